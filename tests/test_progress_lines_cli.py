"""The commands' progress bar (``darwin.cli.common.progress_bar``) on a console that is no
terminal (a log file, CI, ``tee``) writes progress lines, so such a log never goes quiet while
the bar advances; on a terminal it stays rich's bar. Clocks are fakes: nothing here waits."""

from __future__ import annotations

import io
import re
import threading

from click.testing import CliRunner
from rich.console import Console
from rich.progress import Progress, TextColumn

from darwin.cli.common import ProgressLines, progress_bar
from darwin.progress import LINE_EVERY_S


class FakeClock:
    def __init__(self, now: float = 500.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def log_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def lines_of(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_lines_at_the_start_every_interval_and_at_the_end() -> None:
    console, out = log_console()
    clock = FakeClock()
    loss = TextColumn("loss {task.fields[loss]}")
    with ProgressLines(console, "sft", loss, unit="steps", clock=clock, heartbeat_s=None) as progress:
        bar = progress.add_task("demonstrations", total=990, loss="-")
        assert lines_of(out) == ["[     0s] sft demonstrations: 0/990 steps, 0s elapsed, loss -"]
        clock.now += 33
        progress.update(bar, description="training")  # a new description: a line at once, its own clock
        assert lines_of(out)[-1] == "[    33s] sft training: 0/990 steps, 0s elapsed, loss -"
        for step in range(1, 991):  # 0.5 s a step: 495 s of training
            clock.now += 0.5
            progress.update(bar, completed=step, loss=f"{1 / step:.4f}")
    lines = lines_of(out)
    training = lines[2:]
    # one line every LINE_EVERY_S seconds while it trains, and one when it completes
    assert len(training) == int(495 // LINE_EVERY_S) + 1
    assert training[0] == "[    53s] sft training: 40/990 steps, 20s elapsed, about 7m55s left, loss 0.0250"
    assert training[-1] == "[   528s] sft training: 990/990 steps, 8m15s elapsed, loss 0.0010"
    stamps = [float(s) for s in re.findall(r"^\[\s*(\d+)s\]", out.getvalue(), re.M)]
    assert len(stamps) == len(lines)
    gaps = [b - a for a, b in zip(stamps[1:-1], stamps[2:], strict=True)]
    assert max(gaps) <= LINE_EVERY_S  # never quiet while it trains


def test_advance_and_the_line_at_the_end_of_an_unfinished_task() -> None:
    console, out = log_console()
    clock = FakeClock()
    with ProgressLines(console, "judge", unit="verdicts", clock=clock, heartbeat_s=None) as progress:
        bar = progress.add_task("4 episode(s)", total=10, completed=4)  # resumed: the rate counts from 4
        clock.now += 10
        progress.advance(bar)
        progress.advance(bar, 2)
    assert lines_of(out) == [
        "[     0s] judge 4 episode(s): 4/10 verdicts, 0s elapsed",
        "[    10s] judge 4 episode(s): 7/10 verdicts, 10s elapsed, about 10s left",  # the with block ended
    ]


def test_the_heartbeat_writes_a_line_while_nothing_reports() -> None:
    console, out = log_console()
    clock = FakeClock()
    with ProgressLines(console, "sft", unit="steps", clock=clock, heartbeat_s=0.01) as progress:
        progress.add_task("demonstrations", total=100)
        clock.now += LINE_EVERY_S
        beat = threading.Event()
        for _ in range(200):  # at most 2 s, in practice one beat of 0.01 s
            if len(lines_of(out)) > 1:
                beat.set()
                break
            beat.wait(0.01)
    assert beat.is_set()
    assert lines_of(out)[1] == "[    20s] sft demonstrations: 0/100 steps, 20s elapsed"


def test_a_terminal_keeps_rich_progress_bar() -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True)
    assert isinstance(progress_bar(terminal, "sft", time_remaining=True), Progress)
    log, _ = log_console()
    assert isinstance(progress_bar(log, "sft", unit="steps"), ProgressLines)


def test_eval_into_a_log_writes_progress_lines(tmp_path) -> None:
    from darwin.cli.main import main

    args = ["eval", "--agent", "oracle", "--phones", "1", "--tasks", "settings_dark_theme", "--samples", "0"]
    result = CliRunner().invoke(main, [*args, "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert re.search(r"^\[\s*\d+s\] eval oracle on 1 phones: 1/1 episodes, \d+s elapsed$", result.output, re.M)
