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
- **Swipes that stay swipes**: a long press, scroll or drag is an ``input swipe``
  (:mod:`darwin.envs.adb_gestures`); a scroll keeps its full length (its start moves inward
  near an edge) so it never falls under Android's touch slop (8 dp at the density ``dumpsys
  display`` reports) and becomes a tap; a drag shorter than the slop is not sent.
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

The module is split by job: the adb server protocol (:mod:`darwin.envs.adb_client`),
screenshots (:mod:`darwin.envs.adb_screen`), app names to packages (:mod:`darwin.envs.adb_apps`),
typing (:mod:`darwin.envs.adb_typing`), swipes (:mod:`darwin.envs.adb_gestures`), the settings and health records
(:mod:`darwin.envs.adb_config`); this module is the environment.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import shlex
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any, Literal, NoReturn
from xml.etree import ElementTree

import numpy as np
import orjson
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from darwin.actions import (
    Action,
    Answer,
    Click,
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
from darwin.envs.adb_apps import AppMap
from darwin.envs.adb_client import AdbServerClient, ShellOutput
from darwin.envs.adb_config import AdbEnvConfig, CallRecord, PhoneHealth
from darwin.envs.adb_gestures import GestureRefused, Swipe, swipe_for
from darwin.envs.adb_screen import _Frame
from darwin.envs.adb_touch import UNKNOWN_DENSITY_DPI, touch_slop_px
from darwin.envs.adb_typing import type_commands
from darwin.envs.base import InfraError, PhoneEnv
from darwin.envs.screen_elements import ScreenElement, parse_uiautomator_dump
from darwin.types import StateSetup

__all__ = [
    "AdbPhoneEnv",
]

logger = logging.getLogger(__name__)

KEYCODE_HOME = 3
KEYCODE_BACK = 4
LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"
_NETWORK_SERIAL = re.compile(r"^[^\s:]+:\d{1,5}$")
_SERVER_SUSPECT_CAUSES = frozenset({"disconnect", "not_found", "offline", "deadline", "adb_error"})
"""Failures that a dead or restarted adb server also causes (checked by ``AdbPhoneEnv._server_fault``)."""
_SERVER_ROUNDS = 3
"""Reconnects a phone tries after waiting for a returning adb server before it gives up."""


# ======================================================================================
# The environment
# ======================================================================================


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
        self.density_dpi: int | None = None
        """The screen's density as ``dumpsys display`` reports it (read at connect); ``None``: not reported."""
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
        self._last_cause: str | None = None
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
                raise InfraError(
                    "quarantined", f"{self.name} is quarantined ({self._last_error}); release it after a hard reset"
                )
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
        self.device_size, self.density_dpi = self._read_size(deadline)
        if self.config.setup_ime:
            self._setup_ime(deadline)

    def _wait_online(self, deadline: float) -> None:
        state = "missing"
        while True:
            state = self.client.device_state(self.serial, deadline)
            if state == "device":
                return
            if state == "unauthorized":
                raise InfraError(
                    "unauthorized", f"{self.serial} is unauthorized: accept the RSA key prompt on the phone"
                )
            if deadline - time.monotonic() < 0.05:
                raise InfraError("offline", f"{self.serial} is {state!r}, not 'device'")
            time.sleep(0.02)

    def _read_size(self, deadline: float) -> tuple[tuple[int, int], int | None]:
        """The screen's ``(width, height)`` as the phone is turned, and its density (``None``
        where ``dumpsys display`` names none)."""
        out = self._shell_checked(["wm", "size"], deadline).stdout.decode("utf-8", "replace")
        match = re.search(r"Override size: (\d+)x(\d+)", out) or re.search(r"Physical size: (\d+)x(\d+)", out)
        if match is None:
            raise InfraError("adb_error", f"`wm size` on {self.serial} printed {out[:200]!r}, no 'Physical size: WxH'")
        w, h = int(match.group(1)), int(match.group(2))
        display = self.client.shell(self.serial, ["dumpsys", "display"], deadline).stdout.decode("utf-8", "replace")
        rotation = re.search(r"orientation=(\d)", display)
        if rotation is not None and int(rotation.group(1)) % 2 == 1:
            w, h = h, w
        density = re.search(r"\bdensity (\d+)", display)  # DisplayInfo's "density 420 (420.0 x 420.0) dpi"
        return (w, h), int(density.group(1)) if density is not None and int(density.group(1)) > 0 else None

    def _setup_ime(self, deadline: float) -> None:
        ime = self.config.ime_component
        for argv in (["ime", "enable", ime], ["ime", "set", ime]):
            result = self.client.shell(self.serial, argv, deadline)
            if result.exit_code != 0 or b"Unknown input method" in result.stdout + result.stderr:
                if not self._ime_warned:
                    logger.warning(
                        "%s: `%s` failed (%s); typing non-ASCII text will not work. Install ADBKeyboard "
                        "(github.com/senzhk/ADBKeyBoard) on the phone or set AdbEnvConfig(setup_ime=False)",
                        self.name,
                        " ".join(argv),
                        (result.stderr or result.stdout).decode("utf-8", "replace").strip(),
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

    def _server_fault(self, exc: InfraError, connected: bool = True) -> InfraError:
        """``exc``, or the same failure blamed on the adb server (cause ``adb_server``) when the
        server is down or, for a phone that was ``connected``, no longer knows it (the server
        died and a new one started, which forgets every ``adb connect``; a reconnect drops the
        phone itself, so there ``connected`` is False). Such a failure is not the phone's: it
        never counts towards quarantine, and the phone reconnects once the server is back."""
        if exc.cause == "adb_server" or exc.cause not in _SERVER_SUSPECT_CAUSES:
            return exc
        where = f"{self.config.adb_host}:{self.config.adb_port}"
        try:
            known = self.client.devices(time.monotonic() + self.config.adb_server_probe_s)
        except InfraError as probe:
            if probe.cause != "adb_server":
                return exc
            return InfraError("adb_server", f"{exc}; the adb server at {where} is down")
        if connected and self.network and self.serial not in known:
            return InfraError(
                "adb_server", f"{exc}; the adb server at {where} no longer knows {self.serial} (restarted)"
            )
        return exc

    def _wait_for_server(self) -> None:
        """Wait up to ``adb_server_wait_s`` for the adb server to answer again; if it does not,
        quarantine the phone with cause ``adb_server`` and a message that says what to do."""
        cfg = self.config
        start = time.monotonic()
        deadline = start + cfg.adb_server_wait_s
        logger.warning(
            "%s: the adb server at %s:%d is unreachable; waiting up to %g s for it",
            self.name,
            cfg.adb_host,
            cfg.adb_port,
            cfg.adb_server_wait_s,
        )
        while time.monotonic() < deadline:
            try:
                self.client.host_request("host:version", min(deadline, time.monotonic() + cfg.adb_server_probe_s))
            except InfraError:
                time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
                continue
            logger.info("%s: the adb server answers again after %.1f s", self.name, time.monotonic() - start)
            return
        self._quarantine_for_server(
            f"the adb server at {cfg.adb_host}:{cfg.adb_port} did not answer for {cfg.adb_server_wait_s:g} s; "
            f"start it (`adb -P {cfg.adb_port} start-server`) or point adb_server at a running one, then resume"
        )

    def _quarantine_for_server(self, message: str) -> NoReturn:
        failure = InfraError("adb_server", message)
        self._broken = True
        self._failures[failure.cause] += 1
        self._last_error = str(failure)
        self._quarantined = True
        logger.error("%s: quarantined: %s", self.name, failure)
        raise failure

    def _recover(self, first: bool = False) -> None:
        """(Re)connect with bounded exponential backoff; raise ``InfraError`` if it fails.

        A reconnect first drops the old transport (``adb disconnect``) so the adb server
        dials a fresh one; the whole thing is bounded by ``reconnect_timeout_s``. When the
        adb server itself is unreachable, the phone first waits for it (``adb_server_wait_s``),
        then reconnects; a server that keeps going away quarantines the phone with cause
        ``adb_server``.
        """
        for _ in range(_SERVER_ROUNDS):
            if self._last_cause == "adb_server":
                self._wait_for_server()
            try:
                self._reconnect(first)
                return
            except InfraError as exc:
                if exc.cause != "adb_server":
                    raise
        self._quarantine_for_server(
            f"the adb server at {self.config.adb_host}:{self.config.adb_port} went away {_SERVER_ROUNDS} times "
            f"while {self.name} reconnected; look at its log, then resume"
        )

    def _reconnect(self, first: bool) -> None:
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
            before_sleep=lambda state: logger.info(
                "%s: %s try %d failed: %s",
                self.name,
                op,
                state.attempt_number,
                state.outcome.exception() if state.outcome else "?",
            ),
        )
        cause: str | None = None
        try:
            for attempt in retrying:
                with attempt:
                    if deadline - time.monotonic() <= 0:
                        raise InfraError("deadline", f"{op} budget of {cfg.reconnect_timeout_s:g} s spent")
                    tries = attempt.retry_state.attempt_number
                    self._reconnect_once(
                        min(deadline, time.monotonic() + cfg.connect_timeout_s + cfg.command_timeout_s),
                        disconnect=not first or tries > 1,
                    )
        except InfraError as raw:
            exc = self._server_fault(raw, connected=False)
            if first or exc.cause == "adb_server":
                cause = exc.cause
                self._note_failure(exc)
                if exc is raw:
                    raise
                raise exc from raw
            cause = "reconnect_failed"
            failure = InfraError(
                "reconnect_failed", f"{self.serial} did not come back within {cfg.reconnect_timeout_s:g} s: {exc}"
            )
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

    @property
    def quarantine_reason(self) -> str | None:
        return self._last_error if self._quarantined else None

    def release_quarantine(self) -> None:
        """Put the phone back in service (e.g. after a provider's hard reset); the next
        call reconnects first."""
        with self._lock:
            self._quarantined = False
            self._broken = True
            self._consecutive_failures = 0
            logger.info("%s: released from quarantine", self.name)

    def health(self) -> PhoneHealth:
        state: Literal["ok", "recovering", "quarantined"] = (
            "quarantined" if self._quarantined else ("recovering" if self._broken else "ok")
        )
        return PhoneHealth(
            self.name,
            self.serial,
            state,
            self._consecutive_failures,
            dict(self._failures),
            self._reconnects,
            self._n_calls,
            self._last_error,
        )

    def _record(self, record: CallRecord) -> None:
        self.calls.append(record)

    def _note_failure(self, exc: InfraError) -> None:
        self._broken = True
        self._failures[exc.cause] += 1
        self._last_error = str(exc)
        self._last_cause = exc.cause
        if exc.cause == "adb_server":  # not the phone's fault: it waits for the server instead
            return
        self._consecutive_failures += 1
        if not self._quarantined and self._consecutive_failures >= self.config.quarantine_after:
            self._quarantined = True
            logger.error(
                "%s: quarantined after %d consecutive failures (last: %s)", self.name, self._consecutive_failures, exc
            )

    def _guard(self, op: str, timeout: float, fn: Callable[[float], Any], recover: bool = True) -> Any:
        """Run ``fn(deadline)`` as one device call: recover first if needed, record it,
        count failures, quarantine."""
        if self._quarantined:
            raise InfraError(
                "quarantined", f"{self.name} is quarantined ({self._last_error}); release it after a hard reset"
            )
        if recover and self._broken:
            self._recover()
        start = time.monotonic()
        ended: float | None = None  # a failed call's own end: the server check after it is not part of it
        cause = None
        try:
            result = fn(start + timeout)
        except InfraError as raw:
            ended = time.monotonic()
            exc = self._server_fault(raw)
            cause = exc.cause
            self._note_failure(exc)
            if exc is raw:
                raise
            raise exc from raw
        finally:
            self._n_calls += 1
            self._record(CallRecord(op, start, (ended or time.monotonic()) - start, timeout, cause))
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
            return self._guard(
                "shell", timeout or self.config.command_timeout_s, lambda d: self.client.shell(self.serial, argv, d)
            )

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
                raise InfraError(
                    "bad_screenshot", f"screencap gave {array.shape[1]}x{array.shape[0]}, the screen is {w}x{h}"
                )
            if self.config.reject_black_screens and not array.any():
                raise InfraError(
                    "black_screen", f"{self.serial} returned an all-black screen (screen off or capture broken)"
                )
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
            if (
                frame is None
                or not self.config.reuse_settled_frame
                or time.monotonic() - frame.captured_at > self.config.frame_max_age_s
                or self._broken
            ):
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
                try:
                    commands = self.action_commands(action)
                except GestureRefused as exc:  # like a tap on nothing: the phone is left as it is
                    self.last_error = str(exc)
                    logger.info("%s: %s: %s", self.name, action.type, exc)
                    return
                self._run(commands, action.type)
            self._settle()

    def action_commands(self, action: Action) -> list[list[str]]:
        """The argv lists an action sends (``open_app``, ``answer``, ``wait`` and
        ``finished`` are handled by :meth:`execute`). Long presses, scrolls and drags become
        swipes that never turn into a tap (:func:`~darwin.envs.adb_gestures.swipe_for`);
        raises :class:`~darwin.envs.adb_gestures.GestureRefused` for one no phone would perform."""
        if isinstance(action, Click):
            return [["input", "tap", str(action.x), str(action.y)]]
        if isinstance(action, LongPress | Scroll | Drag):
            return [self.swipe(action).argv()]
        if isinstance(action, Type):
            return type_commands(action.content, self.config.text_chunk_chars, self.config.ime_for_ascii)
        if isinstance(action, PressHome):
            return [["input", "keyevent", str(KEYCODE_HOME)]]
        if isinstance(action, PressBack):
            return [["input", "keyevent", str(KEYCODE_BACK)]]
        raise TypeError(f"{type(action).__name__} has no device command; execute() handles it")

    def swipe(self, action: LongPress | Scroll | Drag) -> Swipe:
        """The ``input swipe`` ``action`` becomes on this phone (its size and density)."""
        return swipe_for(action, self.device_size, self.density_dpi or UNKNOWN_DENSITY_DPI, self.config)

    @property
    def touch_slop_px(self) -> int:
        """This phone's touch slop in pixels (8 dp; at :data:`~darwin.envs.adb_touch.UNKNOWN_DENSITY_DPI`
        where the phone reported no density)."""
        return touch_slop_px(self.density_dpi or UNKNOWN_DENSITY_DPI)

    def _open_app(self, name: str) -> None:
        target = self.apps.resolve(name)
        if target is None:
            self.last_error = (
                f"no app named {name!r} in the app map; add it with AppMap.add({name!r}, 'package/activity')"
            )
            logger.info("%s: open_app: %s", self.name, self.last_error)
            return
        if target.activity is not None:
            result = self._guard(
                "am_start",
                self.config.command_timeout_s,
                lambda d: self.client.shell(
                    self.serial, ["am", "start", "-n", f"{target.package}/{target.activity}"], d
                ),
            )
            if result.exit_code == 0 and b"Error" not in result.stdout + result.stderr:
                self.last_error = None
                return
            logger.info(
                "%s: am start %s/%s failed (%s); trying the launcher intent",
                self.name,
                target.package,
                target.activity,
                (result.stderr or result.stdout).decode("utf-8", "replace").strip()[:200],
            )
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
                    raise InfraError(
                        "bad_probe", f"`{shlex.join(command)}` printed {len(out)} bytes that are not JSON: {exc}"
                    ) from None
                if not isinstance(state, dict):
                    raise InfraError(
                        "bad_probe", f"`{shlex.join(command)}` printed a {type(state).__name__}, not a JSON object"
                    )
                return state

            return self._guard("probe", self.config.command_timeout_s, probe)

    def screen_elements(self) -> list[ScreenElement] | None:
        """The screen's view hierarchy through ``uiautomator dump /dev/tty``; ``None`` (logged)
        where the device has no uiautomator or prints something else."""
        with self._lock:

            def dump(deadline: float) -> ShellOutput:
                return self.client.shell(self.serial, ["uiautomator", "dump", "/dev/tty"], deadline)

            out = self._guard("uiautomator", self.config.command_timeout_s, dump)
        text = out.stdout.decode("utf-8", "replace")
        try:
            return parse_uiautomator_dump(text)
        except (ValueError, ElementTree.ParseError) as exc:
            logger.warning("%s: uiautomator dump gave no view hierarchy (%s)", self.name, exc)
            return None

    def apply_setup(self, setup: Sequence[StateSetup]) -> None:
        """Send the setup steps to the phone's ``setup_command`` (served SimPhones)."""
        command = self.config.setup_command
        if command is None:
            super().apply_setup(setup)  # raises SetupUnsupported with the steps named
            return
        payload = orjson.dumps([step.model_dump(mode="json") for step in setup]).decode()
        with self._lock:
            self._guard(
                "setup",
                self.config.command_timeout_s,
                lambda d: self._shell_checked([*command, payload], d),
            )

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
