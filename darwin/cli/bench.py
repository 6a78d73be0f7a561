"""``darwin bench``: the click group of every benchmark (docs/benchmarks.md records the commands).

    darwin bench sim | adb | ray | rollout | model | policy | learner --help

Each command imports its benchmark module when it runs (torch, Ray and adb stay out of
``darwin --help``); :mod:`darwin.cli.main` adds the group to ``darwin``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import click
from rich.console import Console
from rich.table import Table

from darwin.cli.common import parse_int_list, parse_size

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["bench"]

console = Console()


@click.group()
def bench() -> None:
    """Benchmarks that back docs/benchmarks.md."""


@bench.command("rollout")
@click.option("--phones", "phone_counts", default="16,32", show_default=True, help="phone counts for async vs sync")
@click.option("--scaling", default="8,16,32,64", show_default=True, help="phone counts for the async scaling table")
@click.option(
    "--seconds", default=20.0, show_default=True, type=click.FloatRange(1.0), help="run time per configuration"
)
@click.option(
    "--time-scale", default=0.5, show_default=True, type=click.FloatRange(0.001), help="multiplies every phone latency"
)
def bench_rollout_cmd(phone_counts: str, scaling: str, seconds: float, time_scale: float) -> None:
    """Async vs sync rollout under heavy-tailed phone latency (env steps/s, policy idle)."""
    from darwin.bench.rollout import LatencyModel, bench_rollout

    latency = LatencyModel(scale=time_scale)
    rows = bench_rollout(
        parse_int_list(phone_counts, "phone counts", allow_empty=True),
        parse_int_list(scaling, "phone counts", allow_empty=True),
        seconds,
        latency,
    )
    table = Table(
        title=f"rollout: lognormal latency (median {latency.median_s * time_scale:.2f}s, sigma {latency.sigma}) + {latency.stall_p:.0%} stalls of {latency.stall_s * time_scale:.1f}s"
    )
    for col in ("phones", "mode", "env steps/s", "ideal N/latency", "% of ideal", "policy idle", "mean batch"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r.phones),
            r.mode,
            f"{r.steps_per_s:.1f}",
            f"{r.ideal_steps_per_s:.1f}",
            f"{100 * r.efficiency:.1f}%",
            f"{100 * r.idle_fraction:.1f}%",
            f"{r.mean_batch:.2f}",
        )
    console.print(table)
    for n in parse_int_list(phone_counts, "phone counts", allow_empty=True):
        by_mode = {r.mode: r for r in rows if r.phones == n and r.mode in ("async", "sync")}
        if len(by_mode) == 2:
            console.print(
                f"{n} phones: async / sync = {by_mode['async'].steps_per_s / max(by_mode['sync'].steps_per_s, 1e-9):.2f}x"
            )


@bench.command("ray")
@click.option("--phones", "phone_counts", default="8,16,32,64", show_default=True, help="SimPhone counts")
@click.option(
    "--seconds", default=15.0, show_default=True, type=click.FloatRange(1.0), help="run time per configuration"
)
@click.option("--hop-calls", default=300, show_default=True, type=click.IntRange(10), help="calls per hop measurement")
@click.option(
    "--hosts-per-node", default=1, show_default=True, type=click.IntRange(1), help="phone host processes on each node"
)
def bench_ray_cmd(phone_counts: str, seconds: float, hop_calls: int, hosts_per_node: int) -> None:
    """SimPhones in one process vs on two local Ray nodes (env steps/s), and the Ray hop per call."""
    from darwin.bench.ray_phones import bench_ray

    rows, hops = bench_ray(parse_int_list(phone_counts, "phone counts"), seconds, hop_calls, hosts_per_node)
    table = Table(title="rollout throughput: random agent, rule verification every step (no model)")
    for col in ("phones", "placement", "hosts", "env steps/s", "episodes", "driver CPU ms/step"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r.phones),
            r.placement,
            str(r.hosts or "-"),
            f"{r.steps_per_s:.1f}",
            str(r.episodes),
            f"{r.driver_cpu_ms_per_step:.2f}",
        )
    console.print(table)
    hop = Table(title="the Ray hop: mean per call, one phone, calls in sequence")
    for col in ("call", "direct ms", "via Ray ms", "overhead ms"):
        hop.add_column(col, justify="right")
    for h in hops:
        hop.add_row(h.call, f"{h.direct_ms:.2f}", f"{h.ray_ms:.2f}", f"{h.overhead_ms:.2f}")
    console.print(hop)
    _bench_lines([*rows, *hops])


def _bench_lines(rows: Sequence[DataclassInstance]) -> None:
    """One JSON line per result (machine-readable; docs/benchmarks.md quotes them)."""
    import dataclasses
    import json

    for row in rows:
        click.echo(json.dumps(dataclasses.asdict(row)))


@bench.command("model")
@click.option("--family", default="both", show_default=True, type=click.Choice(["qwen2_vl", "qwen2_5_vl", "both"]))
@click.option("--preset", default="A", show_default=True, type=click.Choice(["A", "B"]), help="tiny model size")
@click.option("--batch", default=8, show_default=True, type=click.IntRange(1))
@click.option("--new-tokens", default=16, show_default=True, type=click.IntRange(1))
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(1))
@click.option(
    "--screen",
    default="252x560",
    show_default=True,
    callback=lambda c, p, v: parse_size(v),
    help="WxH, multiples of 28",
)
def bench_model(family: str, preset: str, batch: int, new_tokens: int, repeats: int, screen: tuple[int, int]) -> None:
    """The tiny VLM: build time, forward and generate latency, visual tokens (docs/models.md)."""
    from darwin.bench.model import benchmark
    from darwin.models.config import TinyVLMConfig

    families = ["qwen2_vl", "qwen2_5_vl"] if family == "both" else [family]
    _bench_lines(
        [
            benchmark(
                TinyVLMConfig.preset(preset, family=f, screen_width=screen[0], screen_height=screen[1]),  # type: ignore[arg-type]  # click's Choice gives one of the presets
                batch=batch,
                new_tokens=new_tokens,
                repeats=repeats,
            )
            for f in families
        ]
    )


@bench.command("policy")
@click.option("--family", default="qwen2_vl", show_default=True, type=click.Choice(["qwen2_vl", "qwen2_5_vl"]))
@click.option("--preset", default="A", show_default=True, type=click.Choice(["A", "B"]))
@click.option("--batch", "batches", default="1,8", show_default=True, help="comma-separated batch sizes")
@click.option("--new-tokens", default=16, show_default=True, type=click.IntRange(1))
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(1))
@click.option("--device", default="cpu", show_default=True)
def bench_policy(
    family: str, preset: Literal["A", "B"], batches: str, new_tokens: int, repeats: int, device: str
) -> None:
    """HFPolicy sampling speed on a tiny model per batch size (docs/policies.md)."""
    from darwin.bench.policy import benchmark
    from darwin.models.config import TinyVLMConfig

    sizes = parse_int_list(batches, "batch sizes")
    _bench_lines(
        benchmark(
            TinyVLMConfig.preset(preset, family=family),
            sizes,
            new_tokens=new_tokens,
            repeats=repeats,
            device=device,
        )
    )


@bench.command("learner")
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
    help="--profile: comma-separated: plain (vision tower trained), frozen (learner.freeze_vision), "
    "shared and frozen-shared (the same with learner.critic=shared), critic-frozen "
    "(learner.critic_freeze_vision); each also as <name>-unshared-prefix",
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

    if screen is None:
        screen = PAPER_SCREEN if rows == "paper" else (252, 560)

    started = time.perf_counter()
    if profile:
        from darwin.run.load import load_experiment

        names = [v.strip() for v in variants.split(",") if v.strip()]
        unknown = sorted(set(names) - set(VARIANTS))
        if unknown or not names:
            raise click.BadParameter(
                f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}", param_hint="--variant"
            )
        config = load_experiment(experiment, preset)
        _bench_lines(run_profile(config.learner, tuple(names), steps=steps, repeats=repeats, warm_cache=warm_cache))
        click.echo(f'{{"wall_s": {time.perf_counter() - started:.1f}}}')
        return
    if backend == "verl":
        phase_list = [p.strip() for p in phases.split(",") if p.strip()]
        if sorted(set(phase_list) - {"ppo", "warmup"}):
            raise click.BadParameter("--phase takes ppo,warmup")
        _bench_lines(
            run_verl(
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
            )
        )
        click.echo(f'{{"wall_s": {time.perf_counter() - started:.1f}}}')
        return
    critic_list = [c.strip() for c in critics.split(",") if c.strip()]
    phase_list = [p.strip() for p in phases.split(",") if p.strip()]
    bad = sorted(set(critic_list) - {"separate", "shared"}) + sorted(set(phase_list) - {"ppo", "warmup"})
    if bad:
        raise click.BadParameter(f"unknown value(s) {bad}: --critic takes separate,shared and --phase ppo,warmup")
    _bench_lines(
        run(
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
    )
    click.echo(f'{{"wall_s": {time.perf_counter() - started:.1f}}}')


@bench.command("sim")
@click.option(
    "--instances", default=64, show_default=True, type=click.IntRange(2), help="SimPhones for the memory measurement"
)
@click.option(
    "--steps", default=200, show_default=True, type=click.IntRange(10), help="steps per throughput measurement"
)
@click.option(
    "--locale", default="en", show_default=True, type=click.Choice(["en", "zh"]), help="the phones' UI language"
)
def bench_sim(instances: int, steps: int, locale: str) -> None:
    """SimPhone memory per instance, cold start, steps/s (full-res PNG and agent resolution)."""
    from darwin.bench.sim import bench_sim as run

    result = run(instances=instances, steps=steps, locale=locale)
    table = Table(title=f"SimPhone benchmark (one process, one core, locale {locale})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    for name, value, target in result.rows():
        table.add_row(name, value, target)
    console.print(table)


@bench.command("view")
@click.option("--episodes", default=10_000, show_default=True, type=click.IntRange(1), help="episodes in the database")
@click.option("--steps", default=8, show_default=True, type=click.IntRange(1), help="steps per episode")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(1), help="requests per page (median)")
@click.option(
    "--dir",
    "run_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="where the database goes (default: a temporary folder, removed after)",
)
def bench_view_cmd(episodes: int, steps: int, repeats: int, run_dir: str | None) -> None:
    """darwin view's response times over a run database of many episodes (real HTTP, one local server)."""
    import tempfile
    from pathlib import Path

    from darwin.bench.view import bench_view

    with tempfile.TemporaryDirectory() as tmp:
        result = bench_view(Path(run_dir or tmp) / "run", episodes=episodes, steps=steps, repeats=repeats)
    table = Table(
        title=f"darwin view over {result.episodes:,} episodes / {result.steps:,} steps (built in {result.build_s:.1f} s)"
    )
    for column in ("request", "median", "target"):
        table.add_column(column, justify="left" if column == "request" else "right")
    for row in result.rows():
        table.add_row(*row)
    console.print(table)


@bench.command("adb")
@click.option(
    "--phones", default=16, show_default=True, type=click.IntRange(1, 256), help="phones served and driven at once"
)
@click.option(
    "--seconds", default=3.0, show_default=True, type=click.FloatRange(0.1), help="length of each measurement"
)
@click.option(
    "--adb-port",
    default=None,
    type=click.IntRange(1, 65535),
    help="use this adb server (default: a private one on a free port)",
)
@click.option(
    "--write",
    "write_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="write the figures to this file's '## ADB' section (e.g. docs/benchmarks.md)",
)
def bench_adb(phones: int, seconds: float, adb_port: int | None, write_path: str | None) -> None:
    """Phone commands/s and screenshot latency through a real adb server: darwin vs plain adbutils."""
    import shlex

    from darwin.bench.adb import run_adb_bench, update_benchmarks_md

    try:
        result = run_adb_bench(phones=phones, seconds=seconds, adb_port=adb_port)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    table = Table(title=f"ADB benchmark, one phone ({result.adb_version})")
    table.add_column("client")
    table.add_column("commands/s", justify="right")
    for name, value in result.commands_per_s.items():
        table.add_row(name, f"{value:.0f}")
    console.print(table)
    table = Table(title="full-resolution screenshot, one phone")
    for col in ("client", "median ms", "p95 ms"):
        table.add_column(col, justify="left" if col == "client" else "right")
    for name, (p50, p95) in result.screenshot_ms.items():
        table.add_row(name, f"{p50:.1f}", f"{p95:.1f}")
    console.print(table)
    table = Table(title=f"{phones} phones at once")
    for col in ("client", "per phone", "total"):
        table.add_column(col, justify="left" if col == "client" else "right")
    for name, (per, total) in result.many_commands_per_s.items():
        table.add_row(f"{name} (commands/s)", f"{per:.0f}", f"{total:.0f}")
    for name, (p50, p95, rate) in result.many_screenshot_ms.items():
        table.add_row(
            f"{name} (screenshots/s; p50 {p50:.1f} ms, p95 {p95:.1f} ms)", f"{rate:.1f}", f"{rate * phones:.1f}"
        )
    console.print(table)
    table = Table(title="CPU during the command runs (client, adb server and phones share this machine)")
    for col in ("run", "machine CPU idle", "client CPU per command"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for name, (idle, us) in result.cpu.items():
        table.add_row(name, f"{idle:.0f}%", f"{us:.0f} us")
    console.print(table)
    console.print(
        f"darwin vs plain adbutils per phone: {result.ratio():.1f}x (one phone), {result.many_ratio():.1f}x ({phones} phones); target >= 4x"
    )
    if write_path:
        command = f"darwin bench adb --phones {phones} --seconds {seconds:g} --write {shlex.quote(write_path)}"
        update_benchmarks_md(write_path, result.markdown(command))
        console.print(f"wrote the '## ADB' section of {write_path}")
