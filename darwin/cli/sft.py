"""``darwin sft``: the warm start (behaviour cloning), fine-tunes, and their evaluation."""

from __future__ import annotations

from typing import Literal

import click
from rich.console import Console

from darwin.cli.common import experiment_overrides, parse_size

console = Console()


# ------------------------------------------------------------------------------------ sft
@click.command("sft")
@click.option(
    "--out",
    default=None,
    type=click.Path(file_okay=False),
    help="checkpoint directory (use it as `darwin eval --agent tiny:OUT`)  [default: runs/sft; with --experiment the experiment's warm-start cache entry, which `darwin run` then uses]",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="SFTConfig as a JSON or YAML file; the flags below override it",
)
@click.option(
    "--experiment",
    "experiment_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="an experiment file: train its warm start (its `sft` config; the flags below override it)",
)
@experiment_overrides
@click.option("--steps", default=None, type=click.IntRange(1), help="optimizer steps  [default: 225]")
@click.option("--episodes", default=None, type=click.IntRange(1), help="demonstration episodes in all  [default: 256]")
@click.option(
    "--phones",
    default=None,
    type=click.IntRange(1),
    help="demonstration phones (one seed and layout each)  [default: 32]",
)
@click.option(
    "--batch-size", default=None, type=click.IntRange(1), help="demonstration steps per optimizer step  [default: 32]"
)
@click.option(
    "--lr", default=None, type=click.FloatRange(0.0, 1.0, min_open=True), help="peak learning rate  [default: 2e-3]"
)
@click.option(
    "--seed",
    default=None,
    type=click.IntRange(0),
    help="seeds the model's initial weights, the task orders and the batch order  [default: 0]",
)
@click.option(
    "--tasks", "task_names", default=None, help="comma-separated task ids or set names to demonstrate  [default: base8]"
)
@click.option(
    "--observation-size",
    default=None,
    callback=lambda c, p, v: None if v is None else parse_size(v),
    help="screenshot size; RL and eval must use the same  [default: 168x364]",
)
@click.option("--preset", default=None, type=click.Choice(["A", "B"]), help="tiny model size preset  [default: A]")
@click.option(
    "--stop-threshold",
    default=None,
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="stop early once the held-out stop metric reaches this (needs --eval-every)",
)
@click.option(
    "--eval-every",
    default=None,
    type=click.IntRange(0),
    help="held-out metrics every N steps  [default: 0 = at the end]",
)
@click.option("--threads", default=None, type=click.IntRange(1), help="torch CPU threads  [default: 2]")
@click.option(
    "--eval-episodes",
    default=1,
    show_default=True,
    type=click.IntRange(0),
    help="the final evaluation on the demo tasks: sampled episodes of every task on each --eval-phones phone, "
    "besides one greedy (0 skips it)",
)
@click.option(
    "--eval-phones",
    default=8,
    show_default=True,
    type=click.IntRange(1, 512),
    help="phones of the final evaluation (seeds 0, 1, ...)",
)
@click.option("--force", is_flag=True, help="overwrite a checkpoint already in --out")
@click.option(
    "--model",
    "model_path",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="fine-tune this Qwen2-VL-family checkpoint (Hugging Face layout, e.g. UI-TARS-1.5 or a `darwin sft` output) under --agent-format instead of training the tiny warm start",
)
@click.option(
    "--agent-format",
    default=None,
    help="with --model: uitars-1.5, uitars-1.0, qwen2.5, qwen3 or tiny  [default: the checkpoint's darwin_agent.json, else uitars-1.5]",
)
@click.option(
    "--from-run",
    "from_runs",
    multiple=True,
    metavar="RUN_DIR_OR_DB",
    help="with --model: train on the verifier-accepted episodes of this run directory / run.db / SQLAlchemy URL (repeatable; an RL run = rejection-sampling fine-tune)",
)
@click.option(
    "--from-jsonl",
    "from_jsonl",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="with --model: train on this JSONL demonstration file (repeatable; format in docs/sft.md)",
)
@click.option(
    "--lora-rank",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="with --model: 0 = full fine-tune, else LoRA of this rank (merged into the saved weights)",
)
@click.option(
    "--heldout-fraction",
    default=0.25,
    show_default=True,
    type=click.FloatRange(0.0, 1.0, max_open=True),
    help="with --model: share of run/JSONL episodes held out for action match",
)
def sft_cmd(
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
    model_path: str | None,
    agent_format: str | None,
    from_runs: tuple[str, ...],
    from_jsonl: tuple[str, ...],
    lora_rank: int,
    heldout_fraction: float,
) -> None:
    """Warm start: behaviour-clone the tiny model on SimPhone oracle demonstrations.

    Trains short of mastery on purpose (RL needs room to improve), saves a checkpoint in
    --out, then evaluates it on the demo tasks, sampled at temperature 1 (what RL sees) and
    greedily. With --model: fine-tune any Qwen2-VL-family checkpoint under --agent-format on
    the oracle, --from-run and/or --from-jsonl demonstrations. See docs/sft.md.
    """
    if model_path is not None or from_runs or from_jsonl:
        from darwin.cli.finetune import finetune_command

        if model_path is None:
            raise click.BadParameter(
                "--from-run / --from-jsonl fine-tune a checkpoint: pass --model DIR (e.g. UI-TARS-1.5, or a `darwin sft` output with --agent-format tiny)",
                param_hint="--model",
            )
        if (
            experiment_file
            or config_file
            or overrides
            or preset
            or stop_threshold is not None
            or eval_every is not None
        ):
            raise click.BadParameter(
                "--experiment, --config, --set, --preset, --stop-threshold and --eval-every belong to the tiny warm start; with --model use the flags listed under --model",
                param_hint="--model",
            )
        finetune_command(
            console,
            out=out,
            model=model_path,
            agent_format=agent_format,
            runs=from_runs,
            jsonl=from_jsonl,
            tasks=task_names,
            episodes=episodes,
            phones=phones,
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            threads=threads,
            observation_size=observation_size,
            lora_rank=lora_rank,
            heldout_fraction=heldout_fraction,
            eval_episodes=eval_episodes,
            eval_phones=eval_phones,
            force=force,
        )
        return

    from darwin.cli.warm_start import warm_start_command

    warm_start_command(
        console,
        out=out,
        config_file=config_file,
        experiment_file=experiment_file,
        overrides=overrides,
        steps=steps,
        episodes=episodes,
        phones=phones,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        task_names=task_names,
        observation_size=observation_size,
        preset=preset,
        stop_threshold=stop_threshold,
        eval_every=eval_every,
        threads=threads,
        eval_episodes=eval_episodes,
        eval_phones=eval_phones,
        force=force,
    )
