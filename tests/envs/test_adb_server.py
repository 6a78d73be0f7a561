"""PrivateAdbServer: a server of this process's own, never shared, stopped without touching others."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

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


def _wait(predicate, timeout_s: float = 15.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_killed_server_is_restarted_on_its_port_and_its_death_recorded(tmp_path) -> None:  # noqa: ANN001
    with PrivateAdbServer(log_dir=tmp_path) as server:
        port, first_pid = server.port, server.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        _wait(lambda: server.restarts == 1 and server.running())
        assert server.port == port and server.pid != first_pid
        assert _devices(port).returncode == 0  # the new server answers on the same port
        (death,) = server.deaths
        assert (death.port, death.pid, death.returncode) == (port, first_pid, -signal.SIGKILL)
        assert death.log_path.exists() and death.log_path != server.log_path
    assert not server.running()
    assert death.log_path.exists(), "a log_dir given by the caller is kept"


def test_wait_serving_returns_once_the_new_server_accepts() -> None:
    with PrivateAdbServer() as server:
        server.wait_serving()  # running: at once
        first_pid = server.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        _wait(lambda: len(server.deaths) == 1)  # the watchdog saw it (a killed process is reaped a moment later)
        server.wait_serving()
        assert server.running() and server.pid != first_pid and len(server.deaths) == 1
        assert _devices(server.port).returncode == 0


def test_wait_serving_raises_when_the_watchdog_gave_up() -> None:
    with PrivateAdbServer(max_restarts=0) as server:
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: len(server.deaths) == 1)
        with pytest.raises(RuntimeError, match="died 1 times"):
            server.wait_serving()
        assert server.gave_up is not None


def test_a_server_that_keeps_dying_is_given_up_on_loudly(caplog) -> None:  # noqa: ANN001
    with PrivateAdbServer(max_restarts=1) as server:
        for _ in range(2):
            pid = server.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            _wait(lambda pid=pid: server.pid not in (pid, None) or server.gave_up is not None)
        _wait(lambda: server.gave_up is not None)
        assert "died 2 times within 60 s" in (server.gave_up or "")
        assert not server.running() and server.restarts == 1
    assert "not restarting it" in caplog.text


def test_an_unsupervised_server_stays_dead() -> None:
    with PrivateAdbServer(supervise=False) as server:
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        _wait(lambda: not server.running())
        time.sleep(0.3)
        assert not server.running() and server.restarts == 0 and not server.deaths
