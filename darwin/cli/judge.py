"""``darwin judge``: calibrate LLM judges against labels, and review a finished run.

    darwin judge calibrate runs/eval-sim --config final_state --config marked --model gpt-4o-mini
    darwin judge calibrate labelled/ --config judge.yaml          # human labels (docs/verification.md)
    darwin judge review runs/my_run --config marked --record

Both print tables and write a JSON report; every judged episode is appended to a
``<report>.judged.jsonl`` file beside the report as soon as it is judged, so an interrupted
command resumes where it stopped. A missing or rejected API key stops the command at once.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from darwin.cli.common import progress_bar
from darwin.cli.judge_options import judge_options, judges_from_options, parse_device_size

__all__ = ["judge"]

_LANGUAGES = {"ENG": "English", "CHN": "Chinese"}
_LABEL_KINDS = {"rule": "rule verdicts", "human": "human labels"}


def _label_sources(label_kinds: Sequence[str]) -> str:
    """What labelled the calibrated episodes, as the report names it.

    >>> _label_sources(["human", "rule", "human"])
    'human labels (2 episodes), rule verdicts (1 episode)'
    """
    counts = sorted(Counter(label_kinds).items())
    return ", ".join(
        f"{_LABEL_KINDS.get(kind, kind + ' verdicts')} ({n} episode{'s' if n != 1 else ''})" for kind, n in counts
    )


def _run(judges, cases, out: Path, console: Console):  # noqa: ANN001, ANN202 - darwin.verifiers.judge.calibration types, imported lazily
    """Judge every case with every judge, resumably, with a progress bar."""
    from darwin.policies.litellm import PolicyAuthError
    from darwin.verifiers.judge.calibration import ResultsFile, judge_cases
    from darwin.verifiers.judge.llm_judge import config_fingerprint

    results = ResultsFile(out.with_suffix(".judged.jsonl"))
    done = sum(results.get(config_fingerprint(j.config), c.key) is not None for j in judges.values() for c in cases)
    total = len(judges) * len(cases)
    if done:
        console.print(f"resuming: {done} of {total} verdicts already in {results.path}", highlight=False)
    with progress_bar(console, "judge", unit="verdicts") as progress:
        bar = progress.add_task(
            f"{len(cases)} episode(s) x {len(judges)} configuration(s)", total=total, completed=done
        )
        try:
            return asyncio.run(judge_cases(judges, cases, results, on_judged=lambda _: progress.advance(bar)))
        except PolicyAuthError as exc:
            raise click.ClickException(str(exc)) from None


def _metrics_table(title: str, rows: list[tuple[str, Any, str]]) -> Table:
    table = Table(title=title)
    table.add_column("configuration")
    for name in ("n", "unverified", "accuracy", "precision", "recall", "F1", "paper F1"):
        table.add_column(name, justify="right", no_wrap=True)
    for name, m, paper in rows:
        table.add_row(
            name, str(m.n), str(m.unverified), m.accuracy.fmt(), m.precision.fmt(), m.recall.fmt(), m.f1.fmt(), paper
        )
    return table


def _disagreements(console: Console, name: str, judged: Sequence[Any], show: int) -> list[Any]:
    wrong = [r for r in judged if r.label is not None and r.success is not None and r.success != r.label]
    if wrong and show:
        table = Table(title=f"{name}: {len(wrong)} disagreement(s)" + (f" (first {show})" if len(wrong) > show else ""))
        for col in ("episode", "task", "label", "judge", "judge's reason"):
            table.add_column(col, overflow="fold")
        for r in wrong[:show]:
            table.add_row(
                r.episode_id[:12], r.task_id, "yes" if r.label else "no", "yes" if r.success else "no", r.reason[:200]
            )
        console.print(table)
    return wrong


def _usage_line(console: Console, judged: Sequence[Any]) -> dict[str, Any]:
    from darwin.verifiers.judge.calibration import usage_totals

    totals = usage_totals(judged)
    cost = "unpriced (model not in LiteLLM's price map)" if totals["cost_usd"] is None else f"${totals['cost_usd']:.4f}"
    console.print(
        f"judge requests this time: {totals['requests']}, tokens {totals['prompt_tokens']} in / "
        f"{totals['completion_tokens']} out, cost {cost}",
        highlight=False,
    )
    return totals


@click.group()
def judge() -> None:
    """LLM judges: calibrate them against labels, review a run's verdicts (docs/verification.md)."""


@judge.command("calibrate")
@click.argument("sources", nargs=-1, required=True)
@judge_options("all seven presets")
@click.option(
    "--out",
    default="judge-calibration.json",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="JSON report; judged episodes are kept beside it in <out>.judged.jsonl (a rerun skips them)",
)
@click.option(
    "--labels",
    "run_labels",
    default="rule",
    show_default=True,
    type=click.Choice(["rule", "human"]),
    help="what labels a run's episodes: its rule verdicts, or the labels people gave them in `darwin view`",
)
def calibrate(sources: tuple[str, ...], configs: tuple[str, ...], out: str, run_labels: str, **o: Any) -> None:
    """Judge labelled episodes with each configuration; print the paper's Table 3 per language.

    SOURCES are run directories or run.db files (labelled by their rule verdicts, or with
    ``--labels human`` by the labels given in ``darwin view``) and/or labelled folders / CSV
    files (human labels, format in docs/verification.md; ``darwin view RUN --export-labels DIR``
    writes one).
    """
    from darwin.verifiers.judge.calibration import (
        LabelSourceError,
        judge_metrics,
        load_cases,
        usage_totals,
    )
    from darwin.verifiers.judge.llm_judge import PAPER_TABLE3, PRESETS

    console = Console()
    device_size = parse_device_size(o["device_size"])
    cases = []
    for source in sources:
        try:
            cases += load_cases(source, labels="human" if run_labels == "human" else "rule", device_size=device_size)
        except LabelSourceError as exc:
            raise click.ClickException(str(exc)) from None
    if not cases:
        raise click.ClickException(
            f"no labelled episodes in {', '.join(sources)}: no finished episode has a {run_labels} label. "
            + (
                "Fix: label episodes in `darwin view RUN` first"
                if run_labels == "human"
                else "Fix: pass a run made with the rule verifier (e.g. `darwin eval --agent random`) or a labelled CSV"
            )
        )
    keys = [c.key for c in cases]
    if len(set(keys)) != len(keys):
        raise click.ClickException("the same episode appears in two sources. Fix: pass each run or label file once")
    judges = judges_from_options(configs or tuple(PRESETS), o)
    results = _run(judges, cases, Path(out), console)
    report: dict[str, Any] = {
        "sources": list(sources),
        "labels": _label_sources([c.label_kind for c in cases]),
        "seed": o["seed"],
        "resamples": o["resamples"],
        "configs": {},
    }
    console.print(f"labels: {report['labels']}", highlight=False)
    languages = [lang for lang in _LANGUAGES if any(c.language == lang for c in cases)]
    for lang in languages:
        rows = []
        for name, judged in results.items():
            chosen = [r for r in judged if r.language == lang]
            m = judge_metrics(
                [bool(r.label) for r in chosen], [r.success for r in chosen], resamples=o["resamples"], seed=o["seed"]
            )
            preset = judges[name].config.preset_name()
            paper = f"{PAPER_TABLE3[preset][0 if lang == 'ENG' else 1]:.2f}" if preset in PAPER_TABLE3 else "-"
            rows.append((name, m, paper))
            entry = report["configs"].setdefault(name, {"judge": judges[name].describe(), "metrics": {}})
            entry["metrics"][lang] = asdict(m)
        n = sum(c.language == lang for c in cases)
        console.print(
            _metrics_table(f"judge calibration, {_LANGUAGES[lang]} ({n} episodes; intervals: bootstrap 95%)", rows)
        )
    for name, judged in results.items():
        wrong = _disagreements(console, name, judged, o["show"])
        report["configs"][name]["disagreements"] = [asdict(r) for r in wrong]
        report["configs"][name]["usage"] = usage_totals(judged)
    report["usage"] = _usage_line(console, [r for judged in results.values() for r in judged])
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    console.print(f"report: {out}", highlight=False)


@judge.command("review")
@click.argument("run_dir", type=click.Path(file_okay=False))
@judge_options("marked")
@click.option(
    "--out", default=None, type=click.Path(dir_okay=False), help="JSON report  [default: RUN_DIR/judge-review.json]"
)
@click.option(
    "--record",
    is_flag=True,
    help="also store the judge's verdicts in the run database (verifier kind llm_judge, with tokens and cost)",
)
def review(run_dir: str, configs: tuple[str, ...], out: str | None, record: bool, **o: Any) -> None:
    """Judge a finished run's episodes and report agreement with the verdicts stored there."""
    from darwin.database import DB_FILENAME
    from darwin.verifiers.judge.calibration import (
        LabelSourceError,
        agreement_counts,
        judge_metrics,
        load_run_cases,
        record_judge_verdicts,
    )

    console = Console()
    if len(configs) > 1:
        raise click.BadParameter(
            "review takes one judge configuration; use `darwin judge calibrate` to compare several",
            param_hint="--config",
        )
    db = Path(run_dir) / DB_FILENAME
    if not db.is_file():
        raise click.ClickException(
            f"{run_dir} holds no {DB_FILENAME}. Fix: pass a directory written by `darwin run` or `darwin eval`"
        )
    try:
        cases = load_run_cases(db, labels="stored", device_size=parse_device_size(o["device_size"]))
    except LabelSourceError as exc:
        raise click.ClickException(str(exc)) from None
    if not cases:
        raise click.ClickException(f"{run_dir}: no finished, scored episode to review")
    judges = judges_from_options(configs or ("marked",), o)
    ((name, the_judge),) = judges.items()
    out_path = Path(out) if out else Path(run_dir) / "judge-review.json"
    judged = _run(judges, cases, out_path, console)[name]
    counts = agreement_counts([r.label for r in judged], [r.success for r in judged])
    table = Table(title=f"{name} vs the stored verdicts ({len(judged)} episodes)")
    table.add_column("stored \\ judge")
    for word in ("yes", "no", "unverified"):
        table.add_column(word, justify="right")
    for stored in ("yes", "no", "unverified"):
        table.add_row(stored, *(str(counts[(stored, j)]) for j in ("yes", "no", "unverified")))
    console.print(table)
    scored = [r for r in judged if r.label is not None]
    m = judge_metrics(
        [bool(r.label) for r in scored], [r.success for r in scored], resamples=o["resamples"], seed=o["seed"]
    )
    console.print(_metrics_table("the judge against the stored verdicts (intervals: bootstrap 95%)", [(name, m, "-")]))
    console.print(f"agreement on episodes both decided: {m.accuracy.fmt()}", highlight=False)
    wrong = _disagreements(console, name, judged, o["show"])
    usage = _usage_line(console, judged)
    if record:
        recorded = record_judge_verdicts(db, judged, the_judge.describe())
        console.print(f"recorded {recorded} judge verdict(s) in {db}", highlight=False)
    report = {
        "run_dir": run_dir,
        "judge": the_judge.describe(),
        "metrics": asdict(m),
        "agreement": {f"{s}/{j}": n for (s, j), n in counts.items()},
        "disagreements": [asdict(r) for r in wrong],
        "usage": usage,
    }
    out_path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    console.print(f"report: {out_path}", highlight=False)
