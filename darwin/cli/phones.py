"""``darwin phones serve``, ``darwin serve-policy`` and ``darwin paper-path``: the stand-ins that speak the real protocols (adb, an OpenAI-compatible server)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

console = Console()


# --------------------------------------------------------------------------------- phones
@click.group()
def phones() -> None:
    """Phones over ADB: serve SimPhones as ADB devices."""


@phones.command("serve")
@click.option("--count", default=1, show_default=True, type=click.IntRange(1, 1024), help="number of SimPhones")
@click.option(
    "--port-base",
    default=None,
    type=click.IntRange(1, 65535),
    help="phone i listens on PORT_BASE + i (default: free ports); avoid 5555-5585",
)
@click.option(
    "--faults",
    default="none",
    show_default=True,
    help="fault spec, e.g. 'drop=0.01,hang=0.005,slow=lognormal:0.05:0.5,stall=0.01:3,crash=0.002,reboot=0.001:keep' (docs/phones.md)",
)
@click.option("--seed", default=0, show_default=True, type=int, help="phone i is SimPhone(seed=SEED + i)")
@click.option("--no-perturb", is_flag=True, help="canonical look: no theme, wallpaper, order or pop-up perturbations")
@click.option(
    "--log-limit", default=100_000, show_default=True, type=click.IntRange(1), help="commands kept in memory per phone"
)
@click.option("--connect", is_flag=True, help="also `adb connect` every phone to the adb server on --adb-port")
@click.option(
    "--adb-port", default=5037, show_default=True, type=click.IntRange(1, 65535), help="adb server for --connect"
)
@click.option(
    "--ready-file",
    default=None,
    type=click.Path(dir_okay=False),
    help='write {"addresses": [...]} here once serving (for scripts)',
)
def phones_serve(
    count: int,
    port_base: int | None,
    faults: str,
    seed: int,
    no_perturb: bool,
    log_limit: int,
    connect: bool,
    adb_port: int,
    ready_file: str | None,
) -> None:
    """Serve SimPhones as ADB devices on 127.0.0.1 until interrupted (Ctrl-C / SIGTERM)."""
    import signal
    import threading

    from darwin.envs.adb_client import AdbServerClient
    from darwin.envs.base import InfraError
    from darwin.envs.faults import FaultSpec, FaultSpecError
    from darwin.envs.providers import SimFarm
    from darwin.envs.sim.perturb import PerturbationConfig

    try:
        spec = FaultSpec.parse(faults)
    except FaultSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from None
    if port_base is not None and port_base + count - 1 > 65535:
        raise click.BadParameter(f"ports {port_base}..{port_base + count - 1} exceed 65535", param_hint="--port-base")
    farm = SimFarm(
        count,
        seed=seed,
        faults=spec,
        port_base=port_base,
        perturbation=PerturbationConfig(enabled=not no_perturb),
        log_limit=log_limit,
        adb_port=adb_port,
    )
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
                    raise click.ClickException(
                        f"adb connect {address} failed: {exc} (is an adb server running on port {adb_port}?)"
                    ) from None
        table = Table(title=f"{count} SimPhone(s) served over ADB" + (f" with faults {spec}" if spec.enabled else ""))
        for col in ("phone", "address", "seed"):
            table.add_column(col)
        for i, address in enumerate(farm.addresses):
            table.add_row(f"sim-{i}", address, str(seed + i))
        console.print(table)
        console.print(
            "connect with: " + ("(done) " if connect else "") + f"adb connect {farm.addresses[0]}  ...  Ctrl-C stops."
        )
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


@click.command("serve-policy")
@click.option(
    "--checkpoint",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="a `darwin sft` warm start or any Qwen2-VL / Qwen2.5-VL checkpoint directory",
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--served-model-name", default="darwin-tiny", show_default=True)
@click.option(
    "--temperature",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.0, 100.0),
    help="the only temperature requests may ask for",
)
@click.option("--max-new-tokens", default=64, show_default=True, type=click.IntRange(1, 65536))
@click.option("--api-key-env", default=None, help="name of an environment variable holding the key clients must send")
def serve_policy(
    checkpoint: str,
    port: int,
    host: str,
    served_model_name: str,
    temperature: float,
    max_new_tokens: int,
    api_key_env: str | None,
) -> None:
    """Serve a checkpoint with vLLM's chat-completion protocol (token ids, log-probs, weight updates) on the CPU
    (docs/scale.md): a stand-in for vLLM when testing ServerPolicy without a GPU."""

    from darwin.models.factory import load_vlm
    from darwin.policies.local_policy_server import LocalPolicyServer, serve_forever

    key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not key:
        raise click.ClickException(f"--api-key-env {api_key_env}: the variable is not set")
    server = LocalPolicyServer(
        load_vlm(checkpoint),
        served_model_name=served_model_name,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        api_key=key,
        host=host,
        port=port,
    )
    console.print(f"serving {checkpoint} as {served_model_name!r} on http://{host}:{port} (Ctrl-C stops)")
    with contextlib.suppress(KeyboardInterrupt):
        serve_forever(server)


@click.command("paper-path")
@click.argument("experiment_file", default="examples/spa_bench.py", type=click.Path(dir_okay=False))
@click.option(
    "--preset", default="paper-miniature", show_default=True, help="the file's preset that reads the stand-ins"
)
@click.option(
    "--work-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="stand-ins and the run (default runs/paper-path-<time>)",
)
@click.option("--phones", default=2, show_default=True, type=click.IntRange(1, 64), help="SimPhones served over ADB")
@click.option(
    "--judge-success-rate",
    default=0.3,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="the judge stand-in's share of 'yes'",
)
@click.option("--resume", is_flag=True, help="continue the run in --work-dir from its last checkpoint")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="passed to darwin run")
def paper_path(
    experiment_file: str,
    preset: str,
    work_dir: str | None,
    phones: int,
    judge_success_rate: float,
    resume: bool,
    overrides: tuple[str, ...],
) -> None:
    """The paper preset in miniature: start stand-ins for what a laptop lacks (a tiny UI-TARS-1.5-format
    checkpoint, `darwin serve-policy` as the vLLM server, SimPhones over the adbd protocol behind a real adb
    server, an OpenAI-compatible judge), then `darwin run FILE --preset paper-miniature` against them: verl's
    actor and critic on 2 CPU workers (docs/scale.md)."""
    import subprocess
    import sys

    from darwin.miniature import PaperPathStandIns, StandInError

    work = Path(work_dir) if work_dir else Path("runs") / time.strftime("paper-path-%Y%m%d-%H%M%S")
    if resume and not (work / "run" / "checkpoint").is_dir():
        raise click.ClickException(f"--resume: {work / 'run'} has no checkpoint; pass the --work-dir of an earlier run")
    try:
        with PaperPathStandIns(work / "stand-ins", phones=phones, judge_success_rate=judge_success_rate) as stand_ins:
            console.print(
                f"stand-ins up: policy server {stand_ins.policy_url}, phones {', '.join(stand_ins.devices)}, "
                f"judge {stand_ins.judge.base_url}"
            )
            argv = [
                sys.executable,
                "-m",
                "darwin.cli",
                "run",
                experiment_file,
                "--preset",
                preset,
                "--run-dir",
                str(work / "run"),
            ]
            argv += ["--resume"] if resume else []
            argv += [item for o in overrides for item in ("--set", o)]
            code = subprocess.run(argv, env={**os.environ, **stand_ins.env()}).returncode
            console.print(
                f"the policy server serves weight version {stand_ins.served_weight_version()}; "
                f"the judge answered {stand_ins.judge.requests} requests; run in {work / 'run'}"
            )
    except StandInError as exc:
        raise click.ClickException(str(exc)) from None
    if code:
        raise SystemExit(code)
