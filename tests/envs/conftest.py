"""Shared fixtures for the phone tests: a private adb server for the whole session.

Tests that need the real ``adb`` binary take ``adb_server_port`` and are skipped with a
clear reason when it is missing. The server is this test process's own child on a free port
(never the developer's 5037, never shared with another test process) and stops at the end of
the session.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from darwin.envs.adb_server import PrivateAdbServer


@pytest.fixture(scope="session")
def adb_server_port() -> Iterator[int]:
    """Port of a private adb server started for this test session."""
    if shutil.which("adb") is None:
        pytest.skip("the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)")
    with PrivateAdbServer() as server:
        yield server.port
