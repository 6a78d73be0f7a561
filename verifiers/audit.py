"""How a reward verifier did during a run against the verifier that audited it.

A :class:`~darwin.verifiers.composite.CompositeVerifier` in ``audit`` mode stores, in each
verdict's reason, what its auditor said (:func:`~darwin.verifiers.composite.parse_audit`).
:func:`audit_pairs` reads those pairs back from a run's database and :func:`audit_metrics`
scores the reward verifier's verdicts per task and overall, the auditor's verdict taken as
the truth (``darwin verifier audit``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from darwin.algos.classification import MetricsWithIntervals, bootstrap_metrics
from darwin.store import RunStore
from darwin.verifiers.composite import parse_audit

__all__ = ["audit_metrics", "audit_pairs"]


def audit_pairs(run_dir: str | Path) -> list[tuple[str, bool, bool]]:
    """``(task_id, primary verdict, audit verdict)`` of every execution verdict a composite
    verifier in audit mode stored in the run directory ``run_dir`` (both members verified)."""
    pairs: list[tuple[str, bool, bool]] = []
    with RunStore.for_run_dir(run_dir) as store:
        for run in store.runs():
            for episode in store.episodes(run.run_id):
                for v in store.verdicts(episode.episode_id):
                    note = parse_audit(v.reason) if v.verifier_kind == "composite" else None
                    if (
                        note is None
                        or note.auditor_success is None
                        or v.success is None
                        or v.phase.value != "execution"
                    ):
                        continue
                    pairs.append((episode.task_id, bool(v.success), note.auditor_success))
    return pairs


def audit_metrics(
    pairs: list[tuple[str, bool, bool]], seed: int = 0
) -> list[tuple[str, int, int, MetricsWithIntervals]]:
    """``(task, verdicts, auditor's positives, metrics)`` per task in name order, then
    ``overall``: the primary verdicts scored against the auditor's, with bootstrap intervals
    (``np.random.default_rng(seed)``, shared by the rows in that order)."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, int, int, MetricsWithIntervals]] = []
    for task in sorted({t for t, _, _ in pairs}) + ["overall"]:
        chosen = [(p, a) for t, p, a in pairs if task in ("overall", t)]
        predicted, actual = np.array([p for p, _ in chosen]), np.array([a for _, a in chosen])
        rows.append((task, len(chosen), int(actual.sum()), bootstrap_metrics(predicted, actual, rng)))
    return rows
