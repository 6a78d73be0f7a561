"""``darwin phones serve`` and ``darwin bench adb`` end to end (subprocesses, real adb)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.actions import OpenApp, Type
from darwin.bench.adb import run_adb_bench, update_benchmarks_md
from darwin.cli.main import main
from darwin.envs.adb import AdbPhoneEnv
from darwin.envs.adb_config import AdbEnvConfig

pytestmark = pytest.mark.timeout(180)


def test_serve_rejects_a_bad_fault_spec() -> None:
    result = CliRunner().invoke(main, ["phones", "serve", "--faults", "drop=2"])
    assert result.exit_code == 2
    assert "--faults" in result.output and "not within 0..1" in result.output


def test_serve_serves_phones_until_terminated(adb_server_port: int, tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "darwin.cli",
            "phones",
            "serve",
            "--count",
            "2",
            "--seed",
            "5",
            "--faults",
            "slow=lognormal:0.001:0.1",
            "--ready-file",
            str(ready),
            "--connect",
            "--adb-port",
            str(adb_server_port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "serve did not get ready"
            time.sleep(0.05)
        addresses = json.loads(ready.read_text())["addresses"]
        assert len(addresses) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
        env = AdbPhoneEnv(addresses[1], AdbEnvConfig.for_sim(adb_port=adb_server_port))
        env.execute(OpenApp(app="Chrome"))
        env.execute(Type(content="served; ok"))
        state = env.probe_state()
        assert state is not None and state["foreground"] == "chrome"
        assert env.screenshot((252, 560)).shape == (560, 252, 3)
        env.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, out
    assert "2 SimPhone(s) served over ADB" in out


def test_update_benchmarks_md_keeps_other_sections(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.md"
    update_benchmarks_md(path, "## ADB\n\nfirst\n")
    assert path.read_text() == "# Benchmarks\n\n## ADB\n\nfirst\n"
    path.write_text("# Benchmarks\n\n## SimPhone\n\nsim figures\n\n## ADB\n\nfirst\n\n## Later\n\nkeep me\n")
    update_benchmarks_md(path, "## ADB\n\nsecond\n")
    assert path.read_text() == "# Benchmarks\n\n## SimPhone\n\nsim figures\n\n## ADB\n\nsecond\n\n## Later\n\nkeep me\n"


def test_bench_adb_runs(adb_server_port: int) -> None:
    result = run_adb_bench(phones=2, seconds=0.2, adb_port=adb_server_port)
    assert result.commands_per_s["darwin AdbPhoneEnv.shell"] > 0
    assert result.ratio() > 1.5  # the real figure (>= 4x) is in docs/benchmarks.md
    text = result.markdown("darwin bench adb --phones 2 --seconds 0.2")
    assert text.startswith("## ADB") and "adbutils shell2(v2=True)" in text
