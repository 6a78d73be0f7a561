"""PrivateAdbServer: a server of this process's own, never shared, stopped without touching others."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from darwin.envs.adb_server import PrivateAdbServer, free_port

pytestmark = pytest.mark.skipif(
    shutil.which("adb") is None, reason="the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)"
)


def _devices(port: int) -> subprocess.CompletedProcess[str]:
    # Only called while a server is known to run there: on a dead port adb would start one.
    return subprocess.run(["adb", "-P", str(port), "devices"], capture_output=True, text=True, timeout=30)


def test_a_port_taken_by_another_server_is_refused_not_shared() -> None:
    with PrivateAdbServer() as first:
        assert first.running()
        assert _devices(first.port).returncode == 0
        with pytest.raises(RuntimeError, match=f"port {first.port}: the port already accepts connections"):
            PrivateAdbServer(port=first.port).start()
        assert first.running()  # the refused second owner did not stop the first


def test_stop_ends_only_its_own_server() -> None:
    with PrivateAdbServer() as first, PrivateAdbServer() as second:
        assert first.port != second.port
        second.stop()
        assert not second.running()
        assert first.running()
        assert _devices(first.port).returncode == 0
    assert not first.running()


def test_a_fixed_port_that_nothing_serves_is_used() -> None:
    port = free_port()
    with PrivateAdbServer(port=port) as server:
        assert server.port == port
        assert server.address == f"127.0.0.1:{port}"


def test_bad_arguments_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="port must be in 1..65535"):
        PrivateAdbServer(port=70000)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="apt-get install adb"):
        PrivateAdbServer()
