"""A private adb server that this process owns: its own port, its own process, watched,
restarted when it dies, and stopped on exit.

Benchmarks, runs, the paper-path stand-ins and the tests each need an adb server that nobody
else uses. ``adb -P PORT start-server`` is the wrong tool for that: when PORT already has a
server (another test process picked the same free port a moment earlier), it says "daemon
started successfully" and shares that server, and whichever owner finishes first kills it
under the other with ``kill-server``. :class:`PrivateAdbServer` runs ``adb -P PORT nodaemon
server`` as a child process instead: a port that is taken makes the child exit at once (adb
cannot bind), and the server tries the next free port; stopping it signals only its own
process.

The adb server is one process between darwin and every phone, so it is supervised: a
watchdog thread notices when it exits (a crash, an OOM kill, a ``kill -9``), records the
death (exit status and the tail of its log, which is kept), and starts a new server on the
same port, so every phone's address stays valid. The phones see their commands fail, end the
episodes in flight as infrastructure truncations with cause ``adb_server``, and reconnect to
the new server (:class:`~darwin.envs.adb.AdbPhoneEnv`). A server that dies again and again
(``max_restarts`` within ``restart_window_s``) is given up on, loudly.

Example (needs the ``adb`` binary)::

    from darwin.envs.adb_server import PrivateAdbServer

    with PrivateAdbServer() as server:
        print(server.port)          # e.g. 40113; `adb -P 40113 devices` talks to it
        print(server.restarts)      # 0 until the server dies and is started again
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AdbServerDeath", "PrivateAdbServer", "free_port"]

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class AdbServerDeath:
    """One unexpected exit of a supervised adb server."""

    port: int
    pid: int
    returncode: int
    """The exit status (negative: killed by that signal, e.g. -9)."""
    at: float
    """``time.time()`` when the watchdog saw it."""
    log_path: Path
    """The dead server's whole log (kept until :meth:`PrivateAdbServer.stop`, or for good with ``log_dir``)."""
    log_tail: str
    """The last lines of that log."""


class PrivateAdbServer:
    """An adb server on a port of its own, run as this process's child and supervised.

    Args:
        port: the port to serve on; ``None`` picks a free one, and picks again if another
            process takes it before adb binds it. A given port that is taken is an error.
        adb: path of the ``adb`` binary; ``None`` looks it up on ``PATH``.
        attempts: how many free ports to try before giving up (only when ``port`` is None).
        timeout_s: how long one start may take before it counts as failed.
        supervise: watch the server and start a new one on the same port when it dies.
        max_restarts: give up after this many deaths within ``restart_window_s``.
        restart_window_s: see ``max_restarts``.
        log_dir: where the server's logs go (one file per server started, kept after
            :meth:`stop`); ``None``: a temporary folder removed at :meth:`stop`.
        poll_s: how often the watchdog looks at the process.
    """

    def __init__(
        self,
        port: int | None = None,
        adb: str | None = None,
        attempts: int = 5,
        timeout_s: float = 30.0,
        *,
        supervise: bool = True,
        max_restarts: int = 5,
        restart_window_s: float = 60.0,
        log_dir: str | Path | None = None,
        poll_s: float = 0.1,
    ) -> None:
        adb_path = adb or shutil.which("adb")
        if adb_path is None:
            raise FileNotFoundError(_INSTALL_HINT)
        self.adb: str = adb_path
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535, got {port}")
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        self._fixed_port = port
        self.attempts = attempts if port is None else 1
        self.timeout_s = timeout_s
        self.supervise = supervise
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.poll_s = poll_s
        self.port = 0
        self.deaths: list[AdbServerDeath] = []
        """Every unexpected exit so far, oldest first."""
        self.gave_up: str | None = None
        """Why the watchdog stopped restarting the server (None while it supervises)."""
        self._process: subprocess.Popen[bytes] | None = None
        self._temp_dir: tempfile.TemporaryDirectory[str] | None = None
        if log_dir is None:
            self._temp_dir = tempfile.TemporaryDirectory(prefix="darwin-adb-server-")
            log_dir = self._temp_dir.name
        self._log_dir = Path(log_dir)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._starts = 0
        self._restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watchdog: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the server, for ``$DARWIN_ADB_SERVER`` and ``AdbEnvConfig``."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The log of the server running now (or of the last one started)."""
        return self._log_dir / f"adb-server-{self._starts}.log"

    @property
    def restarts(self) -> int:
        """How many times the watchdog started a new server after one died."""
        return self._restarts

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def start(self) -> PrivateAdbServer:
        """Start the server (and its watchdog); raises ``RuntimeError`` with adb's own log when it cannot."""
        if self._process is not None:
            raise RuntimeError(f"the adb server on port {self.port} is already running")
        failures: list[str] = []
        for _ in range(self.attempts):
            port = self._fixed_port or free_port()
            if self._start_on(port):
                if self.supervise:
                    self._stopping.clear()
                    self._watchdog = threading.Thread(
                        target=self._watch, name=f"adb-server-{self.port}-watchdog", daemon=True
                    )
                    self._watchdog.start()
                return self
            failures.append(f"port {port}: {self.log_path.read_text(errors='replace').strip()[-600:]}")
        raise RuntimeError("could not start a private adb server:\n" + "\n".join(failures))

    def _start_on(self, port: int) -> bool:
        self._starts += 1
        if _accepts(port):  # someone already serves it: never share a server
            self.log_path.write_text("the port already accepts connections")
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

    # -- supervision ------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stopping.wait(self.poll_s):
            with self._lock:
                process = self._process
                if process is None or process.poll() is None:
                    continue
                self._died(process)
                if self.gave_up is not None:
                    return

    def _died(self, process: subprocess.Popen[bytes]) -> None:
        """The server exited on its own (called with the lock held): record it and start another."""
        assert process.returncode is not None
        tail = "\n".join(self.log_path.read_text(errors="replace").strip().splitlines()[-20:])
        death = AdbServerDeath(self.port, process.pid, process.returncode, time.time(), self.log_path, tail)
        self.deaths.append(death)
        self._process = None
        recent = [d for d in self.deaths if d.at >= death.at - self.restart_window_s]
        if len(recent) > self.max_restarts:
            self.gave_up = (
                f"the adb server on port {self.port} died {len(recent)} times within {self.restart_window_s:g} s "
                f"(last exit status {death.returncode}); logs in {self._log_dir}"
            )
            logger.error("%s; not restarting it. Last log lines:\n%s", self.gave_up, tail)
            return
        logger.warning(
            "the adb server on port %d (pid %d) exited with status %d; starting a new one on the same port "
            "(log of the dead one: %s). Last log lines:\n%s",
            self.port,
            process.pid,
            process.returncode,
            death.log_path,
            tail or "(empty)",
        )
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline and not self._stopping.is_set():
            # The port can stay taken for a moment (a client of the dead server on it): retry.
            if self._start_on(self.port):
                self._restarts += 1
                logger.warning("a new adb server (pid %s) serves port %d", self.pid, self.port)
                return
            time.sleep(0.2)
        if not self._stopping.is_set():
            log = self.log_path.read_text(errors="replace")[-600:]
            self.gave_up = f"no new adb server could start on port {self.port} within {self.timeout_s:g} s: {log}"
            logger.error("%s", self.gave_up)

    # -- stopping ---------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the watchdog and the server (only this object's process); safe to call twice.
        A temporary log folder is removed; a ``log_dir`` given by the caller is kept."""
        self._stopping.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=self.timeout_s + 5)
        self._watchdog = None
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._temp_dir is not None:
            self._temp_dir.cleanup()

    def running(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    def wait_serving(self, timeout_s: float | None = None) -> None:
        """Return once a server serves the port: at once while it runs, or, after it died, when the
        watchdog's new one accepts connections (a new server knows no devices: reconnect them).
        Raises ``RuntimeError`` when the watchdog gave up, or when nothing serves within
        ``timeout_s`` (default: one start's timeout plus the watchdog's poll)."""
        limit = self.timeout_s + self.poll_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.gave_up is not None:
                raise RuntimeError(self.gave_up)
            if self.running() and _accepts(self.port):
                return
            time.sleep(0.02)
        raise RuntimeError(f"no adb server serves port {self.port} after {limit:g} s; logs in {self._log_dir}")

    def __enter__(self) -> PrivateAdbServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
