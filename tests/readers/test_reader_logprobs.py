"""With a reader, the learner re-scores exactly what the sampler saw (issue 72).

A tiny VLM plays sampled episodes on a SimPhone through the real step workflow with the
``elements`` reader, so every prompt lists the screen's marks as ``[k] text`` lines. The
learner's path then rebuilds each prompt through its own copy of the processor (checked
against the ids recorded at sampling time), and its teacher-forced log-probs must equal the
sampler's. Changing a recorded prompt's mark lines must be caught or must change the scores.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses

import pytest
import torch

from darwin.agents.base import ModelActor
from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.envs.sim.env import SimPhoneEnv
from darwin.learner.step_rows import (
    LearnerDataError,
    StepRow,
    collate,
    collect_step_rows,
    preprocess_rows,
    processor_inputs,
)
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.models.pixels import PixelEncoder
from darwin.models.scoring import compute_response_logprobs
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.task_registry import get_task
from darwin.types import ChatMessage, EpisodeSampling, Trajectory
from darwin.workflows.step import StepConfig, StepWorkflow

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

SCREEN = (56, 112)  # (W, H): 8 visual tokens per screenshot, as in tests/learner/conftest.py
HORIZON = 3


@pytest.fixture(scope="module")
def policy() -> HFPolicy:
    vlm = build_tiny_vlm(TinyVLMConfig(screen_width=SCREEN[0], screen_height=SCREEN[1]), seed=0)
    return HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, seed=1))


@pytest.fixture(scope="module")
def trajectories(policy: HFPolicy) -> list[Trajectory]:
    """Two sampled episodes of base tasks, read by the elements reader, HORIZON steps each (the
    untrained model's replies rarely parse, so most steps read the home screen's app labels)."""
    workflow = StepWorkflow(config=StepConfig(observation_size=SCREEN))
    played = []
    for seed, task_id in enumerate(("settings_dark_theme", "booking.com_0")):
        actor = ModelActor(TinyAgent(TinyAgentConfig(reader={"name": "elements"})), policy)
        actor.use_sampling(EpisodeSampling(seed=seed))
        task = get_task(task_id).model_copy(update={"step_budget": HORIZON})
        played.append(asyncio.run(workflow.run(SimPhoneEnv(seed=seed), task, actor)))
    return played


def user_text(row: StepRow) -> str:
    return "\n".join(m.text for m in row.prompt.messages if m.role == "user")


def learner_logprobs(policy: HFPolicy, rows: list[StepRow]) -> torch.Tensor:
    """The local learner's scoring of ``rows``: its own processor copy, the recorded-ids fast
    path after the first chunk, left-padded collation, the policy's mask and temperature."""
    image_processor = policy.vlm.processor.image_processor
    inputs = preprocess_rows(
        processor_inputs(copy.deepcopy(policy.vlm.processor)),
        rows,
        chunk=2,  # rows after the first chunk come from their recorded ids and pixels
        pixels=PixelEncoder(image_processor),
        image_token_id=policy.vlm.model.config.image_token_id,
    )
    tok = policy.vlm.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.no_grad():
        logprobs, _ = compute_response_logprobs(
            policy.vlm.model,
            collate(inputs, int(pad)),
            [r.response_ids for r in rows],
            forbidden=policy.forbidden_mask,
            temperature=policy.logprob_temperature,
        )
    return logprobs


def without_last_mark_line(row: StepRow) -> StepRow:
    """``row`` with its prompt's last ``[k] text`` line dropped (recorded ids unchanged)."""
    messages = []
    for message in row.prompt.messages:
        if message.role == "user":
            lines = message.text.split("\n")
            last = max(i for i, line in enumerate(lines) if line.startswith("["))
            message = ChatMessage(role="user", text="\n".join(lines[:last] + lines[last + 1 :]), images=message.images)
        messages.append(message)
    return dataclasses.replace(row, prompt=dataclasses.replace(row.prompt, messages=tuple(messages)))


def test_the_sampled_prompts_list_the_readers_marks(trajectories: list[Trajectory]) -> None:
    rows = collect_step_rows(trajectories).rows
    assert len(rows) >= 4, [len(t.transitions) for t in trajectories]
    observations = {(t.episode_id, i): s.observation for t in trajectories for i, s in enumerate(t.transitions)}
    for row in rows:
        marks = observations[(row.episode_id, row.step)].marks
        assert marks, f"no marks read at episode {row.episode_id} step {row.step}: the reader is off"
        text = user_text(row)
        assert "Screen:\n[0] " in text
        for k, mark in enumerate(marks):
            assert f"[{k}] {mark.text}\n" in text + "\n", (k, mark.text, text)
    # SimPhone's home screen lists its apps: the settings task's first prompt names its app
    first = next(r for r in rows if r.task_id == "settings_dark_theme" and r.step == 0)
    assert any(line.endswith("] Settings") for line in user_text(first).splitlines()), user_text(first)


def test_the_learner_recomputes_the_samplers_logprobs_on_read_screens(
    policy: HFPolicy, trajectories: list[Trajectory]
) -> None:
    rows = collect_step_rows(trajectories).rows
    assert all(r.prompt_ids and r.old_logprobs for r in rows)
    recomputed = learner_logprobs(policy, rows)
    for i, row in enumerate(rows):
        recorded = torch.tensor(row.old_logprobs)
        learner = recomputed[i, : len(row.response_ids)].float()
        assert torch.allclose(recorded, learner, atol=1e-4), (row.task_id, row.step, recorded, learner)


def test_a_prompt_missing_a_mark_line_is_refused_or_scored_differently(
    policy: HFPolicy, trajectories: list[Trajectory]
) -> None:
    rows = collect_step_rows(trajectories).rows
    changed = without_last_mark_line(rows[0])
    assert user_text(changed) != user_text(rows[0])
    # the learner rebuilds the prompt and finds it is not the one the response was sampled from
    with pytest.raises(LearnerDataError, match="differs from the ids recorded"):
        learner_logprobs(policy, [changed, *rows[1:]])
    # without recorded ids to check against, the changed context scores the same response differently
    unchecked = dataclasses.replace(changed, prompt_ids=())
    learner = learner_logprobs(policy, [unchecked])[0, : len(unchecked.response_ids)].float()
    assert not torch.allclose(torch.tensor(unchecked.old_logprobs), learner, atol=1e-4)
