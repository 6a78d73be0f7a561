"""Progress (issue 74): every stage of ``darwin run`` shows its elapsed time and what is left,
and a log is never silent for 30 seconds. Clocks are fakes: nothing here waits or times."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from darwin.progress import LINE_EVERY_S, Heartbeat, LineSchedule, StageClock, StageProgress, duration


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_clock_tells_elapsed_and_left_from_the_rate_so_far() -> None:
    clock = FakeClock()
    stage = StageClock(clock=clock)
    stage.start("SFT training", total=400, unit="steps")
    assert stage.snapshot() == StageProgress("SFT training", 0.0, 0, 400, "steps", None)  # no rate yet
    clock.now += 50
    stage.advance(100)
    snap = stage.snapshot()
    assert (snap.elapsed_s, snap.done, snap.left_s) == (50.0, 100, 150.0)
    assert snap.line() == "SFT training: 100/400 steps, 50s elapsed, about 2m30s left"
    clock.now += 150
    stage.advance(400)
    assert stage.snapshot().left_s == 0.0
    stage.start("held-out")  # a new stage starts its own clock, with nothing known of what is left
    assert stage.snapshot() == StageProgress("held-out", 0.0, 0, None, "", None)
    assert stage.snapshot().line() == "held-out: 0s elapsed"


def test_a_time_budget_bounds_what_is_left() -> None:
    clock = FakeClock()
    stage = StageClock(clock=clock)
    stage.start("RL", total=60, unit="updates", budget_s=840.0)
    clock.now += 100
    assert stage.snapshot().left_s == 740.0  # no update yet: the budget's rest
    stage.advance(10)  # 10 s an update: 50 more would take 500 s, within the budget
    assert stage.snapshot().left_s == 500.0
    clock.now += 700
    assert stage.snapshot().left_s == 40.0  # slower than the budget: the budget ends it
    clock.now += 100
    assert stage.snapshot().left_s == 0.0


def test_advance_can_name_the_total_and_unit_as_the_work_reports_them() -> None:
    clock = FakeClock()
    stage = StageClock(clock=clock)
    stage.start("warm start: SFT demonstrations")
    clock.now += 30
    stage.advance(3, 12, "episodes")
    assert stage.snapshot().timing() == "3/12 episodes, 30s elapsed, about 1m30s left"


def test_durations_read_short() -> None:
    assert [duration(s) for s in (0, 59.4, 60, 3599, 3600, 7380)] == ["0s", "59s", "1m00s", "59m59s", "1h00m", "2h03m"]


def test_a_line_is_due_at_each_new_stage_and_every_interval_within_one() -> None:
    clock = FakeClock()
    schedule = LineSchedule(every_s=20.0, clock=clock)
    due = []
    for _ in range(12):  # a report every 5 s for a minute
        due.append(schedule.due("training"))
        clock.now += 5
    assert due == [True, False, False, False, True, False, False, False, True, False, False, False]
    assert schedule.due("evaluation")  # a new stage at once
    assert not schedule.due("evaluation")


def test_a_silent_stage_still_prints_a_line_every_interval_in_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log (no terminal): a 10-minute stage whose work reports nothing, refreshed only by the
    run's heartbeat every 5 s, prints a line with elapsed and left at least every 30 s."""
    import darwin.cli.run as cli
    from darwin.run.recipe import RunProgress

    console = Console(record=True, width=300, force_terminal=False)
    monkeypatch.setattr(cli, "console", console)
    clock = FakeClock()
    lines = cli._ProgressLines(LineSchedule(clock=clock), clock=clock)
    stage = StageClock(clock=clock)
    stage.start("warm start: SFT demonstrations", total=120, unit="episodes")
    printed_at = []
    for beat in range(120):  # the heartbeat: every 5 s for 10 minutes
        stage.advance(beat)
        before = len(console.export_text(clear=False).splitlines())
        lines(RunProgress(stage="warm start: SFT demonstrations", in_stage=stage.snapshot()))
        if len(console.export_text(clear=False).splitlines()) > before:
            printed_at.append(clock.now)
        clock.now += 5
    gaps = [b - a for a, b in zip(printed_at, printed_at[1:], strict=False)]
    assert gaps and max(gaps) <= LINE_EVERY_S < 30
    text = console.export_text().splitlines()
    assert text[0].endswith("warm start: SFT demonstrations: 0/120 episodes, 0s elapsed")
    assert text[-1].endswith("warm start: SFT demonstrations: 116/120 episodes, 9m40s elapsed, about 20s left")


def test_rl_lines_carry_the_rl_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import darwin.cli.run as cli
    from darwin.run.recipe import RunProgress

    console = Console(record=True, width=300, force_terminal=False)
    monkeypatch.setattr(cli, "console", console)
    clock = FakeClock()
    lines = cli._ProgressLines(LineSchedule(clock=clock), clock=clock)
    rl = StageProgress("RL", 120.0, 3, 44, "updates", 600.0)
    lines(RunProgress(stage="rollout", update=3, updates=44, warmup=False, in_stage=rl))
    clock.now += 25  # no news for 25 s: the same stage again, with the clock moved on
    lines(RunProgress(stage="rollout", update=3, updates=44, warmup=False, in_stage=replace(rl, elapsed_s=145.0)))
    printed = console.export_text().splitlines()
    assert len(printed) == 2
    assert printed[1].endswith("; RL: 3/44 updates, 2m25s elapsed, about 10m00s left")


def test_a_stage_whose_work_is_done_prints_its_last_line_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line that a stage's work is all done comes at once, within the interval, and once: the
    log keeps what each stage took."""
    import darwin.cli.run as cli
    from darwin.run.recipe import RunProgress

    console = Console(record=True, width=300, force_terminal=False)
    monkeypatch.setattr(cli, "console", console)
    clock = FakeClock()
    lines = cli._ProgressLines(LineSchedule(clock=clock), clock=clock)
    stage = "evaluation (final)"
    for done, at in ((0, 0.0), (3, 1.0), (8, 2.0), (8, 3.0), (8, 4.0)):
        clock.now = 1000.0 + at
        lines(
            RunProgress(stage=stage, in_stage=StageProgress(stage, at, done, 8, "episodes", None if done < 8 else 0.0))
        )
    assert [line.split("] ", 1)[1] for line in console.export_text().splitlines()] == [
        "evaluation (final): 0/8 episodes, 0s elapsed",
        "evaluation (final): 8/8 episodes, 2s elapsed, about 0s left",
    ]


def test_the_heartbeat_beats_until_the_block_ends_and_raises_what_a_beat_raised() -> None:
    beaten = threading.Event()
    with Heartbeat(beaten.set, every_s=0.01):
        assert beaten.wait(timeout=60)  # liveness, not timing: it beats at all

    def fail() -> None:
        raise RuntimeError("the display broke")

    stopped = threading.Event()
    with pytest.raises(RuntimeError, match="the display broke"), Heartbeat(fail, every_s=0.01) as heart:
        heart._thread.join(timeout=60)  # the thread ends after the failing beat
        stopped.set()
    assert stopped.is_set()


SMALL_RUN = """
from darwin import EvaluationConfig, ExperimentConfig, LearnerConfig, PhonesConfig, PolicyConfig, SFTConfig

def build(preset):
    return ExperimentConfig(
        name="small", tasks=("settings_dark_theme", "amazon_0"), horizon=6,
        phones=PhonesConfig(count=2, seed=3),
        sft=SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0),
        cache_dir=CACHE,
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        learner=LearnerConfig(critic={"warmup_updates": 1}, ppo_epochs=1, mini_batch_size=8, speed={"micro_batch_size": 4}),
        rollout_steps=12, updates=2, evaluation=EvaluationConfig(samples=1, phones=2),
    )
"""


def test_every_stage_of_a_small_run_prints_its_elapsed_time_and_what_is_left_in_a_log(tmp_path: Path) -> None:
    """``darwin run`` with stdout not a terminal (CliRunner's, as a log file or CI): the SFT warm
    start's demonstrations, encoding and training, the warm start's evaluation, RL and the final
    evaluation each print a line with their work done, elapsed time and what is left, in order."""
    from darwin.cli.main import main

    experiment = tmp_path / "small.py"
    experiment.write_text(SMALL_RUN.replace("CACHE", repr(str(tmp_path / "cache"))))
    result = CliRunner().invoke(main, ["run", str(experiment), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    timing = r"(\d+)/(\d+) {unit}, (\d+s|\d+m\d\ds) elapsed, about (\d+s|\d+m\d\ds) left$"
    stages = {
        r"warm start: SFT demonstrations: ": (4, "episodes"),
        r"warm start: SFT encoding: ": (None, "prompts"),
        r"warm start: SFT training \(loss [\d.]+\): ": (3, "steps"),
        r"evaluation \(warm start\): ": (2 * 2 * 2, "episodes"),  # 2 tasks x 2 phones x (greedy + 1 sample)
        r"rollout: update .*; RL: ": (2, "updates"),
        r"evaluation \(final\): ": (8, "episodes"),
    }
    first_at = []
    for stage, (total, unit) in stages.items():
        pattern = re.compile(r"^\[\s*\d+s\] " + stage + timing.format(unit=unit))
        matches = [(i, m) for i, line in enumerate(lines) if (m := pattern.match(line))]
        assert matches, (stage, result.output)
        first_at.append(matches[0][0])
        done, of = int(matches[-1][1][1]), int(matches[-1][1][2])  # the stage's last line: all of it done
        assert done == of and (total is None or of == total), (stage, matches[-1][1][0])
        assert matches[-1][1][0].endswith("about 0s left"), matches[-1][1][0]
    assert first_at == sorted(first_at), result.output  # in the run's order
