"""Stage-2 curriculum (paper section 4): an external model proposes the next task instances.

:class:`LLMTaskProposer` keeps a queue of task instances that a model (any LiteLLM model:
Gemini, OpenAI, a local vLLM server) proposes from the agent's history, and mixes them with
the configured tasks (its *base* tasks):

* **when** every ``propose_every`` finished episodes, or as soon as the queue of proposed
  tasks runs out, it makes one call (at most ``max_calls`` in all);
* **what the model reads**: every template it may propose (id, app, difficulty, kind,
  description, parameter schema, one example instance's parameters) with the agent's
  recent results on it (episodes, success rate, mean steps, how episodes ended, false
  completions), read from the run database when the curriculum has a run directory, else
  from the outcomes it was told (:meth:`~LLMTaskProposer.update`);
* **what it answers**: a JSON list ``[{"template": ..., "params": {...}, "language":
  "ENG"|"CHN", "why": ...}]`` of instances chosen for learnability (success neither about 0
  nor about 1), read from a code fence or among prose;
* **validation**: every proposal becomes a task through the template's own schema
  (:meth:`darwin.templates.TaskTemplate.task`); an unknown template, parameters the schema
  rejects, a template outside the allowed set (held-out templates of a split are never
  allowed), a language not trained on, a duplicate or one past ``max_proposals`` is
  rejected with its reason, counted in :attr:`~LLMTaskProposer.stats` and logged once per kind;
* **storage**: every call and every proposal (accepted or not, with its reason, the call it
  came from, the answer's tokens and cost) goes to two SQL tables (``curriculum_calls``,
  ``curriculum_proposals``) in the run's database, so ``LLMTaskProposer(tasks,
  replay=<run dir>)`` replays the same accepted tasks without the model;
* **fallback**: when the budget is spent, the model fails or nothing valid comes back, the
  next tasks are drawn from the base tasks (said once per cause); a run never stops for it.

Inside an event loop (training) a call runs on the proposer's own thread and the phones go
on with base tasks meanwhile; outside one (scripts, tests) :meth:`~LLMTaskProposer.next_task`
waits for the answer, so the sequence of tasks is reproducible from the seed.

    >>> from darwin.curricula import EpisodeOutcome, LLMTaskProposer
    >>> from darwin.policies.base import Policy
    >>> from darwin.templates import get_template
    >>> from darwin.types import Generation, TerminationReason
    >>> class Canned(Policy):  # stands in for a hosted model (the llm setting)
    ...     async def generate(self, prompts):
    ...         return [Generation(text='[{"template": "clock.set_alarm", "params": {"hour": 6, "minute": 45}, '
    ...                                 '"language": "ENG", "why": "half-solved"}]')]
    >>> base = [get_template("clock.set_alarm").instance(s) for s in range(2)]
    >>> cur = LLMTaskProposer(base, policy=Canned(), propose_every=1, proposal_share=1.0)
    >>> cur.update(base[0], EpisodeOutcome(base[0].id, False, 24, TerminationReason.STEP_BUDGET))
    >>> task = cur.next_task()          # one episode done: the model is asked (and waited for)
    >>> task.instruction, task.params
    ('Create a 6:45 AM alarm that rings once.', {'hour': 6, 'minute': 45, 'days': []})
    >>> cur.stats.calls, cur.stats.accepted, cur.stats.rejected
    (1, 1, 0)
    >>> cur.close()

See ``docs/curricula.md`` for the settings and an experiment-file example.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import fnmatch
import hashlib
import json
import logging
import os
import random
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Integer, String, Text, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from darwin.curricula._util import _check_int, _check_tasks, _rng_from_json, _rng_to_json
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.database import (
    DB_FILENAME,
    Database,
    StoreError,
    StoreOpenError,
    resolve_database_url,
    utcnow,
)
from darwin.json_replies import parse_json_answer
from darwin.loop_thread import LoopThread
from darwin.memory.llm import clean_text
from darwin.policies.base import Policy
from darwin.policies.litellm import Completion, LiteLLMPolicy, LiteLLMPolicyConfig
from darwin.store import RunStore
from darwin.templates import Language, TaskTemplate, schema_line, templates
from darwin.types import ChatMessage, Prompt, Task, TaskDefinitionError, TerminationReason

logger = logging.getLogger(__name__)

RejectionKind = Literal["malformed", "unknown_template", "not_allowed", "language", "invalid_params", "duplicate", "too_many"]
"""Why a proposal was rejected."""

CallOutcome = Literal["ok", "failed", "malformed"]
"""How a call to the model ended: an answer that was read, an exception, an unreadable answer."""

PROPOSER_SYSTEM = (
    "You design the training curriculum of a reinforcement-learning agent that operates a phone by "
    "looking at screenshots. You see the task templates it may be trained on and its recent results on "
    "each. Propose the task instances it should practise next: those it is most likely to learn from, "
    "i.e. templates it solves sometimes but not always, and templates it has not tried yet. Tasks it "
    "always solves or never solves teach it little. Vary the parameters; keep to each template's "
    "parameter schema exactly."
)

_MAX_RESPONSE_CHARS = 20_000


class ProposerStoreError(StoreOpenError, ValueError):
    """The proposals' database cannot be opened; the message names the URL and the fix.

    Also a ``ValueError``: the database is one of the curriculum's settings, so an
    experiment's check (``darwin run --dry-run``) reports it with the other bad settings.
    """


class ProposerConfig(BaseModel):
    """Settings of :class:`LLMTaskProposer` (validated when built; frozen; holds no secrets)."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    llm: LiteLLMPolicyConfig | None = Field(
        None,
        description="the proposing model, as LiteLLMPolicyConfig fields (model, api_base, api_key_env, temperature, "
        "timeout_s, max_tokens, ...), e.g. {'model': 'gemini/gemini-2.5-flash', 'api_key_env': 'GEMINI_API_KEY'}; "
        "needed unless replay is set or a policy is passed",
    )
    templates: tuple[str, ...] | None = Field(
        None,
        description="the templates the model may propose: ids or glob patterns ('clock.*'); None = the templates the "
        "base tasks are instances of (a split's training templates when the tasks are 'gen.train')",
    )
    languages: tuple[Language, ...] | None = Field(
        None, min_length=1, description="languages a proposal may use; None = the base tasks' languages"
    )
    propose_every: int = Field(32, ge=1, le=1_000_000, description="finished episodes between calls (also before the first)")
    max_proposals: int = Field(8, ge=1, le=64, description="task instances asked for (and kept) per call")
    max_calls: int = Field(50, ge=0, le=1_000_000, description="the call budget; base tasks only once it is spent")
    proposal_share: float = Field(
        0.5, ge=0.0, le=1.0, description="chance that a task comes from the proposal queue while it holds any (else a base task)"
    )
    learnable_band: tuple[float, float] = Field(
        (0.2, 0.8), description="the success rates the prompt calls learnable (MobileRL's success band)"
    )
    history_window: int = Field(50, ge=1, le=100_000, description="most recent episodes per template summarised for the model")
    step_budget: int | None = Field(
        None, ge=1, le=1024, description="step budget of proposed tasks; None = each template's own (set the experiment's horizon to match the base tasks)"
    )
    url: str | None = Field(
        None,
        description="SQLAlchemy URL (or SQLite file path) where calls and proposals are stored; None = the run's "
        "database (<run_dir>/run.db), or an in-memory database without a run directory",
    )
    replay: str | None = Field(
        None,
        description="replay the accepted proposals stored by an earlier run (its run directory, database file or URL) "
        "instead of calling a model",
    )

    @model_validator(mode="after")
    def _check(self) -> ProposerConfig:
        problems = []
        low, high = self.learnable_band
        if not 0.0 <= low <= high <= 1.0:
            problems.append(f"learnable_band must be (low, high) with 0 <= low <= high <= 1, got {self.learnable_band}")
        if self.replay is not None and self.llm is not None:
            problems.append("replay replays stored proposals without a model: drop llm, or drop replay to call the model")
        if problems:
            raise ValueError("; ".join(problems))
        return self


# --------------------------------------------------------------------------- results and proposals


@dataclass(frozen=True)
class TemplateResults:
    """The agent's recent episodes of one template, as the model reads them."""

    template: str
    episodes: int = 0
    """Finished episodes (scored or not)."""
    successes: int = 0
    failures: int = 0
    false_completions: int = 0
    """Episodes the agent ended itself (``finished``/``answer``) that were not successes."""
    mean_steps: float | None = None
    endings: Mapping[str, int] = field(default_factory=dict)
    """How episodes ended, by :class:`~darwin.types.TerminationReason` value."""

    @property
    def success_rate(self) -> float | None:
        scored = self.successes + self.failures
        return self.successes / scored if scored else None

    def text(self) -> str:
        """One line: ``12 episodes: 25% success (3/12 scored), mean 18.3 steps; ended by ...``."""
        if not self.episodes:
            return "not tried yet"
        scored = self.successes + self.failures
        rate = "no verdict yet" if self.success_rate is None else f"{self.success_rate:.0%} success ({self.successes}/{scored} scored)"
        steps = "" if self.mean_steps is None else f", mean {self.mean_steps:.1f} steps"
        endings = ", ".join(f"{k} {v}" for k, v in sorted(self.endings.items(), key=lambda kv: (-kv[1], kv[0])))
        false = f" ({self.false_completions} false completions)" if self.false_completions else ""
        return f"{self.episodes} episodes: {rate}{steps}; ended by {endings}{false}"


def summarise_results(outcomes: Iterable[tuple[str, EpisodeOutcome]], window: int) -> dict[str, TemplateResults]:
    """Per template, the last ``window`` of ``(template, outcome)`` pairs (oldest first) summarised.

    >>> from darwin.types import TerminationReason as R
    >>> rows = [("t", EpisodeOutcome("t.s0", True, 6, R.SUCCESS)), ("t", EpisodeOutcome("t.s1", False, 9, R.AGENT_FINISHED)),
    ...         ("t", EpisodeOutcome("t.s1", False, 24, R.STEP_BUDGET))]
    >>> summarise_results(rows, window=2)["t"].text()
    '2 episodes: 0% success (0/2 scored), mean 16.5 steps; ended by agent_finished 1, step_budget 1 (1 false completions)'
    """
    recent: dict[str, deque[EpisodeOutcome]] = {}
    for template, outcome in outcomes:
        recent.setdefault(template, deque(maxlen=window)).append(outcome)
    out = {}
    for template, rows in recent.items():
        out[template] = TemplateResults(
            template=template,
            episodes=len(rows),
            successes=sum(o.success is True for o in rows),
            failures=sum(o.success is False for o in rows),
            false_completions=sum(o.success is False and o.termination == TerminationReason.AGENT_FINISHED for o in rows),
            mean_steps=sum(o.steps for o in rows) / len(rows),
            endings=dict(Counter(o.termination.value for o in rows)),
        )
    return out


@dataclass(frozen=True)
class Proposal:
    """One proposal of an answer, validated: ``task`` when accepted, else ``rejection`` and ``reason``."""

    position: int
    template: str | None
    params: JsonValue
    language: str | None
    why: str
    task: Task | None = None
    rejection: RejectionKind | None = None
    reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.task is not None


@dataclass(frozen=True)
class CallResult:
    """What one call (or one replayed call) produced."""

    call: int
    """The call's index in this proposer's sequence (0, 1, ...)."""
    outcome: CallOutcome | Literal["replayed"]
    proposals: tuple[Proposal, ...] = ()
    error: str = ""
    completion: Completion | None = None

    @property
    def tasks(self) -> list[Task]:
        return [p.task for p in self.proposals if p.task is not None]


@dataclass
class ProposerStats:
    """Counters of one :class:`LLMTaskProposer` (restored on resume)."""

    calls: int = 0
    """Calls to the model whose answer (or failure) was applied."""
    failures: int = 0
    """Calls that raised (server, network and authentication errors, anything else)."""
    malformed: int = 0
    """Answers with no readable list of proposals."""
    proposals: int = 0
    accepted: int = 0
    rejected: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    """Rejections by :data:`RejectionKind`."""
    replayed_calls: int = 0
    proposed_episodes: int = 0
    """Tasks handed out from the proposal queue."""
    base_episodes: int = 0
    """Tasks handed out from the base tasks."""
    database_errors: int = 0
    """Reads of the run database or writes of proposals that failed (the run went on)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- validation


def _json_text(value: JsonValue) -> str:
    """Canonical JSON of a model's value (stdlib ``json``: integers of any size, unlike orjson)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)


def _phrasing(template: TaskTemplate, params: JsonValue, language: Language) -> int:
    """A phrasing picked by the proposal's content: varied across proposals, the same on replay."""
    digest = hashlib.blake2b(_json_text([template.id, params, language]).encode(), digest_size=4)
    return int(digest.hexdigest(), 16) % len(template.phrasings[language])


def validate_proposal(
    item: object, position: int, *, allowed: Sequence[str], languages: Sequence[Language], step_budget: int | None = None,
) -> Proposal:
    """One item of the model's answer as a :class:`Proposal`: a task of its template, or a rejection with its reason.

    >>> p = validate_proposal({"template": "clock.set_alarm", "params": {"hour": 25}}, 0,
    ...                       allowed=["clock.set_alarm"], languages=["ENG"])
    >>> p.rejection, p.reason.split(". Schema")[0]
    ('invalid_params', "template 'clock.set_alarm': invalid parameters: hour: Input should be less than or equal to 23")
    """
    if not isinstance(item, Mapping):
        return Proposal(position, None, None, None, "", rejection="malformed",
                        reason=f"a proposal must be a JSON object with 'template' and 'params', got {type(item).__name__}")
    template_id, params, language = item.get("template"), item.get("params", {}), item.get("language", languages[0])
    why = clean_text(item.get("why"), 300) or ""

    def reject(kind: RejectionKind, reason: str) -> Proposal:
        return Proposal(position, template_id if isinstance(template_id, str) else None, params,
                        language if isinstance(language, str) else None, why, rejection=kind, reason=reason)

    if not isinstance(template_id, str) or not template_id:
        return reject("malformed", "the proposal names no template (a 'template' string)")
    registry = templates()
    if template_id not in registry:
        close = difflib.get_close_matches(template_id, list(allowed), n=1)
        return reject("unknown_template", f"no template {template_id!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if template_id not in allowed:
        return reject("not_allowed", f"template {template_id!r} is not among the templates this curriculum may propose "
                      "(held out, or not configured)")
    if language not in languages:
        return reject("language", f"language {language!r} is not one of {list(languages)}")
    template = registry[template_id]
    if language not in template.phrasings:
        return reject("language", f"template {template_id!r} has no {language} phrasings")
    if not isinstance(params, Mapping):
        return reject("invalid_params", f"params must be a JSON object of {template_id}'s parameters ({schema_line(template)}), "
                      f"got {type(params).__name__}")
    try:
        task = template.task(dict(params), language, _phrasing(template, params, language))  # type: ignore[arg-type]
    except TaskDefinitionError as exc:
        return reject("invalid_params", str(exc))
    except (ValueError, LookupError, TypeError) as exc:
        # The schema admitted the parameters but the template could not build a task from them
        # (e.g. a name its data lacks): still the model's proposal that is unusable, not a crash.
        return reject("invalid_params", f"template {template_id!r} cannot build a task from {_json_text(params)[:300]} "
                      f"({type(exc).__name__}: {exc}); its schema admits them, so it should be tightened")
    if step_budget is not None:
        task = task.model_copy(update={"step_budget": step_budget})
    return Proposal(position, template_id, task.params, language, why, task=task)


def read_proposals(
    answer: str, *, allowed: Sequence[str], languages: Sequence[Language], max_proposals: int, step_budget: int | None = None,
) -> tuple[Proposal, ...] | None:
    """Every proposal of a model's answer, validated; ``None`` when the answer holds no list of them.

    Read: a JSON list (in a code fence or among prose), or an object holding it under
    ``proposals`` or ``tasks``, or a single proposal object. Proposals past ``max_proposals``
    and repeats of an accepted task are rejected.
    """
    value = parse_json_answer(answer)
    if isinstance(value, dict):
        listed = next((value[k] for k in ("proposals", "tasks") if isinstance(value.get(k), list)), None)
        value = listed if listed is not None else ([value] if "template" in value else None)
    if not isinstance(value, list):
        return None
    out: list[Proposal] = []
    seen: set[str] = set()
    for position, item in enumerate(value):
        if position >= max_proposals:
            out.append(Proposal(position, None, None, None, "", rejection="too_many",
                                reason=f"past the {max_proposals} proposals asked for"))
            continue
        proposal = validate_proposal(item, position, allowed=allowed, languages=languages, step_budget=step_budget)
        if proposal.task is not None and proposal.task.id in seen:
            proposal = Proposal(position, proposal.template, proposal.params, proposal.language, proposal.why,
                                rejection="duplicate", reason=f"the same instance ({proposal.task.id}) was proposed earlier in the answer")
        elif proposal.task is not None:
            seen.add(proposal.task.id)
        out.append(proposal)
    return tuple(out)


# --------------------------------------------------------------------------- storage


class _Base(DeclarativeBase):
    """Declarative base of the proposer's tables (kept apart from the run store's schema)."""


class ProposalCallModel(_Base):
    """One call to the proposing model (or its failure)."""

    __tablename__ = "curriculum_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call: Mapped[int] = mapped_column(Integer, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    model: Mapped[str] = mapped_column(String(256))
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str] = mapped_column(Text, default="")
    response: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)


class ProposalModel(_Base):
    """One proposal of a call: accepted (with the task) or rejected (with the reason)."""

    __tablename__ = "curriculum_proposals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[int] = mapped_column(ForeignKey("curriculum_calls.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    template: Mapped[str | None] = mapped_column(String(256), nullable=True)
    params_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    language: Mapped[str | None] = mapped_column(String(16), nullable=True)
    why: Mapped[str] = mapped_column(Text, default="")
    accepted: Mapped[bool] = mapped_column(Boolean)
    rejection: Mapped[str | None] = mapped_column(String(32), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    task_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    task_json: Mapped[str | None] = mapped_column(Text, nullable=True)


@dataclass(frozen=True)
class StoredCall:
    """A stored call as :meth:`ProposalStore.calls` returns it."""

    call: int
    outcome: str
    model: str
    tasks: tuple[Task, ...]
    """Its accepted tasks, in the answer's order."""
    rejected: int


_STORE_FIX = "set url to another database (or leave it unset to use the run's SQLite database)"


class ProposalStore(Database):
    """The proposer's two tables (``curriculum_calls``, ``curriculum_proposals``) in any SQLAlchemy database.

    Opened (tables created) at construction; SQLite files are shared safely with the run
    store (WAL, busy timeout, writes take the lock up front). A call recorded twice under
    one index (a resumed run redoing a call that was in flight at its checkpoint) reads
    back as the later record.

    >>> store = ProposalStore(None)              # in memory
    >>> store.record(CallResult(0, "malformed", error="no JSON list"), model="m")
    >>> [(c.call, c.outcome, c.tasks) for c in store.calls()]
    [(0, 'malformed', ())]
    >>> store.close()
    """

    what = "proposals database"
    fix = _STORE_FIX
    error = ProposerStoreError
    metadata = _Base.metadata

    def record(self, result: CallResult, *, model: str) -> None:
        """Store one call and its proposals (one transaction)."""
        completion = result.completion
        response = None if completion is None else completion.text[:_MAX_RESPONSE_CHARS]
        with self._lock, self._write_sessions.begin() as s:
            row = ProposalCallModel(
                call=result.call, created_at=utcnow(naive=True), model=model, outcome=result.outcome, error=result.error[:2000],
                response=response, prompt_tokens=None if completion is None else completion.prompt_tokens,
                completion_tokens=None if completion is None else completion.completion_tokens,
                cost_usd=None if completion is None else completion.cost_usd,
            )
            s.add(row)
            s.flush()
            s.add_all(
                ProposalModel(
                    call_id=row.id, position=p.position, template=p.template,
                    params_json=_json_text(p.params), language=p.language,
                    why=p.why, accepted=p.accepted, rejection=p.rejection, reason=p.reason[:2000],
                    task_id=None if p.task is None else p.task.id,
                    task_json=None if p.task is None else p.task.model_dump_json(),
                )
                for p in result.proposals
            )

    def calls(self) -> list[StoredCall]:
        """The stored calls in call order (the later record of an index that was recorded twice)."""
        with self._lock, self._sessions.begin() as s:
            rows = s.scalars(select(ProposalCallModel).order_by(ProposalCallModel.call, ProposalCallModel.id)).all()
            latest = {r.call: r for r in rows}
            proposals = s.scalars(
                select(ProposalModel).where(ProposalModel.call_id.in_([r.id for r in latest.values()]))
                .order_by(ProposalModel.call_id, ProposalModel.position)
            ).all()
            by_call: dict[int, list[ProposalModel]] = {}
            for p in proposals:
                by_call.setdefault(p.call_id, []).append(p)
            return [
                StoredCall(
                    call=index, outcome=row.outcome, model=row.model,
                    tasks=tuple(Task.model_validate_json(p.task_json) for p in by_call.get(row.id, []) if p.accepted and p.task_json),
                    rejected=sum(not p.accepted for p in by_call.get(row.id, [])),
                )
                for index, row in sorted(latest.items())
            ]


def _replay_location(replay: str) -> str | Path:
    """A run directory, database file or URL holding stored proposals."""
    if "://" in replay:
        return replay
    path = Path(replay).expanduser()
    if path.is_dir():
        path = path / DB_FILENAME
    if not path.is_file():
        raise ValueError(f"replay: {replay!r} is neither a run directory with a {DB_FILENAME}, a database file nor a URL; "
                         "pass the run directory of the run whose proposals to replay")
    return path


def _checked_config(config: ProposerConfig | None, seed: int, policy: Policy | None, overrides: Mapping[str, Any]) -> ProposerConfig:
    if config is not None and overrides:
        raise TypeError("pass either a ProposerConfig or keyword overrides, not both")
    cfg = config if config is not None else ProposerConfig.model_validate(overrides)
    _check_int("seed", seed, minimum=None, hint="an integer such as 0")
    if policy is not None and cfg.replay is not None:
        raise ValueError("replay replays stored proposals without a model: drop policy, or drop replay")
    if policy is None and cfg.llm is None and cfg.replay is None:
        raise ValueError(
            "LLMTaskProposer needs a model: set llm to LiteLLMPolicyConfig fields, e.g. llm={'model': "
            "'gemini/gemini-2.5-flash', 'api_key_env': 'GEMINI_API_KEY'}, or replay to the run directory "
            "of a run whose proposals to replay"
        )
    return cfg


def _allowed_templates(config: ProposerConfig, tasks: Sequence[Task]) -> tuple[str, ...]:
    """The templates the proposer may instantiate: ``config.templates`` or those of the base tasks."""
    registry = templates()
    patterns = config.templates
    if patterns is None:
        found = tuple(dict.fromkeys(t.template for t in tasks if t.template is not None))
        if not found:
            raise ValueError("LLMTaskProposer has no templates to propose from: the base tasks are no template "
                             "instances; set templates=[...] (ids or patterns such as 'clock.*'), or use tasks such as 'gen.train'")
        return found
    out: list[str] = []
    for pattern in patterns:
        matched = sorted(t for t in registry if fnmatch.fnmatchcase(t, pattern))
        if not matched:
            close = difflib.get_close_matches(pattern, list(registry), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else "; `darwin tasks list --templates` lists them"
            raise ValueError(f"templates: {pattern!r} matches no registered template{hint}")
        out += [t for t in matched if t not in out]
    return tuple(out)


def load_replay(replay: str) -> list[list[Task]]:
    """The accepted tasks of every stored call, by call index (a call that stored none: an empty list)."""
    store = ProposalStore(_replay_location(replay))
    try:
        stored = store.calls()
    finally:
        store.close()
    if not stored:
        raise ValueError(f"replay: {replay!r} holds no stored proposals (its curriculum_calls table is empty); "
                         "was that run's curriculum an llm_proposer?")
    out: list[list[Task]] = [[] for _ in range(stored[-1].call + 1)]
    for call in stored:
        out[call.call] = list(call.tasks)
    return out


# --------------------------------------------------------------------------- the curriculum


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class LLMTaskProposer(Curriculum):
    """Proposed task instances from an external model, mixed with the base tasks.

    ``LLMTaskProposer(tasks, config)`` or ``LLMTaskProposer(tasks, llm={...}, propose_every=16, ...)``
    with :class:`ProposerConfig` fields as keywords. ``policy`` replaces the model the
    ``llm`` setting describes (anything with ``generate``); ``run_dir`` (passed by
    experiments) is where the agent's results are read (``<run_dir>/run.db``) and the
    proposals stored (unless ``url`` names another database).

    Semantics of :meth:`next_task`: first any finished call is applied (its accepted tasks
    join the queue); then, when a call is due (``propose_every`` episodes since the last one,
    or the queue emptied since the last call filled it) and the budget allows, a call starts;
    then a task is taken from the queue with probability ``proposal_share`` while the queue
    holds any, else drawn uniformly from the base tasks. Each proposed instance runs once.

    :meth:`state_dict` holds the queue, the episode count since the last call, the calls
    made, the counters, the recent outcomes and the generator state; a call that was in
    flight at a checkpoint is made again on resume (under the same index, so a replay reads
    the redone one).

    Args:
        tasks: the base tasks (at least one, distinct ids).
        config: a :class:`ProposerConfig`, or its fields as keyword arguments.
        seed: seeds this curriculum's own generator (never the global one).
        run_dir: the run's directory (experiments pass it).
        policy: the model, instead of ``llm``.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        config: ProposerConfig | None = None,
        *,
        seed: int = 0,
        run_dir: str | os.PathLike[str] | None = None,
        policy: Policy | None = None,
        **overrides: Any,
    ) -> None:
        self.config = cfg = _checked_config(config, seed, policy, overrides)
        self.tasks = _check_tasks(tasks, "LLMTaskProposer")
        self.allowed = _allowed_templates(cfg, self.tasks)
        # One example instance per template for the prompt, built now: a template that cannot
        # build its own instance fails here, when the experiment loads, not in the middle of a run.
        self._examples = {t: _json_text(templates()[t].instance(0).params) for t in self.allowed}
        self.languages: tuple[Language, ...] = cfg.languages or tuple(dict.fromkeys(t.language for t in self.tasks))
        self.policy = policy if policy is not None else (LiteLLMPolicy(cfg.llm) if cfg.llm is not None else None)
        if cfg.llm is not None and cfg.llm.api_key_env and not os.environ.get(cfg.llm.api_key_env):
            logger.warning("proposer model %s: environment variable %s is not set; until it is, calls fail and the "
                           "base tasks are used", cfg.llm.model, cfg.llm.api_key_env)
        self.run_dir = None if run_dir is None else Path(run_dir)
        self._replay = load_replay(cfg.replay) if cfg.replay is not None else None
        self.store: ProposalStore | None = None
        if self._replay is None:
            location: str | Path | None = cfg.url
            if location is None and self.run_dir is not None:
                self.run_dir.mkdir(parents=True, exist_ok=True)
                location = self.run_dir / DB_FILENAME
            self.store = ProposalStore(location)
        self.rng = random.Random(seed)
        self.stats = ProposerStats()
        self._queue: deque[Task] = deque()
        self._since_call = 0
        self._refill_when_empty = False
        self._redo = False
        self._calls = 0  # calls started (or replayed); the index of the next one
        self._pending: concurrent.futures.Future[CallResult] | None = None
        self._outcomes: deque[tuple[str, EpisodeOutcome]] = deque(maxlen=cfg.history_window * max(1, len(self.allowed)))
        self._run_store: RunStore | None = None
        self._task_templates: dict[str, str | None] = {}
        self._loop: LoopThread | None = None
        self._warned: set[str] = set()

    @classmethod
    def check_arguments(
        cls, tasks: Sequence[Task], config: ProposerConfig | None = None, *, seed: int = 0, run_dir: object = None,
        policy: Policy | None = None, **overrides: Any,
    ) -> None:
        """The settings, the templates it may propose from and the database location, with no
        database opened, no thread started and no model reached (``darwin run --dry-run``)."""
        cfg = _checked_config(config, seed, policy, overrides)
        _allowed_templates(cfg, _check_tasks(tasks, "LLMTaskProposer"))
        if cfg.replay is None and cfg.url is not None:
            resolve_database_url(cfg.url, what="proposals database", fix=_STORE_FIX, error=ProposerStoreError)

    def __repr__(self) -> str:
        source = "replay" if self.store is None else self.store.url_text
        return f"LLMTaskProposer({len(self.tasks)} base tasks, {len(self.allowed)} templates, {source!r})"

    def __enter__(self) -> LLMTaskProposer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the model's thread and release the databases (a call in flight is dropped)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        for db in (self.store, self._run_store):
            if db is not None:
                db.close()

    # ----------------------------------------------------------------- choosing tasks

    def next_task(self) -> Task:
        self._harvest()
        if self._due():
            self._start_call()
            if not _in_event_loop():  # nobody to keep busy meanwhile: wait, and stay reproducible
                self.wait_for_call()
        if self._queue and self.rng.random() < self.config.proposal_share:
            self.stats.proposed_episodes += 1
            task = self._queue.popleft()
            if not self._queue:
                self._refill_when_empty = True
            return task
        self.stats.base_episodes += 1
        return self.rng.choice(self.tasks)

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        if outcome.task_id != task.id:
            raise ValueError(f"update() got task {task.id!r} with an outcome for {outcome.task_id!r}; pass the outcome of that task's episode")
        self._since_call += 1
        if task.template is not None:
            self._outcomes.append((task.template, outcome))

    def queue(self) -> list[Task]:
        """The proposed tasks waiting to run, in order."""
        return list(self._queue)

    def wait_for_call(self, timeout: float | None = None) -> bool:
        """Wait for the call in flight (if any) and apply it; ``False`` if it is still running after ``timeout`` s."""
        if self._pending is None:
            return True
        try:
            self._pending.result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        self._harvest()
        return True

    def _due(self) -> bool:
        if self._pending is not None:
            return False
        if not (self._redo or self._since_call >= self.config.propose_every or (self._refill_when_empty and not self._queue)):
            return False
        if self._replay is not None and self._calls >= len(self._replay):
            self._warn_once("replay-done", "LLM proposer: all %d stored calls are replayed; base tasks from now on", len(self._replay))
            return False
        if self._replay is None and self._calls >= self.config.max_calls:
            self._warn_once("budget", "LLM proposer: the call budget (max_calls = %d) is spent; base tasks from now on",
                            self.config.max_calls)
            return False
        return True

    def _start_call(self) -> None:
        index = self._calls
        self._calls += 1
        self._since_call = 0
        self._refill_when_empty = self._redo = False
        if self._replay is not None:
            self._apply(CallResult(index, "replayed", tuple(
                Proposal(i, t.template, t.params, t.language, "", task=t) for i, t in enumerate(self._replay[index])
            )))
            return
        if self._loop is None:
            self._loop = LoopThread("llm-proposer")  # calls never hold up the rollout's loop; LiteLLM's cached clients see one loop
        self._pending = self._loop.submit(self._call(index, list(self._outcomes)))

    def _harvest(self) -> None:
        if self._pending is None or not self._pending.done():
            return
        future, self._pending = self._pending, None
        self._apply(future.result())  # an exception here is a bug in this module: surface it

    def _apply(self, result: CallResult) -> None:
        stats = self.stats
        if result.outcome == "replayed":
            stats.replayed_calls += 1
        else:
            stats.calls += 1
            stats.failures += result.outcome == "failed"
            stats.malformed += result.outcome == "malformed"
        for p in result.proposals:
            stats.proposals += 1
            if p.rejection is None:
                stats.accepted += 1
                continue
            stats.rejected += 1
            stats.rejected_by_reason[p.rejection] = stats.rejected_by_reason.get(p.rejection, 0) + 1
            self._warn_once(f"rejected-{p.rejection}", "LLM proposer: rejected a proposal (%s): %s", p.rejection, p.reason)
        accepted = result.tasks
        self._queue.extend(accepted)
        if accepted:
            self._refill_when_empty = False
        elif result.outcome == "ok":
            self._warn_once("none-valid", "LLM proposer: call %d brought no valid proposal; base tasks until the next call",
                            result.call)

    # ----------------------------------------------------------------- the call

    async def _call(self, index: int, own_outcomes: list[tuple[str, EpisodeOutcome]]) -> CallResult:
        """One call, on the proposer's thread: read the results, ask, validate, store."""
        cfg = self.config
        results = self._results(own_outcomes)
        prompt = self.proposal_prompt(results)
        assert self.policy is not None
        try:
            if isinstance(self.policy, LiteLLMPolicy):
                (completion,) = await self.policy.complete([prompt])
            else:
                (generation,) = await self.policy.generate([prompt])
                completion = Completion(text=generation.text)
        except Exception as exc:  # noqa: BLE001 - any model failure falls back to the base tasks (counted, logged, stored)
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
            self._warn_once(f"failed-{type(exc).__name__}", "LLM proposer: the model failed (%s); base tasks until the "
                            "next call", error)
            result = CallResult(index, "failed", error=error)
        else:
            proposals = read_proposals(completion.text, allowed=self.allowed, languages=self.languages,
                                       max_proposals=cfg.max_proposals, step_budget=cfg.step_budget)
            if proposals is None:
                self._warn_once("malformed", "LLM proposer: could not read the model's answer (expected a JSON list of "
                                "proposals); base tasks until the next call: %r", completion.text[:200])
                result = CallResult(index, "malformed", error="no JSON list of proposals in the answer", completion=completion)
            else:
                result = CallResult(index, "ok", proposals, completion=completion)
        self._record(result)
        return result

    def _record(self, result: CallResult) -> None:
        assert self.store is not None
        model = self.config.llm.model if self.config.llm is not None else type(self.policy).__name__
        try:
            self.store.record(result, model=model)
        except sa_exc.SQLAlchemyError as exc:
            self.stats.database_errors += 1
            self._warn_once("database-write", "LLM proposer: cannot store call %d in %s (%s); a replay will miss it",
                            result.call, self.store.url_text, exc)

    def template_results(self) -> dict[str, TemplateResults]:
        """The agent's recent results per template (what the next call shows the model)."""
        return self._results(list(self._outcomes))

    def _results(self, own_outcomes: list[tuple[str, EpisodeOutcome]]) -> dict[str, TemplateResults]:
        stored = self._stored_outcomes()
        return summarise_results(own_outcomes if stored is None else stored, self.config.history_window)

    def _stored_outcomes(self) -> list[tuple[str, EpisodeOutcome]] | None:
        """The finished episodes of the newest run in ``<run_dir>/run.db`` with their templates;
        ``None`` without a run directory, a run, or a readable database."""
        if self.run_dir is None or not (self.run_dir / DB_FILENAME).is_file():
            return None
        try:
            if self._run_store is None:
                self._run_store = RunStore(self.run_dir / DB_FILENAME)
            runs = self._run_store.runs()
            if not runs:
                return None
            out = []
            for row in self._run_store.episodes(runs[-1].run_id):
                if row.ended_at is None or row.termination_reason is None:
                    continue
                if row.task_id not in self._task_templates:
                    stored_task = self._run_store.task(row.task_id)
                    self._task_templates[row.task_id] = None if stored_task is None else stored_task.template
                template = self._task_templates[row.task_id]
                if template is not None:
                    out.append((template, EpisodeOutcome(row.task_id, row.success, row.num_steps or 0, row.termination_reason)))
            return out
        except (sa_exc.SQLAlchemyError, StoreError) as exc:
            self.stats.database_errors += 1
            self._warn_once("database-read", "LLM proposer: cannot read the agent's results from %s (%s); using the "
                            "outcomes it was told", self.run_dir / DB_FILENAME, exc)
            return None

    def proposal_prompt(self, results: Mapping[str, TemplateResults]) -> Prompt:
        """The request for the next proposals, given the agent's results per template."""
        cfg = self.config
        registry = templates()
        low, high = cfg.learnable_band
        lines = [
            "Templates you may propose (id | app | difficulty | kind | what it asks | parameters | example parameters "
            "| the agent's recent results):",
        ]
        for template_id in self.allowed:
            tpl = registry[template_id]
            example = self._examples[template_id]
            level = {1: "easy", 2: "medium", 3: "hard"}.get(tpl.difficulty, str(tpl.difficulty))
            summary = results.get(template_id, TemplateResults(template_id)).text()
            lines.append(f"- {tpl.id} | {tpl.app} | {level} | {tpl.kind} | {tpl.description or '-'} | "
                         f"{schema_line(tpl)} | {example} | {summary}")
        lines += [
            "",
            f"Languages: {', '.join(self.languages)}.",
            f"Propose up to {cfg.max_proposals} task instances for the agent's next episodes. Prefer templates whose "
            f"success rate is between {low:.0%} and {high:.0%}, then untried ones; avoid templates it always or never "
            "solves unless nothing else is left. Give new parameter values, not the example's.",
            "",
            "Answer with one JSON list and nothing else:",
            '[{"template": "<id>", "params": {<parameters>}, "language": "' + self.languages[0] + '", "why": "<a few words>"}]',
        ]
        return Prompt(messages=(ChatMessage(role="system", text=PROPOSER_SYSTEM), ChatMessage(role="user", text="\n".join(lines))))


    # ----------------------------------------------------------------- resume

    def state_dict(self) -> dict[str, Any]:
        return {
            "queue": [t.model_dump(mode="json") for t in self._queue],
            "since_call": self._since_call,
            "refill_when_empty": self._refill_when_empty,
            "calls": self._calls - (self._pending is not None),
            "redo": self._redo or self._pending is not None,
            "stats": self.stats.as_dict(),
            "outcomes": [[tpl, o.task_id, o.success, o.steps, o.termination.value] for tpl, o in self._outcomes],
            "rng": _rng_to_json(self.rng),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (also after a JSON round trip)."""
        self._queue = deque(Task.model_validate(t) for t in state["queue"])
        self._since_call = int(state["since_call"])
        self._refill_when_empty = bool(state["refill_when_empty"])
        self._calls = int(state["calls"])
        self._redo = bool(state["redo"])
        self.stats = ProposerStats(**state["stats"])
        self._outcomes.clear()
        self._outcomes.extend(
            (tpl, EpisodeOutcome(task_id, success, int(steps), TerminationReason(reason)))
            for tpl, task_id, success, steps, reason in state["outcomes"]
        )
        _rng_from_json(self.rng, state["rng"])

    def _warn_once(self, kind: str, message: str, *args: object) -> None:
        """A warning the first time a kind of event happens; debug messages after that."""
        level = logging.DEBUG if kind in self._warned else logging.WARNING
        self._warned.add(kind)
        logger.log(level, message, *args)


__all__ = [
    "CallResult",
    "LLMTaskProposer",
    "Proposal",
    "ProposalStore",
    "ProposerConfig",
    "ProposerStats",
    "ProposerStoreError",
    "StoredCall",
    "TemplateResults",
    "load_replay",
    "read_proposals",
    "summarise_results",
    "validate_proposal",
]
