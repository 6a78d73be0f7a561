"""Checkpoints: atomic save, exact resume, kill -9 during an update loses nothing completed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from darwin.curricula.static import StaticCurriculum
from darwin.learner.checkpoint import resolve_checkpoint, restore_pending
from darwin.learner.local import LocalLearner
from darwin.replay_buffer import ReplayBuffer
from darwin.task_registry import task_set

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def test_resume_continues_bit_identically(policy, trajectories, kit, tmp_path):
    cfg = kit.small_config(critic={"warmup_updates": 1}, ppo_epochs=2)
    learner = LocalLearner(policy, cfg)
    learner.update(trajectories)
    learner.update(trajectories)
    ckpt = learner.save(tmp_path / "ckpt", pending=trajectories[1:], extra_state={"note": [1, "two"]})
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "actor.pt",
        "critic.pt",
        "learner.json",
        "optimizers.pt",
        "pending.pkl",
        "rng.pt",
    ]

    fresh = kit.tiny_policy()
    resumed = LocalLearner.load(ckpt, fresh)
    assert (resumed.updates, resumed.policy_version, fresh.version) == (2, 1, 1)
    assert resumed.optimizer_steps == learner.optimizer_steps
    assert kit.params_equal(resumed.actor, learner.actor) and kit.params_equal(resumed.critic, learner.critic)
    assert kit.params_equal(fresh.vlm.model.state_dict(), learner.actor_state_dict())
    state = resumed.resume_state
    assert [t.episode_id for t in state.pending] == [t.episode_id for t in trajectories[1:]]
    assert state.extra_state == {"note": [1, "two"]}
    # the same next update on both: identical parameters, counters and metrics
    a, b = learner.update(trajectories), resumed.update(trajectories)
    assert (
        (a.update, a.policy_version, a.policy_loss)
        == (b.update, b.policy_version, b.policy_loss)
        == (3, 2, a.policy_loss)
    )
    assert kit.params_equal(resumed.actor, learner.actor) and kit.params_equal(resumed.critic, learner.critic)


def test_a_failed_save_keeps_the_previous_checkpoint(policy, trajectories, kit, tmp_path, monkeypatch):
    learner = LocalLearner(policy, kit.small_config(critic={"warmup_updates": 1}))
    learner.update(trajectories)
    learner.save(tmp_path / "ckpt")
    learner.update(trajectories)

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("darwin.learner.checkpoint.pickle.dump", boom)
    with pytest.raises(OSError, match="disk full"):
        learner.save(tmp_path / "ckpt", pending=trajectories)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temp directory left
    assert LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy()).updates == 1


def test_a_crash_between_the_renames_resumes_from_the_previous_checkpoint(policy, trajectories, kit, tmp_path):
    learner = LocalLearner(policy, kit.small_config(critic={"warmup_updates": 1}))
    learner.update(trajectories)
    learner.save(tmp_path / "ckpt")
    os.rename(tmp_path / "ckpt", tmp_path / ".ckpt.old")  # the state right after the first rename
    assert resolve_checkpoint(tmp_path / "ckpt") == tmp_path / ".ckpt.old"
    assert LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy()).updates == 1
    learner.update(trajectories)
    learner.save(tmp_path / "ckpt")  # the next save replaces the backup only once it is in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy()).updates == 2
    with pytest.raises(FileNotFoundError, match="not a learner checkpoint"):
        resolve_checkpoint(tmp_path / "nothing")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="refusing to replace"):
        learner.save(tmp_path / "run")
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"


def test_load_refuses_mismatched_policies_and_structures(policy, trajectories, kit, tmp_path):
    learner = LocalLearner(policy, kit.small_config())
    learner.update(trajectories)
    learner.save(tmp_path / "ckpt")
    newer = kit.tiny_policy()
    newer.load_weights(newer.vlm.model.state_dict(), 5)
    with pytest.raises(ValueError, match="newer than the checkpoint"):
        LocalLearner.load(tmp_path / "ckpt", newer)
    with pytest.raises(ValueError, match="model structure"):
        LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy(), config=kit.small_config(critic={"backbone": "shared"}))
    ok = LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy(), config=kit.small_config(actor_lr=5e-4))
    assert ok.actor_optimizer.param_groups[0]["lr"] == 5e-4
    with pytest.raises(TypeError, match="JSON"):
        learner.save(tmp_path / "other", extra_state={"bad": object()})


def test_restore_pending_puts_trajectories_back_into_a_buffer(trajectories):
    buffer = ReplayBuffer(rollout_steps=sum(len(t) for t in trajectories))
    restore_pending(buffer, trajectories)
    assert [t.episode_id for t in buffer.take_completed()] == [t.episode_id for t in trajectories]


def test_group_mode_survives_a_checkpoint(policy, trajectories, kit, tmp_path):
    """Group ids travel on the trajectories: pending groups go back whole after a resume, and a
    group whose other members were still running when the process died is released too."""
    for t, g in zip(trajectories, ("g1", "g1", "g2"), strict=True):
        t.group = g
    learner = LocalLearner(policy, kit.small_config(algorithm="grpo"))
    learner.save(tmp_path / "ckpt", pending=trajectories)
    restored = LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy()).resume_state.pending
    assert [t.group for t in restored] == ["g1", "g1", "g2"]
    buffer = ReplayBuffer(rollout_steps=1, group_size=2)
    restore_pending(buffer, restored)
    batch = buffer.take_completed()
    assert [t.episode_id for t in batch] == [t.episode_id for t in trajectories[:2]]  # g1 complete, first
    assert [t.episode_id for t in buffer.take_completed()] == [trajectories[2].episode_id]  # g2 released
    with pytest.raises(ValueError, match="has no group"):
        restored[0].group = None
        restore_pending(ReplayBuffer(rollout_steps=1, group_size=2), restored[:1])


CHILD = textwrap.dedent(
    """
    import sys, uuid
    import numpy as np, torch
    from darwin.actions import Wait
    from darwin.curricula.static import StaticCurriculum
    from darwin.learner.config import LearnerConfig
    from darwin.learner.local import LocalLearner
    from darwin.models.config import TinyVLMConfig
    from darwin.models.factory import build_tiny_vlm
    from darwin.types import ChatMessage, Prompt
    from darwin.policies.hf import HFPolicy, HFPolicyConfig
    from darwin.task_registry import task_set
    from darwin.types import *

    ckpt, ref = sys.argv[1], sys.argv[2]
    policy = HFPolicy(build_tiny_vlm(TinyVLMConfig(screen_width=56, screen_height=112), seed=0),
                      HFPolicyConfig(max_new_tokens=5, seed=1))
    task = Task(id="t", instruction="Set an alarm.", app="Clock", verifier=VerifierSpec(predicate="p"))

    def trajectory(i):
        rng = np.random.default_rng(i)
        eid = f"episode-{i}"
        steps = []
        for s in range(2):
            shot = rng.integers(0, 256, (112, 56, 3), dtype=np.uint8)
            prompt = Prompt(messages=(ChatMessage(role="user", text=f"Goal {i} step {s}", images=(shot,)),))
            (gen,) = policy.generate_sync([prompt])
            obs = Observation(screenshot=shot, goal="g", device_size=(1080, 2400))
            steps.append(Transition(episode_id=eid, task_id="t", step=s, phase=Phase.EXECUTION, observation=obs,
                                    decision=Decision(action=Wait(), generation=gen, prompt=prompt),
                                    reward=float(s == 1 and i % 2 == 0)))
        return Trajectory(episode_id=eid, task=task, transitions=steps,
                          termination=Termination(TerminationReason.AGENT_FINISHED))

    batches = [[trajectory(2 * k + j) for j in range(2)] for k in range(4)]
    learner = LocalLearner(policy, LearnerConfig(critic={"warmup_updates": 1, "warmup_epochs": 1}, mini_batch_size=4,
                                                 speed={"micro_batch_size": 2}, ppo_epochs=1))
    curriculum = StaticCurriculum(task_set("base8"), seed=1)
    for k in range(2):
        curriculum.next_task()
        learner.update(batches[k])
        learner.save(ckpt, pending=batches[k + 1], extra_state={"curriculum": curriculum.state_dict()})
    torch.save({"actor": learner.actor.state_dict(), "critic": learner.critic.state_dict()}, ref)
    print("saved", flush=True)
    while True:  # later updates, never checkpointed: the parent kills us in the middle of one
        print("updating", flush=True)
        learner.update(batches[2] + batches[3])
    """
)


def test_kill_9_during_an_update_then_resume(kit, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    ckpt, ref = tmp_path / "ckpt", tmp_path / "ref.pt"
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ckpt), str(ref)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
    )
    try:
        lines = []
        deadline = time.monotonic() + 120
        while "updating" not in lines:
            line = proc.stdout.readline().strip()
            if not line and proc.poll() is not None:
                pytest.fail(f"child exited early: {proc.stderr.read()[-2000:]}")
            lines.append(line)
            assert time.monotonic() < deadline, "child too slow"
        time.sleep(0.3)  # inside update 3
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lines[:2] == ["saved", "updating"]

    policy = kit.tiny_policy()
    learner = LocalLearner.load(ckpt, policy)
    saved = torch.load(ref, weights_only=True)
    assert (learner.updates, learner.policy_version, policy.version) == (2, 1, 1)  # counters continue
    assert kit.params_equal(learner.actor.state_dict(), saved["actor"])
    assert kit.params_equal(learner.critic.state_dict(), saved["critic"])
    assert kit.params_equal(policy.vlm.model.state_dict(), learner.actor_state_dict())
    state = learner.resume_state
    assert [t.episode_id for t in state.pending] == ["episode-4", "episode-5"]  # nothing completed was lost
    curriculum = StaticCurriculum(task_set("base8"), seed=7)
    curriculum.load_state_dict(state.extra_state["curriculum"])
    expected = StaticCurriculum(task_set("base8"), seed=1)
    for _ in range(2):
        expected.next_task()
    assert [curriculum.next_task().id for _ in range(5)] == [expected.next_task().id for _ in range(5)]

    m = learner.update(state.pending)  # and training continues
    assert (m.update, m.policy_version, policy.version, m.stage) == (3, 2, 2, "ppo")
    assert m.version_lag_mean == 1.0  # the pending rows were sampled by version 0... of the child's run
