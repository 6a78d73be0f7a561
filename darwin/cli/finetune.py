"""``darwin sft --model``: the command-line side of :func:`darwin.sft.finetune.finetune`
(progress, the held-out action-match table, task success on SimPhone tasks). The ``sft``
command in :mod:`darwin.cli` hands over to :func:`finetune_command` when ``--model`` is given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.progress import TextColumn
from rich.table import Table

from darwin.agents.warm_start import AGENT_FILE, SFT_FILE
from darwin.cli.common import progress_bar
from darwin.loop_thread import run_returning

__all__ = ["checkpoint_defaults", "finetune_command"]


def checkpoint_defaults(model: Path) -> tuple[str | None, tuple[int, int] | None]:
    """The agent format and screenshot size a checkpoint directory records, if any
    (``darwin_agent.json`` of a darwin checkpoint, else a tiny model's screen)."""
    record_file = model / AGENT_FILE
    if record_file.is_file():
        record = json.loads(record_file.read_text(encoding="utf-8"))
        w, h = record.get("observation_size", (None, None))
        size = (int(w), int(h)) if w and h else None
        return ("tiny" if record.get("kind") == "tiny" else record.get("format")), size
    tiny_file = model / "darwin_tiny_vlm.json"
    if tiny_file.is_file():
        cfg = json.loads(tiny_file.read_text(encoding="utf-8")).get("config", {})
        if cfg.get("screen_width") and cfg.get("screen_height"):
            return None, (int(cfg["screen_width"]), int(cfg["screen_height"]))
    return None, None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def finetune_command(
    console: Console,
    *,
    out: str | None,
    model: str,
    agent_format: str | None,
    runs: Sequence[str],
    jsonl: Sequence[str],
    tasks: str | None,
    episodes: int | None,
    phones: int | None,
    steps: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    threads: int | None,
    observation_size: tuple[int, int] | None,
    lora_rank: int,
    heldout_fraction: float,
    eval_episodes: int,
    eval_phones: int,
    force: bool,
) -> None:
    """Fine-tune ``model``, print the held-out action match (before/after, per action type) and,
    for SimPhone tasks, the task success of the result (sampled at T=1 and greedy)."""
    from darwin.database import StoreError
    from darwin.sft.finetune import FinetuneConfig, OracleSource, finetune
    from darwin.sft.records import DemoFileError
    from darwin.task_registry import resolve_tasks

    out_path = Path(out or "runs/sft-finetune")
    if (out_path / SFT_FILE).exists() and not force:
        raise click.BadParameter(
            f"{out_path}: it already holds a checkpoint; pass --force to overwrite it or choose another --out",
            param_hint="--out",
        )
    recorded_format, recorded_size = checkpoint_defaults(Path(model))
    fields: dict[str, Any] = {
        "model": model,
        "agent_format": agent_format or recorded_format or "uitars-1.5",
        "runs": tuple(runs),
        "jsonl": tuple(jsonl),
        "lora_rank": lora_rank,
        "heldout_fraction": heldout_fraction,
    }
    size = observation_size or recorded_size
    if size is not None:
        fields["observation_size"] = size
    fields.update(
        {
            k: v
            for k, v in {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "threads": threads}.items()
            if v is not None
        }
    )
    if steps is not None:  # a short run gets a short warm-up (at most the default 5 steps)
        fields["warmup_steps"] = min(FinetuneConfig.model_fields["warmup_steps"].default, steps // 10)
    if tasks or not (runs or jsonl):  # the oracle: alone, or alongside other sources when --tasks says so
        oracle: dict[str, Any] = {}
        if tasks:
            oracle["tasks"] = tuple(n.strip() for n in tasks.split(",") if n.strip())
        oracle.update({k: v for k, v in {"episodes": episodes, "phones": phones}.items() if v is not None})
        fields["oracle"] = OracleSource(**oracle)
    try:
        config = FinetuneConfig(**fields)
    except ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="--model/flags") from None
    w, h = config.observation_size
    mode = "full fine-tune" if not config.lora_rank else f"LoRA rank {config.lora_rank}"
    console.print(
        f"fine-tuning {model} as {config.agent_format} ({mode}) on {w}x{h} screens: {config.steps} steps of batch {config.batch_size}, lr {config.lr:g}"
    )

    with progress_bar(console, "sft", TextColumn("loss {task.fields[loss]}"), unit="steps") as progress:
        bar = progress.add_task("demonstrations", total=config.steps, loss="-")
        try:
            result = finetune(
                config,
                out_path,
                on_step=lambda s: progress.update(bar, completed=s.step, description="training", loss=f"{s.loss:.4f}"),
                on_phase=lambda name: progress.update(bar, description=name),
            )
        except (DemoFileError, FileNotFoundError, StoreError) as exc:  # a bad source: its message names the fix
            raise click.ClickException(str(exc)) from None
    meta = result.metadata
    training, data = meta["training"], meta["data"]
    console.print(
        f"{data['train']['steps']} training steps from {data['train']['episodes']} episodes, {data['heldout']['steps']} held-out steps; "
        f"loss {training['first_loss']:.3f} -> {training['final_loss']:.4f}"
        + (
            ""
            if training["heldout_loss_before"] is None
            else f"; held-out loss {training['heldout_loss_before']:.3f} -> {training['heldout_loss_after']:.4f}"
        )
    )
    if result.before is not None and result.after is not None:
        table = Table(title=f"held-out action match ({result.after.steps} steps)")
        table.add_column("action type", no_wrap=True)
        table.add_column("steps", justify="right")
        for col in ("greedy before", "greedy after", "sampled before", "sampled after"):
            table.add_column(col, justify="right")
        rows = [(t, v["steps"], result.before.per_type[t], v) for t, v in result.after.per_type.items()]
        for name, n, b, a in rows:
            table.add_row(name, str(n), _pct(b["greedy"]), _pct(a["greedy"]), _pct(b["sampled"]), _pct(a["sampled"]))
        table.add_row(
            "overall",
            str(result.after.steps),
            _pct(result.before.greedy),
            _pct(result.after.greedy),
            _pct(result.before.sampled),
            _pct(result.after.sampled),
        )
        console.print(table)
    console.print(f"checkpoint in {out_path} (darwin eval --agent tiny:{out_path})")
    if eval_episodes == 0:
        return
    names = list(config.oracle.tasks) if config.oracle is not None else sorted({e["task_id"] for e in meta["examples"]})
    sim_tasks = []
    for name in names:
        try:
            sim_tasks.extend(resolve_tasks([name]))
        except (KeyError, ValueError):  # not a SimPhone task (e.g. a JSONL task id): no task success for it
            continue
    if not sim_tasks:
        console.print("no SimPhone tasks among the demonstrations: task success not measured")
        return
    evaluate_and_record(
        console, out_path, meta, tuple(dict.fromkeys(t.id for t in sim_tasks)), eval_phones, eval_episodes
    )


def evaluate_and_record(
    console: Console, out_path: Path, meta: dict[str, Any], task_ids: Sequence[str], phones: int, samples: int
) -> None:
    """A new warm start's paired evaluation (``darwin sft``, with or without ``--model``): on
    ``phones`` phones, per task one greedy and ``samples`` sampled episodes; the table printed,
    the report written into the checkpoint's SFT file under ``eval``."""
    from darwin.sft.evaluation import evaluate_warm_start, success_rows

    started = time.perf_counter()
    with console.status("evaluating"):
        report = run_returning(evaluate_warm_start(out_path, task_ids, phones=phones, samples=samples))
    columns, rows = success_rows(report)
    table = Table(
        title=f"{out_path}: success on {', '.join(task_ids)} ({phones} phones, 1 greedy and {samples} sampled "
        "episode(s) of each task on each)"
    )
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    meta["eval"] = {**report.to_json(), "phones": phones, "wall_s": round(time.perf_counter() - started, 1)}
    (out_path / SFT_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
