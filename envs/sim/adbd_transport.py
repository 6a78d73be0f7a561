"""One adb connection to the fake adbd: message framing, the CNXN handshake, streams with flow
control and the services they open (part of :mod:`darwin.envs.sim.adbd`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from darwin.envs.sim.adbd_backend import CommandRecord, DropConnection
from darwin.envs.sim.adbd_shell import ShellSyntaxError, SimpleCommand, parse_command
from darwin.envs.sim.adbd_wire import (
    _COMMAND_NAMES,
    _HEADER,
    _MIN_NEGOTIATED_PAYLOAD,
    _SHELL_HEADER,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION,
    A_VERSION_MIN,
    A_VERSION_SKIP_CHECKSUM,
    A_WRTE,
    MAX_PAYLOAD,
    MAX_PAYLOAD_V1,
    _split_service,
)


class TransportHost(Protocol):
    """What a connection needs from the server that accepted it (:class:`~darwin.envs.sim.adbd.AdbdServer`)."""

    @property
    def serial_name(self) -> str: ...

    banner: str
    transports: set[_Transport]

    def record_command(self, record: CommandRecord) -> None:
        """Keep one command's record in the server's log."""

    async def run_stream(self, transport: _Transport, stream: _Stream) -> None:
        """Run the service ``stream`` opened, answering on ``transport``."""


logger = logging.getLogger("darwin.envs.sim.adbd")  # records keep the logger name of darwin.envs.sim.adbd

# --------------------------------------------------------------------------------------
# One connection
# --------------------------------------------------------------------------------------


class _StreamClosed(Exception):
    """The stream or its transport went away while we were writing."""


class _Stream:
    def __init__(self, local_id: int, remote_id: int, record: CommandRecord) -> None:
        self.local_id = local_id
        self.remote_id = remote_id
        self.record = record
        self.name, self.args = _split_service(record.service)
        self.v2 = self.name == "shell" and "v2" in self.args
        self.pty = self.name == "shell" and "pty" in self.args
        self.opened = False  # OKAY sent for the OPEN
        self.closed = False  # CLSE sent or received
        self.acked = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.stdin_bytes = 0
        self.commands: list[SimpleCommand] = []
        self.parse_error: ShellSyntaxError | None = None
        try:
            self.commands = parse_command(record.command)
        except ShellSyntaxError as exc:
            self.parse_error = exc
        if self.commands:
            record.argv = tuple(self.commands[0].argv(0))


class _Transport:
    """One TCP connection from an adb server (one ``adb connect``)."""

    def __init__(
        self,
        server: TransportHost,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.version: int | None = None  # negotiated protocol version, None before CNXN
        self.max_payload = MAX_PAYLOAD_V1
        self.streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._write_lock = asyncio.Lock()
        self._closing = False

    # -- sending ---------------------------------------------------------------------

    def _checksum_needed(self) -> bool:
        return self.version is None or self.version < A_VERSION_SKIP_CHECKSUM

    async def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        if self._closing or self.writer.is_closing():
            raise _StreamClosed("transport closed")
        check = (sum(data) & 0xFFFFFFFF) if self._checksum_needed() else 0
        header = _HEADER.pack(command, arg0, arg1, len(data), check, command ^ 0xFFFFFFFF)
        async with self._write_lock:
            try:
                self.writer.write(header + data)
                await self.writer.drain()
            except (ConnectionError, RuntimeError) as exc:
                raise _StreamClosed(f"transport closed while sending: {exc}") from exc

    async def write_stream(self, stream: _Stream, data: bytes) -> None:
        """Send ``data`` as WRTE packets, each acknowledged by OKAY before the next."""
        view = memoryview(data)
        for start in range(0, len(view), self.max_payload):
            await self._write_packet(stream, bytes(view[start : start + self.max_payload]))

    async def _write_packet(self, stream: _Stream, payload: bytes) -> None:
        if stream.closed:
            raise _StreamClosed("stream closed by the client")
        stream.acked.clear()
        await self.send(A_WRTE, stream.local_id, stream.remote_id, payload)
        await stream.acked.wait()
        if stream.closed:
            raise _StreamClosed("stream closed by the client")

    async def write_shell_packet(self, stream: _Stream, packet_id: int, data: bytes) -> None:
        """Send shell v2 packets, one per WRTE, each within the negotiated payload size."""
        limit = self.max_payload - _SHELL_HEADER.size
        view = memoryview(data)
        for start in range(0, len(view), limit):
            chunk = bytes(view[start : start + limit])
            await self._write_packet(stream, _SHELL_HEADER.pack(packet_id, len(chunk)) + chunk)

    async def close_stream(self, stream: _Stream) -> None:
        if stream.closed:
            return
        stream.closed = True
        self.streams.pop(stream.local_id, None)
        with contextlib.suppress(_StreamClosed):
            if stream.opened:
                await self.send(A_CLSE, stream.local_id, stream.remote_id)
            else:  # refuse the OPEN
                await self.send(A_CLSE, 0, stream.remote_id)

    # -- receiving -------------------------------------------------------------------

    async def serve(self) -> None:
        logger.debug("%s: connection from %s", self.server.serial_name, self.peer)
        try:
            while True:
                try:
                    header = await self.reader.readexactly(_HEADER.size)
                except asyncio.IncompleteReadError:
                    return
                command, arg0, arg1, length, check, magic = _HEADER.unpack(header)
                if magic != command ^ 0xFFFFFFFF:
                    logger.warning(
                        "%s: bad packet magic from %s (command %#x, magic %#x); dropping the connection",
                        self.server.serial_name,
                        self.peer,
                        command,
                        magic,
                    )
                    return
                if length > MAX_PAYLOAD:
                    logger.warning(
                        "%s: %s packet of %d bytes from %s exceeds %d; dropping the connection",
                        self.server.serial_name,
                        _COMMAND_NAMES.get(command, hex(command)),
                        length,
                        self.peer,
                        MAX_PAYLOAD,
                    )
                    return
                try:
                    data = await self.reader.readexactly(length) if length else b""
                except asyncio.IncompleteReadError:
                    return
                # A host that redials a device (adb does after a dropped connection) reuses
                # the transport's negotiated version and sends CNXN with checksum 0.
                redial = command == A_CNXN and check == 0
                if not redial and (check or self._checksum_needed()) and check != sum(data) & 0xFFFFFFFF:
                    logger.warning(
                        "%s: checksum mismatch on %s from %s; dropping the connection",
                        self.server.serial_name,
                        _COMMAND_NAMES.get(command, hex(command)),
                        self.peer,
                    )
                    return
                await self._dispatch(command, arg0, arg1, data)
        except (ConnectionError, _StreamClosed) as exc:
            logger.debug("%s: connection from %s lost: %s", self.server.serial_name, self.peer, exc)
        except DropConnection:
            logger.info("%s: dropping connection from %s", self.server.serial_name, self.peer)
        finally:
            await self.shutdown()

    async def _dispatch(self, command: int, arg0: int, arg1: int, data: bytes) -> None:
        if command == A_CNXN:
            await self._on_connect(arg0, arg1, data)
        elif self.version is None:
            logger.debug(
                "%s: ignoring %s before CNXN",
                self.server.serial_name,
                _COMMAND_NAMES.get(command, hex(command)),
            )
        elif command == A_OPEN:
            await self._on_open(arg0, data)
        elif command == A_OKAY:
            stream = self.streams.get(arg1)
            if stream is not None and stream.remote_id == arg0:
                stream.acked.set()
        elif command == A_WRTE:
            stream = self.streams.get(arg1)
            if stream is None or stream.remote_id != arg0:
                logger.debug("%s: WRTE for unknown stream %d", self.server.serial_name, arg1)
                return
            await self.send(A_OKAY, stream.local_id, stream.remote_id)
            stream.stdin_bytes += len(data)  # stdin / shell v2 stdin packets are ignored
        elif command == A_CLSE:
            self._on_close(arg0, arg1)
        else:
            logger.debug(
                "%s: ignoring %s packet",
                self.server.serial_name,
                _COMMAND_NAMES.get(command, hex(command)),
            )

    async def _on_connect(self, version: int, max_payload: int, data: bytes) -> None:
        banner = data.rstrip(b"\0").decode("utf-8", "replace")
        if self.streams:
            logger.info("%s: CNXN again from %s; resetting streams", self.server.serial_name, self.peer)
            await self._cancel_streams()
        negotiated = min(max_payload, MAX_PAYLOAD)
        if negotiated < _MIN_NEGOTIATED_PAYLOAD:
            raise DropConnection(f"peer max payload {max_payload} is too small")
        self.version = None  # compute the CNXN checksum whatever the version
        reply = self.server.banner.encode("utf-8")
        version_out = max(min(version, A_VERSION), A_VERSION_MIN)
        await self.send(A_CNXN, version_out, negotiated, reply)
        self.version = version_out
        self.max_payload = negotiated
        logger.info(
            "%s: connected to %s (%s; protocol %#x, max payload %d)",
            self.server.serial_name,
            self.peer,
            banner,
            version_out,
            negotiated,
        )

    async def _on_open(self, remote_id: int, data: bytes) -> None:
        if remote_id == 0:
            logger.debug("%s: OPEN with local id 0 ignored", self.server.serial_name)
            return
        text = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
        service, sep, command = text.partition(":")
        name, _ = _split_service(service)
        if not sep or name not in ("shell", "exec") or (name == "exec" and service != "exec"):
            logger.info("%s: refusing unsupported service %r", self.server.serial_name, text[:200])
            await self.send(A_CLSE, 0, remote_id)
            return
        record = CommandRecord(service=service, command=command)
        stream = _Stream(self._allocate_id(), remote_id, record)
        self.streams[stream.local_id] = stream
        self.server.record_command(record)
        stream.task = asyncio.create_task(
            self.server.run_stream(self, stream),
            name=f"adbd-{self.server.serial_name}-{stream.local_id}",
        )

    def _on_close(self, remote_id: int, local_id: int) -> None:
        stream = self.streams.get(local_id) if local_id else None
        if stream is None and local_id == 0:  # closed before we answered the OPEN
            stream = next(
                (s for s in self.streams.values() if s.remote_id == remote_id and not s.opened),
                None,
            )
        if stream is None or stream.remote_id != remote_id:
            return
        stream.closed = True
        self.streams.pop(stream.local_id, None)
        stream.acked.set()
        if stream.record.exit_code is None and stream.record.error is None:
            stream.record.error = "stream closed by the client before the command ended"
        if stream.task is not None:
            stream.task.cancel()

    def _allocate_id(self) -> int:
        while True:
            local_id = self._next_id
            self._next_id = self._next_id % 0xFFFFFFFF + 1
            if local_id not in self.streams:
                return local_id

    # -- teardown --------------------------------------------------------------------

    async def _cancel_streams(self) -> None:
        tasks = [s.task for s in self.streams.values() if s.task is not None]
        for stream in self.streams.values():
            stream.closed = True
            stream.acked.set()
            if stream.record.exit_code is None and stream.record.error is None:
                stream.record.error = "connection closed before the command ended"
        self.streams.clear()
        current = asyncio.current_task()
        tasks = [t for t in tasks if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def abort(self) -> None:
        """Close the TCP connection abruptly (used by hooks and by ``stop``)."""
        self._closing = True
        transport = self.writer.transport
        if transport is not None:
            transport.abort()

    async def shutdown(self) -> None:
        self._closing = True
        await self._cancel_streams()
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
        self.server.transports.discard(self)
        logger.debug("%s: connection from %s closed", self.server.serial_name, self.peer)
