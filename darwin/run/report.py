"""Run reports: TensorBoard scalars, a JSON-lines metrics log, and success curves as PNG.

Curves follow the paper's convention: a 20-point sliding mean drawn bold over the raw
values drawn faint.

    >>> import tempfile, pathlib
    >>> from darwin.run.report import plot_success, sliding_mean
    >>> sliding_mean([0, 1, 1, 0], window=2)
    [0.0, 0.5, 1.0, 0.5]
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "success.png"
    >>> plot_success([(10, 0.0), (20, 1.0), (30, 1.0)], out).exists()
    True
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from darwin.algos.evaluation import wilson_interval
from darwin.run.cost import RunCost

if TYPE_CHECKING:
    from darwin.algos.task_metrics import TaskMetrics
    from darwin.evaluate import EvalResult, PairedComparison


def sliding_mean(values: Sequence[float], window: int = 20) -> list[float]:
    """Mean of the last ``window`` values at each point (shorter at the start)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out: list[float] = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


@dataclass(frozen=True)
class EvalPoint:
    """An evaluation drawn on the success plot: where (training step), what and how many."""

    label: str
    step: int
    successes: int
    episodes: int


def plot_success(
    points: Sequence[tuple[int, float]],
    path: str | Path,
    window: int = 20,
    title: str = "mean success vs training steps",
    curves: Mapping[str, Sequence[tuple[int, float]]] | None = None,
    *,
    warmup_until: int | None = None,
    evaluations: Sequence[EvalPoint] = (),
    per_task: Mapping[str, Sequence[tuple[int, float]]] | None = None,
) -> Path:
    """Plot success (``(training_step, value)`` pairs) as a faint raw line and a bold sliding mean.

    The sliding mean starts once ``window`` points exist (no start-up artefact from the first,
    short episodes). ``curves`` adds more labelled runs (e.g. other seeds) to the same axes;
    ``warmup_until`` shades the critic warm-up (training steps before it); ``evaluations``
    are drawn as points with 95% Wilson intervals; ``per_task`` adds one small panel per
    task (its sliding mean, the warm-up shaded) below the run's curve.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = sorted((per_task or {}).items())
    columns = min(4, len(tasks)) or 1
    rows = -(-len(tasks) // columns) if tasks else 0
    # The run's curve on top, one small panel per task below (small multiples: 8 overlaid
    # task curves could not be told apart).
    fig = plt.figure(figsize=(12, 4.5 + 2.2 * rows), dpi=120)
    grid = fig.add_gridspec(1 + rows, columns, height_ratios=[2.0] + [1.0] * rows)
    ax = fig.add_subplot(grid[0, :])
    series = {"run": points} if curves is None else dict(curves)
    for i, (label, pts) in enumerate(series.items()):
        if not pts:
            continue
        draw_curve(ax, pts, window, f"C{i}", label)
    if warmup_until is not None and warmup_until > 0:
        ax.axvspan(0, warmup_until, color="grey", alpha=0.15, label="critic warm-up")
    for j, ev in enumerate(evaluations):
        low, high = wilson_interval(ev.successes, ev.episodes)
        rate = ev.successes / ev.episodes
        ax.errorbar(
            [ev.step],
            [rate],
            yerr=[[rate - low], [high - rate]],
            fmt="o",
            color=f"C{3 + j}",
            capsize=4,
            label=f"{ev.label}: {100 * rate:.1f}% of {ev.episodes} (95% interval)",
        )
    _style(ax, title)
    # a task has 1/len(per_task) of the episodes: a shorter window, so short runs show it too
    task_window = max(3, window // 4)
    for i, (task, pts) in enumerate(tasks):
        tax = fig.add_subplot(grid[1 + i // columns, i % columns], sharex=ax)
        if pts:
            draw_curve(tax, pts, task_window, f"C{i % 10}", task)
        if warmup_until is not None and warmup_until > 0:
            tax.axvspan(0, warmup_until, color="grey", alpha=0.15)
        _style(tax, f"{task} ({task_window}-episode mean)", small=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def draw_curve(
    ax: Any, pts: Sequence[tuple[float, float]], window: int, color: str, label: str, raw: bool = True
) -> None:
    """A bold sliding mean over the points and, faint, the mean of the points at each x as dots:
    joined by a line, a run of 0s and 1s would draw a vertical stroke per point over the curve."""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    if raw:
        at: dict[float, list[float]] = {}
        for x, y in pts:
            at.setdefault(x, []).append(y)
        ax.plot(
            list(at),
            [sum(v) / len(v) for v in at.values()],
            color=color,
            alpha=0.3,
            linestyle="none",
            marker=".",
            markersize=3,
        )
    if len(ys) >= window:
        mean = sliding_mean(ys, window)
        ax.plot(
            xs[window - 1 :], mean[window - 1 :], color=color, linewidth=2.0, label=f"{label} ({window}-point mean)"
        )


def _style(ax: Any, title: str, small: bool = False) -> None:
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if small:  # a small multiple: its title names it; the axes are the main plot's
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=6)
        return
    ax.set_xlabel("training steps (steps of the trajectories trained on)")
    ax.set_ylabel("success")
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", fontsize=7)


@dataclass(frozen=True)
class RunSummary:
    """What one ``darwin run`` directory reports: evaluations, training curve, timings."""

    run_dir: Path
    updates: int
    env_steps: int
    points: list[tuple[int, float]]
    """The success curve: ``(training step, success)`` per scored training episode."""
    first_window: float
    """Mean training success over the first ``window`` episodes."""
    last_window: float
    """Mean training success over the last ``window`` episodes."""
    warm_start_eval: float | None
    final_eval: float | None
    eval_episodes: int
    """Episodes in each evaluation (0 when the run had none)."""
    timings: dict[str, float]
    """``warm_start_s``, ``eval_warm_start_s``, ``rl_s``, ``eval_final_s`` as the run recorded them."""
    eval_task_metrics: dict[str, dict[str, TaskMetrics]] = field(default_factory=dict)
    """Per evaluation (``warm_start``, ``final``) and task: SR, PR, side effects, false
    completions, over-time and the L1-L4 stratum (from ``eval.json``; empty for older runs)."""
    cost: RunCost | None = None
    """Phone and learner time per successful training episode, and the shares of phone time
    lost to infrastructure and backpressure (``summary.json``'s ``cost``; ``None`` for older runs)."""
    evaluations: dict[str, EvalResult] = field(default_factory=dict)
    """``eval.json`` read back: each evaluation's greedy, sampled and pass@k, and its episodes."""

    def strata(self, label: str = "final") -> dict[str, int]:
        """How many tasks of an evaluation fall in each of MobileGym's strata L1-L4."""
        from darwin.algos.task_metrics import strata, stratum_counts

        return {str(k): v for k, v in stratum_counts(strata(self.eval_task_metrics.get(label, {}))).items()}

    @property
    def gain(self) -> float | None:
        """Final minus warm-start evaluation success, in points (None without both)."""
        if self.warm_start_eval is None or self.final_eval is None:
            return None
        return 100 * (self.final_eval - self.warm_start_eval)

    @property
    def total_s(self) -> float:
        return sum(self.timings.values())


def summarize_run(run_dir: str | Path, window: int = 20) -> RunSummary:
    """Read a finished run's ``success_points.json``, ``eval.json`` and ``summary.json``."""
    run_dir = Path(run_dir)
    points_file = run_dir / "success_points.json"
    if not points_file.is_file():
        raise FileNotFoundError(f"{run_dir} has no success_points.json: is it a finished `darwin run` directory?")
    points = [(int(x), float(v)) for x, v in json.loads(points_file.read_text())]
    values = [v for _, v in points]
    evaluations = load_evaluations(run_dir)
    warm, final = evaluations.get("warm_start"), evaluations.get("final")
    sized = final or warm
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    head, tail = values[:window], values[-window:]
    return RunSummary(
        run_dir=run_dir,
        updates=int(summary.get("updates", 0)),
        env_steps=int(summary.get("env_steps", 0)),
        points=points,
        first_window=sum(head) / len(head) if head else 0.0,
        last_window=sum(tail) / len(tail) if tail else 0.0,
        warm_start_eval=None if warm is None else warm.success_rate,
        final_eval=None if final is None else final.success_rate,
        eval_episodes=0 if sized is None else sized.episodes,
        timings={k: float(v) for k, v in summary.items() if k.endswith("_s")},
        eval_task_metrics={label: result.task_metrics for label, result in evaluations.items()},
        cost=RunCost.from_json(summary["cost"]) if isinstance(summary.get("cost"), Mapping) else None,
        evaluations=evaluations,
    )


def metrics_markdown(per_task: Mapping[str, TaskMetrics]) -> str:
    """One evaluation's episode metrics per task as a Markdown table (SR, PR, SE in %; FC, OT counts).

    >>> from darwin.algos.task_metrics import TaskMetrics
    >>> print(metrics_markdown({"clock.set_alarm.s0": TaskMetrics(episodes=2, successes=1, measured=2, progress_rate=0.75)}))
    | task | n | SR | PR | SE | FC | OT | stratum |
    | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |
    | clock.set_alarm.s0 | 2 | 50% | 75% | - | 0 | 0 | L2 |
    """

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.0f}%"

    lines = [
        "| task | n | SR | PR | SE | FC | OT | stratum |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for task, m in per_task.items():
        lines.append(
            f"| {task} | {m.measured} | {pct(m.success_rate)} | {pct(m.progress_rate)} | {pct(m.side_effect_rate)} | "
            f"{m.false_completions} | {m.over_time} | {m.stratum or '-'} |"
        )
    return "\n".join(lines)


def compare_runs(
    run_dirs: Sequence[str | Path], plot_path: str | Path | None, window: int = 20
) -> tuple[list[RunSummary], str]:
    """Summaries of several runs (e.g. seeds), one success plot of all (none when ``plot_path``
    is ``None``: :func:`darwin.run.figures.plot_figure` draws the other figures), and a Markdown table."""
    summaries = [summarize_run(d, window) for d in run_dirs]
    if plot_path is not None:
        curves = {s.run_dir.name: s.points for s in summaries}
        plot_success([], plot_path, window, title="success on the training phones", curves=curves)

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    lines = [
        f"| run directory | warm start (eval) | final (eval) | gain | greedy: warm start -> final | training, first {window} -> last {window} | updates | env steps | warm start s | RL s | total s "
        "| phone-s / success | learner-s / success | phone time: infra | phone time: backpressure |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in summaries:
        gain = "-" if s.gain is None else f"{s.gain:+.1f}"
        greedy = [s.evaluations[k].greedy if k in s.evaluations else None for k in ("warm_start", "final")]
        lines.append(
            f"| {s.run_dir.name} | {pct(s.warm_start_eval)} | {pct(s.final_eval)} | {gain} | {pct(greedy[0])} -> {pct(greedy[1])} | "
            f"{pct(s.first_window)} -> {pct(s.last_window)} | {s.updates} | {s.env_steps} | "
            f"{s.timings.get('warm_start_s', 0):.0f} | {s.timings.get('rl_s', 0):.0f} | {s.total_s:.0f} | {_cost_cells(s.cost)} |"
        )
    gains = [s.gain for s in summaries if s.gain is not None]
    if gains:
        lines.append(
            f"\nMean gain over {len(gains)} run(s): {sum(gains) / len(gains):+.1f} points (evaluation, {summaries[0].eval_episodes} episodes each)."
        )
    lines.extend(paired_lines(summaries))
    for s in summaries:
        if s.eval_task_metrics.get("final"):
            counts = ", ".join(f"{k} {n}" for k, n in s.strata("final").items())
            lines.append(
                f"\n{s.run_dir.name}, final evaluation per task (strata: {counts}):\n\n{metrics_markdown(s.eval_task_metrics['final'])}"
            )
    return summaries, "\n".join(lines) + "\n"


def evaluation_line(result: EvalResult) -> str:
    """One evaluation's greedy, sampled and pass@k success on the training tasks, in one line.

    >>> from darwin.evaluate import EvalResult
    >>> print(evaluation_line(EvalResult("final", 3, 3, 5, 10, {}, 1.0, greedy=0.75, pass_at_k={1: 0.5, 2: 0.7})))
    greedy 75.0%, sampled 50.0% (5/10), pass@1 50.0%, pass@2 70.0%
    """
    greedy = "-" if result.greedy is None else f"{100 * result.greedy:.1f}%"
    passes = "".join(f", pass@{k} {100 * v:.1f}%" for k, v in sorted(result.pass_at_k.items()))
    return f"greedy {greedy}, sampled {100 * result.success_rate:.1f}% ({result.successes}/{result.episodes}){passes}"


def closing_lines(before: EvalResult, after: EvalResult, seed: int = 0) -> list[str]:
    """What ``darwin run`` prints last: the warm start's and the final policy's rates on the
    training tasks, their paired differences with 95% intervals, and the same for each
    ``evaluation.task_sets`` set. A set's episodes never enter another set's comparison."""
    import numpy as np

    from darwin.evaluate import paired_comparison

    def differences(task_ids: Sequence[str]) -> list[str]:
        try:
            comparison = paired_comparison(after.records, before.records, np.random.default_rng(seed), task_ids)
        except ValueError as exc:  # no episode verified in both evaluations
            return [f"not paired: {exc}"]
        return [
            f"{name}: {100 * d.difference.value:+.1f} points (paired 95% interval {100 * d.difference.low:+.1f} "
            f"to {100 * d.difference.high:+.1f}, {d.pairs} pairs{', separated from zero' if d.separated else ''})"
            for name, d in comparison.differences.items()
        ]

    lines = [f"warm start: {evaluation_line(before)}", f"after {after.updates} updates: {evaluation_line(after)}"]
    lines += differences(after.task_ids())
    for name in after.set_tasks:
        if name == "train" or name not in before.per_set or name not in after.per_set:
            continue
        greedy = ""
        if name in before.per_set_greedy and name in after.per_set_greedy:
            greedy = f"greedy {100 * before.per_set_greedy[name]:.1f}% -> {100 * after.per_set_greedy[name]:.1f}%, "
        lines.append(f"{name}: {greedy}sampled {100 * before.per_set[name]:.1f}% -> {100 * after.per_set[name]:.1f}%")
        lines += [f"  {line}" for line in differences(after.task_ids(name))]
    return lines


def paired_table(comparison: PairedComparison) -> list[str]:
    """A paired comparison as Markdown rows: each measure's A, B, A - B, interval, pairs, separated."""
    lines = [
        "| measure | A | B | A - B | interval | pairs | separated |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for name, d in comparison.differences.items():
        lines.append(
            f"| {name} | {100 * d.mean_a:.1f}% | {100 * d.mean_b:.1f}% | {100 * d.difference.value:+.1f} | "
            f"[{100 * d.difference.low:+.1f}, {100 * d.difference.high:+.1f}] | {d.pairs} | "
            f"{'yes' if d.separated else 'no'} |"
        )
    return lines


def paired_lines(summaries: Sequence[RunSummary], seed: int = 0) -> list[str]:
    """The paired comparisons ``darwin compare`` prints: within each run, final against warm
    start; then every run's final against the first run's. Each measure (greedy, sampled,
    pass@k) on the episodes both evaluations verified, with a task-stratified 95% bootstrap
    interval, and whether it is separated from zero (:func:`darwin.evaluate.paired_comparison`).
    Runs whose evaluations share no episode (other phones or protocol) say so."""
    import numpy as np

    from darwin.evaluate import paired_comparison

    def section(title: str, a: EvalResult, b: EvalResult, train: Sequence[str]) -> list[str]:
        try:
            comparison = paired_comparison(a.records, b.records, np.random.default_rng(seed), task_ids=train)
        except ValueError as exc:
            return [f"\n{title}: not paired: {exc}"]
        return [f"\n{title} (paired, 95% bootstrap interval, strata = tasks):\n", *paired_table(comparison)]

    lines: list[str] = []
    for s in summaries:
        for label, result in s.evaluations.items():
            lines.append(f"\n{s.run_dir.name}, {label.replace('_', ' ')} evaluation: {evaluation_line(result)}")
    for s in summaries:
        final, warm = s.evaluations.get("final"), s.evaluations.get("warm_start")
        if final is not None and warm is not None and final.records:
            lines += section(f"{s.run_dir.name}: final (A) against warm start (B)", final, warm, final.task_ids())
    first = summaries[0].evaluations.get("final") if summaries else None
    for s in summaries[1:]:
        final = s.evaluations.get("final")
        if first is not None and final is not None and first.records and final.records:
            lines += section(
                f"{s.run_dir.name} (A) against {summaries[0].run_dir.name} (B), final evaluations",
                final,
                first,
                first.task_ids(),
            )
    return lines


def compare_eval_files(paths: Sequence[str | Path], seed: int = 0) -> str:
    """``darwin compare A.json B.json ...`` on ``darwin eval --json`` files: each file's greedy,
    sampled and pass@k success, then every later file against the first, paired."""
    import numpy as np

    from darwin.evaluate import EvalEpisode, paired_comparison

    loaded = []
    for path in map(Path, paths):
        data = json.loads(path.read_text())
        if "records" not in data or "overall" not in data:
            raise ValueError(f"{path} is not a `darwin eval --json` file (no per-episode records)")
        loaded.append((path, data, [EvalEpisode(**r) for r in data["records"]]))
    lines = [
        "| evaluation | agent | greedy | sampled | pass@k | episodes |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    for path, data, records in loaded:
        overall = data["overall"]
        greedy, sampled = overall.get("greedy_success_rate"), overall.get("sampled_success_rate")
        passes = ", ".join(f"@{k} {100 * v:.1f}%" for k, v in overall.get("pass_at_k", {}).items())
        lines.append(
            f"| {path.name} | {data.get('agent', '?')} | {'-' if greedy is None else f'{100 * greedy:.1f}%'} | "
            f"{'-' if sampled is None else f'{100 * sampled:.1f}%'} | {passes or '-'} | {len(records)} |"
        )
    base_path, _, base = loaded[0]
    for path, _, records in loaded[1:]:
        try:
            comparison = paired_comparison(records, base, np.random.default_rng(seed))
        except ValueError as exc:
            lines.append(f"\n{path.name} against {base_path.name}: not paired: {exc}")
            continue
        lines.append(
            f"\n{path.name} (A) against {base_path.name} (B) (paired, 95% bootstrap interval, strata = tasks):\n"
        )
        lines += paired_table(comparison)
    return "\n".join(lines) + "\n"


def _cost_cells(cost: RunCost | None) -> str:
    """The cost columns of a ``darwin compare`` row: per-success seconds ("no success" for a
    run without one) and the shares of phone time; "-" for a run from before the cost figures."""
    if cost is None:
        return " | ".join(["-"] * 4)

    def per_success(v: float | None) -> str:
        return "no success" if v is None else f"{v:.1f}"

    def share(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    return " | ".join(
        [
            per_success(cost.phone_s_per_success),
            per_success(cost.learner_s_per_success),
            share(cost.infra_share),
            share(cost.backpressure_share),
        ]
    )


def _flat(prefix: str, obj: Any) -> dict[str, float]:
    if is_dataclass(obj) and not isinstance(obj, type):
        obj = asdict(obj)
    if isinstance(obj, Mapping):
        out: dict[str, float] = {}
        for k, v in obj.items():
            out.update(_flat(f"{prefix}/{k}" if prefix else str(k), v))
        return out
    if isinstance(obj, bool):
        return {prefix: float(obj)}
    if isinstance(obj, (int, float)) and math.isfinite(float(obj)):
        return {prefix: float(obj)}
    return {}


class MetricsLogger:
    """Writes scalars to TensorBoard event files and to ``metrics.jsonl`` in ``log_dir``."""

    def __init__(self, log_dir: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = SummaryWriter(str(self.log_dir / "tensorboard"))
        self._jsonl = (self.log_dir / "metrics.jsonl").open("a", encoding="utf-8")

    def log(self, step: int, group: str, values: Any) -> None:
        """Log a dataclass or mapping of numbers under ``group`` at ``step``."""
        flat = _flat(group, values)
        for key, value in flat.items():
            self.writer.add_scalar(key, value, step)
        self._jsonl.write(
            json.dumps({"step": step, "group": group, **{k.split("/", 1)[-1]: v for k, v in flat.items()}}) + "\n"
        )
        self._jsonl.flush()

    def close(self) -> None:
        self.writer.close()
        self._jsonl.close()


def save_evaluations(run_dir: Path, evaluations: Mapping[str, EvalResult]) -> None:
    """Write ``eval.json``: each evaluation's rates, per-task metrics and episode records."""
    data = {k: v.to_json() for k, v in evaluations.items()}
    (run_dir / "eval.json").write_text(json.dumps(data, indent=2) + "\n")


def load_evaluations(run_dir: Path) -> dict[str, EvalResult]:
    """Read ``eval.json`` back (empty when the run has none yet)."""
    from darwin.evaluate import EvalResult

    path = run_dir / "eval.json"
    if not path.exists():
        return {}
    return {k: EvalResult.from_json(v) for k, v in json.loads(path.read_text()).items()}


WARM_START_FILE = "warm_start.json"
"""In a run directory: the absolute path of the warm start the run began from."""


class RunReport:
    """Every file a ``darwin run`` writes besides the checkpoint and the run database:

    ``warm_start.json`` (which warm start), ``metrics.jsonl`` + ``tensorboard/`` (every
    update's metrics), ``updates.jsonl`` (which episodes each update trained on),
    ``eval.json``, and at the end ``success_points.json``, ``summary.json`` and
    ``success.png``.

        >>> import tempfile
        >>> report = RunReport(Path(tempfile.mkdtemp()))
        >>> plot = report.finish(title="demo", success_points=[(6, 0.0), (12, 1.0)], task_points={},
        ...                      warmup_until=0, evaluations={}, summary={"updates": 1})
        >>> sorted(p.name for p in report.run_dir.iterdir())
        ['success.png', 'success_points.json', 'summary.json']
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._metrics: MetricsLogger | None = None

    @property
    def metrics(self) -> MetricsLogger:
        if self._metrics is None:
            raise RuntimeError("RunReport.open_metrics() was not called")
        return self._metrics

    def open_metrics(self) -> None:
        self._metrics = MetricsLogger(self.run_dir)

    def write_warm_start(self, path: Path) -> None:
        (self.run_dir / WARM_START_FILE).write_text(json.dumps({"path": str(path.resolve())}) + "\n")

    def log_update(self, update: Any, batch: Sequence[Any], rollout: Mapping[str, Any]) -> None:
        """One learner update: its metrics, the rollout's numbers, and (provenance) the
        episodes it trained on."""
        with (self.run_dir / "updates.jsonl").open("a", encoding="utf-8") as fh:
            skipped = getattr(update, "actor_skipped_reason", None)  # an update that trained nothing says why
            fh.write(
                json.dumps(
                    {
                        "update": update.update,
                        "episode_ids": [t.episode_id for t in batch],
                        **({"actor_skipped_reason": skipped} if skipped else {}),
                    }
                )
                + "\n"
            )
        self.metrics.log(update.update, "update", update.as_dict())
        self.metrics.log(update.update, "rollout", rollout)

    def save_evaluations(self, evaluations: Mapping[str, EvalResult]) -> None:
        save_evaluations(self.run_dir, evaluations)

    def load_evaluations(self) -> dict[str, EvalResult]:
        return load_evaluations(self.run_dir)

    def finish(
        self,
        *,
        title: str,
        success_points: Sequence[tuple[int, float]],
        task_points: Mapping[str, Sequence[tuple[int, float]]],
        warmup_until: int,
        evaluations: Mapping[str, EvalResult],
        summary: Mapping[str, Any],
    ) -> Path:
        """The run's closing files; returns the success plot."""
        last_x = success_points[-1][0] if success_points else 0
        plot = plot_success(
            success_points,
            self.run_dir / "success.png",
            title=title,
            warmup_until=warmup_until,
            per_task=task_points if len(task_points) > 1 else None,
            evaluations=[
                EvalPoint(
                    f"evaluation ({label.replace('_', ' ')})",
                    0 if label == "warm_start" else last_x,
                    e.successes,
                    e.episodes,
                )
                for label, e in sorted(evaluations.items(), key=lambda kv: kv[0] != "warm_start")
            ],
        )
        (self.run_dir / "success_points.json").write_text(json.dumps([list(p) for p in success_points]))
        (self.run_dir / "summary.json").write_text(json.dumps(dict(summary), indent=2) + "\n")
        return plot

    def close(self) -> None:
        if self._metrics is not None:
            self._metrics.close()


def _task_groups(run_dirs: Sequence[Path]) -> list[tuple[str, list[str]]]:
    """The task groups :func:`compare_task_sets` reports, from each run's ``experiment.json``: the
    training tasks every run evaluated, then each ``evaluation.task_sets`` set, whole and per app
    (a task id's first dotted part) when it spans several apps."""
    experiments = []
    for run_dir in run_dirs:
        path = run_dir / "experiment.json"
        if not path.is_file():
            raise FileNotFoundError(f"{run_dir} has no experiment.json: is it a `darwin run` directory?")
        experiments.append(json.loads(path.read_text()))
    first_sets = experiments[0]["evaluation"]["task_sets"]
    for run_dir, experiment in zip(run_dirs[1:], experiments[1:], strict=True):
        if experiment["evaluation"]["task_sets"] != first_sets:
            raise ValueError(
                f"{run_dir} evaluated other task sets than {run_dirs[0]}: compare runs of one experiment file "
                "(the same evaluation.task_sets), whose evaluations pair"
            )
    common = set(experiments[0]["tasks"]).intersection(*(e["tasks"] for e in experiments[1:]))
    groups = [("train (every run's)", [t for t in experiments[0]["tasks"] if t in common])]
    for name, tasks in first_sets.items():
        groups.append((name, list(tasks)))
        apps = list(dict.fromkeys(t.split(".", 1)[0] for t in tasks))
        if len(apps) > 1:
            groups += [(f"{name}: {app}", [t for t in tasks if t.split(".", 1)[0] == app]) for app in apps]
    return groups


def compare_task_sets(run_dirs: Sequence[str | Path], seed: int = 0, pool_seeds: bool = False) -> str:
    """``darwin compare --per-set``: runs of one experiment file with different arms (such as
    examples/self_evolve.py's presets), compared on each evaluated task group rather than on
    their own training tasks.

    The groups (:func:`_task_groups`) are the training tasks every run evaluated (an arm that
    trains on more tasks also evaluates them; they are left out) and each ``evaluation.task_sets``
    set, whole and per app. The first table has each run's warm-start and final greedy and
    sampled success on each group and the paired gain (final minus warm start, 95% bootstrap
    interval, strata = tasks); the second every later run's final against the first run's, paired.
    With ``pool_seeds``, a third: each arm's runs named ``<arm>-s<N>``
    (:func:`pooled_label`) pooled, their mean over seeds of the warm start's and
    the final success, and of the paired gain, with a two-stage bootstrap interval (seeds, then
    each seed's episodes within tasks: :func:`darwin.algos.evaluation.seed_mean_difference`) and
    each seed's greedy gain.
    Raises ``FileNotFoundError`` for a directory that is not a run and ``ValueError`` for runs
    whose task sets differ."""
    import numpy as np

    from darwin.evaluate import paired_comparison, summarize_episodes

    dirs = [Path(d) for d in run_dirs]
    groups = _task_groups(dirs)
    evaluations = {d: load_evaluations(d) for d in dirs}

    def rates(result: EvalResult | None, tasks: list[str]) -> str:
        if result is None:
            return "-"
        summary = summarize_episodes(result.records, tasks)
        return " / ".join("-" if v is None else f"{100 * v:.1f}%" for v in (summary.greedy, summary.sampled))

    def gains(a: EvalResult | None, b: EvalResult | None, tasks: list[str]) -> str:
        if a is None or b is None:
            return "- | -"
        try:
            differences = paired_comparison(
                a.records, b.records, np.random.default_rng(seed), task_ids=tasks
            ).differences
        except ValueError:
            return "not paired | not paired"
        cells = []
        for measure in ("greedy", "sampled"):
            d = differences.get(measure)
            cells.append(
                "-"
                if d is None
                else f"{100 * d.difference.value:+.1f} ({100 * d.difference.low:+.1f} to {100 * d.difference.high:+.1f})"
            )
        return " | ".join(cells)

    lines = [
        "| run | tasks | n | warm start, greedy / sampled | final, greedy / sampled | gain, greedy (95%) | gain, sampled (95%) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for d in dirs:
        warm, final = evaluations[d].get("warm_start"), evaluations[d].get("final")
        for name, tasks in groups:
            lines.append(
                f"| {d.name} | {name} | {len(tasks)} | {rates(warm, tasks)} | {rates(final, tasks)} | {gains(final, warm, tasks)} |"
            )
    base = dirs[0]
    if len(dirs) > 1:
        lines += [
            f"\nFinal evaluations against {base.name}'s (paired, 95% bootstrap interval, strata = tasks):\n",
            "| run (A) | tasks | A - B, greedy (95%) | A - B, sampled (95%) |",
            "| --- | --- | ---: | ---: |",
        ]
        for d in dirs[1:]:
            for name, tasks in groups:
                lines.append(
                    f"| {d.name} | {name} | {gains(evaluations[d].get('final'), evaluations[base].get('final'), tasks)} |"
                )
    if pool_seeds:
        lines += _seed_means_table(dirs, groups, evaluations, seed)
    return "\n".join(lines) + "\n"


def pooled_label(run_dir: str | Path) -> str:
    """A run directory's name without its seed suffix (``-s<N>``, ``-seed<N>``) or the UTC time
    ``darwin run`` appends to a directory it names itself (``-20261126-132017``): the variant its
    seeds share.

        >>> pooled_label("runs/fig6a-bias-s1")
        'fig6a-bias'
    """
    return re.sub(r"-(s(eed)?\d+|\d{8}-\d{6})$", "", Path(run_dir).name)


def _seed_means_table(
    dirs: Sequence[Path],
    groups: Sequence[tuple[str, list[str]]],
    evaluations: Mapping[Path, Mapping[str, EvalResult]],
    seed: int,
) -> list[str]:
    """:func:`compare_task_sets`'s table of each arm's mean over seeds (its runs with a warm-start
    and a final evaluation)."""
    import numpy as np

    from darwin.algos.evaluation import seed_mean_difference
    from darwin.evaluate import paired_outcomes, summarize_episodes

    arms: dict[str, list[Path]] = {}
    for d in dirs:
        if {"warm_start", "final"} <= evaluations[d].keys():
            arms.setdefault(pooled_label(d), []).append(d)
    lines = [
        "\nMean over seeds (runs named <arm>-s<N> pooled; each seed weighs the same; 95% two-stage bootstrap: seeds, "
        "then each seed's episodes within tasks):\n",
        "| arm | seeds | tasks | warm start, greedy / sampled | final, greedy / sampled | gain, greedy (95%) "
        "| gain, sampled (95%) | greedy gain per seed |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]

    def mean_rates(label: str, runs: list[Path], tasks: list[str]) -> str:
        summaries = [summarize_episodes(evaluations[d][label].records, tasks) for d in runs]
        cells = []
        for measure in ("greedy", "sampled"):
            values = [getattr(s, measure) for s in summaries]
            cells.append("-" if None in values else f"{100 * float(np.mean(values)):.1f}%")
        return " / ".join(cells)

    for arm, runs in arms.items():
        for name, tasks in groups:
            try:
                per_seed = [
                    paired_outcomes(evaluations[d]["final"].records, evaluations[d]["warm_start"].records, tasks)
                    for d in runs
                ]
            except ValueError:  # a run whose two evaluations share no episode, as the first table says
                lines.append(f"| {arm} | {len(runs)} | {name} | - | - | not paired | not paired | - |")
                continue
            cells = []
            for measure in ("greedy", "sampled"):
                triples = [outcomes[measure] for outcomes in per_seed if measure in outcomes]
                if len(triples) < len(runs):
                    cells.append("-")
                    continue
                mean = seed_mean_difference(triples, np.random.default_rng(seed)).difference
                cells.append(f"{100 * mean.value:+.1f} ({100 * mean.low:+.1f} to {100 * mean.high:+.1f})")
            each = ", ".join(
                f"{100 * float(np.mean(o['greedy'][0] - o['greedy'][1])):+.1f}" if "greedy" in o else "-"
                for o in per_seed
            )
            lines.append(
                f"| {arm} | {len(runs)} | {name} | {mean_rates('warm_start', runs, tasks)} | "
                f"{mean_rates('final', runs, tasks)} | {cells[0]} | {cells[1]} | {each} |"
            )
    return lines
