"""Stage-2 agent state (paper section 4): an external model distils episodes into knowledge.

:class:`LLMMemoryManager` keeps the stage-1 sliding window for the raw history and adds
what a window cannot hold:

* **after every episode** (:meth:`~LLMMemoryManager.end_episode`) a model (any
  :class:`~darwin.policies.base.Policy`; a :class:`~darwin.policies.litellm.LiteLLMPolicy` from the
  ``llm`` setting) reads the trajectory (goal, app, outcome, the actions as text,
  optionally the last screenshots) and answers in JSON with an **episode summary** and
  **app knowledge** ("Dark theme is a switch under Display"). Both go to SQL tables of
  their own (:class:`KnowledgeStore`): by default in the run's database
  (``<run_dir>/run.db``), or in any SQLAlchemy database (``url``), so knowledge outlives
  the run and can be shared between runs and machines. A text already known for the
  app is not stored twice: its count and last-seen time go up.
* **when an episode starts** (:meth:`~LLMMemoryManager.start_episode`) the entries for the
  task's app are ranked by relevance to the goal (:func:`rank_entries`: word overlap,
  recency, how often an entry was learned) and the best ones that fit
  ``max_knowledge_tokens`` become the window's :attr:`~darwin.memory.base.MemoryWindow.notes`,
  which agents show before the history.
* optionally (``in_episode_summary``) the model keeps a running summary of the episode,
  updated every ``summary_every`` steps in :meth:`~LLMMemoryManager.observe`; the steps
  it covers leave the raw window and the summary is shown as a note instead.

The model never breaks an episode: a failed request (any exception, authentication and
server errors included) or an unreadable answer is counted in :attr:`LLMMemoryManager.stats`,
logged once per kind of failure, and the agent goes on with the plain window.

    >>> import asyncio
    >>> import numpy as np
    >>> from darwin.actions import OpenApp
    >>> from darwin.memory.llm import LLMMemoryManager
    >>> from darwin.policies.base import Policy
    >>> from darwin.task_registry import get_task
    >>> from darwin.types import Decision, Generation, Observation, Phase, Trajectory, Transition
    >>> class Canned(Policy):  # stands in for a hosted model (LiteLLMPolicy)
    ...     async def generate(self, prompts):
    ...         answer = ('{"summary": "Opened Settings, then Display; switched Dark theme on.", '
    ...                   '"knowledge": ["The Dark theme switch is on the Display page."]}')
    ...         return [Generation(text=answer) for _ in prompts]
    >>> memory = LLMMemoryManager(policy=Canned())        # no run_dir or url: in-memory SQLite
    >>> task = get_task("settings_dark_theme")
    >>> obs = Observation(screenshot=np.zeros((8, 4, 3), np.uint8), goal=task.instruction,
    ...                   device_size=(1080, 2400))
    >>> step = Transition(episode_id="e1", task_id=task.id, step=0, phase=Phase.EXECUTION,
    ...                   observation=obs, decision=Decision(action=OpenApp(app="Settings")))
    >>> episode = Trajectory(episode_id="e1", task=task, transitions=[step])
    >>> asyncio.run(memory.end_episode(episode))
    >>> memory.stats.stored, memory.stats.failures
    (2, 0)
    >>> memory.start_episode(task)                        # the next episode of a Settings task
    >>> for note in memory.window([]).notes:
    ...     print(note)
    Earlier attempt at "Go to display settings. Turn on Dark Theme." (not verified): Opened Settings, then Display; switched Dark theme on.
    The Dark theme switch is on the Display page.
    >>> memory.close()

See ``docs/memory.md`` for the options, the tables and an experiment-file example.

The module is split by job: reading the model's answers (:mod:`darwin.memory.llm_answers`), the
knowledge's storage and ranking (:mod:`darwin.memory.llm_store`), the prompts
(:mod:`darwin.memory.llm_prompts`); this module is the settings and the manager.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import ConfigDict, Field
from sqlalchemy import exc as sa_exc

from darwin.database import DB_FILENAME, resolve_database_url
from darwin.memory.base import (
    NOTES_OVERHEAD_TOKENS,
    Memory,
    MemoryWindow,
    Render,
    approx_token_count,
    default_render,
    format_notes,
)
from darwin.memory.llm_answers import (
    parse_distillation,
    parse_summary,
)
from darwin.memory.llm_prompts import (
    DISTILL_SYSTEM,
    SUMMARY_SYSTEM,
    _outcome,
    _step_lines,
)
from darwin.memory.llm_store import (
    _MEMORY_FIX,
    KINDS,
    EntryKind,
    KnowledgeStore,
    MemoryStoreError,
    rank_entries,
)
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory, TokenCounter
from darwin.policies.base import Policy
from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig, PolicyAuthError
from darwin.types import ChatMessage, Phase, Prompt, Task, Trajectory, Transition

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- config


class LLMMemoryConfig(SlidingWindowConfig):
    """Settings of :class:`LLMMemoryManager` (validated when built; frozen; holds no secrets).

    The window fields (``max_interactions``, ``image_depth``, ``use_summaries``,
    ``max_prompt_tokens``, ``entry_overhead_tokens``) are those of
    :class:`~darwin.memory.sliding_window.SlidingWindowConfig` and configure the raw window.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    llm: LiteLLMPolicyConfig | None = Field(
        None,
        description="the memory model, as LiteLLMPolicyConfig fields (e.g. {'model': 'gemini/gemini-2.5-flash', "
        "'api_key_env': 'GEMINI_API_KEY'}); keys come from the environment only. Needed when distill or "
        "in_episode_summary is on, unless a policy is passed to the manager",
    )
    url: str | None = Field(
        None,
        description="SQLAlchemy URL (or SQLite file path) of the knowledge database, for knowledge shared "
        "across runs and machines; None = the run's own database (<run_dir>/run.db), or an in-memory "
        "database when there is no run directory",
    )
    distill: bool = Field(True, description="distil every ended episode into a summary and app knowledge")
    distill_images: int = Field(
        0, ge=0, le=8, description="screenshots sent with an episode to distil: its last ones (0 = text only)"
    )
    max_steps_in_prompt: int = Field(
        48, ge=2, le=1024, description="steps listed when distilling; longer episodes show their first and last ones"
    )
    max_knowledge_per_episode: int = Field(5, ge=0, le=50, description="facts kept from one episode's answer")
    max_note_chars: int = Field(300, ge=20, le=4000, description="longest stored summary or fact (longer ones are cut)")
    max_knowledge_tokens: int = Field(
        512, ge=0, le=65_536, description="token budget of the notes retrieved at an episode start (0 = no retrieval)"
    )
    max_notes: int = Field(12, ge=1, le=256, description="most notes retrieved at an episode start")
    retrieve_summaries: bool = Field(True, description="retrieve summaries of earlier episodes as well as knowledge")
    max_candidates: int = Field(
        500, ge=1, le=100_000, description="most recent entries of the app that retrieval ranks"
    )
    in_episode_summary: bool = Field(
        False, description="keep a model-written summary of the older steps of the episode in place of their raw window"
    )
    summary_every: int = Field(
        4, ge=1, le=1024, description="fold this many new steps into the running summary at a time"
    )
    summary_keep_recent: int = Field(2, ge=0, le=1024, description="most recent steps never folded (always shown raw)")
    max_summary_chars: int = Field(800, ge=40, le=8000, description="longest running summary (longer ones are cut)")
    max_consecutive_failures: int = Field(
        3,
        ge=1,
        le=1000,
        description="model failures in a row after which model calls pause (auth errors pause at once)",
    )
    failure_cooldown_s: float = Field(
        300.0, ge=0.0, le=86_400.0, description="how long model calls pause; meanwhile the plain window is used"
    )

    @property
    def window(self) -> SlidingWindowConfig:
        """The raw window's settings."""
        return SlidingWindowConfig(**{name: getattr(self, name) for name in SlidingWindowConfig.model_fields})


# --------------------------------------------------------------------------- the manager


@dataclass
class LLMMemoryStats:
    """Counters of one :class:`LLMMemoryManager` (since it was built)."""

    calls: int = 0
    """Requests made to the memory model."""
    failures: int = 0
    """Requests that raised (server, network and authentication errors, anything else)."""
    malformed: int = 0
    """Answers that could not be read (dropped)."""
    stored: int = 0
    """New entries written."""
    deduplicated: int = 0
    """Entries already known (their count and last-seen time bumped instead)."""
    retrieved: int = 0
    """Notes handed to the agent at episode starts."""
    skipped: int = 0
    """Model calls not made while paused after failures."""
    summary_updates: int = 0
    """Running summaries accepted (``in_episode_summary``)."""
    database_errors: int = 0
    """Reads or writes of the knowledge database that failed (the episode went on)."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class LLMMemoryManager(Memory):
    """A sliding window plus knowledge an external model distils from every episode.

    ``LLMMemoryManager(config)`` or ``LLMMemoryManager(llm={...}, max_interactions=8, ...)``
    with :class:`LLMMemoryConfig` fields as keywords. ``policy`` replaces the model the
    ``llm`` setting describes (tests, local models, anything with ``generate``);
    ``run_dir`` (passed by experiments) puts the knowledge in ``<run_dir>/run.db`` unless
    ``url`` names another database; ``token_counter`` as in
    :class:`~darwin.memory.sliding_window.SlidingWindowMemory`.

    One manager serves one agent at a time (its episode state is per episode); managers
    of several agents share knowledge through the database.
    """

    def __init__(
        self,
        config: LLMMemoryConfig | None = None,
        *,
        policy: Policy | None = None,
        run_dir: str | os.PathLike[str] | None = None,
        token_counter: TokenCounter | None = None,
        **overrides: object,
    ) -> None:
        self.config = cfg = self._checked_config(config, policy, overrides)
        self.token_counter: TokenCounter = token_counter or approx_token_count
        self.raw_window = SlidingWindowMemory(cfg.window, token_counter=self.token_counter)
        self.policy = policy if policy is not None or cfg.llm is None else LiteLLMPolicy(cfg.llm)
        if cfg.llm is not None and cfg.llm.api_key_env and not os.environ.get(cfg.llm.api_key_env):
            logger.warning(
                "memory model %s: environment variable %s is not set; until it is, the memory works "
                "without its model (plain window and stored knowledge)",
                cfg.llm.model,
                cfg.llm.api_key_env,
            )
        location: str | os.PathLike[str] | None = cfg.url
        if location is None and run_dir is not None:
            Path(run_dir).mkdir(parents=True, exist_ok=True)
            location = Path(run_dir) / DB_FILENAME
        if location is None:
            logger.info("LLM memory: no url and no run directory; knowledge lives in memory for this process only")
        self.store = KnowledgeStore(location)
        self.stats = LLMMemoryStats()
        self._warned: set[str] = set()
        self._consecutive_failures = 0
        self._paused_until = 0.0
        self._notes: tuple[str, ...] = ()
        self._summary = ""
        self._summary_phase: Phase | None = None
        self._covered_until = 0  # steps numbered below this are in the running summary

    @staticmethod
    def _checked_config(
        config: LLMMemoryConfig | None, policy: Policy | None, overrides: Mapping[str, object]
    ) -> LLMMemoryConfig:
        if config is not None and overrides:
            raise TypeError("pass either an LLMMemoryConfig or keyword overrides, not both")
        cfg = config if config is not None else LLMMemoryConfig.model_validate(overrides)
        if policy is None and cfg.llm is None and (cfg.distill or cfg.in_episode_summary):
            raise ValueError(
                "LLMMemoryManager needs a memory model to distil episodes or summarise steps: set llm to "
                "LiteLLMPolicyConfig fields, e.g. llm={'model': 'gemini/gemini-2.5-flash', "
                "'api_key_env': 'GEMINI_API_KEY'}, or pass policy=...; or set distill=False (and "
                "in_episode_summary=False) to only read stored knowledge"
            )
        return cfg

    @classmethod
    def check_arguments(
        cls,
        config: LLMMemoryConfig | None = None,
        *,
        policy: Policy | None = None,
        run_dir: object = None,
        token_counter: object = None,
        **overrides: object,
    ) -> None:
        """The settings and the database location, with no database opened and no model reached
        (``darwin run --dry-run``)."""
        cfg = cls._checked_config(config, policy, overrides)
        if cfg.url is not None:
            resolve_database_url(cfg.url, what="memory database", fix=_MEMORY_FIX, error=MemoryStoreError)

    def __repr__(self) -> str:
        return f"LLMMemoryManager({self.store.url_text!r})"

    def close(self) -> None:
        """Release the database connections."""
        self.store.close()

    # ----------------------------------------------------------------- the window

    def count_tokens(self, text: str) -> int:
        return self.token_counter(text)

    @property
    def notes(self) -> tuple[str, ...]:
        """The notes the next prompt shows: retrieved knowledge, then the running summary."""
        if self._summary:
            return (*self._notes, f"Earlier in this episode: {self._summary}")
        return self._notes

    def _raw(self, history: Sequence[Transition]) -> list[Transition]:
        """The steps the running summary does not cover."""
        if not self._summary:
            return list(history)
        return [t for t in history if t.step >= self._covered_until]

    def select(self, history: Sequence[Transition]) -> list[Transition]:
        return self.raw_window.select(self._raw(history))

    def window(
        self,
        history: Sequence[Transition],
        render: Render = default_render,
        *,
        reserved_tokens: int = 0,
        image_tokens: int = 0,
    ) -> MemoryWindow:
        notes = self.notes
        notes_tokens = self.count_tokens(format_notes(notes)) + NOTES_OVERHEAD_TOKENS if notes else 0
        raw = self._raw(history)
        inner = self.raw_window.window(
            raw, render, reserved_tokens=reserved_tokens + notes_tokens, image_tokens=image_tokens
        )
        return MemoryWindow(
            entries=inner.entries,
            omitted=inner.omitted + len(history) - len(raw),
            dropped=inner.dropped,
            tokens=inner.tokens + notes_tokens,
            notes=notes,
            notes_tokens=notes_tokens,
        )

    # ----------------------------------------------------------------- episode hooks

    def reset(self) -> None:
        self._notes = ()
        self._clear_summary()

    def _clear_summary(self) -> None:
        self._summary = ""
        self._summary_phase = None
        self._covered_until = 0

    def start_episode(self, task: Task | None = None) -> None:
        """Forget the last episode and retrieve the notes for ``task``'s app and goal."""
        self.reset()
        if task is None or self.config.max_knowledge_tokens == 0:
            return
        try:
            notes = self.retrieve(task.app, task.instruction)
        except sa_exc.SQLAlchemyError as exc:
            self.stats.database_errors += 1
            self._warn_once(
                "database-read",
                "LLM memory: cannot read knowledge from %s (%s); the episode starts without notes",
                self.store.url_text,
                _short(exc),
            )
            return
        self._notes = tuple(notes)
        self.stats.retrieved += len(notes)

    def retrieve(self, app: str, goal: str) -> list[str]:
        """The notes for a task of ``app`` with ``goal``: the best-ranked entries
        (:func:`rank_entries`) that fit ``max_knowledge_tokens`` and ``max_notes``."""
        cfg = self.config
        kinds: tuple[EntryKind, ...] = KINDS if cfg.retrieve_summaries else ("knowledge",)
        candidates = self.store.entries(app, kinds=kinds, limit=cfg.max_candidates)
        notes: list[str] = []
        used = self.count_tokens("Notes:")
        for _, entry in rank_entries(candidates, goal):
            note = entry.note
            cost = self.count_tokens(f"- {note}") + 1
            if used + cost > cfg.max_knowledge_tokens:
                continue  # a shorter one may still fit
            notes.append(note)
            used += cost
            if len(notes) >= cfg.max_notes:
                break
        return notes

    async def observe(self, history: Sequence[Transition]) -> None:
        """With ``in_episode_summary``: fold the older steps into the running summary once
        ``summary_every`` of them (beyond the ``summary_keep_recent`` newest) are pending."""
        cfg = self.config
        if not cfg.in_episode_summary or self.policy is None:
            return
        if not history or history[0].phase != self._summary_phase:
            self._clear_summary()  # a new phase: its history starts afresh
            self._summary_phase = history[0].phase if history else None
        if not history:
            return
        pending = [t for t in history if t.step >= self._covered_until]
        fold = pending[: len(pending) - cfg.summary_keep_recent]
        if len(fold) < cfg.summary_every:
            return
        answer = await self._generate("summarising steps", self.summary_prompt(history[-1].observation.goal, fold))
        if answer is None:
            return
        summary = parse_summary(answer, cfg.max_summary_chars)
        if summary is None:
            self._malformed("running summary", answer)
            return
        self._summary = summary
        self._covered_until = fold[-1].step + 1
        self.stats.summary_updates += 1

    async def end_episode(self, trajectory: Trajectory) -> None:
        """Distil ``trajectory`` and store its summary and knowledge (never raises)."""
        cfg = self.config
        if not cfg.distill or self.policy is None or not trajectory.transitions:
            return
        answer = await self._generate("distilling an episode", self.distill_prompt(trajectory))
        if answer is None:
            return
        distilled = parse_distillation(answer, cfg.max_note_chars)
        if distilled is None:
            self._malformed("distillation", answer)
            return
        task = trajectory.task
        records: list[tuple[str, EntryKind, str]] = []
        if distilled.summary:
            records.append((task.app, "summary", distilled.summary))
        records += [
            (item.app or task.app, "knowledge", item.text)
            for item in distilled.knowledge[: cfg.max_knowledge_per_episode]
        ]
        for app, kind, text in records:
            try:
                new = self.store.add(
                    app, kind, text, task_id=task.id, goal=task.instruction, success=trajectory.success
                )
            except sa_exc.SQLAlchemyError as exc:
                self.stats.database_errors += 1
                self._warn_once(
                    "database-write",
                    "LLM memory: cannot write to %s (%s); this episode's knowledge is lost",
                    self.store.url_text,
                    _short(exc),
                )
                return
            if new:
                self.stats.stored += 1
            else:
                self.stats.deduplicated += 1

    # ----------------------------------------------------------------- prompts

    def distill_prompt(self, trajectory: Trajectory) -> Prompt:
        """The request that distils ``trajectory`` (text, plus its last screenshots when
        ``distill_images`` > 0)."""
        cfg = self.config
        task, steps = trajectory.task, trajectory.transitions
        width, height = steps[0].observation.device_size
        lines = [
            f"App: {task.app}",
            f"Goal: {task.instruction}",
            f"Outcome: {_outcome(trajectory)}",
            f"Screen: {width}x{height} pixels (x to the right, y down)",
            f"Steps ({len(steps)}):",
            *_step_lines(steps, cfg.max_steps_in_prompt),
        ]
        images = tuple(t.observation.screenshot for t in steps[-cfg.distill_images :]) if cfg.distill_images else ()
        if images:
            lines.append(
                f"The attached image{'s are the last screens' if len(images) > 1 else ' is the last screen'} "
                "the agent saw, oldest first."
            )
        lines += [
            "",
            "Answer with one JSON object and nothing else:",
            '{"summary": "<one or two sentences>", "knowledge": ["<one fact about the app>", ...]}',
            f"At most {cfg.max_knowledge_per_episode} facts; an empty list when the episode shows nothing new."
            if cfg.max_knowledge_per_episode
            else 'Leave "knowledge" an empty list: only the summary is kept.',
        ]
        return Prompt(
            messages=(
                ChatMessage(role="system", text=DISTILL_SYSTEM),
                ChatMessage(role="user", text="\n".join(lines), images=images),
            )
        )

    def summary_prompt(self, goal: str, steps: Sequence[Transition]) -> Prompt:
        """The request that folds ``steps`` into the running summary."""
        words_limit = max(20, self.config.max_summary_chars // 7)
        first = steps[0].step + 1
        lines = [
            f"Goal: {goal}",
            f"Summary so far: {self._summary or '(none: these are the first steps)'}",
            f"Steps {first} to {steps[-1].step + 1}:",
            *_step_lines(steps, self.config.max_steps_in_prompt, first_number=first),
            "",
            "Answer with one JSON object and nothing else:",
            f'{{"summary": "<the updated summary of all steps so far, at most {words_limit} words>"}}',
        ]
        return Prompt(
            messages=(
                ChatMessage(role="system", text=SUMMARY_SYSTEM),
                ChatMessage(role="user", text="\n".join(lines)),
            )
        )

    # ----------------------------------------------------------------- failures

    async def _generate(self, purpose: str, prompt: Prompt) -> str | None:
        """The model's answer, or ``None`` after a failure (counted, logged once per kind)."""
        assert self.policy is not None
        now = time.monotonic()
        if now < self._paused_until:
            self.stats.skipped += 1
            return None
        self.stats.calls += 1
        try:
            (generation,) = await self.policy.generate([prompt])
        except Exception as exc:  # noqa: BLE001 - any model failure degrades to the plain window
            self.stats.failures += 1
            self._consecutive_failures += 1
            self._warn_once(
                type(exc).__name__,
                "LLM memory: the model failed while %s (%s: %s); the agent goes on with the plain window",
                purpose,
                type(exc).__name__,
                _short(exc),
            )
            cfg = self.config
            if isinstance(exc, PolicyAuthError) or self._consecutive_failures >= cfg.max_consecutive_failures:
                why = (
                    "an authentication error"
                    if isinstance(exc, PolicyAuthError)
                    else f"{self._consecutive_failures} failures in a row"
                )
                self._paused_until = time.monotonic() + cfg.failure_cooldown_s
                self._consecutive_failures = 0
                self._warn_once(
                    "pause",
                    "LLM memory: %s; model calls pause for %g s (stored knowledge is still shown)",
                    why,
                    cfg.failure_cooldown_s,
                )
            return None
        self._consecutive_failures = 0
        return generation.text

    def _malformed(self, what: str, answer: str) -> None:
        self.stats.malformed += 1
        self._warn_once(
            "malformed",
            "LLM memory: could not read the model's %s answer (expected a JSON object), dropped it: %r",
            what,
            answer[:200],
        )

    def _warn_once(self, kind: str, message: str, *args: object) -> None:
        """A warning the first time a kind of failure happens; debug messages after that."""
        level = logging.DEBUG if kind in self._warned else logging.WARNING
        self._warned.add(kind)
        logger.log(level, message, *args)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = [
    "LLMMemoryConfig",
    "LLMMemoryManager",
    "LLMMemoryStats",
]
