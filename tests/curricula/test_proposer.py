"""LLMTaskProposer end to end against a local OpenAI-compatible server (``openai_server``):
valid proposals become tasks; malformed answers, unknown templates, invalid parameters and
held-out templates are rejected with reasons and counted; the budget caps calls; model
errors fall back to the base tasks; a replay from the stored proposals gives the same tasks
without a server; resume state round-trips; results come from the run database."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin.components import ComponentSpec, build_component
from darwin.curricula.base import EpisodeOutcome
from darwin.curricula.proposer import LLMTaskProposer
from darwin.curricula.proposer_store import ProposalStore
from darwin.curricula.proposer_validation import read_proposals
from darwin.database import DB_FILENAME
from darwin.run.build import build_curriculum
from darwin.run.config import ExperimentConfig
from darwin.store import RunStore
from darwin.templates import SplitConfig, get_template, schema_line, split_templates, templates
from darwin.types import Phase, Task, Termination, TerminationReason, Trajectory, Verdict

ALARM = "clock.set_alarm"
WORLD = "clock.add_world_clock"


def base_tasks() -> list[Task]:
    """Instances of two Clock templates, in English and Chinese."""
    return [get_template(t).instance(s, lang) for t in (ALARM, WORLD) for s in range(2) for lang in ("ENG", "CHN")]


def proposal(template: str, params: Any, language: str = "ENG", why: str = "half solved") -> dict[str, Any]:
    return {"template": template, "params": params, "language": language, "why": why}


def fenced(items: list[Any]) -> str:
    """An answer as models write them: prose around a fenced JSON list."""
    return "Here is the next batch.\n```json\n" + json.dumps(items) + "\n```\nThese should be learnable."


VALID = [proposal(ALARM, {"hour": 6, "minute": 45, "days": [5, 6]}), proposal(WORLD, {"city": "Tokyo"}, "CHN")]


def outcome(
    task: Task, success: bool | None, reason: TerminationReason = TerminationReason.STEP_BUDGET, steps: int = 10
) -> EpisodeOutcome:
    return EpisodeOutcome(task.id, success, steps, TerminationReason.SUCCESS if success else reason)


OPEN: list[LLMTaskProposer] = []


def track(cur: LLMTaskProposer) -> LLMTaskProposer:
    OPEN.append(cur)
    return cur


@pytest.fixture(autouse=True)
def _close_proposers() -> Iterator[None]:
    """Every proposer a test builds is closed after it (its model thread stopped)."""
    yield
    while OPEN:
        OPEN.pop().close()


def proposer(server: Any, **overrides: Any) -> LLMTaskProposer:
    settings: dict[str, Any] = {"llm": server.litellm_config(max_attempts=1), "propose_every": 1, "proposal_share": 1.0}
    settings.update(overrides)
    return track(LLMTaskProposer(base_tasks(), **settings))


def play(cur: LLMTaskProposer, episodes: int, success: bool | None = False) -> list[Task]:
    """Run ``episodes`` simulated episodes: next_task, then an outcome for it."""
    out = []
    for _ in range(episodes):
        task = cur.next_task()
        cur.update(task, outcome(task, success))
        out.append(task)
    return out


def test_module_doctests() -> None:
    result = doctest.testmod(importlib.import_module("darwin.curricula.proposer"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_valid_proposals_become_tasks_with_their_params(openai_server, tmp_path: Path) -> None:
    openai_server.reply = lambda body: fenced(VALID)
    cur = proposer(openai_server, run_dir=tmp_path)
    base = cur.tasks
    cur.update(base[0], outcome(base[0], False, TerminationReason.AGENT_FINISHED, steps=7))  # a false completion
    cur.update(base[4], outcome(base[4], True, steps=5))
    first = cur.next_task()
    assert len(openai_server.requests) == 1
    second = cur.next_task()
    assert [first.template, second.template] == [ALARM, WORLD]
    assert first.params == {"hour": 6, "minute": 45, "days": [5, 6]} and first.language == "ENG"
    assert first.id.startswith("clock.set_alarm.p") and first.verifier.predicate == "clock.alarm"
    assert first.verifier.params == {"hour": 6, "minute": 45, "days": [5, 6]}
    assert "6:45" in first.instruction and "weekend" in first.instruction
    assert second.params == {"city": "Tokyo"} and second.language == "CHN" and "Tokyo" in second.instruction
    assert (cur.stats.calls, cur.stats.accepted, cur.stats.rejected, cur.stats.proposed_episodes) == (1, 2, 0, 2)
    # What the model read: every allowed template with schema, example and the agent's results.
    text = openai_server.texts()[0]
    assert f"- {ALARM} | Clock | medium | action |" in text and schema_line(get_template(ALARM)) in text
    assert (
        "1 episodes: 0% success (0/1 scored), mean 7.0 steps; ended by agent_finished 1 (1 false completions)" in text
    )
    assert "1 episodes: 100% success (1/1 scored), mean 5.0 steps; ended by success 1" in text
    assert "Languages: ENG, CHN." in text and "between 20% and 80%" in text
    assert "clock.home_time_zone" not in text  # not a template of the base tasks
    # Stored in the run's database: the call with its tokens, each proposal with its task.
    with sqlite3.connect(tmp_path / DB_FILENAME) as db:
        calls = db.execute(
            "SELECT call, outcome, model, prompt_tokens, completion_tokens FROM curriculum_calls"
        ).fetchall()
        rows = db.execute(
            "SELECT template, accepted, reason, task_id, why FROM curriculum_proposals ORDER BY position"
        ).fetchall()
    assert calls == [(0, "ok", "openai/fake-llm", 10, 5)]
    assert rows == [(ALARM, 1, "", first.id, "half solved"), (WORLD, 1, "", second.id, "half solved")]
    cur.close()


def test_malformed_answers_fall_back_to_base_tasks(openai_server, caplog: pytest.LogCaptureFixture) -> None:
    openai_server.reply = lambda body: "I would practise alarms next, they seem hard."
    cur = proposer(openai_server, propose_every=2)
    with caplog.at_level(logging.WARNING, logger="darwin.curricula.proposer"):
        drawn = play(cur, 6)
    assert all(t in cur.tasks for t in drawn)
    assert cur.stats.calls == 2 and cur.stats.malformed == 2 and cur.stats.accepted == 0  # episodes 2 and 4 triggered
    assert cur.stats.base_episodes == 6
    assert caplog.text.count("could not read the model's answer") == 1  # logged once per kind
    assert [c.outcome for c in cur.store.calls()] == ["malformed", "malformed"]  # type: ignore[union-attr]


def test_invalid_proposals_are_rejected_with_reasons_and_counted(
    openai_server, caplog: pytest.LogCaptureFixture
) -> None:
    train = [get_template(ALARM).instance(s) for s in range(3)]  # English only
    held_out = "clock.home_time_zone"  # a template of the training app that training leaves out
    good = {"hour": 13, "minute": 30}
    answer = [
        proposal("clock.set_alarmz", {"hour": 6}),  # unknown (a typo)
        proposal(ALARM, {"hour": 25}),  # invalid params
        proposal(held_out, {"zone": "Tokyo"}),  # held out: never allowed
        "set an alarm",  # not an object
        proposal(ALARM, good, "CHN"),  # a language not trained on
        proposal(ALARM, good),  # valid
        proposal(ALARM, good),  # the same again
        proposal(ALARM, {"hour": 14}, why="past max_proposals"),
    ]
    openai_server.reply = lambda body: json.dumps(answer)
    cur = track(
        LLMTaskProposer(
            train,
            llm=openai_server.litellm_config(max_attempts=1),
            propose_every=1,
            max_proposals=7,
            proposal_share=1.0,
        )
    )
    assert cur.allowed == (ALARM,)
    with caplog.at_level(logging.WARNING, logger="darwin.curricula.proposer"):
        play(cur, 3)  # two calls with the same answer (after episode 1, and when the queue emptied)
    assert cur.stats.calls == 2 and cur.stats.accepted == 2 and cur.stats.rejected == 14
    assert cur.stats.rejected_by_reason == {
        "unknown_template": 2,
        "invalid_params": 2,
        "not_allowed": 2,
        "malformed": 2,
        "language": 2,
        "duplicate": 2,
        "too_many": 2,
    }
    assert caplog.text.count("rejected a proposal (not_allowed)") == 1  # once per kind
    stored = cur.store.calls()  # type: ignore[union-attr]
    assert [len(c.tasks) for c in stored] == [1, 1] and stored[0].rejected == 7
    proposals = read_proposals(json.dumps(answer), allowed=cur.allowed, languages=cur.languages, max_proposals=7)
    assert proposals is not None
    reasons = {p.rejection: p.reason for p in proposals if p.rejection}
    assert reasons["unknown_template"] == "no template 'clock.set_alarmz' (did you mean 'clock.set_alarm'?)"
    assert (
        "hour: Input should be less than or equal to 23" in reasons["invalid_params"]
        and "Schema:" in reasons["invalid_params"]
    )
    assert "'clock.home_time_zone' is not among the templates this curriculum may propose" in reasons["not_allowed"]
    assert "must be a JSON object" in reasons["malformed"]
    assert "'CHN' is not one of ['ENG']" in reasons["language"]
    assert "clock.set_alarm.p" in reasons["duplicate"] and "past the 7 proposals" in reasons["too_many"]
    [accepted] = [p for p in proposals if p.accepted]
    assert accepted.task is not None and accepted.task.params == {"hour": 13, "minute": 30, "days": []}


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps([proposal(ALARM, {"hour": 10**30})]),  # an integer past 64 bits
        json.dumps([proposal("clock.zone_offset", {"zone": "Atlantis"})]),  # schema-valid, but no such zone
        json.dumps([proposal(ALARM, {"hour": 6, "minute": 0, "days": [[[[]]]]})]),
        "[" * 5000 + "]" * 5000,  # nesting deeper than the parser goes
        "\x00\xff" * 2000 + "{not json",
        json.dumps({"proposals": "none"}),
        "",
    ],
)
def test_hostile_answers_are_rejected_never_raised(openai_server, answer: str) -> None:
    tasks = [get_template(ALARM).instance(0), get_template("clock.zone_offset").instance(0)]
    openai_server.reply = lambda body: answer
    cur = track(LLMTaskProposer(tasks, llm=openai_server.litellm_config(max_attempts=1), propose_every=1))
    drawn = play(cur, 2)  # the call comes after the first episode
    assert all(t in cur.tasks for t in drawn) and cur.stats.accepted == 0 and cur.stats.calls == 1
    assert cur.stats.malformed + cur.stats.rejected_by_reason.get("invalid_params", 0) == 1
    calls = cur.store.calls()  # type: ignore[union-attr]
    assert len(calls) == 1 and calls[0].outcome in ("ok", "malformed")


def test_held_out_templates_of_a_split_are_never_proposed(openai_server) -> None:
    split = split_templates(SplitConfig(held_out_apps=(), train_instances=2))
    held_out = split.held_out_templates[:64]
    assert held_out
    openai_server.reply = lambda body: json.dumps([proposal(t, templates()[t].instance(0).params) for t in held_out])
    cur = track(
        LLMTaskProposer(
            split.sets["train"], llm=openai_server.litellm_config(max_attempts=1), propose_every=1, max_proposals=64
        )
    )
    assert set(cur.allowed) == set(split.train_templates)
    text = cur.proposal_prompt(cur.template_results()).messages[1].text
    assert not any(f"- {t} |" in text for t in held_out)
    play(cur, 2)
    assert cur.stats.accepted == 0 and cur.stats.rejected_by_reason == {"not_allowed": len(held_out)}


def test_the_budget_caps_calls(openai_server, caplog: pytest.LogCaptureFixture) -> None:
    openai_server.reply = lambda body: fenced(VALID[:1])
    cur = proposer(openai_server, max_calls=2, proposal_share=0.5)
    with caplog.at_level(logging.WARNING, logger="darwin.curricula.proposer"):
        drawn = play(cur, 12)
    assert len(openai_server.requests) == 2 and cur.stats.calls == 2
    assert sum(t.template == ALARM and t not in cur.tasks for t in drawn) == 2  # each proposal ran once
    assert caplog.text.count("call budget (max_calls = 2) is spent") == 1
    zero = proposer(openai_server, max_calls=0)
    play(zero, 3)
    assert len(openai_server.requests) == 2 and zero.stats.base_episodes == 3


@pytest.mark.parametrize("status", [500, 401])
def test_model_errors_fall_back_to_base_tasks(openai_server, status: int, caplog: pytest.LogCaptureFixture) -> None:
    openai_server.reply = lambda body: status
    cur = proposer(openai_server, propose_every=3)
    with caplog.at_level(logging.WARNING, logger="darwin.curricula.proposer"):
        drawn = play(cur, 7)
    assert all(t in cur.tasks for t in drawn)
    assert cur.stats.calls == 2 and cur.stats.failures == 2  # after episodes 3 and 6, not on every draw
    assert caplog.text.count("the model failed") == 1
    (call, _) = cur.store.calls()  # type: ignore[union-attr]
    assert call.outcome == "failed"
    openai_server.reply = lambda body: fenced(VALID)  # the model recovers: proposals again
    play(cur, 3)
    assert cur.stats.accepted == 2


def scripted_answers() -> Any:
    """A different answer per call, in call order (each names the alarm hour of its call)."""
    count = {"n": 0}
    lock = threading.Lock()

    def reply(body: dict) -> str:
        with lock:
            n = count["n"]
            count["n"] += 1
        if n == 1:
            return "no idea"  # a malformed call in the middle
        return fenced([proposal(ALARM, {"hour": 5 + n, "minute": 15}), proposal(WORLD, {"city": "Paris"}, "CHN")])

    return reply


def test_replay_gives_the_same_tasks_without_a_model(openai_server, tmp_path: Path) -> None:
    openai_server.reply = scripted_answers()
    original = proposer(openai_server, run_dir=tmp_path, propose_every=3, proposal_share=0.6, seed=7)
    drawn = play(original, 20)
    assert original.stats.calls >= 3 and original.stats.malformed == 1
    original.close()
    requests = len(openai_server.requests)
    replayed = track(LLMTaskProposer(base_tasks(), replay=str(tmp_path), propose_every=3, proposal_share=0.6, seed=7))
    assert replayed.policy is None and replayed.store is None
    assert play(replayed, 20) == drawn
    assert len(openai_server.requests) == requests
    assert replayed.stats.replayed_calls == original.stats.calls and replayed.stats.calls == 0
    # From the database file too; past the stored calls it falls back to the base tasks.
    from_file = track(
        LLMTaskProposer(base_tasks(), replay=str(tmp_path / DB_FILENAME), propose_every=3, proposal_share=0.6, seed=7)
    )
    assert play(from_file, 20) == drawn
    play(from_file, 30)
    assert from_file.queue() == [] and from_file.stats.replayed_calls == original.stats.calls


def test_replay_of_a_run_without_proposals_is_refused(tmp_path: Path) -> None:
    RunStore.for_run_dir(tmp_path).close()
    ProposalStore(tmp_path / DB_FILENAME).close()
    with pytest.raises(ValueError, match="holds no stored proposals"):
        LLMTaskProposer(base_tasks(), replay=str(tmp_path))
    with pytest.raises(ValueError, match="neither a run directory"):
        LLMTaskProposer(base_tasks(), replay=str(tmp_path / "missing"))


def test_resume_state_round_trip(openai_server) -> None:
    openai_server.reply = scripted_answers()
    uninterrupted = proposer(openai_server, propose_every=4, proposal_share=0.7, max_calls=4, seed=3)
    head = play(uninterrupted, 9)
    state = json.loads(json.dumps(uninterrupted.state_dict()))  # checkpoints store JSON
    assert state["calls"] == uninterrupted.stats.calls >= 1
    assert [Task.model_validate(t) for t in state["queue"]] == uninterrupted.queue()
    tail = play(uninterrupted, 15)

    openai_server.reply = scripted_answers()
    for _ in range(state["calls"]):  # the answers the calls before the checkpoint got
        openai_server.reply({})
    resumed = proposer(openai_server, propose_every=4, proposal_share=0.7, max_calls=4, seed=0)
    resumed.load_state_dict(state)
    assert resumed.queue() == [Task.model_validate(t) for t in state["queue"]]
    assert resumed.stats.as_dict() == state["stats"]
    assert play(resumed, 15) == tail
    assert resumed.stats.calls == uninterrupted.stats.calls == 4  # the budget went on, not restarted
    assert len(head) == 9 and len(openai_server.requests) == 4 + 4 - state["calls"]


def test_a_call_in_flight_at_a_checkpoint_is_made_again_on_resume(openai_server) -> None:
    release = threading.Event()

    def slow(body: dict) -> str:
        release.wait(5)
        return fenced(VALID)

    openai_server.reply = slow
    cur = proposer(openai_server)

    async def start() -> Task:
        return cur.next_task()  # inside an event loop: does not wait for the model

    cur.update(cur.tasks[0], outcome(cur.tasks[0], False))
    first = asyncio.run(start())
    assert first in cur.tasks and cur.stats.base_episodes == 1  # the phones go on with base tasks
    state = json.loads(json.dumps(cur.state_dict()))
    assert state["calls"] == 0 and state["redo"] is True
    release.set()
    assert cur.wait_for_call(timeout=10)
    assert [t.template for t in cur.queue()] == [ALARM, WORLD]
    resumed = proposer(openai_server)
    resumed.load_state_dict(state)
    assert resumed.next_task().template == ALARM  # called again at once
    assert resumed.stats.calls == 1 and len(openai_server.requests) == 2
    cur.close()
    resumed.close()


def record_episode(store: RunStore, run_id: str, task: Task, success: bool, reason: TerminationReason) -> None:
    episode_id = f"{task.id}-{len(store.episodes(run_id))}"
    store.start_episode(run_id, episode_id, task, phone="sim-0")
    store.finish_episode(
        Trajectory(
            episode_id=episode_id,
            task=task,
            termination=Termination(reason),
            verdicts={Phase.EXECUTION: Verdict(success)},
        )
    )


def test_results_are_read_from_the_run_database(openai_server, tmp_path: Path) -> None:
    """With a run directory the model reads the run's episodes, not only what update() was told."""
    store = RunStore.for_run_dir(tmp_path)
    run_id = store.start_run("gen", config=None)
    alarm = get_template(ALARM).instance(0)
    for ok in (True, False, False, True):
        record_episode(store, run_id, alarm, ok, TerminationReason.SUCCESS if ok else TerminationReason.AGENT_FINISHED)
    openai_server.reply = lambda body: fenced(VALID)
    spec = ComponentSpec(
        name="llm_proposer", kwargs={"llm": openai_server.litellm_config(max_attempts=1), "propose_every": 1}
    )
    cur = track(build_component("curriculum", spec, tasks=base_tasks(), seed=0, named_context={"run_dir": tmp_path}))  # type: ignore[arg-type]
    assert isinstance(cur, LLMTaskProposer) and cur.run_dir == tmp_path
    cur.update(alarm, outcome(alarm, True))  # one episode triggers the call; the database has four
    cur.next_task()
    text = openai_server.texts()[0]
    assert (
        f"{ALARM} | Clock" in text
        and "4 episodes: 50% success (2/4 scored), mean 0.0 steps; ended by agent_finished 2, success 2 (2 false completions)"
        in text
    )
    assert f"{WORLD} | Clock" in text and "not tried yet" in text
    assert len(cur.store.calls()) == 1  # type: ignore[union-attr]
    cur.close()
    store.close()


def test_experiment_builds_the_proposer_with_its_run_directory(openai_server, tmp_path: Path) -> None:
    config = ExperimentConfig(
        name="proposer",
        tasks=("clock.set_alarm.s0", "clock.add_world_clock.s1"),
        curriculum=ComponentSpec(
            name="llm_proposer", kwargs={"llm": openai_server.litellm_config(), "step_budget": 32}
        ),
    )
    config.check_components()  # builds it once without a run directory (in-memory proposals)
    cur = track(build_curriculum(config, config.resolve_tasks(), run_dir=tmp_path))  # type: ignore[arg-type]
    assert isinstance(cur, LLMTaskProposer) and cur.run_dir == tmp_path and cur.allowed == (ALARM, WORLD)
    assert cur.store is not None and cur.store.url_text.endswith(f"{tmp_path.name}/{DB_FILENAME}")
    openai_server.reply = lambda body: fenced(VALID[:1])
    cur.update(cur.tasks[0], outcome(cur.tasks[0], False))
    assert cur.next_task().step_budget == 32  # proposed tasks get the experiment's horizon
    cur.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "needs a model"),
        ({"llm": {"model": "m"}, "replay": "runs/x"}, "replay replays stored proposals"),
        ({"llm": {"model": "m"}, "templates": ["clock.nope"]}, "matches no registered template"),
        ({"llm": {"model": "m"}, "max_proposals": 0}, "max_proposals"),
        ({"llm": {"model": "m"}, "proposal_share": 1.5}, "proposal_share"),
        ({"llm": {"model": "m"}, "learnable_band": [0.9, 0.1]}, "learnable_band"),
        ({"llm": {"model": "m", "api_key": "sk-x"}}, "API keys are never part of a config"),
        ({"llm": {"model": "m"}, "propose_evry": 3}, "propose_evry"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LLMTaskProposer(base_tasks(), **kwargs)


def test_tasks_without_templates_need_a_template_list() -> None:
    plain = [Task.model_validate({"id": "x", "instruction": "Do x.", "app": "App", "verifier": {"predicate": "p"}})]
    with pytest.raises(ValueError, match="no templates to propose from"):
        LLMTaskProposer(plain, llm={"model": "m"})
    cur = track(LLMTaskProposer(plain, llm={"model": "m"}, templates=["clock.*"]))
    assert set(cur.allowed) == {t for t in templates() if t.startswith("clock.")}
    cur.close()


def test_in_a_rollout_the_phones_never_wait_for_the_model(openai_server, tmp_path: Path) -> None:
    """The real loop: SimPhones with the oracle, a slow model; base tasks run while a call is in
    flight, proposed instances run and are solved, and the next call reads them from the run database."""
    from darwin.agents.scripted import OracleActor
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.replay_buffer import ReplayBuffer
    from darwin.rollout import RolloutEngine

    def slow(body: dict) -> str:
        time.sleep(0.5)  # the model thinks for half a second
        return fenced([proposal(ALARM, {"hour": 18, "minute": 15}), proposal(WORLD, {"city": "Tokyo"})])

    openai_server.reply = slow
    store = RunStore.for_run_dir(tmp_path)
    run_id = store.start_run("proposer", config=None)
    cur = track(
        LLMTaskProposer(
            base_tasks(),
            llm=openai_server.litellm_config(max_attempts=1),
            propose_every=2,
            proposal_share=1.0,
            max_calls=2,
            run_dir=tmp_path,
            seed=1,
        )
    )
    buffer = ReplayBuffer(rollout_steps=10_000)
    eng = RolloutEngine(
        [SimPhoneEnv(seed=i) for i in range(2)], lambda i: OracleActor(), cur, buffer, store=store, run_id=run_id
    )

    async def run() -> None:
        async with asyncio.timeout(120):
            await eng.run(until=lambda: cur.stats.calls >= 2 and cur.stats.proposed_episodes >= 2 and not cur.queue())

    asyncio.run(run())
    assert cur.stats.base_episodes >= 3  # two before the first call, at least one while it was in flight
    episodes = [e for e in store.episodes(run_id) if e.finished]
    proposed = [e for e in episodes if ".p" in e.task_id]
    assert proposed and all(e.success for e in proposed if e.termination_reason != TerminationReason.ALREADY_DONE)
    second = openai_server.texts()[1]  # the second call read the first call's instances from the database
    line = next(ln for ln in second.splitlines() if ln.startswith(f"- {ALARM} |"))
    assert "not tried yet" not in line and "% success" in line
    store.close()
