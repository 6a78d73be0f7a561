"""Step rows from trajectories, and model batches rebuilt exactly as the policy builds them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from darwin.actions import Wait
from darwin.learner.step_rows import LearnerDataError, StepRow, collate, collect_step_rows, preprocess_rows
from darwin.types import ChatMessage, Decision, Generation, Prompt, Termination, TerminationReason, Trajectory, Verdict

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def test_rows_keep_parse_errors_and_flag_truncations(trajectories):
    out = collect_step_rows(trajectories)
    assert len(out.rows) == 7
    assert [(r.step, r.reward, r.truncated) for r in out.rows] == [
        (0, 0.0, False),
        (1, 0.0, False),
        (2, 1.0, False),  # success
        (0, 0.0, False),
        (1, -0.1, False),  # the parse-error step is a row, penalty kept
        (0, 0.0, True),
        (1, 0.0, True),  # step budget: truncated
    ]
    gen = trajectories[0].transitions[1].decision.generation
    assert out.rows[1].response_ids == gen.response_ids and out.rows[1].old_logprobs == gen.response_logprobs
    assert {r.group for r in out.rows} == {"clock_alarm"}


def test_infra_truncations_are_truncated_or_dropped(policy, kit):
    infra = kit.sampled_trajectory(policy, [0.0], seed=4, reason=TerminationReason.INFRA_TRUNCATED)
    empty = Trajectory(
        episode_id="empty", task=kit.TASK, termination=Termination(TerminationReason.INFRA_TRUNCATED, "hang")
    )
    out = collect_step_rows([infra, empty])
    assert [r.truncated for r in out.rows] == [True] and out.empty_trajectories == 1
    dropped = collect_step_rows([infra, empty], drop_infra_truncated=True)
    assert dropped.rows == [] and dropped.dropped_infra == 2


def test_unverified_trajectories_are_never_trained_on(policy, kit):
    from darwin.types import Phase

    judged = kit.sampled_trajectory(policy, [0.0, 0.0], seed=5, reason=TerminationReason.AGENT_FINISHED)
    judged.verdicts = {Phase.EXECUTION: Verdict(None)}  # the judge could not decide
    errored = kit.sampled_trajectory(policy, [0.0], seed=6, reason=TerminationReason.ERROR)
    errored.verdicts = {Phase.EXECUTION: Verdict(None)}
    failed = kit.sampled_trajectory(policy, [0.0], seed=7, reason=TerminationReason.AGENT_FINISHED)
    failed.verdicts = {Phase.EXECUTION: Verdict(False)}
    # A setup phase that failed is a verified failure of the episode (its last phase has a verdict).
    gated = kit.sampled_trajectory(policy, [0.0], seed=8, reason=TerminationReason.STEP_BUDGET)
    gated.verdicts = {Phase.SETUP: Verdict(False)}
    infra = kit.sampled_trajectory(policy, [0.0], seed=9, reason=TerminationReason.INFRA_TRUNCATED)
    infra.verdicts = {Phase.EXECUTION: Verdict(None)}
    out = collect_step_rows([judged, errored, failed, gated, infra])
    assert out.dropped_unverified == 2
    assert {r.episode_id for r in out.rows} == {failed.episode_id, gated.episode_id, infra.episode_id}


def _replace_decision(traj: Trajectory, step: int, decision: Decision) -> Trajectory:
    transitions = list(traj.transitions)
    transitions[step] = dataclasses.replace(transitions[step], decision=decision)
    return dataclasses.replace(traj, transitions=transitions)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: Decision(action=Wait()), "scripted actor"),
        (lambda d: dataclasses.replace(d, prompt=None), "no prompt"),
        (lambda d: dataclasses.replace(d, generation=Generation(text="x")), "no response token ids"),
        (
            lambda d: dataclasses.replace(
                d, generation=dataclasses.replace(d.generation, response_logprobs=(0.0,) * 99)
            ),
            "pair up",
        ),
        (
            lambda d: dataclasses.replace(
                d,
                generation=dataclasses.replace(
                    d.generation, response_logprobs=(float("-inf"),) * len(d.generation.response_ids)
                ),
            ),
            "non-finite",
        ),
    ],
)
def test_unusable_steps_are_rejected_with_the_episode_and_step(trajectories, change, message):
    traj = trajectories[0]
    bad = _replace_decision(traj, 1, change(traj.transitions[1].decision))
    with pytest.raises(LearnerDataError, match=message) as info:
        collect_step_rows([bad])
    assert f"episode {traj.episode_id!r} step 1" in str(info.value)


def test_incomplete_and_repeated_trajectories_are_rejected(trajectories):
    with pytest.raises(LearnerDataError, match="not completed"):
        collect_step_rows([dataclasses.replace(trajectories[0], termination=None)])
    with pytest.raises(LearnerDataError, match="appears twice"):
        collect_step_rows([trajectories[0], trajectories[0]])


def test_collate_equals_the_policys_batch(policy, kit):
    rng = np.random.default_rng(0)
    shot = lambda w, h: rng.integers(0, 256, (h, w, 3), dtype=np.uint8)  # noqa: E731
    prompts = [
        kit.prompt_for(0, rng),
        Prompt(messages=(ChatMessage(role="user", text="Text only, a longer goal than the others here."),)),
        Prompt(messages=(ChatMessage(role="user", text="Two screens.", images=(shot(56, 112), shot(112, 224))),)),
        kit.prompt_for(5, rng, goal="Open Clock."),
    ]
    rows = [
        StepRow(
            episode_id="e",
            step=i,
            prompt=p,
            prompt_ids=(),
            response_ids=(1,),
            old_logprobs=(0.0,),
            reward=0.0,
            truncated=False,
            policy_version=0,
            group="g",
        )
        for i, p in enumerate(prompts)
    ]
    inputs = preprocess_rows(policy, rows, chunk=3)  # chunks that split the batch unevenly
    for row in inputs:  # each row owns its tensors: a pickled view would carry its whole chunk
        for tensor in (row.pixel_values, row.image_grid_thw):
            if tensor is not None:
                assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    for subset in ([0, 1, 2, 3], [2, 0], [1], [3, 2, 1]):
        expected = policy.build_inputs([prompts[i] for i in subset])
        got = collate([inputs[i] for i in subset], policy.vlm.tokenizer.pad_token_id)
        assert set(got) == set(expected.keys())
        for key in got:
            assert torch.equal(got[key], expected[key]), (subset, key)


def test_a_prompt_rebuilt_differently_is_rejected(trajectories, policy):
    rows = collect_step_rows(trajectories[:1]).rows
    bad = dataclasses.replace(rows[0], prompt_ids=rows[0].prompt_ids[:-1])
    with pytest.raises(LearnerDataError, match="differs from the ids recorded"):
        preprocess_rows(policy, [bad])
