"""``darwin bench learner``: one learner update, timed stage by stage or phase by phase, on the
local learner or verl's FSDP workers (docs/learner.md, docs/scale.md); :mod:`darwin.cli.bench`
adds it to the ``darwin bench`` group. The benchmark module is imported when the command runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import click

from darwin.cli.common import parse_int_list, parse_size

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["bench_learner"]


@click.command("learner")
@click.option("--steps", default=256, show_default=True, type=click.IntRange(1), help="sampled steps per update")
@click.option("--steps-per-episode", default=8, show_default=True, type=click.IntRange(1))
@click.option(
    "--screen",
    default=None,
    callback=lambda c, p, v: None if v is None else parse_size(v),
    help="WxH, multiples of 28 [default: 252x560; 504x1120 with --rows paper]",
)
@click.option("--new-tokens", default=16, show_default=True, type=click.IntRange(1))
@click.option("--critic", "critics", default="separate", show_default=True, help="comma-separated: separate, shared")
@click.option("--phase", "phases", default="ppo", show_default=True, help="comma-separated: ppo, warmup")
@click.option("--micro", "micros", default="8", show_default=True, help="comma-separated micro-batch sizes")
@click.option("--mini", default=32, show_default=True, type=click.IntRange(1))
@click.option("--epochs", default=4, show_default=True, type=click.IntRange(1))
@click.option("--family", default="qwen2_vl", show_default=True, type=click.Choice(["qwen2_vl", "qwen2_5_vl"]))
@click.option("--device", default="cpu", show_default=True)
@click.option(
    "--backend",
    default="local",
    show_default=True,
    type=click.Choice(["local", "verl"]),
    help="verl: VerlLearner on --workers CPU processes (gloo) or GPUs; reports tokens/s and MFU",
)
@click.option(
    "--workers", default=2, show_default=True, type=click.IntRange(1), help="verl: workers (CPU processes or GPUs)"
)
@click.option(
    "--size",
    default="tiny",
    show_default=True,
    type=click.Choice(["tiny", "1b", "2b"]),
    help="verl: the model (1b, 2b: Qwen2.5-VL-shaped with Qwen's vocabulary, random weights)",
)
@click.option(
    "--rows",
    default="sampled",
    show_default=True,
    type=click.Choice(["sampled", "paper"]),
    help="verl: rows the tiny policy samples, or the paper preset's shape (UI-TARS-1.5 prompts with history, "
    "504x1120 screenshots unless --screen says otherwise)",
)
@click.option(
    "--token-budget",
    default=None,
    type=click.IntRange(1),
    help="verl: token-budgeted micro-batches of at most this many tokens per worker (VerlConfig.max_token_len_per_gpu)",
)
@click.option(
    "--remove-padding/--keep-padding",
    default=None,
    help="verl: pack rows without padding (default: where flash-attn is installed on a GPU)",
)
@click.option(
    "--gradient-checkpointing/--no-gradient-checkpointing",
    default=True,
    show_default=True,
    help="verl: recompute activations in the backward pass",
)
@click.option("--offload", is_flag=True, help="verl: parameters and optimizer states leave the GPU between calls")
@click.option(
    "--fused-kernels",
    default="off",
    show_default=True,
    type=click.Choice(["off", "torch", "triton"]),
    help="verl: the actor's log-probs from chunks of its LM head instead of the whole logits (VerlConfig.fused_kernels)",
)
@click.option(
    "--profile",
    is_flag=True,
    help="one update of an experiment's learner on a fixed recorded batch, phase by phase (docs/benchmarks.md)",
)
@click.option("--experiment", default="examples/spa_bench.py", show_default=True, help="--profile: the experiment file")
@click.option("--preset", default="default", show_default=True, help="--profile: the experiment's preset")
@click.option(
    "--variant",
    "variants",
    default="plain,frozen",
    show_default=True,
    help="--profile: comma-separated: plain (vision tower trained), frozen (learner.speed.freeze_vision), "
    "shared and frozen-shared (the same with learner.critic.backbone=shared), critic-frozen "
    "(learner.critic.freeze_vision); each also as <name>-unshared-prefix",
)
@click.option(
    "--warm-cache",
    is_flag=True,
    help="--profile: the image-feature caches hold the batch's screenshots before the timed update, as in a run",
)
@click.option(
    "--repeats", default=3, show_default=True, type=click.IntRange(1), help="--profile: updates per variant (median)"
)
def bench_learner(
    steps: int,
    steps_per_episode: int,
    screen: tuple[int, int] | None,
    new_tokens: int,
    critics: str,
    phases: str,
    micros: str,
    mini: int,
    epochs: int,
    family: str,
    device: str,
    backend: str,
    workers: int,
    size: str,
    rows: str,
    token_budget: int | None,
    remove_padding: bool | None,
    gradient_checkpointing: bool,
    offload: bool,
    fused_kernels: Literal["off", "torch", "triton"],
    profile: bool,
    experiment: str,
    preset: str,
    variants: str,
    warm_cache: bool,
    repeats: int,
) -> None:
    """One learner update on sampled tiny-model steps: time per stage, peak memory (docs/learner.md); with
    --profile, an experiment's learner on a recorded batch, phase by phase; with --backend verl, verl's FSDP
    workers: tokens/s and MFU (docs/scale.md)."""
    from darwin.bench.learner import PAPER_SCREEN, VARIANTS, run, run_verl
    from darwin.bench.learner import profile as run_profile
    from darwin.bench.results import json_lines

    if screen is None:
        screen = PAPER_SCREEN if rows == "paper" else (252, 560)

    started = time.perf_counter()
    results: Sequence[DataclassInstance]
    phase_list = [p.strip() for p in phases.split(",") if p.strip()]
    if profile:
        from darwin.run.load import load_experiment

        names = [v.strip() for v in variants.split(",") if v.strip()]
        unknown = sorted(set(names) - set(VARIANTS))
        if unknown or not names:
            raise click.BadParameter(
                f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}", param_hint="--variant"
            )
        config = load_experiment(experiment, preset)
        results = run_profile(config.learner, tuple(names), steps=steps, repeats=repeats, warm_cache=warm_cache)
    elif backend == "verl":
        if sorted(set(phase_list) - {"ppo", "warmup"}):
            raise click.BadParameter("--phase takes ppo,warmup")
        results = run_verl(
            steps=steps,
            per_episode=steps_per_episode,
            screen=screen,
            new_tokens=new_tokens,
            phases=tuple(phase_list),
            mini=mini,
            epochs=epochs,
            family=family,
            device=device,
            workers=workers,
            size=size,
            micro=parse_int_list(micros, "micro-batch sizes")[0],
            rows=rows,
            token_budget=token_budget,
            remove_padding=remove_padding,
            gradient_checkpointing=gradient_checkpointing,
            offload=offload,
            fused_kernels=fused_kernels,
        )
    else:
        critic_list = [c.strip() for c in critics.split(",") if c.strip()]
        bad = sorted(set(critic_list) - {"separate", "shared"}) + sorted(set(phase_list) - {"ppo", "warmup"})
        if bad:
            raise click.BadParameter(f"unknown value(s) {bad}: --critic takes separate,shared and --phase ppo,warmup")
        results = run(
            steps=steps,
            per_episode=steps_per_episode,
            screen=screen,
            new_tokens=new_tokens,
            critics=tuple(critic_list),
            phases=tuple(phase_list),
            micros=tuple(parse_int_list(micros, "micro-batch sizes")),
            mini=mini,
            epochs=epochs,
            family=family,
            device=device,
        )
    for line in json_lines(results):
        click.echo(line)
    click.echo(f'{{"wall_s": {time.perf_counter() - started:.1f}}}')
