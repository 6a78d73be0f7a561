"""Curricula: which task a free phone runs next."""

from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.curricula.failure_filter import FailureFilterCurriculum
from darwin.curricula.learnability import LearnabilityCurriculum
from darwin.curricula.proposer import LLMTaskProposer
from darwin.curricula.proposer_config import ProposerConfig
from darwin.curricula.reverse import ReverseCurriculum
from darwin.curricula.staged import DifficultyStagedCurriculum, StagedConfig
from darwin.curricula.static import StaticCurriculum
from darwin.curricula.success_band import SuccessBandConfig, SuccessBandCurriculum

__all__ = [
    "Curriculum",
    "DifficultyStagedCurriculum",
    "EpisodeOutcome",
    "FailureFilterCurriculum",
    "LLMTaskProposer",
    "LearnabilityCurriculum",
    "ProposerConfig",
    "ReverseCurriculum",
    "StagedConfig",
    "StaticCurriculum",
    "SuccessBandConfig",
    "SuccessBandCurriculum",
]
