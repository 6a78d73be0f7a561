"""Serve simulated phones as real ADB devices over the adbd wire protocol.

This module speaks the *device* side of the ADB transport protocol (what ``adbd``
speaks on a phone) on TCP ports of ``127.0.0.1``, so that the real ``adb`` server
accepts a simulated phone with ``adb connect 127.0.0.1:PORT`` and ``adbutils`` (or the
``adb`` command line) drives it like a phone. The phone itself is a pluggable
:class:`DeviceBackend`: anything with ``serial_props`` and a blocking
``run(argv, raw_command) -> ShellResult`` method.

Served: ``CNXN`` without ``AUTH``; ``OPEN``/``OKAY``/``WRTE``/``CLSE`` streams with flow
control, several streams per connection; the services ``shell:<cmd>`` (legacy),
``shell,v2[,raw|,pty]:<cmd>`` (shell protocol v2 with exit code) and ``exec:<cmd>``.
Every other service (``sync:``, ``reverse:``, ``framebuffer:``...) is refused with
``CLSE``. Command strings are split into argv with POSIX ``sh`` quoting rules
(:func:`parse_command`); ``;``, ``&&``, ``||``, newlines and ``$?`` are supported, any
other shell syntax (pipes, redirections, ``$VAR``...) gets a clear error and exit code 2.
The shell builtins ``echo`` (with ``-n``), ``true``, ``false`` and ``:`` run in the server;
every other simple command goes to the backend. Every command is recorded as received in
:attr:`AdbdServer.command_log`.

Example (needs the ``adb`` binary; adbutils talks to the adb server on 5037 here)::

    import adbutils
    from darwin.loop_thread import LoopThread
from darwin.envs.sim.adbd import AdbdFarm, ShellResult

    class Say:
        serial_props = {"ro.product.model": "Say"}

        def run(self, argv, raw_command):
            if argv[0] != "say":
                return ShellResult(stderr=f"{argv[0]}: not found\\n".encode(), exit_code=127)
            return ShellResult(stdout=(" ".join(argv[1:]) + "\\n").encode())

    with AdbdFarm([Say(), Say()]) as farm:
        adb = adbutils.AdbClient(host="127.0.0.1", port=5037)
        for address in farm.addresses:
            print(adb.connect(address, timeout=10))       # "connected to 127.0.0.1:..."
        d = adb.device(farm.addresses[0])
        print(d.shell2(["say", "a b; c"], v2=True))       # returncode=0, stdout 'a b; c\\n'
        print(farm.servers[0].command_log[-1].argv)       # ('say', 'a b; c')
        for address in farm.addresses:
            adb.disconnect(address)

The module is split by job: the wire protocol's numbers (:mod:`darwin.envs.sim.adbd_wire`), the
backend interface and records (:mod:`darwin.envs.sim.adbd_backend`), the ``sh`` subset
(:mod:`darwin.envs.sim.adbd_shell`), one connection's framing and streams
(:mod:`darwin.envs.sim.adbd_transport`); this module is the server and the farm.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Sequence

from darwin.envs.sim.adbd_backend import (
    BeforeCommandHook,
    CloseStream,
    CommandRecord,
    DeviceBackend,
    DropConnection,
    ShellResult,
)
from darwin.envs.sim.adbd_transport import _Stream, _StreamClosed, _Transport
from darwin.envs.sim.adbd_wire import (
    _DEFAULT_PROPS,
    A_OKAY,
    BACKEND_ERROR_EXIT_CODE,
    DEVICE_FEATURES,
    SHELL_EXIT,
    SHELL_STDERR,
    SHELL_STDOUT,
    SYNTAX_ERROR_EXIT_CODE,
)
from darwin.loop_thread import LoopThread

__all__ = [
    "AdbdFarm",
    "AdbdServer",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


class AdbdServer:
    """One simulated ADB device listening on ``host:port`` (the device side of ADB).

    Args:
        backend: the phone that runs commands (:class:`DeviceBackend`).
        host: interface to listen on; keep the default ``127.0.0.1``.
        port: TCP port; ``0`` picks a free one (read :attr:`port` after :meth:`start`).
            Avoid 5555-5585: the adb server probes those as local emulators.
        serial_name: a name for logs; defaults to ``"adbd-<port>"``.
        before_command: optional fault-injection hook, see :data:`BeforeCommandHook`.
        max_workers: threads running ``backend.run`` for this device (a slow device only
            ever blocks its own threads).
        log_limit: keep only the newest ``log_limit`` records in :attr:`command_log`
            (``None``: keep all; set it for long-running servers).

    A stopped server can be started again; it listens on the port it had (so ``adb
    connect`` to the same address works after a simulated crash or reboot).

    Example::

        server = AdbdServer(MyBackend())
        await server.start()            # adb connect 127.0.0.1:{server.port}
        ...
        await server.stop()
    """

    def __init__(
        self,
        backend: DeviceBackend,
        host: str = "127.0.0.1",
        port: int = 0,
        serial_name: str | None = None,
        before_command: BeforeCommandHook | None = None,
        max_workers: int = 4,
        log_limit: int | None = None,
    ) -> None:
        if not callable(getattr(backend, "run", None)):
            raise TypeError(
                f"backend {backend!r} has no run(argv, raw_command) method; see darwin.envs.sim.adbd_backend.DeviceBackend"
            )
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.backend = backend
        self.host = host
        self._requested_port = port
        self._serial_name = serial_name
        self.before_command = before_command
        self.max_workers = max_workers
        self.banner = _make_banner(getattr(backend, "serial_props", None) or {})
        self._server: asyncio.Server | None = None
        self.transports: set[_Transport] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        if log_limit is not None and log_limit < 1:
            raise ValueError(f"log_limit must be >= 1 or None, got {log_limit}")
        self._log: collections.deque[CommandRecord] = collections.deque(maxlen=log_limit)
        self._log_lock = threading.Lock()
        self._port: int | None = None

    def __repr__(self) -> str:
        return f"AdbdServer({self.serial_name!r}, {self.host}:{self._port or self._requested_port})"

    # -- public API ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port listened on (only valid after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError(f"{self!r} is not started; call `await server.start()` first")
        return self._port

    @property
    def address(self) -> str:
        """``"host:port"``, what to pass to ``adb connect``."""
        return f"{self.host}:{self.port}"

    @property
    def serial_name(self) -> str:
        if self._serial_name:
            return self._serial_name
        return f"adbd-{self._port or self._requested_port}"

    @property
    def command_log(self) -> list[CommandRecord]:
        """A snapshot of every command received so far, oldest first (thread-safe)."""
        with self._log_lock:
            return list(self._log)

    def clear_command_log(self) -> None:
        with self._log_lock:
            self._log.clear()

    @property
    def connection_count(self) -> int:
        """Number of open TCP connections (adb servers attached)."""
        return len(self.transports)

    @property
    def running(self) -> bool:
        """Whether the server is listening (between :meth:`start` and :meth:`stop`)."""
        return self._server is not None

    async def start(self) -> None:
        """Start listening. Raises ``OSError`` naming the address if the port is taken."""
        if self._server is not None:
            raise RuntimeError(f"{self!r} is already started")
        try:
            port = self._port if self._port is not None else self._requested_port
            self._server = await asyncio.start_server(self._on_client, self.host, port)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {self.host}:{port}: {exc.strerror}") from exc
        self._port = self._server.sockets[0].getsockname()[1]
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.max_workers, thread_name_prefix=f"adbd-{self._port}"
        )
        logger.info("%s: listening on %s:%d", self.serial_name, self.host, self._port)

    async def stop(self) -> None:
        """Stop listening, drop every connection and cancel running commands."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        transports = list(self.transports)
        for transport in transports:
            transport.abort()
        for transport in transports:
            await transport.shutdown()
        await server.wait_closed()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        logger.info("%s: stopped", self.serial_name)

    async def __aenter__(self) -> AdbdServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- internals -------------------------------------------------------------------

    def record_command(self, record: CommandRecord) -> None:
        with self._log_lock:
            self._log.append(record)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = _Transport(self, reader, writer)
        self.transports.add(transport)
        await transport.serve()

    async def run_stream(self, transport: _Transport, stream: _Stream) -> None:
        record = stream.record
        hook_error: BaseException | None = None
        try:
            if self.before_command is not None:
                try:
                    await self.before_command(record.service, record.command)
                except (DropConnection, CloseStream, asyncio.CancelledError):
                    raise
                except Exception as exc:  # noqa: BLE001 - reported to the client and logged
                    logger.exception(
                        "%s: before_command hook failed for %s:%r",
                        self.serial_name,
                        record.service,
                        record.command,
                    )
                    hook_error = exc
            stream.opened = True
            await transport.send(A_OKAY, stream.local_id, stream.remote_id)
            if hook_error is not None:
                await self._emit(transport, stream, _error_result("before_command hook", hook_error))
                await self._finish(
                    transport,
                    stream,
                    BACKEND_ERROR_EXIT_CODE,
                    f"before_command hook error: {type(hook_error).__name__}: {hook_error}",
                )
                return
            await self._execute(transport, stream)
        except CloseStream:
            record.error = "stream closed by before_command hook"
        except DropConnection:
            record.error = "connection dropped by before_command hook"
            transport.abort()
        except asyncio.CancelledError:
            record.error = record.error or "cancelled before the command ended"
            raise
        except _StreamClosed as exc:
            record.error = record.error or f"stream closed before the command ended: {exc}"
        except Exception as exc:
            logger.exception("%s: internal error serving %s:%r", self.serial_name, record.service, record.command)
            record.error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            if not stream.closed and not transport._closing:
                await transport.close_stream(stream)
            else:
                stream.closed = True
                transport.streams.pop(stream.local_id, None)

    async def _execute(self, transport: _Transport, stream: _Stream) -> None:
        record = stream.record
        if not record.command.strip():
            await self._emit(
                transport,
                stream,
                ShellResult(stderr=b"darwin adbd: interactive shells are not supported\n", exit_code=1),
            )
            await self._finish(transport, stream, 1, "interactive shell requested")
            return
        if stream.parse_error is not None:
            exc = stream.parse_error
            logger.warning("%s: %s", self.serial_name, exc)
            await self._emit(transport, stream, ShellResult(stderr=f"/system/bin/sh: {exc}\n".encode()))
            await self._finish(transport, stream, SYNTAX_ERROR_EXIT_CODE, str(exc))
            return
        status = 0
        error: str | None = None
        for simple in stream.commands:
            if (simple.connector == "&&" and status != 0) or (simple.connector == "||" and status == 0):
                continue
            argv = simple.argv(status)
            record.executed.append(tuple(argv))
            result: ShellResult | BaseException | None = _run_builtin(argv)
            if result is None:
                result = await self._run_backend(argv, record.command)
            if isinstance(result, DropConnection):
                record.error = f"connection dropped by the backend after the command ran: {result}"
                transport.abort()
                return
            if isinstance(result, BaseException):
                error = f"backend error: {type(result).__name__}: {result}"
                await self._emit(transport, stream, _error_result("backend", result))
                status = BACKEND_ERROR_EXIT_CODE
                break
            await self._emit(transport, stream, result)
            status = result.exit_code & 0xFF
        await self._finish(transport, stream, status, error)

    async def _run_backend(self, argv: list[str], raw: str) -> ShellResult | BaseException:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._executor, self.backend.run, argv, raw)
        except DropConnection as exc:  # the backend cuts the connection after its effect
            return exc
        except Exception as exc:  # noqa: BLE001 - reported to the client and logged
            logger.exception("%s: backend failed on %r (argv %r)", self.serial_name, raw, argv)
            return exc
        if not isinstance(result, ShellResult):
            exc = TypeError(f"{type(self.backend).__name__}.run returned {type(result).__name__}, expected ShellResult")
            logger.error("%s: %s (command %r)", self.serial_name, exc, raw)
            return exc
        return result

    async def _emit(self, transport: _Transport, stream: _Stream, result: ShellResult) -> None:
        """Send one simple command's output in the stream's framing."""
        stdout, stderr = result.stdout, result.stderr
        if stream.pty:  # a pty merges stderr into stdout and turns \n into \r\n
            stdout = (stdout + stderr).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
            stderr = b""
        if stream.v2:
            if stdout:
                await transport.write_shell_packet(stream, SHELL_STDOUT, stdout)
            if stderr:
                await transport.write_shell_packet(stream, SHELL_STDERR, stderr)
            return
        if stream.name == "exec":  # exec: is stdout only, like exec-out
            if stderr:
                logger.debug(
                    "%s: exec: dropping %d bytes of stderr: %r",
                    self.serial_name,
                    len(stderr),
                    stderr[:200],
                )
            stderr = b""
        data = stdout + stderr  # legacy shell: stderr merged into the stream
        if data:
            await transport.write_stream(stream, data)

    async def _finish(self, transport: _Transport, stream: _Stream, status: int, error: str | None) -> None:
        status &= 0xFF
        if stream.v2:
            await transport.write_shell_packet(stream, SHELL_EXIT, bytes([status]))
        stream.record.exit_code = status
        stream.record.error = error
        await transport.close_stream(stream)


def _run_builtin(argv: list[str]) -> ShellResult | None:
    """The shell builtins the server runs itself (they never reach the backend)."""
    name = argv[0]
    if name == "echo":
        args = argv[1:]
        newline = not (args and args[0] == "-n")
        text = " ".join(args if newline else args[1:]) + ("\n" if newline else "")
        return ShellResult(stdout=text.encode("utf-8", "surrogateescape"))
    if name in ("true", ":"):
        return ShellResult()
    if name == "false":
        return ShellResult(exit_code=1)
    return None


def _error_result(where: str, exc: BaseException) -> ShellResult:
    message = f"darwin adbd: {where} error: {type(exc).__name__}: {exc}\n"
    return ShellResult(stderr=message.encode("utf-8", "replace"), exit_code=BACKEND_ERROR_EXIT_CODE)


def _make_banner(props: dict[str, str]) -> str:
    merged = {**_DEFAULT_PROPS, **props}
    for key, value in merged.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"serial_props must map str to str, got {key!r}: {value!r}")
        if any(c in key for c in ";=:\0") or any(c in value for c in ";\0"):
            raise ValueError(
                f"serial_props entry {key!r}={value!r} cannot go into the ADB banner "
                "(keys must not contain ';', '=', ':' or NUL; values must not contain ';' "
                "or NUL)"
            )
    fields = ";".join(f"{k}={v}" for k, v in merged.items())
    return f"device::{fields};features={','.join(DEVICE_FEATURES)}"


# --------------------------------------------------------------------------------------
# Many devices from sync code
# --------------------------------------------------------------------------------------


class AdbdFarm:
    """Serve several backends as ADB devices from a background thread and event loop.

    One :class:`AdbdServer` per backend, on ``port_base``, ``port_base + 1``, ... or on
    free ephemeral ports when ``port_base`` is ``None``. Usable from sync code::

        with AdbdFarm([backend_a, backend_b]) as farm:
            farm.addresses          # ["127.0.0.1:41235", "127.0.0.1:41236"]
            farm.servers[0].command_log

    Args:
        backends: one backend per device.
        port_base: first port, or ``None`` for ephemeral ports.
        host: interface to listen on.
        before_command: a hook installed on every server (see :data:`BeforeCommandHook`);
            set ``farm.servers[i].before_command`` to target one device.
        max_workers: backend threads per device.
        start_timeout: seconds to wait for every server to listen.
        log_limit: per-device cap on :attr:`AdbdServer.command_log` (``None``: unbounded).
    """

    def __init__(
        self,
        backends: Sequence[DeviceBackend],
        port_base: int | None = None,
        host: str = "127.0.0.1",
        before_command: BeforeCommandHook | None = None,
        max_workers: int = 4,
        start_timeout: float = 30.0,
        log_limit: int | None = None,
    ) -> None:
        if not backends:
            raise ValueError("AdbdFarm needs at least one backend")
        if port_base is not None and not 1 <= port_base <= 65535 - len(backends) + 1:
            raise ValueError(f"port_base={port_base} with {len(backends)} devices does not fit in 1..65535")
        self.servers: list[AdbdServer] = [
            AdbdServer(
                backend,
                host=host,
                port=0 if port_base is None else port_base + i,
                serial_name=f"sim{i}",
                before_command=before_command,
                max_workers=max_workers,
                log_limit=log_limit,
            )
            for i, backend in enumerate(backends)
        ]
        self.start_timeout = start_timeout
        self._thread: LoopThread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The farm's event loop (for ``asyncio.run_coroutine_threadsafe``)."""
        if self._thread is None:
            raise RuntimeError("AdbdFarm is not started")
        return self._thread.loop

    @property
    def addresses(self) -> list[str]:
        """``host:port`` of every device, in backend order."""
        return [server.address for server in self.servers]

    @property
    def ports(self) -> list[int]:
        return [server.port for server in self.servers]

    def call(self, coro: Awaitable[object], timeout: float | None = 30.0) -> object:
        """Run a coroutine on the farm's loop from another thread and return its result."""
        if self._thread is None:
            raise RuntimeError("AdbdFarm is not started")
        return self._thread.call(coro, timeout)  # type: ignore[arg-type]  # LoopThread.call wants a Coroutine; callers pass coroutines

    def start(self) -> None:
        """Start the loop thread and every server; on failure nothing is left running."""
        if self._thread is not None:
            raise RuntimeError("AdbdFarm is already started")
        self._thread = LoopThread("adbd-farm")
        try:
            self.call(self._start_all(), timeout=self.start_timeout)
        except BaseException:
            self.stop()
            raise
        logger.info("AdbdFarm: %d devices on %s", len(self.servers), ", ".join(self.addresses))

    async def _start_all(self) -> None:
        for server in self.servers:
            await server.start()

    async def _stop_all(self) -> None:
        results = await asyncio.gather(*(s.stop() for s in self.servers), return_exceptions=True)
        for server, result in zip(self.servers, results, strict=True):
            if isinstance(result, BaseException):
                logger.error("AdbdFarm: stopping %s failed: %r", server, result)

    def stop(self) -> None:
        """Stop every server, then the loop thread. Idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            if thread.alive:
                thread.call(self._stop_all(), timeout=self.start_timeout)
        finally:
            thread.close(timeout=self.start_timeout)

    def __enter__(self) -> AdbdFarm:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
