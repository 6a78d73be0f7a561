"""Tests for darwin.envs.sim.adbd: the adbd wire-protocol server.

Three layers:
- the sh-subset parser (pure; no adb needed),
- the wire protocol driven by a raw in-test ADB host (no adb needed),
- end to end through the real Debian ``adb`` server and adbutils (skipped without ``adb``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin.envs.adb_server import PrivateAdbServer, free_port
from darwin.envs.sim.adbd import A_OKAY, SHELL_EXIT, SHELL_STDERR, SHELL_STDOUT, AdbdFarm, AdbdServer
from darwin.envs.sim.adbd_backend import CloseStream, DeviceBackend, DropConnection, ShellResult
from darwin.envs.sim.adbd_shell import ShellSyntaxError, parse_command
from darwin.envs.sim.adbd_wire import (
    A_CLSE,
    A_CNXN,
    A_OPEN,
    A_VERSION,
    A_VERSION_MIN,
    A_WRTE,
    BACKEND_ERROR_EXIT_CODE,
    MAX_PAYLOAD,
    SHELL_CLOSE_STDIN,
    SHELL_STDIN,
    SYNTAX_ERROR_EXIT_CODE,
)

pytestmark = pytest.mark.timeout(60)

# ~1 MB "screenshot": a PNG signature followed by deterministic noise (every byte value).
PNG = b"\x89PNG\r\n\x1a\n" + random.Random(1234).randbytes(1_000_000)

NASTY_STRINGS = [
    "; & | $ ` ' \" %",
    "a b",
    "",
    " ",
    "$(reboot)",
    "`id`",
    "'; rm -rf / #",
    '"quoted" \\"escaped\\"',
    "100%s done %%",
    "back\\slash\\",
    "line1\nline2\n",
    "tab\there",
    "cr\r\nlf",
    "中文输入 テスト 한국어",
    "emoji 😀 and ünïcödé",
    "-n",
    "--flag=value",
    "a=b",
    "*?[a-z]~",
    "#not a comment",
    "&&||;;",
    "$? $HOME ${x} $1",
    "x" * 2000,
]


class RecordingBackend:
    """A trivial device: a few commands, every call recorded."""

    def __init__(self, name: str = "dev") -> None:
        self.name = name
        self.serial_props = {
            "ro.product.name": f"test_{name}",
            "ro.product.model": "TestPhone",
            "ro.product.device": "testdev",
        }
        self.calls: list[tuple[list[str], str]] = []
        self._lock = threading.Lock()

    def run(self, argv: list[str], raw_command: str) -> ShellResult:
        with self._lock:
            self.calls.append((list(argv), raw_command))
        name, args = argv[0], argv[1:]
        if name == "emit":  # emit STDOUT STDERR CODE
            return ShellResult(args[0].encode(), args[1].encode(), int(args[2]))
        if name == "input":  # echo the text back, byte-exact
            return ShellResult(stdout=args[-1].encode("utf-8", "surrogateescape"))
        if name == "screencap":
            return ShellResult(stdout=PNG, stderr=b"warning: stderr must not reach exec:\n")
        if name == "whoami":
            return ShellResult(stdout=f"{self.name}\n".encode())
        if name == "sleep":
            time.sleep(float(args[0]))
            return ShellResult(stdout=b"slept\n")
        if name == "boom":
            raise RuntimeError("backend exploded: " + " ".join(args))
        if name == "wrongtype":
            return "not a ShellResult"  # type: ignore[return-value]
        return ShellResult(stderr=f"/system/bin/sh: {name}: not found\n".encode(), exit_code=127)


def test_backend_satisfies_protocol() -> None:
    assert isinstance(RecordingBackend(), DeviceBackend)


# --------------------------------------------------------------------------------------
# sh-subset parser
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", NASTY_STRINGS)
def test_parse_round_trips_adbutils_quoting(text: str) -> None:
    argv = ["input", "text", text]
    command = " ".join(map(shlex.quote, argv))  # what adbutils' list2cmdline sends
    (simple,) = parse_command(command)
    assert simple.argv() == argv
    assert shlex.split(command) == argv


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"))))
def test_parse_round_trips_any_argv(args: list[str]) -> None:
    argv = ["input", "text", *args]
    (simple,) = parse_command(" ".join(map(shlex.quote, argv)))
    assert simple.argv() == argv


def test_parse_sequences_and_status() -> None:
    commands = parse_command("a 'x y'; b && c \"$?\" || d\n# comment\ne f\\ g")
    assert [(c.connector, c.argv(7)) for c in commands] == [
        (";", ["a", "x y"]),
        (";", ["b"]),
        ("&&", ["c", "7"]),
        ("||", ["d"]),
        (";", ["e", "f g"]),
    ]
    assert parse_command("   ") == []


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("ls | grep x", "pipe"),
        ("sleep 1 &", "background"),
        ("echo $HOME", "expansion"),
        ('echo "${x}"', "expansion"),
        ("echo `id`", "command substitution"),
        ("echo $(id)", "expansion"),
        ("cat < f", "redirection"),
        ("screencap -p > /sdcard/a.png", "redirection"),
        ("(ls)", "subshell"),
        ("if true; then ls; fi", "keyword"),
        ("A=1 ls", "assignment"),
        ("echo 'unterminated", "unterminated"),
        ('echo "unterminated', "unterminated"),
        ("; ls", "unexpected"),
        ("ls &&", "ends with"),
    ],
)
def test_parse_rejects_unsupported_syntax(command: str, fragment: str) -> None:
    with pytest.raises(ShellSyntaxError, match=fragment):
        parse_command(command)


# --------------------------------------------------------------------------------------
# Wire protocol through a raw in-test host (no adb binary needed)
# --------------------------------------------------------------------------------------

_HEADER = struct.Struct("<6I")


class RawHost:
    """The host side of the ADB transport, just enough to poke the server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(
        cls, port: int, version: int = A_VERSION, max_payload: int = 256 * 1024
    ) -> tuple[RawHost, tuple[int, int, int, bytes, int]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        host = cls(reader, writer)
        await host.send(A_CNXN, version, max_payload, b"host::features=shell_v2,cmd\0")
        reply = await host.recv()
        assert reply[0] == A_CNXN
        return host, reply

    async def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        header = _HEADER.pack(command, arg0, arg1, len(data), sum(data), command ^ 0xFFFFFFFF)
        self.writer.write(header + data)
        await self.writer.drain()

    async def recv(self, timeout: float = 5.0) -> tuple[int, int, int, bytes, int]:
        header = await asyncio.wait_for(self.reader.readexactly(_HEADER.size), timeout)
        command, arg0, arg1, length, check, magic = _HEADER.unpack(header)
        assert magic == command ^ 0xFFFFFFFF
        data = await asyncio.wait_for(self.reader.readexactly(length), timeout) if length else b""
        return command, arg0, arg1, data, check

    async def open(self, local_id: int, service: str) -> int:
        """OPEN a stream; return the device's id (fails the test on refusal)."""
        await self.send(A_OPEN, local_id, 0, service.encode() + b"\0")
        command, device_id, arg1, _, _ = await self.recv()
        assert (command, arg1) == (A_OKAY, local_id), f"OPEN {service!r} not accepted"
        return device_id

    async def read_stream(self, local_id: int, device_id: int) -> bytes:
        """Collect WRTE payloads (acking each) until the device closes the stream."""
        chunks: list[bytes] = []
        while True:
            command, arg0, arg1, data, _ = await self.recv()
            assert (arg0, arg1) == (device_id, local_id)
            if command == A_CLSE:
                return b"".join(chunks)
            assert command == A_WRTE
            chunks.append(data)
            await self.send(A_OKAY, local_id, device_id)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


def decode_v2(stream: bytes) -> tuple[bytes, bytes, int | None]:
    stdout, stderr, code = b"", b"", None
    while stream:
        packet_id, length = struct.unpack("<BI", stream[:5])
        data, stream = stream[5 : 5 + length], stream[5 + length :]
        if packet_id == SHELL_STDOUT:
            stdout += data
        elif packet_id == SHELL_STDERR:
            stderr += data
        elif packet_id == SHELL_EXIT:
            code = data[0]
    return stdout, stderr, code


@pytest.fixture
async def server() -> AdbdServer:
    srv = AdbdServer(RecordingBackend("raw"), max_workers=8)
    await srv.start()
    yield srv
    await srv.stop()


async def test_raw_negotiates_version_and_payload(server: AdbdServer) -> None:
    host, (_, version, max_payload, banner, _) = await RawHost.connect(server.port)
    assert version == A_VERSION
    assert max_payload == 256 * 1024
    assert banner.startswith(b"device::ro.product.name=test_raw;")
    assert b"features=shell_v2,cmd" in banner
    await host.close()

    host, (_, version, max_payload, _, _) = await RawHost.connect(
        server.port, version=0x01000002, max_payload=8 * 1024 * 1024
    )
    assert (version, max_payload) == (A_VERSION, MAX_PAYLOAD)
    await host.close()


async def test_raw_old_protocol_checksums_and_flow_control(server: AdbdServer) -> None:
    host, (_, version, max_payload, _, _) = await RawHost.connect(server.port, version=A_VERSION_MIN, max_payload=4096)
    assert (version, max_payload) == (A_VERSION_MIN, 4096)
    device_id = await host.open(1, "exec:screencap -p")
    received: list[bytes] = []
    while True:
        command, arg0, arg1, data, check = await host.recv()
        assert (arg0, arg1) == (device_id, 1)
        if command == A_CLSE:
            break
        assert command == A_WRTE
        assert len(data) <= 4096
        assert check == sum(data)  # checksums are computed for protocol < 0x01000001
        received.append(data)
        if len(received) == 1:  # no second WRTE before we acknowledge the first
            with pytest.raises(asyncio.TimeoutError):
                await host.recv(timeout=0.2)
        await host.send(A_OKAY, 1, device_id)
    assert b"".join(received) == PNG  # exec: is stdout only, stderr dropped
    await host.close()


async def test_raw_refuses_unsupported_services(server: AdbdServer) -> None:
    host, _ = await RawHost.connect(server.port)
    for local_id, service in enumerate(
        ["sync:", "reverse:forward:tcp:1;tcp:2", "framebuffer:", "root:", "exec,x:ls", "nocolon"],
        start=10,
    ):
        await host.send(A_OPEN, local_id, 0, service.encode() + b"\0")
        assert (await host.recv())[:3] == (A_CLSE, 0, local_id)
    # the connection still serves
    device_id = await host.open(1, "shell,v2,raw:whoami")
    assert decode_v2(await host.read_stream(1, device_id)) == (b"raw\n", b"", 0)
    await host.close()


async def test_raw_concurrent_streams_and_stdin_packets(server: AdbdServer) -> None:
    host, _ = await RawHost.connect(server.port)
    slow = await host.open(1, "shell,v2:sleep 0.5")
    fast = await host.open(2, "shell,v2:emit out err 4")
    # stdin and close-stdin packets on the slow stream are acknowledged and ignored
    stdin = struct.pack("<BI", SHELL_STDIN, 3) + b"abc" + struct.pack("<BI", SHELL_CLOSE_STDIN, 0)
    await host.send(A_WRTE, 1, slow, stdin)
    streams: dict[int, bytes] = {1: b"", 2: b""}
    closed: set[int] = set()
    order: list[int] = []
    while closed != {1, 2}:
        command, _, local_id, data, _ = await host.recv()
        if command == A_OKAY:
            assert local_id == 1  # the ack of our stdin WRTE
        elif command == A_WRTE:
            streams[local_id] += data
            await host.send(A_OKAY, local_id, slow if local_id == 1 else fast)
        else:
            assert command == A_CLSE
            closed.add(local_id)
            order.append(local_id)
    assert order == [2, 1]  # the fast stream was not held up by the slow one
    assert decode_v2(streams[2]) == (b"out", b"err", 4)
    assert decode_v2(streams[1]) == (b"slept\n", b"", 0)
    await host.close()


async def test_raw_pty_and_interactive_shell(server: AdbdServer) -> None:
    host, _ = await RawHost.connect(server.port)
    device_id = await host.open(1, "shell,v2,TERM=xterm,pty:emit 'a\nb' 'e\n' 0")
    assert decode_v2(await host.read_stream(1, device_id)) == (b"a\r\nbe\r\n", b"", 0)
    device_id = await host.open(2, "shell,v2,pty:")
    stdout, _, code = decode_v2(await host.read_stream(2, device_id))  # a pty merges stderr
    assert code == 1 and b"interactive shells are not supported" in stdout
    await host.close()


async def test_raw_client_close_mid_command(server: AdbdServer) -> None:
    host, _ = await RawHost.connect(server.port)
    device_id = await host.open(1, "shell,v2:sleep 0.3")
    await host.send(A_CLSE, 1, device_id)
    with pytest.raises(asyncio.TimeoutError):  # nothing more arrives for the closed stream
        await host.recv(timeout=0.6)
    record = server.command_log[-1]
    assert record.exit_code is None
    assert "closed by the client" in (record.error or "")
    device_id = await host.open(2, "shell:emit a b 0")
    assert await host.read_stream(2, device_id) == b"ab"  # legacy shell merges stderr
    await host.close()


async def test_raw_bad_magic_drops_connection(server: AdbdServer) -> None:
    host, _ = await RawHost.connect(server.port)
    host.writer.write(_HEADER.pack(A_OPEN, 1, 0, 0, 0, 0))  # wrong magic
    await host.writer.drain()
    assert await asyncio.wait_for(host.reader.read(), 5) == b""
    await host.close()


async def test_raw_before_command_hook() -> None:
    calls: list[tuple[str, str]] = []

    async def hook(service: str, command: str) -> None:
        calls.append((service, command))
        if command == "refuse":
            raise CloseStream
        if command == "drop":
            raise DropConnection
        if command == "fail":
            raise RuntimeError("injected fault")
        await asyncio.sleep(0.05)

    async with AdbdServer(RecordingBackend("hooked"), before_command=hook) as srv:
        host, _ = await RawHost.connect(srv.port)
        device_id = await host.open(1, "shell,v2:whoami")
        assert decode_v2(await host.read_stream(1, device_id)) == (b"hooked\n", b"", 0)
        device_id = await host.open(2, "shell,v2:fail")
        _, stderr, code = decode_v2(await host.read_stream(2, device_id))
        assert code == BACKEND_ERROR_EXIT_CODE
        assert b"injected fault" in stderr
        await host.send(A_OPEN, 3, 0, b"shell,v2:refuse\0")
        assert (await host.recv())[:3] == (A_CLSE, 0, 3)
        await host.send(A_OPEN, 4, 0, b"shell,v2:drop\0")
        assert await asyncio.wait_for(host.reader.read(), 5) == b""
        await host.close()
        assert calls == [
            ("shell,v2", "whoami"),
            ("shell,v2", "fail"),
            ("shell,v2", "refuse"),
            ("shell,v2", "drop"),
        ]
        assert srv.command_log[-1].error == "connection dropped by before_command hook"


async def test_server_port_in_use_error() -> None:
    async with AdbdServer(RecordingBackend()) as first:
        clash = AdbdServer(RecordingBackend(), port=first.port)
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            await clash.start()


def test_bad_serial_props_rejected() -> None:
    backend = RecordingBackend()
    backend.serial_props = {"ro.product.model": "a;b"}
    with pytest.raises(ValueError, match="cannot go into the ADB banner"):
        AdbdServer(backend)


# --------------------------------------------------------------------------------------
# End to end through the real adb server and adbutils
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def private_adb() -> Iterator[PrivateAdbServer]:
    """A private adb server on a free port, this process's own child (supervised); always stopped afterwards."""
    if shutil.which("adb") is None:
        pytest.skip("the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)")
    with PrivateAdbServer() as server:
        yield server


@pytest.fixture(scope="module")
def adb_port(private_adb: PrivateAdbServer) -> int:
    return private_adb.port


@pytest.fixture(scope="module")
def adb_client(adb_port: int):  # adbutils.AdbClient (untyped)
    import adbutils

    return adbutils.AdbClient(host="127.0.0.1", port=adb_port, socket_timeout=20)


def _connect(adb_client, address: str, timeout: float = 10.0) -> None:
    result = adb_client.connect(address, timeout=timeout)
    assert result in (f"connected to {address}", f"already connected to {address}"), result
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = {info.serial: info.state for info in adb_client.list()}
        if states.get(address) == "device":
            return
        time.sleep(0.02)
    raise AssertionError(f"{address} not online after {timeout} s: {states}")


def _connect_all(adb_client, server: PrivateAdbServer, addresses: list[str], attempts: int = 3) -> None:
    """``adb connect`` every address at once. Debian's adb server has crashed (SIGSEGV) under such a
    burst; its supervisor starts a new one, which knows no devices: connect them all again. Any
    failure while the server stayed up is the test's failure."""
    import adbutils

    for attempt in range(attempts):
        deaths = len(server.deaths)
        try:
            with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
                list(pool.map(lambda a: _connect(adb_client, a), addresses))
            return
        except (adbutils.AdbError, OSError):  # refused, or reset by a server that is going down
            # A dead server is reaped and recorded by the watchdog within a few polls.
            seen = time.monotonic() + 10 * server.poll_s + 1.0
            while len(server.deaths) == deaths and time.monotonic() < seen:
                time.sleep(server.poll_s)
            if len(server.deaths) == deaths or attempt == attempts - 1:
                raise
            server.wait_serving()


@contextlib.contextmanager
def connected_farm(
    adb_client, server: PrivateAdbServer, backends: list[RecordingBackend], **kwargs
) -> Iterator[AdbdFarm]:
    with AdbdFarm(backends, **kwargs) as farm:
        try:
            _connect_all(adb_client, server, farm.addresses)
            yield farm
        finally:
            for address in farm.addresses:
                adb_client.disconnect(address)


@pytest.fixture(scope="module")
def farm(adb_client, private_adb: PrivateAdbServer) -> Iterator[AdbdFarm]:
    with connected_farm(adb_client, private_adb, [RecordingBackend("a"), RecordingBackend("b")]) as f:
        yield f


@pytest.fixture
def device(adb_client, farm: AdbdFarm):
    return adb_client.device(farm.addresses[0])


def test_adb_lists_device_with_banner(adb_port: int, farm: AdbdFarm) -> None:
    out = subprocess.run(
        ["adb", "-P", str(adb_port), "devices", "-l"], capture_output=True, text=True, timeout=10
    ).stdout
    for address in farm.addresses:
        assert f"{address}" in out
    assert "product:test_a model:TestPhone device:testdev" in out


def test_adb_connect_unreachable_returns_message(adb_client) -> None:
    port = free_port()  # nothing listens there
    result = adb_client.connect(f"127.0.0.1:{port}", timeout=10)
    assert not result.startswith("connected to"), result  # a string, never an exception
    assert f"127.0.0.1:{port}" in result, result


@pytest.mark.parametrize("code", [0, 1, 3, 127, 255, 256])
def test_shell_v2_exit_codes_and_streams(device, farm: AdbdFarm, code: int) -> None:
    result = device.shell2(["emit", "out\n", "err\n", str(code)], v2=True, timeout=10)
    assert result.returncode == code & 0xFF
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    record = farm.servers[0].command_log[-1]
    assert record.service == "shell,v2" and record.shell_v2
    assert record.argv == ("emit", "out\n", "err\n", str(code))
    assert record.exit_code == code & 0xFF


def test_shell_v2_sequences_and_unsupported_syntax(device) -> None:
    result = device.shell2("emit a '' 3 || emit b '' 0 && echo \"status=$?\"", v2=True, timeout=10)
    assert (result.returncode, result.stdout) == (0, "abstatus=0\n")
    result = device.shell2("whoami | grep a", v2=True, timeout=10)
    assert result.returncode == SYNTAX_ERROR_EXIT_CODE
    assert "pipe" in result.stderr
    result = device.shell2("no-such-tool", v2=True, timeout=10)
    assert result.returncode == 127 and "not found" in result.stderr


def test_legacy_shell(device, farm: AdbdFarm) -> None:
    assert device.shell("whoami", timeout=10) == "a"
    assert device.shell(["emit", "o", "e", "0"], timeout=10) == "oe"
    assert farm.servers[0].command_log[-1].service == "shell"
    # adbutils' v1 fallback appends "; echo X4EXIT:$?" and parses the status back
    result = device.shell2(["emit", "o", "", "9"], v2=False, timeout=10)
    assert (result.returncode, result.output) == (9, "o")


def test_exec_and_shell_binary_payload(device) -> None:
    assert device.shell(["screencap", "-p"], encoding=None, timeout=20) == PNG + (
        b"warning: stderr must not reach exec:\n"  # legacy shell merges stderr, like adbd
    )
    with device.open_transport(timeout=20) as conn:
        conn.send_command("exec:screencap -p")
        conn.check_okay()
        chunks: list[bytes] = []
        while chunk := conn.conn.recv(1 << 16):
            chunks.append(chunk)
    assert b"".join(chunks) == PNG
    raw = device.shell2(["screencap", "-p"], v2=True, encoding=None, timeout=20)
    assert raw.stdout == PNG and raw.returncode == 0


@pytest.mark.parametrize("text", NASTY_STRINGS)
def test_argv_round_trip_through_adb(device, farm: AdbdFarm, text: str) -> None:
    backend = farm.servers[0].backend
    assert isinstance(backend, RecordingBackend)
    result = device.shell2(["input", "text", text], v2=True, timeout=10, encoding=None)
    assert result.returncode == 0
    assert result.stdout == text.encode()
    record = farm.servers[0].command_log[-1]
    assert record.argv == ("input", "text", text)
    assert record.command == " ".join(map(shlex.quote, ["input", "text", text]))
    assert backend.calls[-1][0] == ["input", "text", text]


def test_slow_device_does_not_stall_others(adb_client, farm: AdbdFarm) -> None:
    slow = adb_client.device(farm.addresses[0])
    fast = adb_client.device(farm.addresses[1])
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(slow.shell2, ["sleep", "1.5"], v2=True, timeout=10)
        time.sleep(0.1)
        start = time.monotonic()
        for _ in range(5):
            assert fast.shell2("whoami", v2=True, timeout=10).stdout == "b\n"
        assert time.monotonic() - start < 1.0
        assert pending.result().stdout == "slept\n"


def test_backend_exception_becomes_exit_code(device, farm: AdbdFarm, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="darwin.envs.sim.adbd"):
        result = device.shell2(["boom", "now"], v2=True, timeout=10)
        assert result.returncode == BACKEND_ERROR_EXIT_CODE
        assert "RuntimeError: backend exploded: now" in result.stderr
        wrong = device.shell2("wrongtype", v2=True, timeout=10)
        assert wrong.returncode == BACKEND_ERROR_EXIT_CODE
        assert "expected ShellResult" in wrong.stderr
    assert any("backend exploded" in r.getMessage() or r.exc_info for r in caplog.records)
    records = farm.servers[0].command_log
    assert "RuntimeError" in (records[-2].error or "")
    assert device.shell2("whoami", v2=True, timeout=10).returncode == 0  # still serving


def test_unsupported_service_fails_cleanly(device) -> None:
    import adbutils

    with pytest.raises(adbutils.AdbError):
        device.sync.stat("/sdcard")
    assert device.shell2("whoami", v2=True, timeout=10).stdout == "a\n"


def test_hang_before_open_is_bounded_by_shell2_timeout(device, farm: AdbdFarm) -> None:
    import adbutils

    server = farm.servers[0]

    async def hang(service: str, command: str) -> None:
        if command == "hang":  # the device does not answer the OPEN for 2 s
            await asyncio.sleep(2)

    server.before_command = hang
    try:
        start = time.monotonic()
        with pytest.raises(adbutils.AdbTimeout):
            device.shell2("hang", v2=True, timeout=1)
        assert time.monotonic() - start < 5
    finally:
        server.before_command = None
    # adb only closes the abandoned stream once the device answers the OPEN
    record = next(r for r in reversed(server.command_log) if r.command == "hang")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and record.error is None:
        time.sleep(0.02)
    assert "closed" in (record.error or ""), record
    assert record.exit_code is None
    assert device.shell2("whoami", v2=True, timeout=10).stdout == "a\n"


def test_sixteen_devices_in_parallel(adb_client, private_adb: PrivateAdbServer) -> None:
    backends = [RecordingBackend(f"d{i}") for i in range(16)]
    with connected_farm(adb_client, private_adb, backends) as farm16:
        assert len(set(farm16.addresses)) == 16

        def ask(i: int) -> str:
            dev = adb_client.device(farm16.addresses[i])
            return dev.shell2(["input", "text", f"hello {i}"], v2=True, timeout=10).stdout

        with ThreadPoolExecutor(max_workers=16) as pool:
            assert list(pool.map(ask, range(16))) == [f"hello {i}" for i in range(16)]
        for i, server in enumerate(farm16.servers):
            assert [r.argv for r in server.command_log] == [("input", "text", f"hello {i}")]


def test_farm_consecutive_ports_and_clean_failure() -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        farm = AdbdFarm([RecordingBackend(), RecordingBackend()], port_base=taken - 1)
        with pytest.raises(OSError, match=f"127.0.0.1:{taken}"):
            farm.start()
        assert farm._thread is None  # nothing left running
    base = free_port()
    try:
        farm = AdbdFarm([RecordingBackend(), RecordingBackend()], port_base=base)
        farm.start()
    except OSError as exc:  # base + 1 happened to be taken
        pytest.skip(f"ports {base}..{base + 1} not free: {exc}")
    try:
        assert farm.addresses == [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]
    finally:
        farm.stop()
    with pytest.raises(ValueError, match="port_base"):
        AdbdFarm([RecordingBackend()], port_base=70000)


def test_connecting_survives_an_adb_server_that_dies_and_is_restarted() -> None:
    """The recovery the farm fixtures rely on: the server is dead when the connects start; its
    supervisor's new one gets every device connected."""
    import adbutils

    if shutil.which("adb") is None:
        pytest.skip("the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb)")
    with PrivateAdbServer() as server, AdbdFarm([RecordingBackend("x"), RecordingBackend("y")]) as farm:
        client = adbutils.AdbClient(host="127.0.0.1", port=server.port, socket_timeout=20)
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _connect_all(client, server, farm.addresses)
        assert len(server.deaths) == 1 and server.restarts == 1
        assert {d.serial for d in client.list()} == set(farm.addresses)
