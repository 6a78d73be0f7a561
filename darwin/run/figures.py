"""The paper's figures from finished ``darwin run`` directories (``darwin compare --metric``).

Every figure is built from what a run leaves behind: ``updates.jsonl`` says which episodes
each update trained on, in order, and ``run.db`` holds each episode's outcome, length, phase
verdicts and wall-clock times. So one record per trained episode (:class:`TrainedEpisode`)
carries everything a curve needs, and a figure is a choice of x and y over those records:

- ``success``: success against training steps (the paper's Fig. 2, 5a, 6);
- ``success-steps``: the steps of successful episodes against training steps (MobileRL's
  shortest-path adjustment shortens them);
- ``phase-success``: success of each lifecycle phase (setup, execution, teardown) against
  training steps, one panel per phase (Fig. 5);
- ``wall``: training steps against wall-clock seconds of RL (Fig. 3b, phone scaling).

Curves follow the paper's style (:func:`darwin.run.report.draw_curve`): a bold sliding mean over
faint raw values. ``pool_seeds`` draws one curve per variant: the runs named ``<variant>-s<N>``
(or ``<name>-<UTC time>``, as ``darwin run`` names them) are pooled, their points sorted by x,
so the sliding mean averages the seeds locally (:func:`darwin.run.report.pooled_label` names
the variant).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from darwin.run.report import draw_curve, pooled_label
from darwin.types import Phase

__all__ = [
    "FIGURE_METRICS",
    "FigureMetric",
    "FigureRun",
    "TrainedEpisode",
    "figure_table",
    "panel_window",
    "plot_figure",
    "read_runs",
    "trained_episodes",
]

FigureMetric = Literal["success", "success-steps", "phase-success", "wall"]
FIGURE_METRICS: tuple[FigureMetric, ...] = ("success", "success-steps", "phase-success", "wall")

Points = list[tuple[float, float]]


@dataclass(frozen=True)
class TrainedEpisode:
    """One episode a learner update trained on, in training order.

    Attributes:
        update: the update (1-based) whose batch held it.
        training_step: the steps of every trained episode up to and including this one: the
            x axis of ``success.png``.
        success: the verifier's verdict (``None``: unverified).
        num_steps: the steps it played.
        phase_success: each played phase's verdict (lifecycle tasks have setup and teardown too).
        ended_s: seconds from the start of the run's first trained episode to this one's end.
    """

    update: int
    training_step: int
    success: bool | None
    num_steps: int
    phase_success: Mapping[Phase, bool | None]
    ended_s: float


@dataclass(frozen=True)
class FigureRun:
    """One finished run as the figures see it, read once (:func:`read_runs`) and handed to
    :func:`plot_figure` and :func:`figure_table` alike.

    Attributes:
        run_dir: the run directory.
        episodes: its trained episodes, in the order its updates took them.
        collected: the finished episodes its training collected, trained or not (the rest of
            them is over-collection).
    """

    run_dir: Path
    episodes: list[TrainedEpisode]
    collected: int


def read_runs(run_dirs: Sequence[str | Path | FigureRun]) -> list[FigureRun]:
    """Each run directory's :class:`FigureRun` (runs already read are passed through), with
    :func:`trained_episodes`'s errors for a directory that is not a finished run."""
    out: list[FigureRun] = []
    for run in run_dirs:
        if isinstance(run, FigureRun):
            out.append(run)
        else:
            episodes, collected = _read_run(run)
            out.append(FigureRun(Path(run), episodes, collected))
    return out


def trained_episodes(run_dir: str | Path) -> list[TrainedEpisode]:
    """The episodes a finished run trained on, in the order its updates took them.

    Raises ``FileNotFoundError`` naming what is missing when ``run_dir`` lacks
    ``updates.jsonl`` or ``run.db``, and ``ValueError`` when ``updates.jsonl`` names an
    episode the database does not hold (the two files are from different runs).
    """
    return _read_run(run_dir)[0]


def _read_run(run_dir: str | Path) -> tuple[list[TrainedEpisode], int]:
    """The trained episodes, and how many episodes the training run collected in all
    (finished ones; trained or not: the rest is over-collection)."""
    from darwin.database import DB_FILENAME
    from darwin.store import RunStore

    root = Path(run_dir)
    updates_file, db_file = root / "updates.jsonl", root / DB_FILENAME
    for needed in (updates_file, db_file):
        if not needed.is_file():
            raise FileNotFoundError(
                f"{root} has no {needed.name}: figures other than `success` need a run directory "
                "written by `darwin run` (it records which episodes each update trained on)"
            )
    order: list[tuple[int, str]] = []
    for line_no, line in enumerate(updates_file.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            record = json.loads(line)
            try:
                order.extend((int(record["update"]), str(e)) for e in record["episode_ids"])
            except (KeyError, TypeError) as exc:
                raise ValueError(f"{updates_file}:{line_no} is not an update record ({exc!r})") from None
    store = RunStore.for_run_dir(root)
    try:
        by_run = {run.run_id: store.episodes(run.run_id) for run in store.runs()}
    finally:
        store.close()
    rows = {e.episode_id: e for episodes in by_run.values() for e in episodes}
    trained_ids = {e for _, e in order}
    collected = sum(
        sum(e.finished for e in episodes)
        for episodes in by_run.values()
        if any(e.episode_id in trained_ids for e in episodes)
    )
    missing = [e for _, e in order if e not in rows]
    if missing:
        raise ValueError(
            f"{updates_file} names {len(missing)} episode(s) that {db_file} does not hold (first: {missing[0]}); "
            "the two files are from different runs"
        )
    if not order:
        return [], collected
    start = min(rows[e].started_at for _, e in order)
    out: list[TrainedEpisode] = []
    trained = 0
    for update, episode_id in order:
        row = rows[episode_id]
        steps = row.num_steps or 0
        trained += steps
        end = row.ended_at or row.started_at
        out.append(
            TrainedEpisode(
                update=update,
                training_step=trained,
                success=row.success,
                num_steps=steps,
                phase_success=dict(row.phase_success),
                ended_s=(end - start).total_seconds(),
            )
        )
    return out, collected


def _panels(episodes: Sequence[TrainedEpisode], metric: FigureMetric) -> dict[str, Points]:
    """One run's points per panel of ``metric``'s figure."""
    if metric == "success":
        return {"": [(e.training_step, float(e.success)) for e in episodes if e.success is not None]}
    if metric == "success-steps":
        return {"": [(e.training_step, float(e.num_steps)) for e in episodes if e.success]}
    if metric == "phase-success":
        panels: dict[str, Points] = {}
        for phase in Phase:
            pts: Points = [
                (float(e.training_step), float(ok)) for e in episodes if (ok := e.phase_success.get(phase)) is not None
            ]
            if pts:
                panels[phase.value] = pts
        return panels
    if metric == "wall":
        # one point per update: when its last episode ended, and the training steps through it
        last: dict[int, TrainedEpisode] = {}
        for e in episodes:
            last[e.update] = e
        return {"": [(e.ended_s, float(e.training_step)) for e in last.values()]}
    raise ValueError(f"unknown figure metric {metric!r}; choose one of {', '.join(FIGURE_METRICS)}")


def _curves(runs: Sequence[FigureRun], metric: FigureMetric, pool_seeds: bool) -> dict[str, dict[str, Points]]:
    """Panel -> label -> points; pooled runs' points sorted by x."""
    out: dict[str, dict[str, Points]] = {}
    for run in runs:
        label = pooled_label(run.run_dir) if pool_seeds else run.run_dir.name
        for panel, pts in _panels(run.episodes, metric).items():
            out.setdefault(panel, {}).setdefault(label, []).extend(pts)
    for curves in out.values():
        for pts in curves.values():
            pts.sort(key=lambda p: p[0])
    return out


_AXES: dict[FigureMetric, tuple[str, str, str]] = {
    "success": ("training steps", "success", "success on the training phones"),
    "success-steps": ("training steps", "steps of a successful episode", "steps of successful training episodes"),
    "phase-success": ("training steps", "success of the phase", "success per lifecycle phase"),
    "wall": ("seconds of RL", "training steps", "training steps against wall time"),
}


def plot_figure(
    run_dirs: Sequence[str | Path | FigureRun],
    path: str | Path,
    metric: FigureMetric = "success",
    *,
    window: int = 20,
    pool_seeds: bool = False,
) -> Path:
    """Draw ``metric``'s figure of ``run_dirs`` to the PNG ``path``: one panel (one per
    phase for ``phase-success``), one curve per run or, with ``pool_seeds``, per variant.
    ``wall`` draws one point per update joined by a line (its points are not noisy).
    ``run_dirs`` may hold runs already read (:func:`read_runs`), so a caller that also wants
    :func:`figure_table` reads each run once.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    curves = _curves(read_runs(run_dirs), metric, pool_seeds)
    if not curves:
        raise ValueError(f"the runs have no points for the {metric!r} figure (no trained episode has one)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    xlabel, ylabel, title = _AXES[metric]
    fig, axes = plt.subplots(1, len(curves), figsize=(6.5 * len(curves), 4.5), dpi=120, squeeze=False)
    labels = sorted({label for panel in curves.values() for label in panel})
    for ax, (panel, by_label) in zip(axes[0], sorted(curves.items(), key=lambda kv: _phase_order(kv[0])), strict=True):
        for label, pts in sorted(by_label.items()):
            color = f"C{labels.index(label) % 10}"
            if metric == "wall":
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, linewidth=2.0, marker=".", label=label)
            else:
                draw_curve(ax, pts, panel_window(len(pts), window), color, label)
        if metric in ("success", "phase-success"):
            ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: {panel}" if panel else title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def panel_window(points: int, window: int) -> int:
    """The sliding mean's window for a curve of ``points`` points: ``window``, or a third of the
    points (at least 3) when there are fewer than two windows of them (a setup phase that only
    some tasks have), so a sparse curve is drawn rather than left out.

    >>> panel_window(500, 20), panel_window(27, 20), panel_window(4, 20)
    (20, 9, 3)
    """
    return window if points >= 2 * window else max(3, points // 3)


def _phase_order(panel: str) -> int:
    names = [p.value for p in Phase]
    return names.index(panel) if panel in names else -1


def figure_table(run_dirs: Sequence[str | Path | FigureRun], metric: FigureMetric, window: int = 20) -> str:
    """The figure's numbers per run as Markdown: the mean of the first and the last ``window``
    points of each panel, or, for ``wall``, the pace of training (updates, seconds per update,
    training steps per second)."""
    if metric == "wall":
        lines = [
            "| run directory | updates | training steps | seconds of RL | s per update | training steps / s "
            "| episodes collected | not trained (over-collection) | policy lag (mean versions) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for run in read_runs(run_dirs):
            episodes, collected = run.episodes, run.collected
            pts = _panels(episodes, "wall")[""]
            if not pts:
                lines.append(f"| {run.run_dir.name} | 0 | 0 | - | - | - | {collected} | - | - |")
                continue
            seconds, steps = pts[-1]
            over = collected - len(episodes)
            lag = _mean_update_metric(run.run_dir, "version_lag_mean")
            lines.append(
                f"| {run.run_dir.name} | {len(pts)} | {steps:.0f} | {seconds:.0f} | {seconds / len(pts):.1f} | "
                f"{steps / seconds if seconds else 0:.1f} | {collected} | {over} ({100 * over / max(collected, 1):.0f}%) | "
                f"{'-' if lag is None else f'{lag:.2f}'} |"
            )
        return "\n".join(lines) + "\n"
    unit = "success" if metric != "success-steps" else "steps"
    lines = [
        f"| run directory | panel | points | first {window} ({unit}) | last {window} ({unit}) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for run in read_runs(run_dirs):
        for panel, pts in _panels(run.episodes, metric).items():
            ys = [y for _, y in pts]
            head, tail = ys[:window], ys[-window:]

            def cell(v: list[float]) -> str:
                if not v:
                    return "-"
                mean = sum(v) / len(v)
                return f"{100 * mean:.1f}%" if unit == "success" else f"{mean:.2f}"

            lines.append(f"| {run.run_dir.name} | {panel or metric} | {len(ys)} | {cell(head)} | {cell(tail)} |")
    return "\n".join(lines) + "\n"


def _mean_update_metric(run_dir: str | Path, key: str) -> float | None:
    """The mean of one learner-update number over a run's ``metrics.jsonl`` (``None``: never logged)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return None
    values = [
        float(record[key])
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and (record := json.loads(line)).get("group") == "update" and key in record
    ]
    return sum(values) / len(values) if values else None
