"""The ``darwin`` command line."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(message)s", handlers=[RichHandler(console=console, show_path=False)])


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size; write WIDTHxHEIGHT, e.g. 252x560") from None
    if not (0 < w <= 1080 and 0 < h <= 2400):
        raise click.BadParameter(f"{text!r} must fit in 1080x2400")
    return w, h


@click.group()
@click.option("--log-level", default="warning", type=click.Choice(["debug", "info", "warning", "error"]), show_default=True)
def main(log_level: str) -> None:
    """Darwin: train mobile GUI agents with online multi-turn RL."""
    _setup_logging(log_level)


# ---------------------------------------------------------------------------------- tasks
@main.group()
def tasks() -> None:
    """The task registry."""


@tasks.command("list")
@click.option("--set", "set_name", default=None, help="only tasks of this set (base8, paper16, cycle8)")
def tasks_list(set_name: str | None) -> None:
    """Show the registered tasks."""
    from darwin.tasks import TASK_SETS, registry, task_set

    chosen = task_set(set_name) if set_name else list(registry().values())
    table = Table(title=f"tasks ({set_name or 'all'})")
    table.add_column("id", no_wrap=True)
    for col in ("app", "instruction", "golden", "phases", "sets"):
        table.add_column(col)
    for t in chosen:
        phases = "+".join(p.value for p, *_ in t.phases())
        sets = ",".join(name for name, ids in TASK_SETS.items() if t.id in ids)
        table.add_row(t.id, t.app, t.instruction, str(t.golden_steps or ""), phases, sets)
    console.print(table)


# ----------------------------------------------------------------------------------- eval
AGENT_KINDS = ("oracle", "random")


def _actor_factory(spec: str, seed: int) -> Callable[[int], object]:
    from darwin.agents.scripted import OracleActor, RandomActor

    kind = spec.split(":", 1)[0]
    if kind == "oracle":
        return lambda i: OracleActor()
    if kind == "random":
        return lambda i: RandomActor(seed=seed * 1000 + i)
    raise click.BadParameter(f"unknown agent {spec!r}; available: {', '.join(AGENT_KINDS)}", param_hint="--agent")


@main.command("eval")
@click.option("--agent", "agent_spec", required=True, help="oracle | random")
@click.option("--phones", default=4, show_default=True, type=click.IntRange(1, 512), help="SimPhones run concurrently")
@click.option("--tasks", "task_names", default="base8", show_default=True, help="comma-separated task ids, set names or task files")
@click.option("--episodes", default=1, show_default=True, type=click.IntRange(1), help="episodes per task")
@click.option("--seed", default=0, show_default=True, type=int, help="phone seeds are seed, seed+1, ...")
@click.option("--run-dir", default=None, type=click.Path(file_okay=False), help="where run.db and screenshots go (default runs/eval-<time>)")
@click.option("--db", default=None, help="SQLAlchemy URL instead of <run-dir>/run.db")
@click.option("--observation-size", default="252x560", show_default=True, callback=lambda c, p, v: _size(v), help="screenshot size given to the agent")
@click.option("--no-perturb", is_flag=True, help="canonical look: no theme, wallpaper, order or pop-up perturbations")
def eval_cmd(agent_spec: str, phones: int, task_names: str, episodes: int, seed: int, run_dir: str | None, db: str | None, observation_size: tuple[int, int], no_perturb: bool) -> None:
    """Evaluate an agent on SimPhones; prints success per task and overall."""
    from darwin.envs.sim import PerturbationConfig
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.evaluate import evaluate
    from darwin.store import RunStore
    from darwin.tasks import resolve_tasks
    from darwin.types import TaskDefinitionError
    from darwin.workflows import LifecycleWorkflow, StepConfig

    make_actor = _actor_factory(agent_spec, seed)
    try:
        chosen = resolve_tasks([n.strip() for n in task_names.split(",") if n.strip()])
    except (KeyError, TaskDefinitionError) as exc:
        raise click.BadParameter(str(exc).strip("'\""), param_hint="--tasks") from None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_path = Path(run_dir or f"runs/eval-{stamp}")
    store = RunStore(db, screenshot_dir=run_path / "screenshots") if db else RunStore.for_run_dir(run_path)
    perturbation = PerturbationConfig(enabled=not no_perturb)
    envs = [SimPhoneEnv(seed=seed + i, perturbation=perturbation, name=f"sim-{seed + i}") for i in range(phones)]
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=observation_size))
    run_id = store.start_run(f"eval {agent_spec}", config=None)
    total = len(chosen) * episodes
    started = time.perf_counter()
    with Progress(TextColumn("[bold]eval[/] {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=False) as progress:
        bar = progress.add_task(f"{agent_spec} on {phones} phones", total=total)
        report = asyncio.run(evaluate(chosen, envs, make_actor, episodes, workflow, store, run_id, on_episode=lambda t: progress.advance(bar)))
    elapsed = time.perf_counter() - started
    table = Table(title=f"{agent_spec}: success per task ({episodes} episode(s) each)")
    table.add_column("task", no_wrap=True)
    for col in ("success", "episodes", "infra", "unverified", "errors", "mean steps"):
        table.add_column(col, justify="right")
    for task_id, score in [*report.per_task.items(), ("overall", report.overall)]:
        rate = score.success_rate
        mean_steps = report.mean_steps(None if task_id == "overall" else task_id)
        table.add_row(task_id, "-" if rate is None else f"{100 * rate:.1f}%", str(score.episodes), str(score.infra_truncated), str(score.unverified), str(score.errors), f"{mean_steps:.1f}")
    console.print(table)
    steps = sum(len(t) for t in report.trajectories)
    console.print(f"{steps} steps in {elapsed:.1f}s ({steps / max(elapsed, 1e-9):.1f} steps/s); run {run_id} stored in {store.url.render_as_string(hide_password=True)}")
    store.close()


# ---------------------------------------------------------------------------------- bench
@main.group()
def bench() -> None:
    """Benchmarks that back docs/benchmarks.md."""


@bench.command("rollout")
@click.option("--phones", "phone_counts", default="16,32", show_default=True, help="phone counts for async vs sync")
@click.option("--scaling", default="8,16,32,64", show_default=True, help="phone counts for the async scaling table")
@click.option("--seconds", default=20.0, show_default=True, type=click.FloatRange(1.0), help="run time per configuration")
@click.option("--time-scale", default=0.5, show_default=True, type=click.FloatRange(0.001), help="multiplies every phone latency")
def bench_rollout_cmd(phone_counts: str, scaling: str, seconds: float, time_scale: float) -> None:
    """Async vs sync rollout under heavy-tailed phone latency (env steps/s, policy idle)."""
    from darwin.bench_rollout import LatencyModel, bench_rollout

    def counts(text: str) -> list[int]:
        try:
            return [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"{text!r} is not a comma-separated list of phone counts") from None

    latency = LatencyModel(scale=time_scale)
    rows = bench_rollout(counts(phone_counts), counts(scaling), seconds, latency)
    table = Table(title=f"rollout: lognormal latency (median {latency.median_s * time_scale:.2f}s, sigma {latency.sigma}) + {latency.stall_p:.0%} stalls of {latency.stall_s * time_scale:.1f}s")
    for col in ("phones", "mode", "env steps/s", "ideal N/latency", "% of ideal", "policy idle", "mean batch"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r.phones), r.mode, f"{r.steps_per_s:.1f}", f"{r.ideal_steps_per_s:.1f}", f"{100 * r.efficiency:.1f}%", f"{100 * r.idle_fraction:.1f}%", f"{r.mean_batch:.2f}")
    console.print(table)
    for n in counts(phone_counts):
        by_mode = {r.mode: r for r in rows if r.phones == n and r.mode in ("async", "sync")}
        if len(by_mode) == 2:
            console.print(f"{n} phones: async / sync = {by_mode['async'].steps_per_s / max(by_mode['sync'].steps_per_s, 1e-9):.2f}x")


@bench.command("sim")
@click.option("--instances", default=64, show_default=True, type=click.IntRange(2), help="SimPhones for the memory measurement")
@click.option("--steps", default=200, show_default=True, type=click.IntRange(10), help="steps per throughput measurement")
def bench_sim(instances: int, steps: int) -> None:
    """SimPhone memory per instance, cold start, steps/s (full-res PNG and agent resolution)."""
    from darwin.bench import bench_sim as run

    result = run(instances=instances, steps=steps)
    table = Table(title="SimPhone benchmark (one process, one core)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    for name, value, target in result.rows():
        table.add_row(name, value, target)
    console.print(table)


@bench.command("adb")
@click.option("--phones", default=16, show_default=True, type=click.IntRange(1, 256), help="phones served and driven at once")
@click.option("--seconds", default=3.0, show_default=True, type=click.FloatRange(0.1), help="length of each measurement")
@click.option("--adb-port", default=None, type=click.IntRange(1, 65535), help="use this adb server (default: a private one on a free port)")
@click.option("--write", "write_path", default=None, type=click.Path(dir_okay=False), help="write the figures to this file's '## ADB' section (e.g. docs/benchmarks.md)")
def bench_adb(phones: int, seconds: float, adb_port: int | None, write_path: str | None) -> None:
    """Phone commands/s and screenshot latency through a real adb server: darwin vs plain adbutils."""
    import shlex

    from darwin.bench_adb import run_adb_bench, update_benchmarks_md

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
        table.add_row(f"{name} (screenshots/s; p50 {p50:.1f} ms, p95 {p95:.1f} ms)", f"{rate:.1f}", f"{rate * phones:.1f}")
    console.print(table)
    table = Table(title="CPU during the command runs (client, adb server and phones share this machine)")
    for col in ("run", "machine CPU idle", "client CPU per command"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for name, (idle, us) in result.cpu.items():
        table.add_row(name, f"{idle:.0f}%", f"{us:.0f} us")
    console.print(table)
    console.print(f"darwin vs plain adbutils per phone: {result.ratio():.1f}x (one phone), {result.many_ratio():.1f}x ({phones} phones); target >= 4x")
    if write_path:
        command = f"darwin bench adb --phones {phones} --seconds {seconds:g} --write {shlex.quote(write_path)}"
        update_benchmarks_md(write_path, result.markdown(command))
        console.print(f"wrote the '## ADB' section of {write_path}")


# --------------------------------------------------------------------------------- phones
@main.group()
def phones() -> None:
    """Phones over ADB: serve SimPhones as ADB devices."""


@phones.command("serve")
@click.option("--count", default=1, show_default=True, type=click.IntRange(1, 1024), help="number of SimPhones")
@click.option("--port-base", default=None, type=click.IntRange(1, 65535), help="phone i listens on PORT_BASE + i (default: free ports); avoid 5555-5585")
@click.option("--faults", default="none", show_default=True, help="fault spec, e.g. 'drop=0.01,hang=0.005,slow=lognormal:0.05:0.5,stall=0.01:3,crash=0.002,reboot=0.001:keep' (docs/phones.md)")
@click.option("--seed", default=0, show_default=True, type=int, help="phone i is SimPhone(seed=SEED + i)")
@click.option("--no-perturb", is_flag=True, help="canonical look: no theme, wallpaper, order or pop-up perturbations")
@click.option("--log-limit", default=100_000, show_default=True, type=click.IntRange(1), help="commands kept in memory per phone")
@click.option("--connect", is_flag=True, help="also `adb connect` every phone to the adb server on --adb-port")
@click.option("--adb-port", default=5037, show_default=True, type=click.IntRange(1, 65535), help="adb server for --connect")
@click.option("--ready-file", default=None, type=click.Path(dir_okay=False), help="write {\"addresses\": [...]} here once serving (for scripts)")
def phones_serve(count: int, port_base: int | None, faults: str, seed: int, no_perturb: bool, log_limit: int, connect: bool, adb_port: int, ready_file: str | None) -> None:
    """Serve SimPhones as ADB devices on 127.0.0.1 until interrupted (Ctrl-C / SIGTERM)."""
    import json
    import signal
    import threading

    from darwin.envs.adb import AdbServerClient
    from darwin.envs.base import InfraError
    from darwin.envs.faults import FaultSpec, FaultSpecError
    from darwin.envs.providers import SimFarm
    from darwin.envs.sim import PerturbationConfig

    try:
        spec = FaultSpec.parse(faults)
    except FaultSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from None
    if port_base is not None and port_base + count - 1 > 65535:
        raise click.BadParameter(f"ports {port_base}..{port_base + count - 1} exceed 65535", param_hint="--port-base")
    farm = SimFarm(count, seed=seed, faults=spec, port_base=port_base, perturbation=PerturbationConfig(enabled=not no_perturb), log_limit=log_limit, adb_port=adb_port)
    try:
        farm.start()
    except OSError as exc:
        raise click.ClickException(f"{exc}; pick another --port-base or omit it for free ports") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if connect:
            client = AdbServerClient(port=adb_port)
            for address in farm.addresses:
                try:
                    client.connect_device(address, time.monotonic() + 10)
                except InfraError as exc:
                    raise click.ClickException(f"adb connect {address} failed: {exc} (is an adb server running on port {adb_port}?)") from None
        table = Table(title=f"{count} SimPhone(s) served over ADB" + (f" with faults {spec}" if spec.enabled else ""))
        for col in ("phone", "address", "seed"):
            table.add_column(col)
        for i, address in enumerate(farm.addresses):
            table.add_row(f"sim-{i}", address, str(seed + i))
        console.print(table)
        console.print("connect with: " + ("(done) " if connect else "") + f"adb connect {farm.addresses[0]}  ...  Ctrl-C stops.")
        if ready_file:
            Path(ready_file).write_text(json.dumps({"addresses": farm.addresses}))
        stop.wait()
    finally:
        if connect:
            client = AdbServerClient(port=adb_port)
            for address in farm.addresses:
                try:
                    client.disconnect_device(address, time.monotonic() + 5)
                except InfraError as exc:
                    console.print(f"adb disconnect {address}: {exc}")
        farm.stop()


if __name__ == "__main__":
    main()
