"""What ``darwin view`` writes to disk: a static site of the runs (no server needed, for
sharing), and a run's human labels in the formats ``darwin judge calibrate`` and
``darwin verifier train`` read.

The static site has the same pages as the web app, without the filters, the label form and
the comparison (they need a server). Each screenshot an exported page shows is copied once,
under its content-addressed name.
"""

from __future__ import annotations

import csv
import logging
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from darwin.store_rows import EpisodeFilter
from darwin.types import ACTOR, Phase
from darwin.view.pages import PAGE_SIZE, Links, Renderer, asset
from darwin.view.source import RunSource

__all__ = ["LABELS_CSV", "LabelExport", "export_labels", "export_site"]

logger = logging.getLogger(__name__)

LABELS_CSV = "labels.csv"
"""The label file (docs/verification.md's format) in a labels export."""

_UNFINISHED = "unfinished (labelled before the viewer refused that: no last screen to judge)"
_DUPLICATE = (
    "duplicates (the same final screen, goal, screen before and last action as an example the folder holds already)"
)


@dataclass(frozen=True)
class LabelExport:
    """What :func:`export_labels` wrote: ``trajectories`` rows of ``labels.csv``,
    ``verifier_examples`` rows of ``examples.jsonl``, the labelled episodes left out of the label
    file (``skipped``) and those left out of the examples (``skipped_examples``), each with why."""

    trajectories: int
    verifier_examples: int
    skipped: dict[str, str]
    skipped_examples: dict[str, str] = field(default_factory=dict)

    def left_out(self) -> str:
        """What was left out, counted by reason, for the user; empty when nothing was.

        >>> LabelExport(1, 0, {"e1": "unfinished"}, {"e1": "unfinished", "e2": "a duplicate"}).left_out()
        'left out of labels.csv: 1 unfinished; left out of examples.jsonl: 1 unfinished, 1 a duplicate'
        """
        parts = []
        for where, skipped in ((LABELS_CSV, self.skipped), ("examples.jsonl", self.skipped_examples)):
            if skipped:
                counts = Counter(skipped.values())
                parts.append(f"left out of {where}: " + ", ".join(f"{n} {why}" for why, n in counts.items()))
        return "; ".join(parts)


def export_labels(source: RunSource, out: Path) -> LabelExport:
    """Write ``source``'s execution-phase labels to ``out``: ``labels.csv`` plus one folder per
    episode under ``trajectories/`` (``step_NNN.png``, ``actions.jsonl``, ``final.png``), which
    ``darwin judge calibrate OUT`` reads; and, for a run directory, ``examples.jsonl`` +
    ``images/`` (each labelled final screen), which ``darwin verifier train --data OUT`` reads."""
    from darwin.verifiers.judge.calibration import final_screen
    from darwin.verifiers.learned.data import HUMAN, DatasetWriter, examples_from_run

    out.mkdir(parents=True, exist_ok=True)
    store = source.store
    rows: list[dict[str, str]] = []
    skipped: dict[str, str] = {}
    for lab in store.labels(run_id=source.run_id):
        if lab.phase != Phase.EXECUTION:
            skipped[lab.episode_id] = f"a {lab.phase.value} label (the label file holds execution labels)"
            continue
        episode = store.episode(lab.episode_id)
        task = None if episode is None else store.task(episode.task_id)
        if episode is None or task is None:
            skipped[lab.episode_id] = "its episode or task is not in the database"
            continue
        if not episode.finished:
            skipped[lab.episode_id] = _UNFINISHED
            continue
        actor_steps = [s for s in store.steps(lab.episode_id) if s.agent == ACTOR]
        steps = [s for s in actor_steps if s.phase == Phase.EXECUTION]
        later = [s for s in actor_steps if s.phase == Phase.TEARDOWN and s.screenshot_path]
        final = final_screen(steps, later, episode)  # the screen the judge would look at
        final_file = None if final is None else source.screenshot(final)
        if final_file is None:
            skipped[lab.episode_id] = "no final screen stored"
            continue
        folder = out / "trajectories" / lab.episode_id
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(final_file, folder / "final.png")
        actions = []
        for i, step in enumerate(steps):
            shot = None if step.screenshot_path is None else source.screenshot(step.screenshot_path)
            if shot is not None:
                shutil.copyfile(shot, folder / f"step_{i:03d}.png")
            actions.append(step.action_json or "null")
        (folder / "actions.jsonl").write_text("".join(a + "\n" for a in actions), encoding="utf-8")
        width, height = episode.device_size or (1080, 2400)
        rows.append(
            {
                "episode_id": lab.episode_id,
                "instruction": task.instruction,
                "label": "yes" if lab.success else "no",
                "trajectory_dir": f"trajectories/{lab.episode_id}",
                "language": task.language,
                "app": task.app,
                "task_id": task.id,
                "device_width": str(width),
                "device_height": str(height),
                "note": lab.note,
                "labeller": lab.labeller,
            }
        )
    with (out / LABELS_CSV).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(
            fh,
            fieldnames=[
                "episode_id",
                "instruction",
                "label",
                "trajectory_dir",
                "language",
                "app",
                "task_id",
                "device_width",
                "device_height",
                "note",
                "labeller",
            ],
        )
        writer.writeheader()
        writer.writerows(rows)
    examples = 0
    skipped_examples: dict[str, str] = {}
    if source.run_dir is None:
        skipped_examples = {row["episode_id"]: "a database given without its run directory" for row in rows}
    elif rows:
        dataset = DatasetWriter(out)
        made = {screen.example.episode_id: screen for screen in examples_from_run(source.run_dir, HUMAN)}
        for row in rows:  # one at a time: a screen the folder already holds is counted, not lost in a total
            screen = made.get(row["episode_id"])
            if screen is None:
                skipped_examples[row["episode_id"]] = "no final screen stored"
            elif dataset.write([screen]):
                examples += 1
            else:
                skipped_examples[row["episode_id"]] = _DUPLICATE
    for episode_id, why in skipped.items():
        logger.warning("label of episode %s not exported: %s", episode_id, why)
    for episode_id, why in skipped_examples.items():
        logger.warning("label of episode %s not made a verifier example: %s", episode_id, why)
    return LabelExport(len(rows), examples, skipped, skipped_examples)


def export_site(sources: Sequence[RunSource], out: Path) -> int:
    """Write the static site of ``sources`` to ``out`` (``index.html`` opens it); returns the
    number of pages written."""
    renderer = Renderer(sources)
    out.mkdir(parents=True, exist_ok=True)
    (out / "static").mkdir(exist_ok=True)
    for name in ("view.css", "plotly.min.js"):
        (out / "static" / name).write_bytes(asset(name))
    pages = 0

    def write(rel: str, html: str) -> None:
        nonlocal pages
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        pages += 1

    write("index.html", renderer.index(Links(static=True, depth=0)))
    for k, source in enumerate(sources):
        write(f"runs/{k}/index.html", renderer.run(k, Links(static=True, depth=2)))
        total = source.store.episode_page(source.run_id, limit=1).total
        for page in range(max(1, -(-total // PAGE_SIZE))):
            html = renderer.episodes(k, Links(static=True, depth=3), EpisodeFilter(), query={}, page=page)
            write(f"runs/{k}/episodes/page-{page}.html", html)
        copied: set[str] = set()
        offset = 0
        while True:
            listing = source.store.episode_page(source.run_id, offset=offset, limit=500)
            for episode in listing.rows:
                context = renderer.episode_context(k, episode.episode_id)
                assert context is not None  # listed from the same run
                write(f"runs/{k}/episodes/{episode.episode_id}.html", renderer.render_episode(context, Links(True, 3)))
                shots = [v.step.screenshot_path for _, views in context["phases"] for v in views]
                for rel in [*shots, episode.final_screenshot_path]:
                    if rel is None or rel in copied:
                        continue
                    copied.add(rel)
                    file = source.screenshot(rel)
                    if file is not None:
                        (out / f"runs/{k}/shots" / rel).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(file, out / f"runs/{k}/shots" / rel)
            offset += len(listing.rows)
            if offset >= listing.total or not listing.rows:
                break
    return pages
