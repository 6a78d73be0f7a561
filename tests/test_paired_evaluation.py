"""Paired evaluations: every episode has an identity (task, phone, sample) and its own
sampling seed, so two checkpoints evaluated alike meet the same initial states and the same
random numbers, and their difference is measured pair by pair."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from darwin.agents.base import Actor, ModelActor
from darwin.agents.scripted import OracleActor
from darwin.evaluate import (
    GREEDY,
    EvalEpisode,
    EvalProtocol,
    EvalResult,
    evaluate_paired,
    evaluation_phones,
    paired_comparison,
    summarize_episodes,
)
from darwin.policies.base import Policy
from darwin.rollout import EpisodeRequest, RolloutEngine
from darwin.task_registry import get_task
from darwin.types import Decision, EpisodeSampling, Generation, Prompt


def test_protocol_seeds_are_per_episode_and_reproducible() -> None:
    protocol = EvalProtocol(samples=3, seed=4)
    seeds = {protocol.sampling("clock_1", "eval-0", j).seed for j in (GREEDY, 0, 1, 2)}
    assert len(seeds) == 4
    assert protocol.sampling("clock_1", "eval-0", 1) == EvalProtocol(samples=3, seed=4).sampling("clock_1", "eval-0", 1)
    assert protocol.sampling("clock_1", "eval-1", 1) != protocol.sampling("clock_1", "eval-0", 1)
    assert (
        protocol.sampling("clock_1", "eval-0", GREEDY).greedy and not protocol.sampling("clock_1", "eval-0", 0).greedy
    )
    assert protocol.episodes_per_instance == 4
    with pytest.raises(ValueError, match="plays nothing"):
        EvalProtocol(samples=0, greedy=False)


class _RecordingPolicy(Policy):
    """Answers 'finished' and records each request's seed and greedy flag."""

    def __init__(self) -> None:
        self.seen: list[tuple[int | None, bool]] = []

    async def generate(self, prompts: list[Prompt]) -> list[Generation]:  # type: ignore[override]
        self.seen.extend((p.seed, p.greedy) for p in prompts)
        return [Generation(text="finished") for _ in prompts]


def test_a_model_actor_seeds_every_request_of_an_episode_from_its_sampling() -> None:
    from darwin.agents.tiny import TinyAgent

    policy = _RecordingPolicy()
    actor = ModelActor(TinyAgent(), policy)
    engine = RolloutEngine(evaluation_phones(0, 1), lambda i: actor)
    sampling = EpisodeSampling(seed=9, greedy=True)
    task = get_task("clock_1")
    asyncio.run(engine.run_episodes([EpisodeRequest(task, sampling=sampling), EpisodeRequest(task)]))
    first, second = policy.seen[0], policy.seen[-1]
    assert first == (sampling.request_seed(0), True)
    assert second == (None, False)  # no sampling given: the policy's own


def test_pinned_requests_play_on_their_phone_and_come_back_in_order() -> None:
    tasks = [get_task("clock_1"), get_task("settings_dark_theme")]
    envs = evaluation_phones(0, 3)
    requests = [EpisodeRequest(t, phone=i % 3) for i, t in enumerate(tasks * 3)]
    engine = RolloutEngine(envs, lambda i: OracleActor())
    played = asyncio.run(engine.run_episodes(requests))
    assert [(t.task.id, t.phone) for t in played] == [(r.task.id, envs[r.phone].name) for r in requests]  # type: ignore[index]
    with pytest.raises(ValueError, match="asks for phone 5"):
        asyncio.run(engine.run_episodes([EpisodeRequest(tasks[0], phone=5)]))


class _PressesBack(Actor):
    """Presses back at every step: never reaches a goal."""

    async def act(self, observation, history):  # noqa: ANN001, ANN201
        from darwin.actions import PressBack

        return Decision(action=PressBack())


def test_the_same_protocol_plays_the_same_episodes_and_pairs_them() -> None:
    tasks = [get_task("clock_1"), get_task("settings_dark_theme")]
    protocol = EvalProtocol(samples=2)
    oracle = asyncio.run(evaluate_paired(tasks, evaluation_phones(0, 2), lambda i: OracleActor(), protocol))
    again = asyncio.run(evaluate_paired(tasks, evaluation_phones(0, 2), lambda i: OracleActor(), protocol))
    assert [r.key for r in oracle.records] == [r.key for r in again.records]
    assert len(oracle.records) == 2 * 2 * 3 and {r.sample for r in oracle.records} == {GREEDY, 0, 1}
    summary = oracle.summary()
    assert (summary.greedy, summary.sampled, summary.pass_at) == (1.0, 1.0, {1: 1.0, 2: 1.0})

    stuck = asyncio.run(evaluate_paired(tasks, evaluation_phones(0, 2), lambda i: _PressesBack(), protocol))
    comparison = paired_comparison(oracle.records, stuck.records, np.random.default_rng(0))
    assert set(comparison.differences) == {"greedy", "sampled", "pass@1", "pass@2"}
    greedy = comparison.differences["greedy"]
    assert (greedy.difference.value, greedy.pairs, greedy.separated) == (1.0, 4, True)
    with pytest.raises(ValueError, match="share no verified episode"):
        other = asyncio.run(evaluate_paired(tasks, evaluation_phones(50, 2), lambda i: OracleActor(), protocol))
        paired_comparison(oracle.records, other.records, np.random.default_rng(0))


def test_paired_comparison_hand_computed() -> None:
    def ep(task: str, inst: str, sample: int, success: bool | None) -> EvalEpisode:
        return EvalEpisode(task, inst, sample, success, f"{task}{inst}{sample}", 3)

    # one task, two instances, greedy + 2 samples each
    a = [ep("t", "p0", GREEDY, True), ep("t", "p0", 0, True), ep("t", "p0", 1, False),
         ep("t", "p1", GREEDY, True), ep("t", "p1", 0, True), ep("t", "p1", 1, True)]  # fmt: skip
    b = [ep("t", "p0", GREEDY, False), ep("t", "p0", 0, False), ep("t", "p0", 1, False),
         ep("t", "p1", GREEDY, True), ep("t", "p1", 0, True), ep("t", "p1", 1, None)]  # fmt: skip
    d = paired_comparison(a, b, np.random.default_rng(0)).differences
    assert (d["greedy"].mean_a, d["greedy"].mean_b, d["greedy"].pairs) == (1.0, 0.5, 2)
    # sampled pairs: (p0,0) 1 vs 0, (p0,1) 0 vs 0, (p1,0) 1 vs 1; (p1,1) unverified in B: left out
    assert d["sampled"].pairs == 3 and d["sampled"].difference.value == pytest.approx(1 / 3)
    # pass@2 only where both have 2 verified samples: p0, 1 - C(1,2)/C(2,2) = 1 against 0
    assert d["pass@2"].pairs == 1 and d["pass@2"].difference.value == 1.0
    s = summarize_episodes(a)
    assert (s.greedy, s.sampled, s.pass_at) == (1.0, 0.75, {1: 0.75, 2: 1.0})


def test_eval_result_round_trips_through_json() -> None:
    record = EvalEpisode("t", "eval-0", GREEDY, True, "e", 4)
    result = EvalResult(
        "final", 2, 2, 3, 4, {"t": 0.75}, 1.5, greedy=1.0, pass_at_k={1: 0.75, 2: 1.0},
        per_task_pass_at_k={"t": {1: 0.75}}, protocol=EvalProtocol(samples=2), records=[record],
    )  # fmt: skip
    import json

    again = EvalResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result
