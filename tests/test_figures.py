"""The paper's figures from a run directory (`darwin compare --metric`): a hand-built run of
five episodes (four trained over two updates, one collected and never trained) with a known
clock, whose every number is computed by hand below."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import darwin.run.figures as figures_module
import darwin.store as store_module
from darwin.actions import Click
from darwin.cli.main import main
from darwin.run.figures import figure_table, plot_figure, read_runs, trained_episodes
from darwin.run.report import pooled_label
from darwin.store import RunStore
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

TASK = Task(
    id="settings_dark",
    instruction="Turn on dark theme.",
    app="Settings",
    verifier=VerifierSpec(predicate="settings.dark_theme", params={"enabled": True}),
)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

# episode -> (steps, verdicts per phase, start s, end s)
EPISODES: dict[str, tuple[int, dict[Phase, bool], int, int]] = {
    "e1": (3, {Phase.SETUP: True, Phase.EXECUTION: True, Phase.TEARDOWN: False}, 0, 10),
    "e2": (5, {Phase.EXECUTION: False}, 5, 30),
    "e3": (2, {Phase.EXECUTION: True}, 31, 50),
    "e4": (4, {}, 40, 70),  # unverified
    "e5": (6, {Phase.EXECUTION: True}, 60, 80),  # collected, never trained
}
UPDATES = [(1, ["e1", "e2"]), (2, ["e3", "e4"])]


def _trajectory(episode_id: str, steps: int, verdicts: dict[Phase, bool]) -> Trajectory:
    transitions = [
        Transition(
            episode_id=episode_id,
            task_id=TASK.id,
            step=i,
            phase=Phase.EXECUTION,
            observation=Observation(
                screenshot=np.zeros((4, 2, 3), dtype=np.uint8), goal=TASK.instruction, device_size=(2, 4), step=i
            ),
            decision=Decision(action=Click(x=1, y=1)),
        )
        for i in range(steps)
    ]
    return Trajectory(
        episode_id=episode_id,
        task=TASK,
        transitions=transitions,
        termination=Termination(TerminationReason.STEP_BUDGET),
        verdicts={phase: Verdict(ok) for phase, ok in verdicts.items()},
    )


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    now = [T0]
    monkeypatch.setattr(store_module, "utcnow", lambda: now[0])
    store = RunStore.for_run_dir(tmp_path)
    run_id = store.start_run("figures", config=None)
    events = sorted(
        [(start, "start", eid) for eid, (_, _, start, _) in EPISODES.items()]
        + [(end, "end", eid) for eid, (_, _, _, end) in EPISODES.items()]
    )
    for at, kind, eid in events:
        now[0] = T0 + timedelta(seconds=at)
        steps, verdicts, _, _ = EPISODES[eid]
        if kind == "start":
            store.start_episode(run_id, eid, TASK, phone="sim-0")
        else:
            store.finish_episode(_trajectory(eid, steps, verdicts))
    store.close()
    lines = [json.dumps({"update": u, "episode_ids": ids}) for u, ids in UPDATES]
    (tmp_path / "updates.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "success_points.json").write_text(json.dumps([[3, 1.0], [8, 0.0], [10, 1.0]]))
    return tmp_path


def test_trained_episodes_follow_the_updates_order_with_their_training_steps_and_times(run_dir):
    episodes = trained_episodes(run_dir)
    assert [e.update for e in episodes] == [1, 1, 2, 2]
    assert [e.training_step for e in episodes] == [3, 8, 10, 14]  # 3, +5, +2, +4
    assert [e.success for e in episodes] == [True, False, True, None]
    assert [e.ended_s for e in episodes] == [10.0, 30.0, 50.0, 70.0]
    assert episodes[0].phase_success == {Phase.SETUP: True, Phase.EXECUTION: True, Phase.TEARDOWN: False}


def test_each_figure_table_is_the_hand_computed_numbers(run_dir):
    # the steps of the successful trained episodes: e1 (3) and e3 (2); e5 succeeded but was never trained
    steps = figure_table([run_dir], "success-steps", window=1)
    assert f"| {run_dir.name} | success-steps | 2 | 3.00 | 2.00 |" in steps
    phases = figure_table([run_dir], "phase-success", window=2)
    assert f"| {run_dir.name} | setup | 1 | 100.0% | 100.0% |" in phases
    assert f"| {run_dir.name} | execution | 3 | 50.0% | 50.0% |" in phases  # T, F | F, T
    assert f"| {run_dir.name} | teardown | 1 | 0.0% | 0.0% |" in phases
    # two updates, ending with e2 (30 s, 8 steps) and e4 (70 s, 14 steps); 5 collected, 4 trained
    wall = figure_table([run_dir], "wall")
    assert f"| {run_dir.name} | 2 | 14 | 70 | 35.0 | 0.2 | 5 | 1 (20%) | - |" in wall


def test_every_figure_draws_and_the_cli_prints_its_table(run_dir, tmp_path_factory, monkeypatch):
    out = tmp_path_factory.mktemp("plots")
    reads: list[Path] = []
    read_run = figures_module._read_run
    monkeypatch.setattr(figures_module, "_read_run", lambda d: reads.append(Path(d)) or read_run(d))
    for metric in ("success", "success-steps", "phase-success", "wall"):
        assert plot_figure([run_dir], out / f"{metric}.png", metric, window=2, pool_seeds=True).stat().st_size > 0
    result = CliRunner().invoke(
        main, ["compare", str(run_dir), "--metric", "phase-success", "--window", "2", "--plot", str(out / "c.png")]
    )
    assert result.exit_code == 0, result.output
    assert "| teardown | 1 | 0.0% | 0.0% |" in result.output
    assert (out / "c.png").stat().st_size > 0
    # the figure and its table come from one read of the run; a run already read is not read again
    assert reads[-1:] == [run_dir] and len(reads) == 5
    runs = read_runs([run_dir])
    assert figure_table(runs, "wall") == figure_table([run_dir], "wall")
    assert read_runs(runs) == runs and len(reads) == 7


def test_a_run_without_its_update_record_or_with_another_runs_episodes_is_refused(run_dir, tmp_path):
    (run_dir / "updates.jsonl").write_text(json.dumps({"update": 1, "episode_ids": ["nope"]}) + "\n")
    with pytest.raises(ValueError, match="1 episode\\(s\\) that .* does not hold \\(first: nope\\)"):
        trained_episodes(run_dir)
    (run_dir / "updates.jsonl").unlink()
    result = CliRunner().invoke(main, ["compare", str(run_dir), "--metric", "wall", "--plot", str(tmp_path / "w.png")])
    assert result.exit_code != 0
    assert "has no updates.jsonl" in result.output


def test_seeds_pool_under_the_variants_name():
    assert pooled_label("runs/fig6a-bias-s1") == "fig6a-bias"
    assert pooled_label(Path("runs/p-default-seed12")) == "p-default"
    assert pooled_label("runs/no-seed") == "no-seed"
    assert pooled_label("runs/paper_findings_fig2-20261126-132017") == "paper_findings_fig2"
