"""What ``darwin view`` reads: a run directory, a ``run.db`` file or a SQLAlchemy URL, opened
as one :class:`RunSource` per run it holds, with the files a run directory has beside its
database (``metrics.jsonl``, ``eval.json``, ``updates.jsonl``, ``experiment.json``).

Nothing here writes; the viewer's one write is a label (``RunStore.record_label``, the labels
table). A source is opened with :class:`~darwin.store.RunStore`, which brings a database of
an older darwin up to the current schema first, as every darwin command does.

    >>> import tempfile
    >>> from darwin.store import RunStore
    >>> run_dir = Path(tempfile.mkdtemp())
    >>> store = RunStore.for_run_dir(run_dir); _ = store.start_run("demo", config=None); store.close()
    >>> [s.name for s in open_sources([str(run_dir)])]
    ['demo']
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from darwin.database import DB_FILENAME
from darwin.evaluate import EvalResult
from darwin.store import SCREENSHOT_DIRNAME, RunStore
from darwin.store_rows import RunRow
from darwin.store_secrets import redact_secrets

__all__ = ["MetricPoint", "RunSource", "SourceError", "open_sources"]

_SHOT_PATH = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{64}\.png$")
"""A screenshot's path in the content-addressed store (``<sha[:2]>/<sha>.png``); nothing else is served."""


class SourceError(ValueError):
    """A ``darwin view`` argument that names no run; the message says what is wrong and the fix."""


@dataclass(frozen=True)
class MetricPoint:
    """One line of ``metrics.jsonl``: a group's numbers at an update (``step``)."""

    step: int
    group: str
    values: dict[str, float]


@dataclass
class RunSource:
    """One run as the viewer sees it: its rows in the run database and its directory's files.

    ``run_dir`` is ``None`` for a database given by URL (no curves, evaluations or updates then).
    """

    store: RunStore
    run: RunRow
    origin: str
    run_dir: Path | None
    _updates_read: tuple[int, dict[str, int]] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def screenshot(self, rel_path: str) -> Path | None:
        """The file of a stored screenshot, or ``None`` when ``rel_path`` is not one of the
        store's content-addressed paths or the file is missing (never a path outside the store)."""
        root = self.store.screenshot_dir
        if root is None or not _SHOT_PATH.fullmatch(rel_path):
            return None
        path = (root / rel_path).resolve()
        if not path.is_relative_to(root.resolve()) or not path.is_file():
            return None
        return path

    def config(self) -> JsonValue | None:
        """The run's experiment config (``experiment.json``, else the database's), secrets removed."""
        path = None if self.run_dir is None else self.run_dir / "experiment.json"
        if path is not None and path.is_file():
            return redact_secrets(json.loads(path.read_text(encoding="utf-8")))
        return None if self.run.config is None else redact_secrets(self.run.config)

    def metrics(self) -> list[MetricPoint]:
        """Every numeric value of ``metrics.jsonl`` (empty without a run directory)."""
        path = None if self.run_dir is None else self.run_dir / "metrics.jsonl"
        if path is None or not path.is_file():
            return []
        points = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            values = {k: float(v) for k, v in row.items() if k not in ("step", "group") and isinstance(v, (int, float))}
            points.append(MetricPoint(int(row.get("step", 0)), str(row.get("group", "")), values))
        return points

    def evaluations(self) -> dict[str, EvalResult]:
        """``eval.json``'s evaluations by label (``warm_start``, ``final``...)."""
        path = None if self.run_dir is None else self.run_dir / "eval.json"
        if path is None or not path.is_file():
            return {}
        return {k: EvalResult.from_json(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}

    def update_of(self) -> dict[str, int]:
        """The update each trained-on episode went into (``updates.jsonl``; read again only when
        the file changed, so a running run's page stays current)."""
        path = None if self.run_dir is None else self.run_dir / "updates.jsonl"
        if path is None or not path.is_file():
            return {}
        stamp = path.stat().st_mtime_ns
        if self._updates_read is None or self._updates_read[0] != stamp:
            update_of: dict[str, int] = {}
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    for episode_id in row.get("episode_ids", []):
                        update_of.setdefault(episode_id, int(row["update"]))
            self._updates_read = (stamp, update_of)
        return self._updates_read[1]

    def episodes_of_update(self, update: int) -> frozenset[str]:
        return frozenset(e for e, u in self.update_of().items() if u == update)


def open_sources(arguments: Sequence[str]) -> list[RunSource]:
    """One :class:`RunSource` per run in each argument: a run directory (with ``run.db``), a
    database file, or a SQLAlchemy URL. Raises :class:`SourceError` naming the argument and the
    fix when it holds no run."""
    sources: list[RunSource] = []
    for argument in arguments:
        if "://" in argument:
            store, run_dir = RunStore(argument), None
        else:
            path = Path(argument).expanduser()
            if path.is_dir() and (path / DB_FILENAME).is_file():
                store, run_dir = RunStore(path / DB_FILENAME, screenshot_dir=path / SCREENSHOT_DIRNAME), path
            elif path.is_file():
                store, run_dir = RunStore(path), path.parent
            else:
                what = "is a directory without run.db" if path.is_dir() else "does not exist"
                raise SourceError(
                    f"{argument!r} {what}. Fix: pass a `darwin run`/`darwin eval` directory, its run.db, "
                    "or a SQLAlchemy URL such as postgresql+psycopg://user@host/db"
                )
        runs = store.runs()
        if not runs:
            store.close()
            raise SourceError(f"{argument!r} holds no run. Fix: pass a database a `darwin run` or `darwin eval` wrote")
        sources.extend(RunSource(store, run, argument, run_dir) for run in runs)
    return sources
