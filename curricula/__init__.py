"""Curricula: which task a free phone runs next.

The interface is :class:`Curriculum` (``next_task`` and ``update``); the built-ins are
:class:`StaticCurriculum` (round robin, uniform or weighted), :class:`LearnabilityCurriculum`,
:class:`FailureFilterCurriculum`, :class:`DifficultyStagedCurriculum`,
:class:`SuccessBandCurriculum`, :class:`ReverseCurriculum` and the LLM task proposer
:class:`LLMTaskProposer` (docs/curricula.md):

    >>> from darwin.curricula import Curriculum, StaticCurriculum
    >>> from darwin.task_registry import task_set
    >>> curriculum = StaticCurriculum(task_set("base8"))
    >>> isinstance(curriculum, Curriculum), curriculum.next_task().id == task_set("base8")[0].id
    (True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

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

if TYPE_CHECKING:
    from darwin.curricula.base import Curriculum, EpisodeOutcome
    from darwin.curricula.failure_filter import FailureFilterCurriculum
    from darwin.curricula.learnability import LearnabilityCurriculum
    from darwin.curricula.proposer import LLMTaskProposer
    from darwin.curricula.proposer_config import ProposerConfig
    from darwin.curricula.reverse import ReverseCurriculum
    from darwin.curricula.staged import DifficultyStagedCurriculum, StagedConfig
    from darwin.curricula.static import StaticCurriculum
    from darwin.curricula.success_band import SuccessBandConfig, SuccessBandCurriculum
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Curriculum": "darwin.curricula.base",
            "DifficultyStagedCurriculum": "darwin.curricula.staged",
            "EpisodeOutcome": "darwin.curricula.base",
            "FailureFilterCurriculum": "darwin.curricula.failure_filter",
            "LLMTaskProposer": "darwin.curricula.proposer",
            "LearnabilityCurriculum": "darwin.curricula.learnability",
            "ProposerConfig": "darwin.curricula.proposer_config",
            "ReverseCurriculum": "darwin.curricula.reverse",
            "StagedConfig": "darwin.curricula.staged",
            "StaticCurriculum": "darwin.curricula.static",
            "SuccessBandConfig": "darwin.curricula.success_band",
            "SuccessBandCurriculum": "darwin.curricula.success_band",
        },
    )
