"""The cost of a success: phone-seconds and learner-seconds per successful training episode,
and the shares of phone time lost to infrastructure and to backpressure (``darwin.run.cost``),
as the rollout counts them, the run summary reports them and ``darwin compare`` shows them.

No test asserts a wall-clock duration: the hand-computed run sets its times, and the real
runs are checked against their own counters."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.agents.scripted import OracleActor
from darwin.cli.main import main
from darwin.curricula.static import StaticCurriculum
from darwin.envs.faults import FaultSpec, FaultyEnv
from darwin.envs.sim.env import SimPhoneEnv
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine, RolloutStats
from darwin.run.cost import NO_SUCCESS, RunCost
from darwin.run.report import compare_runs, summarize_run
from darwin.task_registry import get_task, task_set
from darwin.types import Phase, Termination, TerminationReason, Trajectory, Verdict

COST_HEADER = "| phone-s / success | learner-s / success | phone time: infra | phone time: backpressure |"


def _episode(success: bool | None, reason: TerminationReason, cause: str = "") -> Trajectory:
    trajectory = Trajectory(
        episode_id=f"e-{reason.value}-{success}",
        task=get_task("settings_dark_theme"),
        termination=Termination(reason, cause),
    )
    if success is not None:
        trajectory.verdicts[Phase.EXECUTION] = Verdict(success)
    return trajectory


def test_the_figures_are_the_totals_over_successes_and_phone_time():
    cost = RunCost(
        phones=4,
        rollout_s=50.0,
        phone_s=200.0,
        episode_phone_s=150.0,
        infra_phone_s=30.0,
        backpressure_phone_s=10.0,
        learner_s=12.0,
        episodes=9,
        successes=3,
    )
    assert cost.phone_s_per_success == pytest.approx(200 / 3)
    assert cost.learner_s_per_success == pytest.approx(4.0)
    assert (cost.infra_share, cost.backpressure_share) == (pytest.approx(0.15), pytest.approx(0.05))
    # $0.10 per phone-hour, $2.50 per GPU-hour, 2 learner GPUs: (200 x 0.10 + 12 x 2 x 2.50) / 3600 / 3
    assert cost.usd_per_success(0.10, 2.50, learner_gpus=2) == pytest.approx((20.0 + 60.0) / 3600 / 3)
    # A resumed run adds each process's totals; the phones are the latest process's.
    resumed = cost + RunCost(phones=2, rollout_s=10.0, phone_s=20.0, learner_s=3.0, episodes=2, successes=2)
    assert (resumed.phones, resumed.rollout_s, resumed.phone_s, resumed.learner_s, resumed.successes) == (
        2,
        60.0,
        220.0,
        15.0,
        5,
    )
    assert resumed.phone_s_per_success == pytest.approx(44.0)
    assert RunCost.from_json(json.loads(json.dumps(cost.to_json()))) == cost  # exact, as a checkpoint keeps it
    summary = cost.to_json(digits=4)
    assert (
        summary["phone_s_per_success"] == 66.6667 and summary["learner_s_per_success"] == 4.0 and "note" not in summary
    )


def test_a_run_without_a_success_says_so_instead_of_dividing_by_zero():
    cost = RunCost(phones=2, rollout_s=5.0, phone_s=10.0, episode_phone_s=8.0, learner_s=1.0, episodes=3)
    assert cost.phone_s_per_success is None and cost.learner_s_per_success is None
    assert cost.usd_per_success(0.10, 2.50) is None
    summary = cost.to_json(digits=4)
    assert summary["phone_s_per_success"] is None and summary["learner_s_per_success"] is None
    assert summary["note"] == NO_SUCCESS and NO_SUCCESS in cost.describe()
    assert RunCost().infra_share is None and RunCost().backpressure_share is None  # no phone time either


def test_a_hand_computed_small_run():
    """2 phones for 10 s: 4 episodes of 3, 2, 4 and 1 s (2 successes, 1 disconnect), 3 s of
    backpressure, 4 s of learner updates."""
    stats = RolloutStats(started=100.0)
    stats.record(_episode(True, TerminationReason.SUCCESS), 3.0)
    stats.record(_episode(False, TerminationReason.STEP_BUDGET), 2.0)
    stats.record(_episode(None, TerminationReason.INFRA_TRUNCATED, "disconnect"), 4.0)
    stats.record(_episode(True, TerminationReason.AGENT_FINISHED), 1.0)
    stats.backpressure_s = 3.0
    stats.finished = 110.0
    cost = RunCost.of_rollout(stats, phones=2, learner_s=4.0)
    assert (cost.phones, cost.rollout_s, cost.phone_s) == (2, 10.0, 20.0)  # 2 phones x 10 s
    assert (cost.episode_phone_s, cost.infra_phone_s, cost.backpressure_phone_s) == (10.0, 4.0, 3.0)
    assert (cost.episodes, cost.successes, cost.learner_s) == (4, 2, 4.0)
    assert cost.phone_s_per_success == 10.0  # 20 phone-s / 2 successes
    assert cost.learner_s_per_success == 2.0  # 4 learner-s / 2 successes
    assert cost.infra_share == 0.2  # 4 of 20 phone-s in the disconnected episode
    assert cost.backpressure_share == 0.15  # 3 of 20 phone-s waiting for the learner
    # (20 phone-s x $0.10 + 4 GPU-s x $2.50) / 3600 / 2 successes
    assert cost.usd_per_success(0.10, 2.50) == pytest.approx(12.0 / 3600 / 2)
    assert cost.describe().startswith("cost of a success: 10.0 phone-seconds and 2.0 learner-seconds (2 successful")


def test_the_engine_times_every_finished_episode_and_its_infrastructure_losses():
    """Phones that drop connections, and a learner that never drains the buffer: every
    finished episode's phone time is counted, the disconnected ones' also as infrastructure
    time, and episodes plus waiting fit in the phones' time."""
    spec = FaultSpec(drop=0.1, drop_when="before", seed=4)
    envs = [
        FaultyEnv(SimPhoneEnv(seed=i), spec, device=f"sim-{i}", call_timeout_s=2, recovery_timeout_s=5)
        for i in range(2)
    ]
    buffer = ReplayBuffer(rollout_steps=40)
    engine = RolloutEngine(
        envs, lambda i: OracleActor(), StaticCurriculum(task_set("base8"), seed=1), buffer, max_backlog_steps=40
    )
    stats = asyncio.run(engine.run(until=lambda: engine.stats.phones_waiting == len(envs)))
    lost = stats.terminations[TerminationReason.INFRA_TRUNCATED.value]
    assert lost > 0 and stats.episodes > lost and stats.backpressure_s > 0
    assert 0 < stats.infra_phone_s < stats.episode_phone_s
    cost = RunCost.of_rollout(stats, len(envs), learner_s=0.0)
    assert cost.phone_s == pytest.approx(2 * stats.elapsed)
    assert cost.episode_phone_s + cost.backpressure_phone_s <= cost.phone_s
    assert cost.infra_share is not None and cost.backpressure_share is not None
    assert 0 < cost.infra_share + cost.backpressure_share < 1


SMALL = """
import itertools

from darwin.components import ComponentSpec
from darwin.run.config import EvaluationConfig, ExperimentConfig, PhonesConfig, PolicyConfig
from darwin.learner.config import LearnerConfig
from darwin.sft.config import SFTConfig
from darwin.types import Verdict

CALLS = itertools.count()

def every_other(request):
    # The tiny warm start rarely succeeds; this judge makes every other episode a success.
    return Verdict(success=next(CALLS) % 2 == 0, reason="every other episode")

def build(preset):
    return ExperimentConfig(
        name="cost", tasks=("settings_dark_theme", "amazon_0"), horizon=6,
        phones=PhonesConfig(count=2, seed=3),
        sft=SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0),
        cache_dir=CACHE,
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        learner=LearnerConfig(critic={"warmup_updates": 0}, ppo_epochs=1, mini_batch_size=8, speed={"micro_batch_size": 4}),
        rollout_steps=12, updates=UPDATES, evaluation=EvaluationConfig(samples=0),
        verifier=ComponentSpec(name=f"{__name__}:every_other"),
    )
"""


def _experiment(tmp_path: Path, updates: int) -> Path:
    path = tmp_path / "cost.py"
    path.write_text(SMALL.replace("CACHE", repr(str(tmp_path / "cache"))).replace("UPDATES", str(updates)))
    return path


def _check_summary(run_dir: Path, phones: int, resumed: bool = False) -> RunCost:
    """The summary's cost figures agree with the run's own counters: its phones, its RL time,
    its updates' timings; per-success figures are the totals over the successes."""
    whole = json.loads((run_dir / "summary.json").read_text())
    summary = whole["cost"]
    cost = RunCost.from_json(summary)
    assert cost.phones == phones and cost.phone_s == pytest.approx(phones * cost.rollout_s, abs=1e-3)
    assert cost.episode_phone_s > 0 and cost.episode_phone_s + cost.backpressure_phone_s <= cost.phone_s + 1e-3
    if not resumed:  # rl_s is this process's; the cost is the whole run's
        assert 0 < cost.learner_s <= whole["rl_s"] + 0.01 and cost.rollout_s <= whole["rl_s"] + 0.01
    # The learner-seconds hold every update's own time (metrics.jsonl total_s), and little more.
    updates = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["total_s"] for r in updates if r["group"] == "update") <= cost.learner_s + 1e-3
    for name, share, seconds in (
        ("infra_share", cost.infra_share, cost.infra_phone_s),
        ("backpressure_share", cost.backpressure_share, cost.backpressure_phone_s),
    ):
        assert share is not None and 0 <= share <= 1 and share == pytest.approx(seconds / cost.phone_s)
        assert summary[name] == pytest.approx(share, abs=1e-4)
    if cost.successes:
        assert summary["phone_s_per_success"] == pytest.approx(cost.phone_s / cost.successes, abs=1e-3)
        assert summary["learner_s_per_success"] == pytest.approx(cost.learner_s / cost.successes, abs=1e-3)
    else:
        assert (
            summary["phone_s_per_success"] is None
            and summary["learner_s_per_success"] is None
            and summary["note"] == NO_SUCCESS
        )
    return cost


def test_a_small_run_reports_the_cost_of_a_success_and_compare_shows_it(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(_experiment(tmp_path, 1)), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    cost = _check_summary(run_dir, phones=2)
    with sqlite3.connect(run_dir / "run.db") as db:  # the training run's finished episodes, as stored
        finished = db.execute(
            "select count(*), coalesce(sum(success), 0) from episodes where termination_reason is not null"
        ).fetchone()
        infra = db.execute("select count(*) from episodes where termination_reason = 'infra_truncated'").fetchone()[0]
    assert (cost.episodes, cost.successes) == tuple(
        finished
    ) and cost.successes > 0  # the judge passes every other episode
    assert (cost.infra_phone_s > 0) == (infra > 0)
    printed = re.search(
        r"cost of a success: ([0-9.]+) phone-seconds and ([0-9.]+) learner-seconds", " ".join(result.output.split())
    )
    assert printed is not None, result.output
    assert float(printed[1]) == pytest.approx(cost.phone_s / cost.successes, abs=0.06)
    assert float(printed[2]) == pytest.approx(cost.learner_s / cost.successes, abs=0.06)
    # metrics.jsonl has the figures at each update too.
    rollout = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"rollout"' in line]
    assert rollout and rollout[-1]["cost/phones"] == 2 and rollout[-1]["cost/learner_s"] > 0

    # A resume adds the second process's time to the checkpoint's.
    checkpointed = RunCost.from_json(
        json.loads((run_dir / "checkpoint" / "learner.json").read_text())["extra_state"]["cost"]
    )
    assert checkpointed.learner_s > 0 and checkpointed.successes <= cost.successes
    result = CliRunner().invoke(main, ["run", str(_experiment(tmp_path, 2)), "--run-dir", str(run_dir), "--resume"])
    assert result.exit_code == 0, result.output
    resumed = _check_summary(run_dir, phones=2, resumed=True)
    second = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    second_update_s = [r["total_s"] for r in second if r["group"] == "update" and r["step"] == 2]
    assert resumed.learner_s >= checkpointed.learner_s + second_update_s[0] - 1e-3
    assert resumed.rollout_s > checkpointed.rollout_s and resumed.successes >= checkpointed.successes

    compared = CliRunner().invoke(main, ["compare", str(run_dir), "--plot", str(tmp_path / "cmp.png")])
    assert compared.exit_code == 0, compared.output
    assert COST_HEADER in compared.output
    row = next(line for line in compared.output.splitlines() if line.startswith(f"| {run_dir.name} |"))
    per_success = "no success" if not resumed.successes else f"{resumed.phone_s / resumed.successes:.1f}"
    assert (
        per_success in row
        and f"{100 * (resumed.infra_share or 0):.1f}% | {100 * (resumed.backpressure_share or 0):.1f}% |" in row
    )


def test_compare_shows_the_cost_columns_per_run(tmp_path):
    """A run with successes, one without, and one from before the cost figures."""
    runs = {
        "paid": RunCost(
            phones=2,
            rollout_s=50.0,
            phone_s=100.0,
            infra_phone_s=25.0,
            backpressure_phone_s=10.0,
            learner_s=8.0,
            episodes=6,
            successes=4,
        ).to_json(digits=4),
        "none": RunCost(phones=2, rollout_s=5.0, phone_s=10.0, learner_s=1.0, episodes=2).to_json(digits=4),
        "old": None,
    }
    for name, cost in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "success_points.json").write_text("[[1, 0.0], [2, 1.0]]")
        summary = {"updates": 1, "env_steps": 12, "rl_s": 3.0} | ({} if cost is None else {"cost": cost})
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
    summaries, table = compare_runs([tmp_path / n for n in runs], tmp_path / "cmp.png")
    assert summaries[2].cost is None and summaries[0].total_s == 3.0  # the cost is not a timing
    assert summarize_run(tmp_path / "paid").cost == RunCost.from_json(runs["paid"])  # type: ignore[arg-type]
    assert COST_HEADER in table
    rows = {line.split(" | ")[0][2:]: line for line in table.splitlines() if line.startswith("| ") and " | " in line}
    assert rows["paid"].endswith("| 25.0 | 2.0 | 25.0% | 10.0% |")
    assert rows["none"].endswith("| no success | no success | 0.0% | 0.0% |")
    assert rows["old"].endswith("| - | - | - | - |")
