"""``darwin bench``: the click group of every benchmark (docs/benchmarks.md records the commands).

    darwin bench sim | adb | ray | rollout | model | policy | learner --help

Each command imports its benchmark module when it runs (torch, Ray and adb stay out of
``darwin --help``); ``learner`` lives in :mod:`darwin.cli.bench_learner`;
:mod:`darwin.cli.main` adds the group to ``darwin``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import click
from rich.console import Console
from rich.table import Table

from darwin.cli.bench_learner import bench_learner
from darwin.cli.common import parse_int_list, parse_size

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["bench"]

console = Console()


@click.group()
def bench() -> None:
    """Benchmarks that back docs/benchmarks.md."""


bench.add_command(bench_learner)


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
        table.add_row(*r.cells())
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
        table.add_row(*r.cells())
    console.print(table)
    hop = Table(title="the Ray hop: mean per call, one phone, calls in sequence")
    for col in ("call", "direct ms", "via Ray ms", "overhead ms"):
        hop.add_column(col, justify="right")
    for h in hops:
        hop.add_row(*h.cells())
    console.print(hop)
    _echo_json_lines([*rows, *hops])


def _echo_json_lines(results: Sequence[DataclassInstance]) -> None:
    """One JSON line per result (machine-readable; docs/benchmarks.md quotes them)."""
    from darwin.bench.results import json_lines

    for line in json_lines(results):
        click.echo(line)


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
    _echo_json_lines(
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
    _echo_json_lines(
        benchmark(
            TinyVLMConfig.preset(preset, family=family),
            sizes,
            new_tokens=new_tokens,
            repeats=repeats,
            device=device,
        )
    )


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


@bench.command("reader")
@click.option(
    "--reader",
    "reader_name",
    default="ocr",
    show_default=True,
    help="a pixel reader: ocr, or the import path of a Reader class (darwin.readers)",
)
@click.option(
    "--size", default="504x1120", show_default=True, help="the screenshot size WxH read (the agent's resolution)"
)
@click.option("--locales", default="en,zh", show_default=True, help="comma-separated SimPhone locales (en, zh)")
def bench_reader_cmd(reader_name: str, size: str, locales: str) -> None:
    """A reader against SimPhone's own elements on the launcher and every app's first screen:
    word recall, box IoU, centre hits, ms per screen cold / warm / cached (docs/benchmarks.md)."""
    from darwin.bench.reader import bench_reader
    from darwin.components import ComponentError, ComponentSpec, build_component
    from darwin.readers.base import Reader

    try:
        width, height = (int(v) for v in size.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"{size!r} is not WxH, e.g. 504x1120", param_hint="--size") from None
    if not (16 <= width <= 4096 and 16 <= height <= 4096):
        raise click.BadParameter(f"{size} must lie between 16 and 4096 pixels a side", param_hint="--size")
    try:
        reader = build_component("reader", ComponentSpec(name=reader_name))
    except ComponentError as exc:
        raise click.BadParameter(str(exc), param_hint="--reader") from None
    assert isinstance(reader, Reader)
    if reader.needs_phone or not reader.reads:
        raise click.BadParameter(
            f"{reader_name!r} does not read pixels; the benchmark compares a pixel reader (ocr) with the elements",
            param_hint="--reader",
        )
    try:
        results = bench_reader(reader, (width, height), tuple(v.strip() for v in locales.split(",") if v.strip()))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--locales") from None
    table = Table(title=f"reader {reader.cache_key} at {width}x{height} against SimPhone's elements (seed 0)")
    for column in (
        "locale",
        "screens",
        "word recall",
        "box IoU (median)",
        "centre hits",
        "ms cold",
        "ms warm",
        "ms cached",
        "elements ms",
    ):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r.locale,
            str(r.screens),
            f"{100 * r.recall:.1f}% ({r.words_read}/{r.words})",
            f"{r.iou_median:.2f}",
            f"{100 * r.centre_hits:.1f}% of {r.matched}",
            "-" if not r.cold_ms else f"{r.cold_ms:.0f}",
            f"{r.warm_ms:.0f}",
            f"{r.cached_ms:.1f}",
            f"{r.elements_ms:.1f}",
        )
    console.print(table)
    for r in results:
        if r.missed:
            console.print(f"{r.locale} words not read: {', '.join(r.missed)}", highlight=False, soft_wrap=True)


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
