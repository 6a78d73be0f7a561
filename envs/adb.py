"""Phones over ADB: :class:`AdbPhoneEnv` drives any ADB device through a real adb server.

Cloud phones (``adb connect host:port``), emulators, USB phones and SimPhones served by
``darwin phones serve`` all look the same here. What it does, and why:

- **A fast client** (:class:`AdbServerClient`) speaks the adb server's smart-socket
  protocol directly: the device stays connected and its features are checked once at
  connect; each command is one TCP connection to the adb server with no version probe
  and no sleep on close; output streams into a chunk list; ``exec:screencap -p`` gives
  raw PNG bytes and shell protocol v2 gives exit codes. adbutils opens two connections
  per call and sleeps 10 ms on each close (docs/benchmarks.md has the measured difference).
- **A deadline on every device call**: the whole call (connect, transport switch, the
  device answering the OPEN, reading the output) must finish by its deadline, or it
  raises :class:`~darwin.envs.base.InfraError` ``deadline``.
- **Argv lists only**: every command is an argv list, quoted for the device's ``sh``
  with :func:`shlex.quote`; nothing is ever built as a host shell string.
- **Typing byte-exact**: printable ASCII goes through ``input text`` (spaces as ``%s``,
  a literal ``%s`` split across two commands so Android never turns it into a space),
  newlines become ``input keyevent 66`` (ENTER: a new line in multi-line fields, submit
  in single-line ones, as the ``type`` action specifies), and any other text (tabs,
  Chinese, emoji) goes through the ADBKeyboard IME as a base64 broadcast.
- **Validated screenshots**: a PNG that does not decode, has the wrong size or is all
  black raises ``InfraError`` (``bad_screenshot`` / ``black_screen``), never a silent
  black image.
- **Screen stabilisation**: after an action, poll until two consecutive screenshots
  match within a tolerance (bounded by ``settle_timeout_s``); the paper's fixed 2 s wait
  is ``settle="fixed"``. The settled frame is reused as the next observation.
- **Failures are truncations**: every infrastructure failure raises ``InfraError`` with
  a cause; the next call first reconnects (``adb disconnect`` + ``adb connect``, result
  checked, bounded exponential backoff with tenacity, then a ping); after
  ``quarantine_after`` consecutive failures the phone is quarantined (calls fail at once
  with cause ``quarantined``) until :meth:`AdbPhoneEnv.release_quarantine`.

Example (a SimPhone served as an ADB device; needs the ``adb`` binary)::

    from darwin.envs.providers import SimFarm
    from darwin.actions import OpenApp, Type

    with SimFarm(count=2, adb_port=5037) as farm:
        env = farm.acquire()                      # an AdbPhoneEnv, connected
        env.execute(OpenApp(app="Chrome"))
        shot = env.screenshot((252, 560))         # (560, 252, 3) uint8
        state = env.probe_state()                 # the SimPhone's JSON state
        farm.release(env)
"""

from __future__ import annotations

import base64
import concurrent.futures
import csv
import io
import logging
import re
import shlex
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import orjson
from isal import isal_zlib
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, ConfigDict, Field, model_validator
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from darwin.actions import (
    Action,
    Answer,
    Click,
    Direction,
    Drag,
    Finished,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
    Type,
    Wait,
)
from darwin.envs.base import InfraError, PhoneEnv
from darwin.types import StateSetup

__all__ = [
    "AdbEnvConfig",
    "AdbPhoneEnv",
    "AdbServerClient",
    "AppMap",
    "AppTarget",
    "CallRecord",
    "PhoneHealth",
    "ShellOutput",
    "decode_screenshot",
    "load_app_overrides",
    "type_commands",
]

logger = logging.getLogger(__name__)

KEYCODE_HOME = 3
KEYCODE_BACK = 4
KEYCODE_ENTER = 66
ADB_KEYBOARD_IME = "com.android.adbkeyboard/.AdbIME"
LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_NETWORK_SERIAL = re.compile(r"^[^\s:]+:\d{1,5}$")
_PACKAGE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")
_PRINTABLE_ASCII = re.compile(r"^[\x20-\x7e]*$")


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


# ======================================================================================
# Screenshots
# ======================================================================================


def _decode_png_unfiltered(data: bytes) -> np.ndarray | None:
    """Fast path for 8-bit RGB/RGBA PNGs whose rows all use filter 0 (what SimPhone and
    some screen-capture tools write): ISA-L inflate + a reshape. ``None`` otherwise."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        return None
    idat = []
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat.append(data[pos + 8 : pos + 8 + length])
        elif kind == b"IEND":
            break
        pos += 12 + length
    try:
        raw = isal_zlib.decompress(b"".join(idat))
    except isal_zlib.error:
        return None
    stride = width * channels + 1
    if len(raw) != stride * height:
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride)
    if rows[:, 0].any():
        return None
    return rows[:, 1:].reshape(height, width, channels)[..., :3]


def decode_screenshot(data: bytes) -> np.ndarray:
    """Decode ``screencap -p`` bytes to ``(H, W, 3)`` uint8; raises ``InfraError`` on
    anything that is not a complete PNG (truncated transfers, error text, empty output)."""
    if not data.startswith(_PNG_SIGNATURE):
        head = data[:60]
        raise InfraError("bad_screenshot", f"screencap returned {len(data)} bytes that are not a PNG: {head!r}")
    array = _decode_png_unfiltered(data)
    if array is not None:
        return array
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InfraError("bad_screenshot", f"screencap PNG of {len(data)} bytes does not decode: {exc}") from None


def _resize(array: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    if size is None:
        return array
    w, h = size
    if array.shape[1] == w and array.shape[0] == h:
        return array
    image = Image.fromarray(np.ascontiguousarray(array))  # a contiguous copy is cheaper for Pillow
    factor = min(array.shape[1] // w, array.shape[0] // h)
    if factor >= 2:
        image = image.reduce(factor)
    return np.asarray(image.resize((w, h), Image.Resampling.BILINEAR))


@dataclass
class _Frame:
    png: bytes
    captured_at: float
    _array: np.ndarray | None = None
    _thumb: np.ndarray | None = None
    _resized: tuple[tuple[int, int], np.ndarray] | None = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = decode_screenshot(self.png)
        return self._array

    def resized(self, size: tuple[int, int] | None) -> np.ndarray:
        """The frame at ``size`` (cached: observations of one frame are resized once)."""
        if size is None:
            return self.array()
        if self._resized is None or self._resized[0] != size:
            self._resized = (size, _resize(self.array(), size))
        return self._resized[1]

    def thumbnail(self) -> np.ndarray:
        if self._thumb is None:
            a = self.array()
            self._thumb = np.asarray(Image.fromarray(a).reduce(8), dtype=np.int16)
        return self._thumb


# ======================================================================================
# open_app: names to packages
# ======================================================================================


class AppTarget(NamedTuple):
    """Where ``open_app`` goes: a package and, if known, the activity for ``am start -n``."""

    package: str
    activity: str | None = None


def _app_key(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


class AppMap:
    """App names (as agents write them) to Android packages and activities.

    Built from SPA-Bench's task lists (``task_app`` / ``task_app_CHN`` -> ``adb_app``,
    ``adb_home_page``), the SimPhone apps (label, id, aliases) and your overrides, in that
    order (later wins). Lookups ignore case, spaces and punctuation, so ``"Google Play"``,
    ``"google_play"`` and ``"googleplay"`` are the same app; a package name works too.

    >>> apps = AppMap.default(overrides={"My Bank": "com.bank.app/.Main"})
    >>> apps.resolve("booking.com")
    AppTarget(package='com.booking', activity='com.booking.appindex.presentation.activity.SearchActivity')
    >>> apps.resolve("my bank")
    AppTarget(package='com.bank.app', activity='com.bank.app.Main')
    >>> apps.resolve("com.example.unlisted")
    AppTarget(package='com.example.unlisted', activity=None)
    >>> apps.resolve("no such app") is None
    True
    """

    def __init__(self, entries: Mapping[str, AppTarget | str] | None = None) -> None:
        self._by_key: dict[str, AppTarget] = {}
        self.update(entries or {})

    @staticmethod
    def _target(value: AppTarget | str) -> AppTarget:
        if isinstance(value, AppTarget):
            return value
        package, _, activity = value.partition("/")
        if not _PACKAGE_NAME.match(package):
            raise ValueError(f"app target {value!r} is not 'package' or 'package/activity' (e.g. 'com.android.chrome/com.google.android.apps.chrome.Main')")
        if activity.startswith("."):
            activity = package + activity
        return AppTarget(package, activity or None)

    def add(self, name: str, target: AppTarget | str) -> None:
        """Map ``name`` (and the target's package name) to ``target``."""
        resolved = self._target(target)
        key = _app_key(name)
        if not key:
            raise ValueError(f"app name {name!r} has no letters or digits")
        self._by_key[key] = resolved
        self._by_key.setdefault(_app_key(resolved.package), resolved)

    def update(self, entries: Mapping[str, AppTarget | str]) -> None:
        for name, target in entries.items():
            self.add(name, target)

    def resolve(self, name: str) -> AppTarget | None:
        """The target for ``name``; an unlisted package name maps to itself (launcher
        intent); ``None`` if the name is unknown."""
        target = self._by_key.get(_app_key(name))
        if target is not None:
            return target
        if _PACKAGE_NAME.match(name.strip()):
            return AppTarget(name.strip())
        return None

    def __len__(self) -> int:
        return len(self._by_key)

    @classmethod
    def spa_bench(cls) -> AppMap:
        """The package/activity columns of SPA-Bench's single-app task lists (ENG + CHN)."""
        apps = cls()
        folder = resources.files("darwin") / "data" / "spa-bench"
        for name in ("single-app-ENG.csv", "single-app-CHN.csv"):
            with (folder / name).open(encoding="utf-8-sig") as handle:
                for row in csv.DictReader(handle):
                    target = AppTarget(row["adb_app"].strip(), row["adb_home_page"].strip() or None)
                    for column in ("task_app", "task_app_CHN"):
                        if row.get(column):
                            apps.add(row[column], target)
        return apps

    @classmethod
    def sim_apps(cls) -> AppMap:
        """The SimPhone's apps: label, id and aliases to package and activity."""
        from darwin.envs.sim.apps import default_apps

        apps = cls()
        for app in default_apps():
            target = AppTarget(app.package, app.activity)
            for name in (app.label, app.id, *app.aliases):
                apps.add(name, target)
        return apps

    @classmethod
    def default(cls, overrides: Mapping[str, AppTarget | str] | None = None) -> AppMap:
        """SPA-Bench, then the SimPhone apps, then ``overrides``."""
        apps = cls.spa_bench()
        apps._by_key.update(cls.sim_apps()._by_key)
        apps.update(overrides or {})
        return apps


# ======================================================================================
# Typing
# ======================================================================================


def _input_text_chunks(text: str, max_chars: int) -> list[str]:
    """Printable-ASCII ``text`` as ``input text`` arguments that type it exactly.

    Spaces become ``%s``; a literal ``%`` followed by ``s`` is split across two
    arguments (Android would turn ``%s`` into a space, and ``input text`` has no escape).
    """
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for i, ch in enumerate(text):
        piece = "%s" if ch == " " else ch
        if size + len(piece) > max_chars:
            chunks.append("".join(current))
            current, size = [], 0
        current.append(piece)
        size += len(piece)
        if ch == "%" and i + 1 < len(text) and text[i + 1] == "s":
            chunks.append("".join(current))
            current, size = [], 0
    if current:
        chunks.append("".join(current))
    return chunks


def type_commands(content: str, max_chars: int = 200, ime_for_ascii: bool = False) -> list[list[str]]:
    """The argv lists that type ``content`` into the focused field, byte-exact.

    Lines are separated by ``input keyevent 66`` (ENTER: a new line in a multi-line
    field, submit in a single-line one). A line of printable ASCII is typed with
    ``input text``; any other line (tabs, CJK, emoji, control characters) is committed
    by the ADBKeyboard IME from a base64 payload.

    >>> type_commands("50%s off\\n")
    [['input', 'text', '50%'], ['input', 'text', 's%soff'], ['input', 'keyevent', '66']]
    >>> type_commands("中文")
    [['am', 'broadcast', '-a', 'ADB_INPUT_B64', '--es', 'msg', '5Lit5paH']]
    """
    commands: list[list[str]] = []
    for i, line in enumerate(content.split("\n")):
        if i > 0:
            commands.append(["input", "keyevent", str(KEYCODE_ENTER)])
        if not line:
            continue
        if _PRINTABLE_ASCII.match(line) and not ime_for_ascii:
            commands.extend(["input", "text", chunk] for chunk in _input_text_chunks(line, max_chars))
        else:
            payload = base64.b64encode(line.encode("utf-8")).decode("ascii")
            commands.append(["am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", payload])
    return commands


# ======================================================================================
# The environment
# ======================================================================================


class AdbEnvConfig(BaseModel):
    """Settings of :class:`AdbPhoneEnv`; every duration is in seconds.

    The defaults suit cloud phones; ``AdbEnvConfig.for_sim()`` suits served SimPhones
    (no animations: no settle delay, and the state probe enabled).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    adb_host: str = Field(default="127.0.0.1", description="host of the adb server")
    adb_port: int = Field(default=5037, ge=1, le=65535, description="port of the adb server")
    command_timeout_s: float = Field(default=10.0, gt=0, description="deadline of one shell command")
    screenshot_timeout_s: float = Field(default=15.0, gt=0, description="deadline of one screencap")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="deadline of adb connect + waiting for state 'device'")
    settle: Literal["poll", "fixed", "none"] = Field(default="poll", description="after an action: poll until two screens match, sleep fixed_wait_s, or nothing")
    settle_initial_delay_s: float = Field(default=0.3, ge=0, description="sleep before the first settle screenshot")
    settle_interval_s: float = Field(default=0.2, ge=0, description="sleep between settle screenshots")
    settle_timeout_s: float = Field(default=5.0, ge=0, description="stop polling after this long (the screen may still move)")
    settle_tolerance: float = Field(default=1.0, ge=0, description="mean absolute difference (0-255) of 1/8-size thumbnails below which two screens match")
    fixed_wait_s: float = Field(default=2.0, ge=0, description="the paper's wait after each action (settle='fixed')")
    reuse_settled_frame: bool = Field(default=True, description="serve the settled screenshot as the next observation")
    frame_max_age_s: float = Field(default=1.0, ge=0, description="oldest settled frame that may be reused")
    long_press_ms: int = Field(default=1000, ge=500, description="hold time of a long press (a swipe that does not move)")
    scroll_ms: int = Field(default=300, ge=1, lt=500, description="swipe duration of a scroll (a fling)")
    scroll_distance: float = Field(default=0.4, gt=0, le=1, description="scroll swipe length as a fraction of the screen height (width for left/right)")
    drag_ms: int = Field(default=1000, ge=500, description="swipe duration of a drag")
    text_chunk_chars: int = Field(default=200, ge=2, description="longest argument of one 'input text'")
    ime_for_ascii: bool = Field(default=False, description="type ASCII through the IME as well")
    setup_ime: bool = Field(default=True, description="'ime enable' + 'ime set' ADBKeyboard at every connect (needed for non-ASCII text)")
    ime_component: str = Field(default=ADB_KEYBOARD_IME)
    probe_command: tuple[str, ...] | None = Field(default=None, description="argv printing the phone state as JSON (SimPhones: ('darwin-state',))")
    answer_command: tuple[str, ...] | None = Field(default=None, description="argv prefix that records an answer on the phone (SimPhones: ('darwin-answer',))")
    setup_command: tuple[str, ...] | None = Field(default=None, description="argv prefix that applies a task's setup steps, given as one JSON argument (SimPhones: ('darwin-setup',)); None: tasks with setup cannot run")
    reject_black_screens: bool = Field(default=True, description="an all-black screenshot is an infrastructure failure (screen off, capture broken)")
    reconnect_attempts: int = Field(default=6, ge=1, description="reconnect tries before the call fails")
    reconnect_backoff_s: float = Field(default=0.2, ge=0, description="first wait between reconnect tries (doubles)")
    reconnect_backoff_max_s: float = Field(default=5.0, ge=0)
    reconnect_timeout_s: float = Field(default=60.0, gt=0, description="deadline of a whole reconnect (all tries and waits)")
    quarantine_after: int = Field(default=3, ge=1, description="consecutive failures (calls or reconnects) that quarantine the phone")
    call_log_size: int = Field(default=10_000, ge=0, description="recent device calls kept in AdbPhoneEnv.calls")

    @model_validator(mode="after")
    def _check(self) -> AdbEnvConfig:
        problems = []
        if self.reconnect_backoff_max_s < self.reconnect_backoff_s:
            problems.append(f"reconnect_backoff_max_s={self.reconnect_backoff_max_s} < reconnect_backoff_s={self.reconnect_backoff_s}; raise the maximum")
        if self.probe_command is not None and not self.probe_command:
            problems.append("probe_command=() is empty; use None for no probe")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def for_sim(cls, **overrides: Any) -> AdbEnvConfig:
        """Settings for SimPhones served by ``darwin phones serve``: state probe on, no
        animation delays (two immediate screenshots already match)."""
        from darwin.envs.sim.device import ANSWER_COMMAND, SETUP_COMMAND, STATE_COMMAND

        values: dict[str, Any] = {
            "probe_command": (STATE_COMMAND,),
            "answer_command": (ANSWER_COMMAND,),
            "setup_command": (SETUP_COMMAND,),
            "settle_initial_delay_s": 0.0,
            "settle_interval_s": 0.0,
        }
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class CallRecord:
    """One device call (or reconnect) as :class:`AdbPhoneEnv` made it."""

    op: str
    started: float
    duration: float
    timeout: float
    cause: str | None = None
    """``None`` on success, else the ``InfraError`` cause."""


@dataclass
class PhoneHealth:
    """What a phone's env knows about its health (:meth:`AdbPhoneEnv.health`)."""

    name: str
    serial: str
    state: Literal["ok", "recovering", "quarantined"]
    consecutive_failures: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    reconnects: int = 0
    calls: int = 0
    last_error: str | None = None


class AdbPhoneEnv(PhoneEnv):
    """A phone reached through a real adb server (cloud phone, emulator, USB, served SimPhone).

    Args:
        serial: ``host:port`` (connected with ``adb connect``) or a USB/emulator serial.
        config: :class:`AdbEnvConfig`.
        apps: :class:`AppMap` for ``open_app`` (default: SPA-Bench + SimPhone apps).
        state_probe: ``probe(env) -> dict | None`` for rule verification; overrides
            ``config.probe_command``.
        name: a label for logs (default: the serial).
        connect: connect now (raises ``InfraError`` if the phone is unreachable).

    Every public method raises :class:`~darwin.envs.base.InfraError` with a cause when the
    phone or its connection fails, except :meth:`go_home` (best-effort cleanup between
    episodes: failures are logged and counted, and the next call reconnects). Each phone
    runs its blocking calls on its own thread, so a hung phone never holds up another.

    Example (a served SimPhone on 127.0.0.1:6101 and an adb server on 5037)::

        env = AdbPhoneEnv("127.0.0.1:6101", AdbEnvConfig.for_sim())
        env.execute(Type(content="hello; world %s\\n"))
        env.health().state          # 'ok'
    """

    def __init__(
        self,
        serial: str,
        config: AdbEnvConfig | None = None,
        *,
        apps: AppMap | None = None,
        state_probe: Callable[[AdbPhoneEnv], dict[str, Any] | None] | None = None,
        name: str | None = None,
        connect: bool = True,
    ) -> None:
        self.serial = serial
        self.config = config or AdbEnvConfig()
        self.apps = apps if apps is not None else AppMap.default()
        self.state_probe = state_probe
        self.name = name or serial
        self.client = AdbServerClient(self.config.adb_host, self.config.adb_port)
        self.device_size: tuple[int, int] = (0, 0)
        self.last_error: str | None = None
        """Why the last ``open_app`` did nothing (unknown app), like SimPhoneEnv's."""
        self.last_answer: str | None = None
        self.calls: deque[CallRecord] = deque(maxlen=self.config.call_log_size)
        """Recent device calls with durations and deadlines (for tests and monitoring)."""
        self._lock = threading.RLock()
        self._frame: _Frame | None = None  # the settled frame, reusable as the next observation
        self._last_frame: _Frame | None = None  # the last valid capture
        self._broken = False
        self._quarantined = False
        self._consecutive_failures = 0
        self._failures: Counter[str] = Counter()
        self._reconnects = 0
        self._n_calls = 0
        self._last_error: str | None = None
        self._ime_warned = False
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"adb-{serial}")
        if connect:
            self.connect()

    def __repr__(self) -> str:
        return f"AdbPhoneEnv({self.serial!r}, state={self.health().state!r})"

    # -- connection -------------------------------------------------------------------
    @property
    def network(self) -> bool:
        """Whether the serial is ``host:port`` (reached with ``adb connect``)."""
        return bool(_NETWORK_SERIAL.match(self.serial))

    def connect(self) -> None:
        """Connect (``adb connect`` for ``host:port``), wait for state ``device``, read the
        screen size and set up the IME, retrying with bounded backoff like a reconnect.
        Raises ``InfraError`` (the last attempt's cause) on failure."""
        with self._lock:
            if self._quarantined:
                raise InfraError("quarantined", f"{self.name} is quarantined ({self._last_error}); release it after a hard reset")
            self._recover(first=True)

    def _connect_once(self, deadline: float) -> None:
        if self.network:
            self.client.connect_device(self.serial, deadline)
        self._wait_online(deadline)
        features = self.client.host_request(f"host-serial:{self.serial}:features", deadline)
        if "shell_v2" not in features.split(","):
            raise InfraError(
                "unsupported_device",
                f"{self.serial} lacks the shell_v2 feature (features: {features!r}); AdbPhoneEnv needs Android 7 or later",
            )
        self.device_size = self._read_size(deadline)
        if self.config.setup_ime:
            self._setup_ime(deadline)

    def _wait_online(self, deadline: float) -> None:
        state = "missing"
        while True:
            state = self.client.device_state(self.serial, deadline)
            if state == "device":
                return
            if state == "unauthorized":
                raise InfraError("unauthorized", f"{self.serial} is unauthorized: accept the RSA key prompt on the phone")
            if deadline - time.monotonic() < 0.05:
                raise InfraError("offline", f"{self.serial} is {state!r}, not 'device'")
            time.sleep(0.02)

    def _read_size(self, deadline: float) -> tuple[int, int]:
        out = self._shell_checked(["wm", "size"], deadline).stdout.decode("utf-8", "replace")
        match = re.search(r"Override size: (\d+)x(\d+)", out) or re.search(r"Physical size: (\d+)x(\d+)", out)
        if match is None:
            raise InfraError("adb_error", f"`wm size` on {self.serial} printed {out[:200]!r}, no 'Physical size: WxH'")
        w, h = int(match.group(1)), int(match.group(2))
        display = self.client.shell(self.serial, ["dumpsys", "display"], deadline).stdout.decode("utf-8", "replace")
        rotation = re.search(r"orientation=(\d)", display)
        if rotation is not None and int(rotation.group(1)) % 2 == 1:
            w, h = h, w
        return w, h

    def _setup_ime(self, deadline: float) -> None:
        ime = self.config.ime_component
        for argv in (["ime", "enable", ime], ["ime", "set", ime]):
            result = self.client.shell(self.serial, argv, deadline)
            if result.exit_code != 0 or b"Unknown input method" in result.stdout + result.stderr:
                if not self._ime_warned:
                    logger.warning(
                        "%s: `%s` failed (%s); typing non-ASCII text will not work. Install ADBKeyboard "
                        "(github.com/senzhk/ADBKeyBoard) on the phone or set AdbEnvConfig(setup_ime=False)",
                        self.name, " ".join(argv), (result.stderr or result.stdout).decode("utf-8", "replace").strip(),
                    )
                    self._ime_warned = True
                return

    def _reconnect_once(self, deadline: float, disconnect: bool) -> None:
        self._frame = None
        self._last_frame = None
        if disconnect and self.network:
            self.client.disconnect_device(self.serial, deadline)
        self._connect_once(deadline)
        ping = self.client.shell(self.serial, ["echo", "darwin-ping"], deadline)
        if ping.exit_code != 0 or ping.stdout != b"darwin-ping\n":
            raise InfraError("adb_error", f"ping after connecting returned {ping!r}")

    def _recover(self, first: bool = False) -> None:
        """(Re)connect with bounded exponential backoff; raise ``InfraError`` if it fails.

        A reconnect first drops the old transport (``adb disconnect``) so the adb server
        dials a fresh one; the whole thing is bounded by ``reconnect_timeout_s``.
        """
        cfg = self.config
        op = "connect" if first else "reconnect"
        start = time.monotonic()
        deadline = start + cfg.reconnect_timeout_s
        backoff = wait_exponential(multiplier=cfg.reconnect_backoff_s, max=cfg.reconnect_backoff_max_s)
        retrying = Retrying(
            stop=stop_after_attempt(cfg.reconnect_attempts),
            wait=lambda state: min(backoff(state), max(0.0, deadline - time.monotonic())),
            retry=retry_if_exception_type(InfraError),
            reraise=True,
            before_sleep=lambda state: logger.info("%s: %s try %d failed: %s", self.name, op, state.attempt_number, state.outcome.exception() if state.outcome else "?"),
        )
        cause: str | None = None
        try:
            for attempt in retrying:
                with attempt:
                    if deadline - time.monotonic() <= 0:
                        raise InfraError("deadline", f"{op} budget of {cfg.reconnect_timeout_s:g} s spent")
                    tries = attempt.retry_state.attempt_number
                    self._reconnect_once(min(deadline, time.monotonic() + cfg.connect_timeout_s + cfg.command_timeout_s), disconnect=not first or tries > 1)
        except InfraError as exc:
            if first:
                cause = exc.cause
                self._note_failure(exc)
                raise
            cause = "reconnect_failed"
            failure = InfraError("reconnect_failed", f"{self.serial} did not come back within {cfg.reconnect_timeout_s:g} s: {exc}")
            self._note_failure(failure)
            raise failure from exc
        finally:
            self._n_calls += 1
            self._record(CallRecord(op, start, time.monotonic() - start, cfg.reconnect_timeout_s, cause))
        self._broken = False
        if not first:
            self._reconnects += 1
            logger.info("%s: reconnected after %.2f s", self.name, time.monotonic() - start)

    # -- health -----------------------------------------------------------------------
    @property
    def quarantined(self) -> bool:
        """True after ``quarantine_after`` consecutive failures: every call then fails
        with cause ``quarantined`` until :meth:`release_quarantine`."""
        return self._quarantined

    def release_quarantine(self) -> None:
        """Put the phone back in service (e.g. after a provider's hard reset); the next
        call reconnects first."""
        with self._lock:
            self._quarantined = False
            self._broken = True
            self._consecutive_failures = 0
            logger.info("%s: released from quarantine", self.name)

    def health(self) -> PhoneHealth:
        state: Literal["ok", "recovering", "quarantined"] = "quarantined" if self._quarantined else ("recovering" if self._broken else "ok")
        return PhoneHealth(self.name, self.serial, state, self._consecutive_failures, dict(self._failures), self._reconnects, self._n_calls, self._last_error)

    def _record(self, record: CallRecord) -> None:
        self.calls.append(record)

    def _note_failure(self, exc: InfraError) -> None:
        self._broken = True
        self._consecutive_failures += 1
        self._failures[exc.cause] += 1
        self._last_error = str(exc)
        if not self._quarantined and self._consecutive_failures >= self.config.quarantine_after:
            self._quarantined = True
            logger.error("%s: quarantined after %d consecutive failures (last: %s)", self.name, self._consecutive_failures, exc)

    def _guard(self, op: str, timeout: float, fn: Callable[[float], Any], recover: bool = True) -> Any:
        """Run ``fn(deadline)`` as one device call: recover first if needed, record it,
        count failures, quarantine."""
        if self._quarantined:
            raise InfraError("quarantined", f"{self.name} is quarantined ({self._last_error}); release it after a hard reset")
        if recover and self._broken:
            self._recover()
        start = time.monotonic()
        cause = None
        try:
            result = fn(start + timeout)
        except InfraError as exc:
            cause = exc.cause
            self._note_failure(exc)
            raise
        finally:
            self._n_calls += 1
            self._record(CallRecord(op, start, time.monotonic() - start, timeout, cause))
        self._consecutive_failures = 0
        return result

    # -- device calls -----------------------------------------------------------------
    def _shell_checked(self, argv: Sequence[str] | str, deadline: float) -> ShellOutput:
        result = self.client.shell(self.serial, argv, deadline)
        if result.exit_code != 0:
            command = argv if isinstance(argv, str) else shlex.join(argv)
            raise InfraError(
                "command_failed",
                f"`{command[:120]}` exited {result.exit_code} on {self.serial}: "
                f"{(result.stderr or result.stdout).decode('utf-8', 'replace').strip()[:300]}",
            )
        return result

    def shell(self, argv: Sequence[str], timeout: float | None = None) -> ShellOutput:
        """Run one command (an argv list) with a deadline; any exit code is returned."""
        if isinstance(argv, str):
            raise TypeError("AdbPhoneEnv.shell takes an argv list, not a string (no host-side shell strings)")
        with self._lock:
            return self._guard("shell", timeout or self.config.command_timeout_s, lambda d: self.client.shell(self.serial, argv, d))

    def _run(self, commands: Sequence[Sequence[str]], op: str) -> ShellOutput:
        """Run commands in one round trip (joined with ``&&``: the first failure stops)."""
        if not commands:  # e.g. typing an empty string
            return ShellOutput(b"", b"", 0)
        script = " && ".join(" ".join(shlex.quote(a) for a in argv) for argv in commands)
        return self._guard(op, self.config.command_timeout_s, lambda d: self._shell_checked(script, d))

    def _capture(self) -> _Frame:
        def grab(deadline: float) -> _Frame:
            data = self.client.exec_out(self.serial, ["screencap", "-p"], deadline)
            last = self._last_frame
            if last is not None and last.png == data:  # unchanged screen: already decoded and checked
                frame = _Frame(data, time.monotonic(), last._array, last._thumb, last._resized)
                self._last_frame = frame
                return frame
            frame = _Frame(data, time.monotonic())
            array = frame.array()  # validate now: a bad frame is a failure of this call
            w, h = self.device_size
            if array.shape[:2] not in ((h, w), (w, h)):
                raise InfraError("bad_screenshot", f"screencap gave {array.shape[1]}x{array.shape[0]}, the screen is {w}x{h}")
            if self.config.reject_black_screens and not array.any():
                raise InfraError("black_screen", f"{self.serial} returned an all-black screen (screen off or capture broken)")
            self._last_frame = frame
            return frame

        return self._guard("screencap", self.config.screenshot_timeout_s, grab)

    def _settle(self) -> None:
        cfg = self.config
        self._frame = None
        if cfg.settle == "none":
            return
        if cfg.settle == "fixed":
            time.sleep(cfg.fixed_wait_s)
            return
        end = time.monotonic() + cfg.settle_timeout_s
        if cfg.settle_initial_delay_s:
            time.sleep(cfg.settle_initial_delay_s)
        previous = self._capture()
        while time.monotonic() < end:
            if cfg.settle_interval_s:
                time.sleep(min(cfg.settle_interval_s, max(0.0, end - time.monotonic())))
            current = self._capture()
            if self._same(previous, current):
                previous = current
                break
            previous = current
        else:
            logger.debug("%s: screen still changing after %.1f s", self.name, cfg.settle_timeout_s)
        self._frame = previous

    def _same(self, a: _Frame, b: _Frame) -> bool:
        if a.png == b.png:
            return True
        ta, tb = a.thumbnail(), b.thumbnail()
        return ta.shape == tb.shape and float(np.abs(ta - tb).mean()) <= self.config.settle_tolerance

    # -- PhoneEnv -----------------------------------------------------------------------
    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        """The current screen, ``(H, W, 3)`` uint8, resized to ``size = (W, H)``."""
        with self._lock:
            frame = self._frame
            if frame is None or not self.config.reuse_settled_frame or time.monotonic() - frame.captured_at > self.config.frame_max_age_s or self._broken:
                frame = self._capture()
                self._frame = frame
            return frame.resized(size)

    def execute(self, action: Action) -> None:
        """Perform one action, then let the screen settle."""
        with self._lock:
            self._frame = None
            if isinstance(action, Finished):
                return
            if isinstance(action, Answer):
                self.last_answer = action.content
                if self.config.answer_command is not None:
                    self._run([[*self.config.answer_command, action.content]], "answer")
                return
            if isinstance(action, OpenApp):
                self._open_app(action.app)
            elif not isinstance(action, Wait):
                self._run(self.action_commands(action), action.type)
            self._settle()

    def action_commands(self, action: Action) -> list[list[str]]:
        """The argv lists an action sends (``open_app``, ``answer``, ``wait`` and
        ``finished`` are handled by :meth:`execute`)."""
        cfg = self.config
        w, h = self.device_size
        if isinstance(action, Click):
            return [["input", "tap", str(action.x), str(action.y)]]
        if isinstance(action, LongPress):
            x, y = str(action.x), str(action.y)
            return [["input", "swipe", x, y, x, y, str(cfg.long_press_ms)]]
        if isinstance(action, Scroll):
            x, y = action.x, action.y
            if action.direction in (Direction.UP, Direction.DOWN):
                d = round(cfg.scroll_distance * h)
                y2 = y - d if action.direction == Direction.DOWN else y + d  # finger up reveals content below
                x2, y2 = x, min(max(y2, 0), max(h - 1, 0))
            else:
                d = round(cfg.scroll_distance * w)
                x2 = x - d if action.direction == Direction.RIGHT else x + d
                x2, y2 = min(max(x2, 0), max(w - 1, 0)), y
            return [["input", "swipe", str(x), str(y), str(x2), str(y2), str(cfg.scroll_ms)]]
        if isinstance(action, Drag):
            return [["input", "swipe", str(action.x1), str(action.y1), str(action.x2), str(action.y2), str(cfg.drag_ms)]]
        if isinstance(action, Type):
            return type_commands(action.content, cfg.text_chunk_chars, cfg.ime_for_ascii)
        if isinstance(action, PressHome):
            return [["input", "keyevent", str(KEYCODE_HOME)]]
        if isinstance(action, PressBack):
            return [["input", "keyevent", str(KEYCODE_BACK)]]
        raise TypeError(f"{type(action).__name__} has no device command; execute() handles it")

    def _open_app(self, name: str) -> None:
        target = self.apps.resolve(name)
        if target is None:
            self.last_error = f"no app named {name!r} in the app map; add it with AppMap.add({name!r}, 'package/activity')"
            logger.info("%s: open_app: %s", self.name, self.last_error)
            return
        if target.activity is not None:
            result = self._guard("am_start", self.config.command_timeout_s, lambda d: self.client.shell(self.serial, ["am", "start", "-n", f"{target.package}/{target.activity}"], d))
            if result.exit_code == 0 and b"Error" not in result.stdout + result.stderr:
                self.last_error = None
                return
            logger.info("%s: am start %s/%s failed (%s); trying the launcher intent", self.name, target.package, target.activity, (result.stderr or result.stdout).decode("utf-8", "replace").strip()[:200])
        argv = ["monkey", "-p", target.package, "-c", LAUNCHER_CATEGORY, "1"]
        result = self._guard("monkey", self.config.command_timeout_s, lambda d: self.client.shell(self.serial, argv, d))
        if result.exit_code == 0 and b"No activities found" not in result.stdout + result.stderr:
            self.last_error = None
        else:
            self.last_error = f"{target.package} is not installed on {self.serial} (monkey: {(result.stdout + result.stderr).decode('utf-8', 'replace').strip()[:200]})"
            logger.info("%s: open_app(%r): %s", self.name, name, self.last_error)

    def go_home(self) -> None:
        """Press HOME and settle. Best effort: an infrastructure failure is logged and
        counted (see :meth:`health`), never raised; the next call reconnects."""
        with self._lock:
            if self._quarantined:
                return
            try:
                self._frame = None
                self._run([["input", "keyevent", str(KEYCODE_HOME)]], "home")
                self._settle()
            except InfraError as exc:
                logger.warning("%s: go_home failed: %s", self.name, exc)

    def probe_state(self) -> dict[str, Any] | None:
        """The phone's machine-readable state, through ``state_probe`` or ``probe_command``."""
        if self.state_probe is not None:
            return self.state_probe(self)
        command = self.config.probe_command
        if command is None:
            return None
        with self._lock:
            def probe(deadline: float) -> dict[str, Any]:
                out = self._shell_checked(list(command), deadline).stdout
                try:
                    state = orjson.loads(out)
                except orjson.JSONDecodeError as exc:
                    raise InfraError("bad_probe", f"`{shlex.join(command)}` printed {len(out)} bytes that are not JSON: {exc}") from None
                if not isinstance(state, dict):
                    raise InfraError("bad_probe", f"`{shlex.join(command)}` printed a {type(state).__name__}, not a JSON object")
                return state

            return self._guard("probe", self.config.command_timeout_s, probe)

    def apply_setup(self, setup: Sequence[StateSetup]) -> None:
        """Send the setup steps to the phone's ``setup_command`` (served SimPhones)."""
        if self.config.setup_command is None:
            super().apply_setup(setup)  # raises SetupUnsupported with the steps named
        payload = orjson.dumps([step.model_dump(mode="json") for step in setup]).decode()
        with self._lock:
            self._guard("setup", self.config.command_timeout_s, lambda d: self._shell_checked([*self.config.setup_command, payload], d))

    def close(self) -> None:
        """Stop the env's worker thread (the device stays connected to the adb server)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- async twins on the phone's own thread --------------------------------------------
    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def ascreenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return await self._in_thread(self.screenshot, size)

    async def aexecute(self, action: Action) -> None:
        await self._in_thread(self.execute, action)

    async def ago_home(self) -> None:
        await self._in_thread(self.go_home)

    async def aprobe_state(self) -> dict[str, Any] | None:
        return await self._in_thread(self.probe_state)

    async def aapply_setup(self, setup: Sequence[StateSetup]) -> None:
        await self._in_thread(self.apply_setup, setup)


def load_app_overrides(path: str | Path) -> dict[str, str]:
    """Read ``name,package[/activity]`` lines (a CSV without header) for :class:`AppMap`."""
    overrides: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, row in enumerate(csv.reader(handle), start=1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) != 2:
                raise ValueError(f"{path}:{lineno}: expected 'name,package[/activity]', got {row!r}")
            overrides[row[0].strip()] = row[1].strip()
    return overrides

