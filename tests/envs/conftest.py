"""Shared fixtures for the phone tests: a private, supervised adb server for the whole session.

Tests that need the real ``adb`` binary take ``adb_server_port`` (or ``adb_server``) and are
skipped with a clear reason when it is missing. The server is this test process's own child
on a free port (never the developer's 5037, never shared with another test process), is
restarted by its watchdog if it dies (the death is reported as a warning with the tail of
its log, and the whole log is kept under pytest's base temp folder), and stops at the end of
the session.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator

import pytest

from darwin.envs.adb_server import PrivateAdbServer


@pytest.fixture(scope="session")
def adb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateAdbServer]:
    """A private adb server started for this test session (supervised; logs kept)."""
    if shutil.which("adb") is None:
        pytest.skip("the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)")
    with PrivateAdbServer(log_dir=tmp_path_factory.mktemp("adb-server")) as server:
        yield server
    for death in server.deaths:
        warnings.warn(
            f"the session's adb server (port {death.port}, pid {death.pid}) died with status {death.returncode} "
            f"and was restarted; its log: {death.log_path}\n{death.log_tail}",
            stacklevel=1,
        )


@pytest.fixture(scope="session")
def adb_server_port(adb_server: PrivateAdbServer) -> int:
    """Port of the session's private adb server."""
    return adb_server.port
