"""Curricula: which task a free phone runs next."""

from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.curricula.static import StaticCurriculum

__all__ = ["Curriculum", "EpisodeOutcome", "StaticCurriculum"]
