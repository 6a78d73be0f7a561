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
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import re
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from darwin.loop_thread import LoopThread

__all__ = [
    "BACKEND_ERROR_EXIT_CODE",
    "SYNTAX_ERROR_EXIT_CODE",
    "AdbdFarm",
    "AdbdServer",
    "BeforeCommandHook",
    "CloseStream",
    "CommandRecord",
    "DeviceBackend",
    "DropConnection",
    "ShellResult",
    "ShellSyntaxError",
    "SimpleCommand",
    "parse_command",
]

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------
# Wire constants (system/core/adb/adb.h)
# --------------------------------------------------------------------------------------

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_STLS = 0x534C5453

_COMMAND_NAMES = {
    A_CNXN: "CNXN",
    A_AUTH: "AUTH",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_CLSE: "CLSE",
    A_WRTE: "WRTE",
    A_STLS: "STLS",
}

A_VERSION_MIN = 0x01000000
A_VERSION_SKIP_CHECKSUM = 0x01000001
A_VERSION = 0x01000001
MAX_PAYLOAD_V1 = 4 * 1024
MAX_PAYLOAD = 1024 * 1024
_MIN_NEGOTIATED_PAYLOAD = 64

_HEADER = struct.Struct("<6I")

# Shell protocol v2 packet ids (system/core/adb/shell_protocol.h).
SHELL_STDIN = 0
SHELL_STDOUT = 1
SHELL_STDERR = 2
SHELL_EXIT = 3
SHELL_CLOSE_STDIN = 4
SHELL_WINDOW_SIZE_CHANGE = 5
_SHELL_HEADER = struct.Struct("<BI")

#: Features advertised in the CNXN banner: only what this server implements.
DEVICE_FEATURES = ("shell_v2", "cmd")

#: Exit code of a command whose backend (or ``before_command`` hook) raised
#: (``EX_SOFTWARE`` from sysexits.h); the error text is sent on stderr.
BACKEND_ERROR_EXIT_CODE = 70
#: Exit code for shell syntax this server does not support (what ``sh`` uses for
#: syntax errors).
SYNTAX_ERROR_EXIT_CODE = 2

_DEFAULT_PROPS = {
    "ro.product.name": "darwin_sim",
    "ro.product.model": "DarwinSim",
    "ro.product.device": "darwin_sim",
}


# --------------------------------------------------------------------------------------
# Public data types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShellResult:
    """What one simple command produced on the device.

    ``exit_code`` is reduced to 0..255 (``& 0xFF``) as a real shell does.
    """

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


@runtime_checkable
class DeviceBackend(Protocol):
    """The phone behind an :class:`AdbdServer`.

    ``serial_props`` fills the CNXN banner (``ro.product.name``, ``ro.product.model``,
    ``ro.product.device``; defaults are used for missing keys). ``run`` executes one simple
    command and blocks as long as it likes: the server calls it in a worker thread of its
    own pool, so several calls for one device may run concurrently (make ``run``
    thread-safe or build the server with ``max_workers=1``). ``raw_command`` is the full
    command string as received (it may hold several simple commands joined by ``;``).
    Raising is allowed: the client sees exit code :data:`BACKEND_ERROR_EXIT_CODE` and the
    error on stderr, and the server logs the traceback. Unknown commands should return
    exit code 127 as ``sh`` does. The builtins ``echo``, ``true``, ``false`` and ``:`` never
    reach the backend.

    Example::

        class Echo:
            serial_props = {"ro.product.model": "Echo"}

            def run(self, argv: list[str], raw_command: str) -> ShellResult:
                return ShellResult(stdout=" ".join(argv[1:]).encode() + b"\\n")
    """

    serial_props: dict[str, str]

    def run(self, argv: list[str], raw_command: str) -> ShellResult: ...


@dataclass
class CommandRecord:
    """One service command as the device received it (see :attr:`AdbdServer.command_log`).

    Attributes:
        service: the service prefix exactly as received, e.g. ``"shell,v2,raw"``,
            ``"shell"`` or ``"exec"``.
        command: the command string exactly as received (UTF-8, undecodable bytes kept
            as surrogate escapes).
        argv: argv of the first simple command as parsed (``()`` if the command is empty
            or could not be parsed).
        executed: argv of every simple command handed to the backend, in order (``$?``
            expanded); filled while the command runs.
        exit_code: the exit status sent to the client, ``None`` while running or when the
            stream ended without one (closed by the client, dropped by a hook).
        error: why the command failed inside the server (syntax error, backend exception,
            closed by the client), else ``None``.
        received_at: ``time.time()`` when the OPEN arrived.
    """

    service: str
    command: str
    argv: tuple[str, ...] = ()
    executed: list[tuple[str, ...]] = field(default_factory=list)
    exit_code: int | None = None
    error: str | None = None
    received_at: float = field(default_factory=time.time)

    @property
    def shell_v2(self) -> bool:
        """Whether the command came over the shell v2 protocol."""
        name, args = _split_service(self.service)
        return name == "shell" and "v2" in args


class DropConnection(Exception):  # noqa: N818 - a control signal, not an error
    """Raise from a ``before_command`` hook to drop the whole TCP connection abruptly.

    A backend's ``run`` may raise it too: the command's effect stays, the connection is
    cut before any output or exit code is sent (the client never learns the outcome).
    """


class CloseStream(Exception):  # noqa: N818 - a control signal, not an error
    """Raise from a ``before_command`` hook to refuse the stream (CLSE, no output)."""


#: ``async def hook(service: str, command: str) -> None``, awaited after an OPEN arrives
#: and before it is answered. It may sleep (a slow device; sleeping forever models a
#: device that never answers OPEN), raise :class:`DropConnection` or
#: :class:`CloseStream`, or raise anything else (the command then fails with
#: :data:`BACKEND_ERROR_EXIT_CODE` and the error on stderr).
BeforeCommandHook = Callable[[str, str], Awaitable[None]]


# --------------------------------------------------------------------------------------
# POSIX sh subset: command splitting
# --------------------------------------------------------------------------------------


class ShellSyntaxError(ValueError):
    """A command string uses shell syntax this server does not implement, or is invalid."""


class _LastStatus:
    """Placeholder for ``$?`` inside a word."""

    def __repr__(self) -> str:
        return "$?"


_STATUS = _LastStatus()
_WordPart = str | _LastStatus


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command of a command list.

    ``connector`` is the operator before it (``";"`` for the first one, ``"&&"`` or
    ``"||"``); ``words`` hold literal text and ``$?`` placeholders, see :meth:`argv`.
    """

    connector: str
    words: tuple[tuple[_WordPart, ...], ...]

    def argv(self, last_status: int = 0) -> list[str]:
        """The argv with ``$?`` replaced by ``last_status``."""
        return [
            "".join(str(last_status) if part is _STATUS else part for part in word)  # type: ignore[misc]
            for word in self.words
        ]


_RESERVED_WORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until"}
    | {"for", "in", "{", "}", "!", "[[", "]]", "function", "select"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SPECIAL_PARAM = set("@*#$!-0123456789")
_DQ_ESCAPABLE = set('$`"\\')


def parse_command(command: str) -> list[SimpleCommand]:
    """Split a command string into simple commands with POSIX ``sh`` quoting rules.

    Supported: blanks, single quotes, double quotes (with ``\\$ \\` \\" \\\\`` escapes),
    backslash escapes and line continuations, ``#`` comments, ``;``, newlines, ``&&``,
    ``||`` and ``$?``. Anything that would need a real shell (pipes, ``&``, redirections,
    subshells, ``$VAR``, command substitution, keywords, leading ``VAR=value``) raises
    :class:`ShellSyntaxError`; unquoted glob characters and ``~`` stay literal.
    ``parse_command(" ".join(map(shlex.quote, argv)))[0].argv() == argv`` for any argv.

    >>> [c.argv() for c in parse_command("input text 'a b'; echo \\"x\\"$?")]
    [['input', 'text', 'a b'], ['echo', 'x0']]
    """
    commands: list[SimpleCommand] = []
    words: list[tuple[_WordPart, ...]] = []
    quoted_flags: list[bool] = []
    parts: list[_WordPart] | None = None  # the word being built, None between words
    quoted = False
    connector = ";"
    awaiting_command = False  # after && or ||: a command must follow
    i = 0
    n = len(command)

    def unsupported(what: str) -> ShellSyntaxError:
        return ShellSyntaxError(
            f"{what} at offset {i} of {command!r} is not supported by the darwin adbd "
            "shell (only simple commands joined by ';', '&&', '||' or newlines, "
            "with quoting and $?)"
        )

    def start_word() -> list[_WordPart]:
        nonlocal parts
        if parts is None:
            parts = []
        return parts

    def end_word() -> None:
        nonlocal parts, quoted
        if parts is not None:
            words.append(tuple(parts))
            quoted_flags.append(quoted)
            parts = None
            quoted = False

    def end_command(operator: str) -> None:
        nonlocal connector, awaiting_command
        end_word()
        if words:
            _check_command_words(words, quoted_flags, command)
            commands.append(SimpleCommand(connector, tuple(words)))
            words.clear()
            quoted_flags.clear()
            connector = ";" if operator == "\n" else operator
            awaiting_command = operator in ("&&", "||")
        elif operator == "\n":
            return  # blank line; a pending && / || keeps waiting for its command
        else:
            raise ShellSyntaxError(
                f"syntax error: unexpected {operator!r} at offset {i} of {command!r}"
            )

    def dollar(target: list[_WordPart]) -> int:
        """Handle a '$' at ``i``; return how many characters were consumed."""
        nxt = command[i + 1] if i + 1 < n else ""
        if nxt == "?":
            target.append(_STATUS)
            return 2
        if nxt and (nxt.isalnum() or nxt == "_" or nxt in "{(" or nxt in _SPECIAL_PARAM):
            raise unsupported(f"expansion '${nxt}'")
        target.append("$")  # a lone '$' is literal in sh
        return 1

    while i < n:
        ch = command[i]
        if ch in " \t":
            end_word()
            i += 1
        elif ch == "\n":
            end_command("\n")
            i += 1
        elif ch == "#" and parts is None:
            while i < n and command[i] != "\n":
                i += 1
        elif ch == "\\":
            if i + 1 < n and command[i + 1] == "\n":
                i += 2  # line continuation
            elif i + 1 < n:
                start_word().append(command[i + 1])
                quoted = True
                i += 2
            else:
                start_word().append("\\")
                i += 1
        elif ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError(f"unterminated single quote at offset {i} of {command!r}")
            start_word().append(command[i + 1 : end])
            quoted = True
            i = end + 1
        elif ch == '"':
            word = start_word()
            quoted = True
            i += 1
            while True:
                if i >= n:
                    raise ShellSyntaxError(f"unterminated double quote in {command!r}")
                c = command[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and command[i + 1] in _DQ_ESCAPABLE:
                    word.append(command[i + 1])
                    i += 2
                elif c == "\\" and i + 1 < n and command[i + 1] == "\n":
                    i += 2
                elif c == "$":
                    i += dollar(word)
                elif c == "`":
                    raise unsupported("command substitution '`'")
                else:
                    word.append(c)
                    i += 1
        elif ch == "$":
            i += dollar(start_word())
        elif ch == "`":
            raise unsupported("command substitution '`'")
        elif ch == ";":
            if command.startswith(";;", i):
                raise unsupported("';;'")
            end_command(";")
            i += 1
        elif ch == "&":
            if command.startswith("&&", i):
                end_command("&&")
                i += 2
            else:
                raise unsupported("background job '&'")
        elif ch == "|":
            if command.startswith("||", i):
                end_command("||")
                i += 2
            else:
                raise unsupported("pipe '|'")
        elif ch in "<>":
            raise unsupported(f"redirection {ch!r}")
        elif ch in "()":
            raise unsupported(f"subshell {ch!r}")
        else:
            start_word().append(ch)
            i += 1
    end_word()
    if words:
        end_command(";")
    elif awaiting_command:
        raise ShellSyntaxError(f"syntax error: {command!r} ends with {connector!r}")
    return commands


def _check_command_words(
    words: Sequence[tuple[_WordPart, ...]], quoted_flags: Sequence[bool], command: str
) -> None:
    first = words[0]
    if quoted_flags[0] or not all(isinstance(p, str) for p in first):
        return
    text = "".join(first)  # type: ignore[arg-type]
    if text in _RESERVED_WORDS:
        raise ShellSyntaxError(
            f"shell keyword {text!r} in {command!r} is not supported by the darwin adbd shell"
        )
    if _ASSIGNMENT.match(text):
        raise ShellSyntaxError(
            f"variable assignment {text!r} in {command!r} is not supported by the darwin "
            "adbd shell (quote the word if it is a command name)"
        )


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


def _split_service(service: str) -> tuple[str, list[str]]:
    name, *args = service.split(",")
    return name, args


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
        server: AdbdServer,
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
                        "%s: bad packet magic from %s (command %#x, magic %#x); dropping "
                        "the connection",
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
            logger.info(
                "%s: CNXN again from %s; resetting streams", self.server.serial_name, self.peer
            )
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
        self.server._record(record)
        stream.task = asyncio.create_task(
            self.server._run_stream(self, stream),
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
        self.server._transports.discard(self)
        logger.debug("%s: connection from %s closed", self.server.serial_name, self.peer)


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
                f"backend {backend!r} has no run(argv, raw_command) method; "
                "see darwin.envs.sim.adbd.DeviceBackend"
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
        self._transports: set[_Transport] = set()
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
        return len(self._transports)

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
            raise OSError(
                exc.errno, f"cannot listen on {self.host}:{port}: {exc.strerror}"
            ) from exc
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
        transports = list(self._transports)
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

    def _record(self, record: CommandRecord) -> None:
        with self._log_lock:
            self._log.append(record)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = _Transport(self, reader, writer)
        self._transports.add(transport)
        await transport.serve()

    async def _run_stream(self, transport: _Transport, stream: _Stream) -> None:
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
                await self._emit(
                    transport, stream, _error_result("before_command hook", hook_error)
                )
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
            logger.exception(
                "%s: internal error serving %s:%r", self.serial_name, record.service, record.command
            )
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
                ShellResult(
                    stderr=b"darwin adbd: interactive shells are not supported\n", exit_code=1
                ),
            )
            await self._finish(transport, stream, 1, "interactive shell requested")
            return
        if stream.parse_error is not None:
            exc = stream.parse_error
            logger.warning("%s: %s", self.serial_name, exc)
            await self._emit(
                transport, stream, ShellResult(stderr=f"/system/bin/sh: {exc}\n".encode())
            )
            await self._finish(transport, stream, SYNTAX_ERROR_EXIT_CODE, str(exc))
            return
        status = 0
        error: str | None = None
        for simple in stream.commands:
            if (simple.connector == "&&" and status != 0) or (
                simple.connector == "||" and status == 0
            ):
                continue
            argv = simple.argv(status)
            record.executed.append(tuple(argv))
            result = _run_builtin(argv)
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
            exc = TypeError(
                f"{type(self.backend).__name__}.run returned {type(result).__name__}, "
                "expected ShellResult"
            )
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

    async def _finish(
        self, transport: _Transport, stream: _Stream, status: int, error: str | None
    ) -> None:
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
            raise ValueError(
                f"port_base={port_base} with {len(backends)} devices does not fit in 1..65535"
            )
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
        return self._thread.call(coro, timeout)  # type: ignore[arg-type]

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
