"""``darwin sft`` without ``--model``: the tiny warm start (behaviour cloning on SimPhone oracle
demonstrations), its progress and figures, then its evaluation. The ``sft`` command in
:mod:`darwin.cli.sft` hands over to :func:`warm_start_command`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click
from rich.console import Console
from rich.progress import TextColumn

from darwin.cli.common import load_experiment_for_command, progress_bar

if TYPE_CHECKING:
    from darwin.sft.training import HeldoutMetrics, StepStats

__all__ = ["warm_start_command"]


def warm_start_command(
    console: Console,
    *,
    out: str | None,
    config_file: str | None,
    experiment_file: str | None,
    overrides: tuple[str, ...],
    steps: int | None,
    episodes: int | None,
    phones: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    task_names: str | None,
    observation_size: tuple[int, int] | None,
    preset: Literal["A", "B"] | None,
    stop_threshold: float | None,
    eval_every: int | None,
    threads: int | None,
    eval_episodes: int,
    eval_phones: int,
    force: bool,
) -> None:
    """Train the tiny warm start from ``--config``'s or the experiment's SFTConfig with the flags
    over it, save it in ``out`` (default: ``runs/sft``, or the experiment's warm-start cache
    entry), print its figures, then evaluate it (unless ``eval_episodes`` is 0)."""
    from pydantic import ValidationError

    from darwin.agents.warm_start import SFT_FILE
    from darwin.cli.finetune import evaluate_and_record
    from darwin.sft.config import SFTConfigFileError, read_sft_config_file, sft_config_from_fields
    from darwin.sft.training import train_sft

    if experiment_file and config_file:
        raise click.BadParameter(
            "pass --experiment or --config, not both (the experiment holds its SFTConfig)", param_hint="--config"
        )
    if overrides and not experiment_file:
        raise click.BadParameter("--set needs --experiment", param_hint="--set")
    if out is not None and (Path(out) / SFT_FILE).exists() and not force:  # before anything slow or strict
        raise click.BadParameter(
            f"{out}: it already holds a checkpoint; pass --force to overwrite it or choose another --out",
            param_hint="--out",
        )
    experiment = load_experiment_for_command(experiment_file, overrides) if experiment_file else None
    fields: dict[str, object] = {} if experiment is None else experiment.sft.model_dump()
    if config_file:
        try:
            fields.update(read_sft_config_file(config_file))
        except SFTConfigFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--config") from None
    flags = {
        "steps": steps,
        "episodes": episodes,
        "phones": phones,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "model_seed": seed,
        "observation_size": observation_size,
        "stop_threshold": stop_threshold,
        "eval_every": eval_every,
        "threads": threads,
        "tasks": tuple(n.strip() for n in task_names.split(",") if n.strip()) if task_names else None,
    }
    try:
        config = sft_config_from_fields(fields, flags, preset=preset)
    except ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/flags") from None
    if out is None:  # the experiment's cache entry is what `darwin run` looks up (darwin.sft.cache)
        out = (
            "runs/sft" if experiment is None else str(Path(experiment.cache_dir) / f"warm-start-{config.config_hash()}")
        )
    out_path = Path(out)
    if (out_path / SFT_FILE).exists() and not force:
        what = (
            "the experiment's warm start is already built"
            if experiment is not None
            else "it already holds a checkpoint"
        )
        raise click.BadParameter(
            f"{out_path}: {what}; pass --force to overwrite it or choose another --out", param_hint="--out"
        )
    w, h = config.observation_size
    console.print(
        f"SFT config {config.config_hash()}: {config.episodes} episodes on {config.phones} phones ({', '.join(config.tasks)}), {w}x{h} screens, {config.steps} steps of batch {config.batch_size}, lr {config.lr:g}"
    )

    step_columns = (TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]} tok/s"))
    with progress_bar(console, "sft", *step_columns, time_remaining=True, unit="steps") as progress:
        bar = progress.add_task("demonstrations", total=config.steps, loss="-", tps="-")

        def on_step(s: StepStats) -> None:
            progress.update(
                bar, completed=s.step, description="training", loss=f"{s.loss:.4f}", tps=f"{s.tokens_per_s:,.0f}"
            )

        def on_heldout(m: HeldoutMetrics) -> None:
            progress.console.print(
                f"held-out at step {m.step}: loss {m.loss:.4f}, sequence prob {m.sequence_prob:.3f}"
                + (
                    ""
                    if m.greedy_match is None
                    else f", greedy exact {m.greedy_match:.3f}, greedy action {m.greedy_action_match:.3f}"
                )
            )

        result = train_sft(
            config,
            out_path,
            on_step=on_step,
            on_heldout=on_heldout,
            on_phase=lambda name: progress.update(bar, description=name),
        )
    meta = result.metadata
    data_stats, wall, training = meta["data"]["train"], meta["wall_time_s"], meta["training"]
    console.print(
        f"{data_stats['steps']} demonstration steps from {data_stats['episodes']} episodes ({data_stats['unique_screens']} distinct screens); {training['steps_run']} steps{' (stopped early)' if training['stopped_early'] else ''}; loss {training['first_loss']:.3f} -> {training['final_loss']:.4f}"
    )
    load = meta["machine"]["load_average_1m"]
    console.print(
        f"wall time {wall['total_s']:.0f}s (demonstrations {wall['demonstrations_s']:.0f}s, encoding {wall['encoding_s']:.0f}s, training {wall['training_s']:.0f}s) on {config.threads} thread(s), process CPU {wall['process_cpu_s']:.0f}s, 1-min load average {load[0]} -> {load[1]} on {meta['machine']['cpu_count']} cores; checkpoint in {out_path}"
    )
    if eval_episodes == 0:
        return
    evaluate_and_record(console, out_path, meta, config.tasks, eval_phones, eval_episodes)
