"""Shared fixtures for the phone tests: a private adb server for the whole session.

Tests that need the real ``adb`` binary take ``adb_server_port`` and are skipped with a
clear reason when it is missing. The server runs on a free port (never the developer's
5037) and is killed at the end of the session.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def adb_server_port() -> Iterator[int]:
    """Port of a private adb server started for this test session."""
    adb = shutil.which("adb")
    if adb is None:
        pytest.skip("the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)")
    port = free_port()
    try:
        subprocess.run([adb, "-P", str(port), "start-server"], check=True, capture_output=True, timeout=30)
        yield port
    finally:
        subprocess.run([adb, "-P", str(port), "kill-server"], capture_output=True, timeout=30)
