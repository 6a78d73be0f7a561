"""A private adb server that this process owns: its own port, its own process, stopped on exit.

Benchmarks, the paper-path stand-ins and the tests each need an adb server that nobody else
uses. ``adb -P PORT start-server`` is the wrong tool for that: when PORT already has a server
(another test process picked the same free port a moment earlier), it says "daemon started
successfully" and shares that server, and whichever owner finishes first kills it under the
other with ``kill-server``. :class:`PrivateAdbServer` runs ``adb -P PORT nodaemon server`` as
a child process instead: a port that is taken makes the child exit at once (adb cannot bind),
and the server tries the next free port; stopping it signals only its own process.

Example (needs the ``adb`` binary)::

    from darwin.envs.adb_server import PrivateAdbServer

    with PrivateAdbServer() as server:
        print(server.port)          # e.g. 40113; `adb -P 40113 devices` talks to it
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PrivateAdbServer", "free_port"]

_INSTALL_HINT = "the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)"


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (another process may take it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class PrivateAdbServer:
    """An adb server on a port of its own, run as this process's child.

    Args:
        port: the port to serve on; ``None`` picks a free one, and picks again if another
            process takes it before adb binds it. A given port that is taken is an error.
        adb: path of the ``adb`` binary; ``None`` looks it up on ``PATH``.
        attempts: how many free ports to try before giving up (only when ``port`` is None).
        timeout_s: how long one start may take before it counts as failed.
    """

    def __init__(
        self, port: int | None = None, adb: str | None = None, attempts: int = 5, timeout_s: float = 30.0
    ) -> None:
        self.adb = adb or shutil.which("adb")
        if self.adb is None:
            raise FileNotFoundError(_INSTALL_HINT)
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535, got {port}")
        self._fixed_port = port
        self.attempts = attempts if port is None else 1
        self.timeout_s = timeout_s
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir = tempfile.TemporaryDirectory(prefix="darwin-adb-server-")

    @property
    def address(self) -> str:
        """``host:port`` of the server, for ``$DARWIN_ADB_SERVER`` and ``AdbEnvConfig``."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return Path(self._log_dir.name) / "adb-server.log"

    def start(self) -> PrivateAdbServer:
        """Start the server; raises ``RuntimeError`` with adb's own log when it cannot."""
        if self._process is not None:
            raise RuntimeError(f"the adb server on port {self.port} is already running")
        failures: list[str] = []
        for _ in range(self.attempts):
            port = self._fixed_port or free_port()
            if self._start_on(port):
                return self
            failures.append(f"port {port}: {self.log_path.read_text(errors='replace').strip()[-600:]}")
        raise RuntimeError("could not start a private adb server:\n" + "\n".join(failures))

    def _start_on(self, port: int) -> bool:
        if _accepts(port):  # someone already serves it: never share a server
            with self.log_path.open("w") as log:
                log.write("the port already accepts connections")
            return False
        with self.log_path.open("wb") as log:
            process = subprocess.Popen(
                [self.adb, "-P", str(port), "nodaemon", "server"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:  # adb exits when it cannot bind its port
                return False
            if _accepts(port):
                self._process, self.port = process, port
                return True
            time.sleep(0.02)
        process.kill()
        process.wait(timeout=10)
        return False

    def stop(self) -> None:
        """Stop the server (only this object's process) and remove its log; safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self._log_dir.cleanup()

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> PrivateAdbServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
