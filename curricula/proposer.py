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

    >>> from darwin.curricula.base import EpisodeOutcome
    >>> from darwin.curricula.proposer import LLMTaskProposer
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

The module is split by job: the settings (:mod:`darwin.curricula.proposer_config`), results and
proposals (:mod:`darwin.curricula.proposer_results`), validation
(:mod:`darwin.curricula.proposer_validation`), storage and replay
(:mod:`darwin.curricula.proposer_store`); this module is the curriculum.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import exc as sa_exc

from darwin.curricula._util import _check_tasks, _rng_from_json, _rng_to_json
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.curricula.proposer_config import ProposerConfig
from darwin.curricula.proposer_results import (
    CallResult,
    Proposal,
    ProposerStats,
    TemplateResults,
    summarise_results,
)
from darwin.curricula.proposer_store import (
    _STORE_FIX,
    ProposalStore,
    ProposerStoreError,
    _allowed_templates,
    _checked_config,
    load_replay,
)
from darwin.curricula.proposer_validation import _json_text, read_proposals
from darwin.database import DB_FILENAME, StoreError, resolve_database_url
from darwin.loop_thread import LoopThread
from darwin.policies.base import Policy
from darwin.policies.litellm import Completion, LiteLLMPolicy
from darwin.store import RunStore
from darwin.templates import Language, schema_line, templates
from darwin.types import ChatMessage, Prompt, Task, TerminationReason

logger = logging.getLogger(__name__)


PROPOSER_SYSTEM = (
    "You design the training curriculum of a reinforcement-learning agent that operates a phone by "
    "looking at screenshots. You see the task templates it may be trained on and its recent results on "
    "each. Propose the task instances it should practise next: those it is most likely to learn from, "
    "i.e. templates it solves sometimes but not always, and templates it has not tried yet. Tasks it "
    "always solves or never solves teach it little. Vary the parameters; keep to each template's "
    "parameter schema exactly."
)


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
            logger.warning(
                "proposer model %s: environment variable %s is not set; until it is, calls fail and the "
                "base tasks are used",
                cfg.llm.model,
                cfg.llm.api_key_env,
            )
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
        cls,
        tasks: Sequence[Task],
        config: ProposerConfig | None = None,
        *,
        seed: int = 0,
        run_dir: object = None,
        policy: Policy | None = None,
        **overrides: Any,
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
            raise ValueError(
                f"update() got task {task.id!r} with an outcome for {outcome.task_id!r}; pass the outcome of that task's episode"
            )
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
        if not (
            self._redo or self._since_call >= self.config.propose_every or (self._refill_when_empty and not self._queue)
        ):
            return False
        if self._replay is not None and self._calls >= len(self._replay):
            self._warn_once(
                "replay-done",
                "LLM proposer: all %d stored calls are replayed; base tasks from now on",
                len(self._replay),
            )
            return False
        if self._replay is None and self._calls >= self.config.max_calls:
            self._warn_once(
                "budget",
                "LLM proposer: the call budget (max_calls = %d) is spent; base tasks from now on",
                self.config.max_calls,
            )
            return False
        return True

    def _start_call(self) -> None:
        index = self._calls
        self._calls += 1
        self._since_call = 0
        self._refill_when_empty = self._redo = False
        if self._replay is not None:
            self._apply(
                CallResult(
                    index,
                    "replayed",
                    tuple(
                        Proposal(i, t.template, t.params, t.language, "", task=t)
                        for i, t in enumerate(self._replay[index])
                    ),
                )
            )
            return
        if self._loop is None:
            self._loop = LoopThread(
                "llm-proposer"
            )  # calls never hold up the rollout's loop; LiteLLM's cached clients see one loop
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
            self._warn_once(
                f"rejected-{p.rejection}", "LLM proposer: rejected a proposal (%s): %s", p.rejection, p.reason
            )
        accepted = result.tasks
        self._queue.extend(accepted)
        if accepted:
            self._refill_when_empty = False
        elif result.outcome == "ok":
            self._warn_once(
                "none-valid",
                "LLM proposer: call %d brought no valid proposal; base tasks until the next call",
                result.call,
            )

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
            self._warn_once(
                f"failed-{type(exc).__name__}",
                "LLM proposer: the model failed (%s); base tasks until the next call",
                error,
            )
            result = CallResult(index, "failed", error=error)
        else:
            proposals = read_proposals(
                completion.text,
                allowed=self.allowed,
                languages=self.languages,
                max_proposals=cfg.max_proposals,
                step_budget=cfg.step_budget,
            )
            if proposals is None:
                self._warn_once(
                    "malformed",
                    "LLM proposer: could not read the model's answer (expected a JSON list of "
                    "proposals); base tasks until the next call: %r",
                    completion.text[:200],
                )
                result = CallResult(
                    index, "malformed", error="no JSON list of proposals in the answer", completion=completion
                )
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
            self._warn_once(
                "database-write",
                "LLM proposer: cannot store call %d in %s (%s); a replay will miss it",
                result.call,
                self.store.url_text,
                exc,
            )

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
                    out.append(
                        (template, EpisodeOutcome(row.task_id, row.success, row.num_steps or 0, row.termination_reason))
                    )
            return out
        except (sa_exc.SQLAlchemyError, StoreError) as exc:
            self.stats.database_errors += 1
            self._warn_once(
                "database-read",
                "LLM proposer: cannot read the agent's results from %s (%s); using the outcomes it was told",
                self.run_dir / DB_FILENAME,
                exc,
            )
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
            lines.append(
                f"- {tpl.id} | {tpl.app} | {level} | {tpl.kind} | {tpl.description or '-'} | "
                f"{schema_line(tpl)} | {example} | {summary}"
            )
        lines += [
            "",
            f"Languages: {', '.join(self.languages)}.",
            f"Propose up to {cfg.max_proposals} task instances for the agent's next episodes. Prefer templates whose "
            f"success rate is between {low:.0%} and {high:.0%}, then untried ones; avoid templates it always or never "
            "solves unless nothing else is left. Give new parameter values, not the example's.",
            "",
            "Answer with one JSON list and nothing else:",
            '[{"template": "<id>", "params": {<parameters>}, "language": "'
            + self.languages[0]
            + '", "why": "<a few words>"}]',
        ]
        return Prompt(
            messages=(ChatMessage(role="system", text=PROPOSER_SYSTEM), ChatMessage(role="user", text="\n".join(lines)))
        )

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
    "LLMTaskProposer",
]
