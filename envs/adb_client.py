"""The adb server's smart-socket protocol, spoken directly: :class:`AdbServerClient`, one TCP
connection per command, a deadline on every call (part of :mod:`darwin.envs.adb`).
"""

from __future__ import annotations

import shlex
import socket
import struct
import time
from collections.abc import Sequence
from typing import NamedTuple

from darwin.envs.base import InfraError

# ======================================================================================
# The adb server protocol, fast and with deadlines
# ======================================================================================


class ShellOutput(NamedTuple):
    """Result of one shell v2 command: separate streams and the exit code."""

    stdout: bytes
    stderr: bytes
    exit_code: int


def _remaining(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise InfraError("deadline", f"{what}: deadline passed")
    return left


def _fail_cause(message: str) -> str:
    text = message.lower()
    if text.strip() == "closed":  # the device cut the stream before answering
        return "disconnect"
    if "not found" in text or "no devices" in text:
        return "not_found"
    if "offline" in text:
        return "offline"
    if "unauthorized" in text:
        return "unauthorized"
    return "adb_error"


class AdbServerClient:
    """A minimal client of one adb server (the ``adb start-server`` process), with deadlines.

    Every method takes an absolute ``deadline`` (``time.monotonic()`` seconds) and raises
    :class:`~darwin.envs.base.InfraError` (cause ``deadline``, ``adb_server``,
    ``not_found``, ``offline``, ``disconnect``, ``adb_error``...) instead of hanging or
    returning partial output.

    >>> client = AdbServerClient(port=1)           # nothing listens on port 1
    >>> try:
    ...     client.host_request("host:version", time.monotonic() + 1)
    ... except InfraError as exc:
    ...     print(exc.cause)
    adb_server
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 5037) -> None:
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        return f"AdbServerClient({self.host}:{self.port})"

    # -- plumbing ---------------------------------------------------------------------
    def _socket(self, deadline: float) -> socket.socket:
        timeout = _remaining(deadline, "connecting to the adb server")
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except TimeoutError:
            raise InfraError("deadline", f"connecting to the adb server at {self.host}:{self.port}") from None
        except OSError as exc:
            raise InfraError(
                "adb_server",
                f"cannot reach the adb server at {self.host}:{self.port} ({exc.strerror or exc}); "
                f"start it with `adb -P {self.port} start-server`",
            ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    @staticmethod
    def _recv_exact(sock: socket.socket, n: int, deadline: float, what: str) -> bytes:
        parts = []
        left = n
        while left:
            sock.settimeout(_remaining(deadline, what))
            try:
                chunk = sock.recv(left)
            except TimeoutError:
                raise InfraError("deadline", what) from None
            except OSError as exc:
                raise InfraError("disconnect", f"{what}: {exc}") from None
            if not chunk:
                raise InfraError("disconnect", f"{what}: connection closed after {n - left} of {n} bytes")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _request(self, sock: socket.socket, request: str, deadline: float) -> None:
        data = request.encode("utf-8")
        try:
            sock.sendall(b"%04x" % len(data) + data)
        except OSError as exc:
            raise InfraError("disconnect", f"sending {request[:60]!r} to the adb server: {exc}") from None
        status = self._recv_exact(sock, 4, deadline, f"waiting for the answer to {request[:80]!r}")
        if status == b"OKAY":
            return
        if status == b"FAIL":
            message = self._read_block(sock, deadline, request)
            raise InfraError(_fail_cause(message), f"adb server refused {request[:80]!r}: {message}")
        raise InfraError("adb_error", f"unexpected adb server reply {status!r} to {request[:80]!r}")

    def _read_block(self, sock: socket.socket, deadline: float, what: str) -> str:
        length = self._recv_exact(sock, 4, deadline, f"reading the reply to {what[:60]!r}")
        try:
            size = int(length, 16)
        except ValueError:
            raise InfraError("adb_error", f"bad length {length!r} in the reply to {what[:60]!r}") from None
        return self._recv_exact(sock, size, deadline, f"reading the reply to {what[:60]!r}").decode("utf-8", "replace")

    # -- host services ----------------------------------------------------------------
    def host_request(self, request: str, deadline: float, reply: bool = True) -> str:
        """Send a host service request (``host:version``, ``host:connect:ADDR``,
        ``host-serial:SERIAL:get-state``...) and return its reply block."""
        with self._socket(deadline) as sock:
            self._request(sock, request, deadline)
            return self._read_block(sock, deadline, request) if reply else ""

    def connect_device(self, address: str, deadline: float) -> str:
        """``adb connect ADDRESS``; raises unless the server says it is connected."""
        message = self.host_request(f"host:connect:{address}", deadline)
        if message.startswith(("connected to", "already connected to")):
            return message
        raise InfraError("connect_failed", f"adb connect {address}: {message.strip() or 'no reply'}")

    def disconnect_device(self, address: str, deadline: float) -> str:
        """``adb disconnect ADDRESS``; returns the server's message (never raises for an
        unknown device: it is already disconnected)."""
        try:
            return self.host_request(f"host:disconnect:{address}", deadline)
        except InfraError as exc:
            if exc.cause in ("not_found", "adb_error"):
                return exc.detail
            raise

    def device_state(self, serial: str, deadline: float) -> str:
        """``device``, ``offline``, ``unauthorized``... or ``missing`` if unknown."""
        try:
            return self.host_request(f"host-serial:{serial}:get-state", deadline).strip()
        except InfraError as exc:
            if exc.cause in ("not_found", "offline", "unauthorized"):
                return "missing" if exc.cause == "not_found" else exc.cause
            raise

    def devices(self, deadline: float) -> dict[str, str]:
        """``{serial: state}`` of every device the server knows (``adb devices``)."""
        text = self.host_request("host:devices", deadline)
        return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)

    # -- device services --------------------------------------------------------------
    def open_service(self, serial: str, service: str, deadline: float) -> socket.socket:
        """A socket to ``service`` on the device (after the server's OKAY), for streaming."""
        sock = self._socket(deadline)
        try:
            self._request(sock, f"host:transport:{serial}", deadline)
            self._request(sock, service, deadline)
        except BaseException:
            sock.close()
            raise
        return sock

    def shell(self, serial: str, argv: Sequence[str] | str, deadline: float, max_bytes: int = 64 << 20) -> ShellOutput:
        """Run a command with shell protocol v2 (separate stdout/stderr, exit code).

        ``argv`` is quoted argument by argument (:func:`shlex.quote`); a string is sent
        as is (only for commands you wrote yourself). A connection that ends before the
        exit code raises ``InfraError("disconnect")``: partial output is never returned.
        """
        command = argv if isinstance(argv, str) else " ".join(shlex.quote(a) for a in argv)
        with self.open_service(serial, f"shell,v2,raw:{command}", deadline) as sock:
            buf = bytearray()
            out: list[bytes] = []
            err: list[bytes] = []
            pos = 0
            total = 0
            what = f"reading the output of {command[:80]!r}"
            while True:
                while len(buf) - pos >= 5:
                    kind, length = struct.unpack_from("<BI", buf, pos)
                    if len(buf) - pos - 5 < length:
                        break
                    payload = bytes(buf[pos + 5 : pos + 5 + length])
                    pos += 5 + length
                    if kind == 1:
                        out.append(payload)
                    elif kind == 2:
                        err.append(payload)
                    elif kind == 3:
                        return ShellOutput(b"".join(out), b"".join(err), payload[0] if payload else 255)
                if pos:
                    del buf[:pos]
                    pos = 0
                sock.settimeout(_remaining(deadline, what))
                try:
                    chunk = sock.recv(1 << 18)
                except TimeoutError:
                    raise InfraError("deadline", what) from None
                except OSError as exc:
                    raise InfraError("disconnect", f"{what}: {exc}") from None
                if not chunk:
                    raise InfraError("disconnect", f"{what}: connection closed before the exit code")
                total += len(chunk)
                if total > max_bytes:
                    raise InfraError("adb_error", f"{what}: more than {max_bytes} bytes")
                buf += chunk

    def exec_out(self, serial: str, argv: Sequence[str], deadline: float, max_bytes: int = 64 << 20) -> bytes:
        """Run a command with ``exec:`` and return its raw stdout (no framing, no exit code:
        validate the bytes yourself)."""
        command = " ".join(shlex.quote(a) for a in argv)
        what = f"reading the output of exec:{command[:80]!r}"
        with self.open_service(serial, f"exec:{command}", deadline) as sock:
            chunks: list[bytes] = []
            total = 0
            while True:
                sock.settimeout(_remaining(deadline, what))
                try:
                    chunk = sock.recv(1 << 18)
                except TimeoutError:
                    raise InfraError("deadline", what) from None
                except OSError as exc:
                    raise InfraError("disconnect", f"{what}: {exc}") from None
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                total += len(chunk)
                if total > max_bytes:
                    raise InfraError("adb_error", f"{what}: more than {max_bytes} bytes")
