"""Run reports: TensorBoard scalars, a JSON-lines metrics log, and success curves as PNG.

Curves follow the paper's convention: a 20-point sliding mean drawn bold over the raw
values drawn faint.

    >>> import tempfile, pathlib
    >>> from darwin.report import plot_success, sliding_mean
    >>> sliding_mean([0, 1, 1, 0], window=2)
    [0.0, 0.5, 1.0, 0.5]
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "success.png"
    >>> plot_success([(10, 0.0), (20, 1.0), (30, 1.0)], out).exists()
    True
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a window
import matplotlib.pyplot as plt  # noqa: E402


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


def plot_success(
    points: Sequence[tuple[int, float]],
    path: str | Path,
    window: int = 20,
    title: str = "mean success vs training steps",
    curves: Mapping[str, Sequence[tuple[int, float]]] | None = None,
) -> Path:
    """Plot success (``(env_step, value)`` pairs) as a faint raw line and a bold sliding mean.

    ``curves`` adds more labelled runs (e.g. other seeds) to the same axes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    series = {"run": points} if curves is None else dict(curves)
    for i, (label, pts) in enumerate(series.items()):
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        color = f"C{i}"
        ax.plot(xs, ys, color=color, alpha=0.15, linewidth=0.8)
        ax.plot(xs, sliding_mean(ys, window), color=color, linewidth=2.0, label=f"{label} ({window}-point mean)")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("success")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


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
        self._jsonl.write(json.dumps({"step": step, "group": group, **{k.split("/", 1)[-1]: v for k, v in flat.items()}}) + "\n")
        self._jsonl.flush()

    def close(self) -> None:
        self.writer.close()
        self._jsonl.close()
