import json

import pytest
from PIL import Image

from darwin.run.report import MetricsLogger, plot_success, sliding_mean


def test_sliding_mean_by_hand():
    assert sliding_mean([1, 0, 0, 1, 1], window=3) == [1.0, 0.5, 1 / 3, 1 / 3, 2 / 3]
    with pytest.raises(ValueError):
        sliding_mean([1], window=0)


def test_plot_writes_a_png(tmp_path):
    pts = [(i * 10, float(i % 3 == 0)) for i in range(60)]
    out = plot_success(pts, tmp_path / "plots" / "s.png", curves={"seed 0": pts, "seed 1": pts[::2]})
    assert Image.open(out).format == "PNG"


def test_metrics_logger_writes_tensorboard_and_jsonl(tmp_path):
    log = MetricsLogger(tmp_path)
    log.log(3, "update", {"policy_loss": 0.25, "skip": "text", "nan": float("nan")})
    log.close()
    row = json.loads((tmp_path / "metrics.jsonl").read_text().strip())
    assert row == {"step": 3, "group": "update", "policy_loss": 0.25}
    assert any((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_progress_lines_print_when_an_update_starts_and_when_the_rollout_goes_on(monkeypatch):
    """Non-TTY progress: a line per stage change, not per refresh."""
    from rich.console import Console

    import darwin.cli.run as cli
    from darwin.run.recipe import RunProgress

    console = Console(record=True, width=200, force_terminal=False)
    monkeypatch.setattr(cli, "console", console)
    lines = cli._ProgressLines()
    stages = [
        ("warm start", 0),
        ("evaluation (warm start)", 0),
        ("rollout", 0),
        ("update (critic warm-up)", 0),
        ("rollout", 1),
        ("update", 1),
        ("rollout", 2),
        ("update", 2),
        ("rollout", 3),
        ("evaluation (final)", 3),
    ]
    for stage, update in stages:
        lines(RunProgress(stage=stage, update=update, updates=3))
    for _ in range(3):  # refreshes within a stage print nothing
        lines(RunProgress(stage="evaluation (final)", update=3, updates=3))
    printed = console.export_text().strip().splitlines()
    # warm start, evaluation, rollout 0, update 0, rollout 1, update 1, rollout 2, update 2, rollout 3, final evaluation
    assert len(printed) == 10
    assert printed[3].split("] ", 1)[1].startswith("update (critic warm-up): update 0/3")
    # the warm start's lines (its training, its evaluation) show their own stage, not RL
    # counters that do not exist yet; the rollout's first line has them
    assert [line.split("] ", 1)[1] for line in printed[:2]] == ["warm start", "evaluation (warm start)"]
    assert "env steps" in printed[2]


def _plotted_axes(*args, **kwargs):
    """``plot_success(*args, **kwargs)``, returning the axes of the figure it saved."""
    import matplotlib.pyplot as plt

    from darwin.run.report import plot_success

    drawn = {}
    real_savefig = plt.Figure.savefig

    def capture(fig, path, *a, **k):
        drawn["axes"] = fig.axes
        return real_savefig(fig, path, *a, **k)

    plt.Figure.savefig = capture
    try:
        plot_success(*args, **kwargs)
    finally:
        plt.Figure.savefig = real_savefig
    return drawn["axes"]


def test_plot_has_no_mean_before_a_full_window_and_draws_evaluations(tmp_path):
    from darwin.run.report import EvalPoint

    points = [(i * 5, float(i % 2)) for i in range(30)]
    main, *per_task = _plotted_axes(
        points,
        tmp_path / "p.png",
        window=20,
        warmup_until=40,
        evaluations=[EvalPoint("warm start", 0, 38, 96), EvalPoint("final", 145, 50, 96)],
        per_task={"a": points[::2], "b": points[1::2]},
    )
    mean_line = [ln for ln in main.get_lines() if "20-point mean" in ln.get_label()][0]
    assert list(mean_line.get_xdata())[0] == points[19][0]  # starts once 20 points exist
    labels = [t.get_text() for t in main.get_legend().get_texts()]
    assert any("critic warm-up" in t for t in labels) and sum("95% interval" in t for t in labels) == 2
    assert len(per_task) == 2  # one small panel per task
    assert all(
        len(ax.get_lines()) == 2 and ax.get_title().startswith(task) for ax, task in zip(per_task, "ab", strict=True)
    )


def test_plot_draws_raw_values_as_dots_one_per_x_not_vertical_strokes(tmp_path):
    # three updates of four episodes each: the episodes of an update share its x
    points = [(x, float(k % 2 == 0 or x == 300)) for x in (100, 200, 300) for k in range(4)]
    (main,) = _plotted_axes(points, tmp_path / "p.png", window=4)
    raw = [ln for ln in main.get_lines() if "mean" not in ln.get_label()][0]
    assert list(raw.get_xdata()) == [100, 200, 300] and list(raw.get_ydata()) == [0.5, 0.5, 1.0]
    assert raw.get_linestyle() == "None"  # dots: no stroke from 0 to 1 between them


def _evaluation(label: str, success: dict[str, list[bool]], updates: int = 0):
    """An evaluation of 2 phones per task: per task, each phone's greedy episode then one sample."""
    from darwin.evaluate import GREEDY, EvalEpisode, EvalResult

    records = [
        EvalEpisode(task, f"phone-{i // 2}", GREEDY if i % 2 == 0 else 0, ok, f"{label}-{task}-{i}", 3)
        for task, outcomes in success.items()
        for i, ok in enumerate(outcomes)
    ]
    sets = {"train": ["a", "b"], "unseen": ["c"]}

    def rate(tasks, sample):
        chosen = [r.success for r in records if r.task_id in tasks and (r.sample == GREEDY) == (sample == GREEDY)]
        return sum(chosen) / len(chosen)

    sampled = [r for r in records if r.task_id in sets["train"] and r.sample != GREEDY]
    return EvalResult(
        label,
        updates,
        updates,
        sum(bool(r.success) for r in sampled),
        len(sampled),
        {t: rate([t], 0) for t in success},
        1.0,
        per_set={name: rate(tasks, 0) for name, tasks in sets.items()},
        greedy=rate(sets["train"], GREEDY),
        per_set_greedy={name: rate(tasks, GREEDY) for name, tasks in sets.items()},
        records=records,
        set_tasks=sets,
    )


def test_closing_lines_pair_the_training_tasks_apart_from_each_held_out_set():
    """The headline gain is the training tasks' (as the rates beside it), never diluted by a
    held-out set's episodes; each set gets its own rates and paired differences."""
    from darwin.run.report import closing_lines

    before = _evaluation("warm_start", {"a": [False] * 4, "b": [False] * 4, "c": [False] * 4})
    after = _evaluation("final", {"a": [True] * 4, "b": [True] * 4, "c": [False] * 4}, updates=5)
    lines = closing_lines(before, after)
    assert lines[0].startswith("warm start: greedy 0.0%") and lines[1].startswith("after 5 updates: greedy 100.0%")
    greedy = next(line for line in lines if line.startswith("greedy:"))
    assert greedy.startswith("greedy: +100.0 points") and "4 pairs" in greedy  # 2 tasks x 2 phones, not 3 tasks
    unseen = lines.index("unseen: greedy 0.0% -> 0.0%, sampled 0.0% -> 0.0%")
    assert lines[unseen + 1].startswith("  greedy: +0.0 points") and "2 pairs" in lines[unseen + 1]
    reread = type(after).from_json(json.loads(json.dumps(after.to_json())))
    assert reread.set_tasks == after.set_tasks and reread.task_ids("unseen") == ["c"]
