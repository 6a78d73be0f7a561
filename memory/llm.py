"""Stage-2 agent state (paper section 4): an external model distils episodes into knowledge.

:class:`LLMMemoryManager` keeps the stage-1 sliding window for the raw history and adds
what a window cannot hold:

* **after every episode** (:meth:`~LLMMemoryManager.end_episode`) a model (any
  :class:`~darwin.policies.base.Policy`; a :class:`~darwin.policies.LiteLLMPolicy` from the
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
  ``max_knowledge_tokens`` become the window's :attr:`~darwin.memory.MemoryWindow.notes`,
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
    >>> from darwin.memory import LLMMemoryManager
    >>> from darwin.policies.base import Policy
    >>> from darwin.tasks import get_task
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
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field
from sqlalchemy import (
    Boolean,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    select,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from darwin.database import DB_FILENAME, Database, StoreOpenError, resolve_database_url, utcnow
from darwin.json_replies import parse_json_answer
from darwin.memory.base import (
    NOTES_OVERHEAD_TOKENS,
    Memory,
    MemoryWindow,
    Render,
    approx_token_count,
    default_render,
    format_notes,
)
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory, TokenCounter
from darwin.policies.base import Policy
from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig, PolicyAuthError
from darwin.types import ACTOR, ChatMessage, Phase, Prompt, Task, Trajectory, Transition

logger = logging.getLogger(__name__)

EntryKind = Literal["summary", "knowledge"]
"""What an entry is: the summary of one episode, or a fact about an app."""

KINDS: tuple[EntryKind, ...] = ("knowledge", "summary")

RECENCY_WEIGHT = 0.3
"""Weight of recency in :func:`rank_entries` (the newest entry gets the whole weight)."""
COUNT_WEIGHT = 0.2
"""Weight of repetition in :func:`rank_entries` (an entry learned again and again nears it)."""

_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset({
    "a", "an", "the", "to", "of", "in", "on", "at", "by", "for", "from", "with", "and", "or", "is",
    "are", "be", "it", "its", "this", "that", "as", "into", "then", "your", "you", "my", "me", "i",
    "go", "turn", "open", "set",
})

DISTILL_SYSTEM = (
    "You maintain the long-term memory of an agent that operates a phone by looking at "
    "screenshots. From one finished episode, write (1) a short summary of what the agent did "
    "and how it ended, useful the next time it attempts a similar task, and (2) knowledge about "
    "the app that will help in future tasks: where a screen, setting or control is, how a "
    "control behaves, which path works and which does not. Only state what the episode shows. "
    "Each fact is one self-contained sentence that names the screen or control it is about."
)
SUMMARY_SYSTEM = (
    "You keep a running summary of a phone-using agent's progress in its current task, so that "
    "its older steps can be left out of its prompt. Keep what the rest of the task needs: what "
    "was done, which screen the agent reached, what did not work."
)


# --------------------------------------------------------------------------- errors and config


class MemoryStoreError(StoreOpenError, ValueError):
    """The memory's database cannot be opened; the message names the URL and the fix.

    Also a ``ValueError``: the database is one of the memory's settings, so an experiment's
    check (``darwin run --dry-run``) reports it with the other bad settings.
    """


class LLMMemoryConfig(SlidingWindowConfig):
    """Settings of :class:`LLMMemoryManager` (validated when built; frozen; holds no secrets).

    The window fields (``max_interactions``, ``image_depth``, ``use_summaries``,
    ``max_prompt_tokens``, ``entry_overhead_tokens``) are those of
    :class:`~darwin.memory.SlidingWindowConfig` and configure the raw window.
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
    summary_every: int = Field(4, ge=1, le=1024, description="fold this many new steps into the running summary at a time")
    summary_keep_recent: int = Field(
        2, ge=0, le=1024, description="most recent steps never folded (always shown raw)"
    )
    max_summary_chars: int = Field(800, ge=40, le=8000, description="longest running summary (longer ones are cut)")
    max_consecutive_failures: int = Field(
        3, ge=1, le=1000, description="model failures in a row after which model calls pause (auth errors pause at once)"
    )
    failure_cooldown_s: float = Field(
        300.0, ge=0.0, le=86_400.0, description="how long model calls pause; meanwhile the plain window is used"
    )

    @property
    def window(self) -> SlidingWindowConfig:
        """The raw window's settings."""
        return SlidingWindowConfig(**{name: getattr(self, name) for name in SlidingWindowConfig.model_fields})


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class KnowledgeItem:
    """One fact from a distillation answer; ``app`` when the model named another app."""

    text: str
    app: str | None = None


@dataclass(frozen=True)
class Distillation:
    """What the memory model made of one episode."""

    summary: str | None
    knowledge: tuple[KnowledgeItem, ...] = ()


def clean_text(value: object, limit: int) -> str | None:
    """A stripped one-line string of at most ``limit`` characters, or ``None`` if ``value``
    is not a string with some words in it."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not _WORD.search(text):
        return None
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


_SUMMARY_KEYS = ("summary", "episode_summary")
_KNOWLEDGE_KEYS = ("knowledge", "app_knowledge", "facts")
_FACT_KEYS = ("fact", "text", "knowledge", "content")


def parse_distillation(text: str, limit: int = 300) -> Distillation | None:
    """Read a distillation answer; ``None`` when it is malformed.

    The answer asked for is ``{"summary": "...", "knowledge": ["...", ...]}``; also read: the
    object inside a code fence or among prose, facts as objects (``{"fact": "...", "app":
    "..."}``), a single fact as a string, and a bare list of facts (no summary). ``{"summary":
    "", "knowledge": []}`` is a valid answer that taught nothing.

    >>> parse_distillation('```json\\n{"summary": "Opened Clock.", "knowledge": ["Alarms are on the Alarm tab."]}\\n```')
    Distillation(summary='Opened Clock.', knowledge=(KnowledgeItem(text='Alarms are on the Alarm tab.', app=None),))
    >>> parse_distillation('[{"fact": "Wi-Fi is under Network", "app": "Settings"}]').knowledge
    (KnowledgeItem(text='Wi-Fi is under Network', app='Settings'),)
    >>> parse_distillation('I could not find anything.') is None
    True
    """
    value = parse_json_answer(text)
    summary: str | None = None
    items: list[object]
    if isinstance(value, dict):
        summary_keys = [k for k in _SUMMARY_KEYS if k in value]
        knowledge_keys = [k for k in _KNOWLEDGE_KEYS if k in value]
        if not summary_keys and not knowledge_keys:
            return None
        if summary_keys:
            raw = value[summary_keys[0]]
            if raw is not None and not isinstance(raw, str):
                return None
            summary = clean_text(raw, limit)
        raw_items = value[knowledge_keys[0]] if knowledge_keys else None
        if raw_items is None:
            items = []
        elif isinstance(raw_items, (str, dict)):
            items = [raw_items]
        elif isinstance(raw_items, list):
            items = raw_items
        else:
            return None
    elif isinstance(value, list):
        items = value
    else:
        return None
    knowledge: list[KnowledgeItem] = []
    readable = 0
    for item in items:
        if isinstance(item, str):
            readable += 1
            fact = clean_text(item, limit)
            if fact is not None:
                knowledge.append(KnowledgeItem(fact))
        elif isinstance(item, dict):
            fact = next((item[k] for k in _FACT_KEYS if isinstance(item.get(k), str)), None)
            if item.get("kind") == "summary" or (fact is None and isinstance(item.get("summary"), str)):
                readable += 1
                summary = summary or clean_text(fact if fact is not None else item.get("summary"), limit)
                continue
            if fact is None:
                continue
            readable += 1
            cleaned = clean_text(fact, limit)
            if cleaned is not None:
                app = item.get("app")
                knowledge.append(KnowledgeItem(cleaned, app.strip() if isinstance(app, str) and app.strip() else None))
    if items and not readable:
        return None
    return Distillation(summary=summary, knowledge=tuple(knowledge))


def parse_summary(text: str, limit: int = 800) -> str | None:
    """Read a running-summary answer (``{"summary": "..."}``); ``None`` when malformed.

    >>> parse_summary('{"summary": "Opened Settings; on the Display page now."}')
    'Opened Settings; on the Display page now.'
    """
    value = parse_json_answer(text)
    if isinstance(value, dict):
        return clean_text(value.get("summary"), limit)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return clean_text(" ".join(value), limit)  # type: ignore[arg-type]
    return None


# --------------------------------------------------------------------------- storage


def app_key(app: str) -> str:
    """How an app is stored and looked up: whitespace collapsed, case folded.

    >>> app_key("  Google   Play ")
    'google play'
    """
    return " ".join(app.split()).casefold()


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters, digits, underscores)."""
    return _WORD.findall(text.casefold())


def text_hash(text: str) -> str:
    """SHA-256 of the normalised text (its words, lower case): the deduplication key.

    >>> text_hash("Dark theme is under Display.") == text_hash("dark  theme is under display")
    True
    """
    return hashlib.sha256(" ".join(words(text)).encode("utf-8")).hexdigest()


class _Base(DeclarativeBase):
    """Declarative base of the memory's tables (kept apart from the run store's schema)."""


class MemoryEntryModel(_Base):
    """One summary or fact; unique per (app, kind, normalised text)."""

    __tablename__ = "memory_entries"
    __table_args__ = (
        UniqueConstraint("app", "kind", "text_hash", name="uq_memory_entries_app_kind_hash"),
        Index("ix_memory_entries_app_seen", "app", "last_seen_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    app: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(64))
    times_seen: Mapped[int] = mapped_column(Integer, default=1)
    task_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    goal: Mapped[str | None] = mapped_column(Text, nullable=True)
    success: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class KnowledgeEntry:
    """A stored entry, as queries return it (no ORM object leaks out)."""

    id: int
    app: str
    kind: EntryKind
    text: str
    times_seen: int
    task_id: str | None
    goal: str | None
    success: bool | None
    created_at: datetime
    last_seen_at: datetime

    @property
    def note(self) -> str:
        """How the entry reads as a prompt note."""
        if self.kind == "knowledge":
            return self.text
        outcome = {True: "succeeded", False: "failed", None: "not verified"}[self.success]
        goal = f' at "{self.goal}"' if self.goal else ""
        return f"Earlier attempt{goal} ({outcome}): {self.text}"


def _entry(row: MemoryEntryModel) -> KnowledgeEntry:
    return KnowledgeEntry(
        id=row.id, app=row.app, kind=row.kind,  # type: ignore[arg-type]
        text=row.text, times_seen=row.times_seen, task_id=row.task_id, goal=row.goal,
        success=row.success, created_at=row.created_at, last_seen_at=row.last_seen_at,
    )


_MEMORY_FIX = "set url to another database (or leave it unset to use the run's SQLite database)"


class KnowledgeStore(Database):
    """The memory's SQL table (``memory_entries``) in any SQLAlchemy database.

    Opened (and the table created) at construction; a database that cannot be opened raises
    :class:`MemoryStoreError` naming the URL and the fix. SQLite files are shared safely with
    the run store and other processes (WAL, busy timeout, writes take the lock up front).

    >>> store = KnowledgeStore(None)             # in memory
    >>> store.add("Clock", "knowledge", "The + button adds an alarm.")
    True
    >>> store.add("clock", "knowledge", "the + button adds an alarm")   # same text: counted
    False
    >>> [(e.text, e.times_seen) for e in store.entries("Clock")]
    [('The + button adds an alarm.', 2)]
    >>> store.close()
    """

    what = "memory database"
    fix = _MEMORY_FIX
    error = MemoryStoreError
    metadata = _Base.metadata

    def add(
        self,
        app: str,
        kind: EntryKind,
        text: str,
        *,
        task_id: str | None = None,
        goal: str | None = None,
        success: bool | None = None,
    ) -> bool:
        """Store ``text`` for ``app``; ``True`` if new, ``False`` if already known (its
        ``times_seen`` and ``last_seen_at`` are bumped instead)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        key, digest = app_key(app), text_hash(text)
        if not key or not words(text):
            raise ValueError("an entry needs an app name and some words of text")
        for attempt in range(2):
            try:
                with self._session(write=True) as s:
                    now = utcnow(naive=True)
                    row = s.scalar(
                        select(MemoryEntryModel).where(
                            MemoryEntryModel.app == key,
                            MemoryEntryModel.kind == kind,
                            MemoryEntryModel.text_hash == digest,
                        )
                    )
                    if row is not None:
                        row.times_seen += 1
                        row.last_seen_at = now
                        return False
                    s.add(MemoryEntryModel(
                        app=key, kind=kind, text=text, text_hash=digest, times_seen=1, task_id=task_id,
                        goal=goal, success=success, created_at=now, last_seen_at=now,
                    ))
                    return True
            except sa_exc.IntegrityError:
                if attempt:
                    raise
                # A concurrent writer inserted the same text between our read and write: count it.
        raise AssertionError("unreachable")

    def entries(
        self, app: str | None = None, kinds: Sequence[EntryKind] = KINDS, limit: int | None = None
    ) -> list[KnowledgeEntry]:
        """Entries (of ``app`` if given), most recently seen first."""
        query = select(MemoryEntryModel).where(MemoryEntryModel.kind.in_(list(kinds)))
        if app is not None:
            query = query.where(MemoryEntryModel.app == app_key(app))
        query = query.order_by(MemoryEntryModel.last_seen_at.desc(), MemoryEntryModel.id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._session(write=False) as s:
            return [_entry(row) for row in s.scalars(query)]


def rank_entries(entries: Sequence[KnowledgeEntry], goal: str) -> list[tuple[float, KnowledgeEntry]]:
    """Entries scored by relevance to ``goal``, best first (ties: the more recent first).

    ``score = overlap + RECENCY_WEIGHT / (1 + r) + COUNT_WEIGHT * (1 - 1 / times_seen)``:
    ``overlap`` is the share of the goal's words (minus a few stop words) that the entry
    contains (its goal too, for summaries), ``r`` the entry's rank by last-seen time (0 =
    the newest of the app's entries). Word overlap dominates; recency and repetition
    order entries the goal says little about.
    """
    goal_words = set(words(goal)) - _STOPWORDS or set(words(goal))
    by_recency = sorted(entries, key=lambda e: (e.last_seen_at, e.id), reverse=True)
    scored = []
    for rank, entry in enumerate(by_recency):
        entry_words = set(words(entry.text)) | (set(words(entry.goal)) if entry.kind == "summary" and entry.goal else set())
        overlap = len(goal_words & entry_words) / len(goal_words) if goal_words else 0.0
        score = overlap + RECENCY_WEIGHT / (1 + rank) + COUNT_WEIGHT * (1 - 1 / max(1, entry.times_seen))
        scored.append((rank, score, entry))
    scored.sort(key=lambda x: (-x[1], x[0]))
    return [(score, entry) for _, score, entry in scored]


# --------------------------------------------------------------------------- prompts


def action_text(transition: Transition, limit: int = 200) -> str:
    """One step as the memory model reads it: ``click(x=540, y=1200)``, the model's thought
    when it wrote one, the agent when it is not the actor, the phase when not execution."""
    decision = transition.decision
    if decision.action is not None:
        data = decision.action.model_dump(mode="json")
        name = data.pop("type")
        text = f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in data.items()) + ")"
    elif decision.message is not None:
        text = f"said: {clean_text(decision.message, limit) or '(nothing)'}"
    else:
        reason = decision.parse_error.reason if decision.parse_error is not None else "no action"
        text = f"invalid output ({clean_text(reason, limit) or 'unreadable'})"
    thought = default_render(transition).summary
    if thought and decision.message is None:
        text += f" - thought: {clean_text(thought, limit)}"
    tags = [t for t in (transition.phase.value if transition.phase != Phase.EXECUTION else "",
                        transition.agent if transition.agent != ACTOR else "") if t]
    return (f"[{', '.join(tags)}] " if tags else "") + text


def _step_lines(steps: Sequence[Transition], max_steps: int, first_number: int = 1) -> list[str]:
    lines = [f"{first_number + i}. {action_text(t)}" for i, t in enumerate(steps)]
    if len(lines) > max_steps:
        head, tail = max_steps // 2, max_steps - max_steps // 2
        lines = lines[:head] + [f"... ({len(lines) - max_steps} steps not shown) ..."] + lines[-tail:]
    return lines


def _outcome(trajectory: Trajectory) -> str:
    verdict = {True: "succeeded", False: "failed", None: "not verified"}[trajectory.success]
    termination = trajectory.termination
    if termination is None:
        return verdict
    cause = f": {clean_text(termination.cause, 200)}" if termination.cause else ""
    return f"{verdict} (ended by {termination.reason.value}{cause})"


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
    :class:`~darwin.memory.SlidingWindowMemory`.

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
                "without its model (plain window and stored knowledge)", cfg.llm.model, cfg.llm.api_key_env,
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
    def _checked_config(config: LLMMemoryConfig | None, policy: Policy | None, overrides: Mapping[str, object]) -> LLMMemoryConfig:
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
        cls, config: LLMMemoryConfig | None = None, *, policy: Policy | None = None, run_dir: object = None,
        token_counter: object = None, **overrides: object,
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
            self._warn_once("database-read", "LLM memory: cannot read knowledge from %s (%s); the episode starts "
                            "without notes", self.store.url_text, _short(exc))
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
        records += [(item.app or task.app, "knowledge", item.text)
                    for item in distilled.knowledge[: cfg.max_knowledge_per_episode]]
        for app, kind, text in records:
            try:
                new = self.store.add(app, kind, text, task_id=task.id, goal=task.instruction, success=trajectory.success)
            except sa_exc.SQLAlchemyError as exc:
                self.stats.database_errors += 1
                self._warn_once("database-write", "LLM memory: cannot write to %s (%s); this episode's knowledge "
                                "is lost", self.store.url_text, _short(exc))
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
        images = tuple(t.observation.screenshot for t in steps[-cfg.distill_images:]) if cfg.distill_images else ()
        if images:
            lines.append(f"The attached image{'s are the last screens' if len(images) > 1 else ' is the last screen'} "
                         "the agent saw, oldest first.")
        lines += [
            "",
            "Answer with one JSON object and nothing else:",
            '{"summary": "<one or two sentences>", "knowledge": ["<one fact about the app>", ...]}',
            f"At most {cfg.max_knowledge_per_episode} facts; an empty list when the episode shows nothing new."
            if cfg.max_knowledge_per_episode else 'Leave "knowledge" an empty list: only the summary is kept.',
        ]
        return Prompt(messages=(
            ChatMessage(role="system", text=DISTILL_SYSTEM),
            ChatMessage(role="user", text="\n".join(lines), images=images),
        ))

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
        return Prompt(messages=(
            ChatMessage(role="system", text=SUMMARY_SYSTEM),
            ChatMessage(role="user", text="\n".join(lines)),
        ))

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
            self._warn_once(type(exc).__name__, "LLM memory: the model failed while %s (%s: %s); the agent "
                            "goes on with the plain window", purpose, type(exc).__name__, _short(exc))
            cfg = self.config
            if isinstance(exc, PolicyAuthError) or self._consecutive_failures >= cfg.max_consecutive_failures:
                why = ("an authentication error" if isinstance(exc, PolicyAuthError)
                       else f"{self._consecutive_failures} failures in a row")
                self._paused_until = time.monotonic() + cfg.failure_cooldown_s
                self._consecutive_failures = 0
                self._warn_once("pause", "LLM memory: %s; model calls pause for %g s (stored knowledge is "
                                "still shown)", why, cfg.failure_cooldown_s)
            return None
        self._consecutive_failures = 0
        return generation.text

    def _malformed(self, what: str, answer: str) -> None:
        self.stats.malformed += 1
        self._warn_once("malformed", "LLM memory: could not read the model's %s answer (expected a JSON object), "
                        "dropped it: %r", what, answer[:200])

    def _warn_once(self, kind: str, message: str, *args: object) -> None:
        """A warning the first time a kind of failure happens; debug messages after that."""
        level = logging.DEBUG if kind in self._warned else logging.WARNING
        self._warned.add(kind)
        logger.log(level, message, *args)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = [
    "COUNT_WEIGHT",
    "RECENCY_WEIGHT",
    "Distillation",
    "KnowledgeEntry",
    "KnowledgeItem",
    "KnowledgeStore",
    "LLMMemoryConfig",
    "LLMMemoryManager",
    "LLMMemoryStats",
    "MemoryEntryModel",
    "MemoryStoreError",
    "action_text",
    "app_key",
    "clean_text",
    "parse_distillation",
    "parse_json_answer",
    "parse_summary",
    "rank_entries",
    "text_hash",
    "words",
]
