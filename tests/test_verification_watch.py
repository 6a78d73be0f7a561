"""No silent runs: a run warns once when few of its recent episodes were verified, naming the
cause, and stops with a clear error after K updates without a verified episode
(``verification_watch``); an update without a verdict does not move the actor
(``learner.infra_only_updates``: tests/learner/test_infra_only_updates.py, and end to end here)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from darwin.actions import Wait
from darwin.problems import ExperimentError
from darwin.run.config import ExperimentConfig
from darwin.run.load import apply_overrides
from darwin.run.verification_watch import VerificationWatch, VerificationWatchConfig
from darwin.types import (
    Decision,
    Observation,
    Phase,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    Verdict,
    VerifierSpec,
)

TASK = Task(id="clock_1", instruction="Open the clock.", app="Clock", verifier=VerifierSpec(predicate="p"))
NO_PROBE = "the phone has no state probe; use an LLM judge"


def episode(
    verdict: bool | None, reason: TerminationReason = TerminationReason.AGENT_FINISHED, why: str = "judged"
) -> Trajectory:
    """One played step, ended by ``reason``, with the verifier's ``verdict`` and reason (or the cause)."""
    eid = os.urandom(8).hex()
    obs = Observation(screenshot=np.zeros((2, 2, 3), np.uint8), goal=TASK.instruction, device_size=(2, 2))
    step = Transition(eid, TASK.id, 0, Phase.EXECUTION, obs, Decision(action=Wait()), done=True)
    cause = why if reason in (TerminationReason.INFRA_TRUNCATED, TerminationReason.ERROR) else ""
    return Trajectory(
        episode_id=eid,
        task=TASK,
        transitions=[step],
        termination=Termination(reason, cause),
        verdicts={Phase.EXECUTION: Verdict(verdict, reason=why)},
    )


def unprobed(n: int) -> list[Trajectory]:
    return [episode(None, why=NO_PROBE) for _ in range(n)]


def cut(n: int, cause: str = "deadline") -> list[Trajectory]:
    return [episode(None, TerminationReason.INFRA_TRUNCATED, cause) for _ in range(n)]


# ------------------------------------------------------------------ threshold 1: the warning
def test_few_verified_episodes_warn_once_with_the_cause(caplog):
    watch = VerificationWatch(VerificationWatchConfig(warn_below_verified_share=0.5, window_episodes=10))
    with caplog.at_level(logging.WARNING, logger="darwin.run.verification_watch"):
        healthy = watch.observe([episode(True), episode(False), *unprobed(1), *cut(1)])
        assert healthy.verified_share == 0.5 and not caplog.records  # at the threshold: no warning
        # The user's adb run: most episodes unverified (no state probe), the rest cut by faults.
        counts = watch.observe([*unprobed(4), *cut(2, "disconnect")])
        assert (counts.episodes, counts.verified, counts.unverified, counts.infra_truncated) == (6, 0, 4, 2)
        (record,) = caplog.records
        message = record.getMessage()
        # The share over the last 10 episodes (2 of them verified), and each cause, the most frequent first.
        assert message.startswith("only 20% of the last 10 episodes were verified")
        assert message.index(NO_PROBE) < message.index("'disconnect'")
        assert "5 unverified" in message and "sim_state_probe" in message and "3 infrastructure truncations" in message
        watch.observe(unprobed(8))
        watch.observe([episode(True)] + unprobed(3))
    assert len(caplog.records) == 1, "warns once"
    assert watch.warned and watch.stop_message() is None


def test_a_failing_judge_and_errors_are_named_and_zero_never_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="darwin.run.verification_watch"):
        VerificationWatch(VerificationWatchConfig(warn_below_verified_share=0.0)).observe(unprobed(5))
        assert not caplog.records
        judged = VerificationWatch()
        judged.observe(
            [
                episode(None, why="judge unreachable: HTTP 503"),
                episode(None, why="judge unreachable: HTTP 503"),
                episode(None, TerminationReason.ERROR, "KeyError: 'screen'"),
                episode(True),
            ]
        )
    (record,) = caplog.records
    assert "2 unverified" in record.getMessage() and "judge unreachable: HTTP 503" in record.getMessage()
    assert "1 ended in an error" in record.getMessage() and "KeyError" in record.getMessage()


# ------------------------------------------------------------------ threshold 2: the stop
def test_k_updates_without_a_verified_episode_stop_the_run_with_the_cause():
    watch = VerificationWatch(VerificationWatchConfig(stop_after_updates_without_verified=3))
    for _ in range(2):
        watch.observe([*unprobed(3), *cut(1)])
    watch.observe([episode(False), *unprobed(3)])  # one verified episode (a failure counts) starts the count again
    for _ in range(2):
        watch.observe(unprobed(4))
        assert watch.stop_message() is None
    watch.observe([*unprobed(2), *cut(2)])
    message = watch.stop_message()
    assert message is not None and message.startswith("no episode of the last 3 updates (12 episodes) was verified")
    assert NO_PROBE in message and "continue with --resume" in message
    never = VerificationWatch(VerificationWatchConfig(stop_after_updates_without_verified=None))
    for _ in range(10):
        never.observe(unprobed(2))
    assert never.stop_message() is None


def test_the_settings_are_validated_and_set_with_set():
    config = apply_overrides(
        ExperimentConfig(name="demo"),
        [
            "verification_watch.warn_below_verified_share=0.2",
            "verification_watch.window_episodes=32",
            "verification_watch.stop_after_updates_without_verified=null",
        ],
    )
    assert config.verification_watch == VerificationWatchConfig(
        warn_below_verified_share=0.2, window_episodes=32, stop_after_updates_without_verified=None
    )
    assert ExperimentConfig(name="demo").verification_watch.stop_after_updates_without_verified == 3
    for bad in (
        "verification_watch.warn_below_verified_share=1.5",
        "verification_watch.window_episodes=0",
        "verification_watch.stop_after_updates_without_verified=0",
    ):
        with pytest.raises(ExperimentError, match=bad.split("=")[0].split(".")[1]):
            apply_overrides(ExperimentConfig(name="demo"), [bad])
    with pytest.raises(ExperimentError, match="did you mean 'window_episodes'"):
        apply_overrides(ExperimentConfig(name="demo"), ["verification_watch.window_episode=8"])


# ------------------------------------------------------------------ the three together, through `darwin run`
NEVER_SURE = """
from darwin.components import ComponentSpec
from darwin.run.config import AgentConfig, ExperimentConfig, PhonesConfig, PolicyConfig
from darwin.learner.config import LearnerConfig
from darwin.run.verification_watch import VerificationWatchConfig
from darwin.types import Verdict


def never_sure(request):
    return Verdict(success=None, reason="the phone has no state probe; use an LLM judge")


def build(preset):
    return ExperimentConfig(
        name="unverified", tasks=("settings_dark_theme",), horizon=3, checkpoint=CHECKPOINT,
        agent=AgentConfig(format="uitars-1.5", observation_size=(252, 560), max_new_tokens=24),
        phones=PhonesConfig(count=2), policy=PolicyConfig(max_batch=2, max_wait=0.01), rollout_steps=6, updates=6,
        learner=LearnerConfig(critic={"warmup_updates": 0}, mini_batch_size=4, speed={"micro_batch_size": 2}, actor_lr=1e-2),
        verifier=ComponentSpec(name=f"{__name__}:never_sure"),
        verification_watch=VerificationWatchConfig(stop_after_updates_without_verified=2),
    )
"""


def test_darwin_run_without_verdicts_warns_stops_and_never_moves_the_actor(tmp_path: Path):
    from darwin.models.factory import build_tiny_vlm

    build_tiny_vlm(seed=0).save_pretrained(tmp_path / "ui-tars")
    experiment = tmp_path / "unverified.py"
    experiment.write_text(textwrap.dedent(NEVER_SURE).replace("CHECKPOINT", repr(str(tmp_path / "ui-tars"))))
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "darwin.cli", "run", str(experiment), "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "CI": "true", "COLUMNS": "400"},
        timeout=600,
    )
    output = " ".join((done.stdout + done.stderr).split())  # rich wraps long lines
    assert done.returncode != 0, output
    assert output.count("were verified (verification_watch.warn_below_verified_share") == 1, output
    assert "Error: no episode of the last 2 updates" in output and NO_PROBE in output and "--resume" in output, output
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    updates = [r for r in rows if r["group"] == "update"]
    assert [u["step"] for u in updates] == [1, 2] and all(u["actor_skipped"] == 1 for u in updates)
    assert all(
        r["verified"] == 0 and r["unverified"] == r["episodes"] > 0 for r in rows if r["group"] == "verification"
    )
    skipped = [
        json.loads(line)["actor_skipped_reason"] for line in (run_dir / "updates.jsonl").read_text().splitlines()
    ]
    assert skipped == ["no_verdict", "no_verdict"]
    manifest = json.loads((run_dir / "checkpoint" / "learner.json").read_text())
    assert (manifest["updates"], manifest["policy_version"]) == (
        2,
        0,
    )  # saved, so --resume continues; the actor never moved
