"""A SimPhone behind an adbd shell: the device side of ``darwin phones serve``.

:class:`SimDeviceBackend` implements :class:`darwin.envs.sim.adbd_backend.DeviceBackend` over one
:class:`~darwin.envs.sim.phone.SimPhone`, so the real ``adb`` server, adbutils and
:class:`darwin.envs.adb.AdbPhoneEnv` drive a simulated phone exactly as they drive a
cloud phone. It understands the commands phone agents send (docs/phones.md has the
full table):

=================================================  =============================================
command                                            effect on the SimPhone
=================================================  =============================================
``input tap X Y``                                  ``click(X, Y)``
``input swipe X1 Y1 X2 Y2 [MS]`` (MS default 300)  moved less than 21 px: ``long_press`` if
                                                   MS >= 500, else ``click``; moved and
                                                   MS < 500: a fling = ``scroll`` from
                                                   (X1, Y1) (finger up = content ``down``);
                                                   MS >= 500: ``drag`` (content follows)
``input draganddrop X1 Y1 X2 Y2 [MS]``             ``drag``
``input text S``                                   types S with Android's rules: ``%s`` is a
                                                   space, printable ASCII only (else exit 1)
``input keyevent K...``                            HOME, BACK, ENTER (submit / new line), DEL,
                                                   digits, letters, SPACE; others are no-ops
``am broadcast -a ADB_INPUT_B64 --es msg B64``     ADBKeyboard IME: commit the UTF-8 text
                                                   verbatim (needs ``ime set`` to ADBKeyboard)
``am start -n PKG/ACTIVITY``                       ``open_app`` (exit 255 + ``Error:`` if the
                                                   component does not exist)
``monkey -p PKG -c ...LAUNCHER 1``                 ``open_app`` by package (exit 252 if unknown)
``screencap -p`` / ``screencap``                   PNG / raw RGBA of the full 1080x2400 screen
``wm size``, ``wm density``, ``dumpsys window``,   what adbutils parses (size, rotation 0,
``dumpsys display``, ``getprop [NAME]``,           focused activity, properties, packages,
``pm list packages``, ``ime ...``                  input methods)
``uiautomator dump /dev/tty``                      the screen's view hierarchy (XML)
``darwin-state``                                   the phone's full JSON state (the state probe)
``darwin-answer TEXT``                             records an ``answer`` action's text
``darwin-setup JSON``                              applies a task's setup steps (a JSON list of
                                                   ``{"step": ..., "params": ...}``; exit 2 if invalid)
=================================================  =============================================

Anything else exits 127 (``not found``) as ``sh`` does. Every call holds the backend's
lock, so adbd's worker threads never touch the phone concurrently.

    >>> from darwin.envs.sim.device import SimDeviceBackend
    >>> dev = SimDeviceBackend(seed=0)
    >>> dev.run(["monkey", "-p", "com.android.settings", "-c",
    ...          "android.intent.category.LAUNCHER", "1"], "").exit_code
    0
    >>> dev.phone.foreground
    'settings'
    >>> dev.run(["wm", "size"], "wm size").stdout
    b'Physical size: 1080x2400\\n'
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable, Sequence

import numpy as np
import orjson
from pydantic import ValidationError

from darwin.actions import (
    Action,
    Answer,
    Click,
    Direction,
    Drag,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
)
from darwin.envs.adb_touch import touch_slop_px
from darwin.envs.screen_elements import uiautomator_dump
from darwin.envs.sim.adbd_backend import ShellResult
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.png import encode_png
from darwin.types import StateSetup, TaskDefinitionError

__all__ = [
    "ADB_KEYBOARD_IME",
    "DEFAULT_IME",
    "FLING_MAX_MS",
    "LAUNCHER_COMPONENT",
    "LONG_PRESS_MIN_MS",
    "STATE_COMMAND",
    "ANSWER_COMMAND",
    "DENSITY_DPI",
    "TOUCH_SLOP_PX",
    "SimDeviceBackend",
    "decode_input_text",
    "reboot_phone",
    "swipe_action",
]

logger = logging.getLogger(__name__)

#: The state probe: prints the phone's JSON state (``AdbPhoneEnv(probe_command=...)``).
STATE_COMMAND = "darwin-state"
#: Records the text of an ``answer`` action in the phone state (sim only).
ANSWER_COMMAND = "darwin-answer"
#: Applies a task instance's setup steps to the phone state (sim only).
SETUP_COMMAND = "darwin-setup"
#: ADBKeyboard (github.com/senzhk/ADBKeyBoard), the IME behind ``ADB_INPUT_B64``.
ADB_KEYBOARD_IME = "com.android.adbkeyboard/.AdbIME"
#: The IME selected on a fresh SimPhone (a stock keyboard: broadcasts are ignored).
DEFAULT_IME = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
LAUNCHER_COMPONENT = "com.google.android.apps.nexuslauncher/.NexusLauncherActivity"

#: The screen density a SimPhone reports (``wm density``, ``dumpsys display``).
DENSITY_DPI = 420
#: A swipe that moves less than this is a tap or a long press (Android's touch slop, 8 dp at
#: :data:`DENSITY_DPI`: what :class:`~darwin.envs.adb.AdbPhoneEnv` reads and keeps its swipes above).
TOUCH_SLOP_PX = touch_slop_px(DENSITY_DPI)
#: A stationary swipe held at least this long is a long press.
LONG_PRESS_MIN_MS = 500
#: A moving swipe shorter than this is a fling (a page scroll); longer ones drag.
FLING_MAX_MS = 500
DEFAULT_SWIPE_MS = 300

_KEYS: dict[int, str] = {
    0: "UNKNOWN",
    3: "HOME",
    4: "BACK",
    19: "DPAD_UP",
    20: "DPAD_DOWN",
    21: "DPAD_LEFT",
    22: "DPAD_RIGHT",
    23: "DPAD_CENTER",
    24: "VOLUME_UP",
    25: "VOLUME_DOWN",
    26: "POWER",
    55: "COMMA",
    56: "PERIOD",
    61: "TAB",
    62: "SPACE",
    66: "ENTER",
    67: "DEL",
    82: "MENU",
    84: "SEARCH",
    111: "ESCAPE",
    112: "FORWARD_DEL",
    187: "APP_SWITCH",
    223: "SLEEP",
    224: "WAKEUP",
}
_KEYS.update({7 + d: str(d) for d in range(10)})
_KEYS.update({29 + i: chr(ord("A") + i) for i in range(26)})
_KEY_CODES = {name: code for code, name in _KEYS.items()}
_KEY_CHARS = {"SPACE": " ", "COMMA": ",", "PERIOD": "."}

_OPTION_ARITY = {
    "-a": 1,
    "-c": 1,
    "-d": 1,
    "-t": 1,
    "-n": 1,
    "-f": 1,
    "-p": 1,
    "-e": 2,
    "--es": 2,
    "--ei": 2,
    "--ez": 2,
    "--el": 2,
    "--ef": 2,
    "--eu": 2,
    "--eia": 2,
    "--esa": 2,
    "--esn": 1,
    "--user": 1,
    "-R": 1,
    "-P": 1,
    "--start-profiler": 1,
    "--display": 1,
    "--windowingMode": 1,
    "--activityType": 1,
    "--receiver-permission": 1,
}


def decode_input_text(arg: str) -> str:
    """What Android's ``input text ARG`` types: ``%s`` becomes a space, nothing else changes.

    This is the exact loop of ``InputShellCommand.sendText``: after a ``%``, an ``s``
    turns into a space and the ``%`` is removed; every other character (a ``%`` before
    anything but ``s`` included) is typed as is.

    >>> decode_input_text("100%s%%s%x")
    '100 % %x'
    """
    buff = list(arg)
    escape = False
    i = 0
    while i < len(buff):
        if escape:
            escape = False
            if buff[i] == "s":
                buff[i] = " "
                del buff[i - 1]
                i -= 1
        if buff[i] == "%":
            escape = True
        i += 1
    return "".join(buff)


def swipe_action(x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> Action:
    """The SimPhone action an ``input swipe`` amounts to (see the module table)."""
    dx, dy = x2 - x1, y2 - y1
    x1, y1, x2, y2 = (max(0, v) for v in (x1, y1, x2, y2))
    if max(abs(dx), abs(dy)) < TOUCH_SLOP_PX:
        return LongPress(x=x1, y=y1) if duration_ms >= LONG_PRESS_MIN_MS else Click(x=x1, y=y1)
    if duration_ms < FLING_MAX_MS:
        if abs(dy) >= abs(dx):
            direction = Direction.DOWN if dy < 0 else Direction.UP
        else:
            direction = Direction.RIGHT if dx < 0 else Direction.LEFT
        return Scroll(x=x1, y=y1, direction=direction)
    return Drag(x1=x1, y1=y1, x2=x2, y2=y2)


def reboot_phone(phone: SimPhone, reset: bool) -> None:
    """What a reboot does to a SimPhone: apps restart at their root screens, the launcher
    shows; app data persists (``reset=False``) or is wiped to the seed's (``reset=True``)."""
    if reset:
        phone.reset()
        return
    for app_id, app in phone.apps.items():
        phone.state["apps"][app_id]["stack"] = [{"name": app.root_screen}]
    phone.press_home()


class _Usage(Exception):  # noqa: N818 - control flow inside the backend
    """A command line the tool rejects; becomes stderr + exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _ok(text: str = "") -> ShellResult:
    return ShellResult(stdout=text.encode("utf-8"))


def _coord(value: str, what: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        raise _Usage(f"Error: invalid {what} {value!r}: expected a number") from None


class SimDeviceBackend:
    """One SimPhone served as an ADB device (a :class:`~darwin.envs.sim.adbd_backend.DeviceBackend`).

    Args:
        phone: the phone to serve; a new ``SimPhone(seed, perturbation)`` if ``None``.
        seed: seed of the new phone (ignored when ``phone`` is given).
        perturbation: perturbations of the new phone.
        serial: ``ro.serialno`` and the product name suffix.

    Thread-safe: every command holds :attr:`lock`; take it too when touching
    :attr:`phone` while the device is served.

    Example (no adb needed; :class:`~darwin.envs.sim.adbd.AdbdFarm` serves it)::

        >>> dev = SimDeviceBackend(seed=1)
        >>> dev.run(["am", "start", "-n", "com.android.settings/com.android.settings.Settings"], "").stdout
        b'Starting: Intent { cmp=com.android.settings/com.android.settings.Settings }\\n'
        >>> import orjson
        >>> orjson.loads(dev.run(["darwin-state"], "darwin-state").stdout)["foreground"]
        'settings'
    """

    def __init__(
        self,
        phone: SimPhone | None = None,
        seed: int = 0,
        perturbation: PerturbationConfig | None = None,
        serial: str | None = None,
    ) -> None:
        self.phone = phone if phone is not None else SimPhone(seed=seed, perturbation=perturbation)
        self.serial = serial or f"darwin-sim-{self.phone.seed}"
        self.serial_props = {
            "ro.product.name": "darwin_sim",
            "ro.product.model": "DarwinSim",
            "ro.product.device": "darwin_sim",
        }
        self.lock = threading.RLock()
        self.ime = DEFAULT_IME
        self.enabled_imes = {DEFAULT_IME}
        self._png_source: np.ndarray | None = None
        self._png = b""
        self._commands: dict[str, Callable[[list[str]], ShellResult]] = {
            "input": self._input,
            "screencap": self._screencap,
            "wm": self._wm,
            "dumpsys": self._dumpsys,
            "uiautomator": self._uiautomator,
            "getprop": self._getprop,
            "am": self._am,
            "monkey": self._monkey,
            "pm": self._pm,
            "ime": self._ime,
            STATE_COMMAND: self._state,
            ANSWER_COMMAND: self._answer,
            SETUP_COMMAND: self._setup,
        }

    @property
    def props(self) -> dict[str, str]:
        """What ``getprop`` prints."""
        return {
            **self.serial_props,
            "ro.serialno": self.serial,
            "ro.build.version.sdk": "34",
            "ro.build.version.release": "14",
            "ro.product.manufacturer": "Darwin",
            "ro.product.cpu.abi": "x86_64",
            "sys.boot_completed": "1",
        }

    # -- DeviceBackend ------------------------------------------------------------------
    def run(self, argv: list[str], raw_command: str) -> ShellResult:
        """Execute one simple command on the phone (see the module table)."""
        handler = self._commands.get(argv[0])
        if handler is None:
            return ShellResult(stderr=f"/system/bin/sh: {argv[0]}: not found\n".encode(), exit_code=127)
        try:
            with self.lock:
                return handler(argv[1:])
        except _Usage as exc:
            return ShellResult(stderr=f"{exc}\n".encode("utf-8", "replace"), exit_code=exc.exit_code)

    # -- provider hooks -----------------------------------------------------------------
    def reboot(self, reset: bool = False) -> None:
        """Apply a reboot's effect on the phone (see :func:`reboot_phone`)."""
        with self.lock:
            reboot_phone(self.phone, reset)

    # -- commands -----------------------------------------------------------------------
    def _execute(self, action: Action) -> None:
        self.phone.execute(action)

    def _input(self, args: list[str]) -> ShellResult:
        # input [<source>] [-d DISPLAY] <command> [<arg>...]
        sources = {
            "keyboard",
            "touchscreen",
            "touchpad",
            "mouse",
            "stylus",
            "trackball",
            "dpad",
            "gamepad",
            "joystick",
            "keyboard_wired",
        }
        while args and (args[0] in sources or args[0] == "-d"):
            args = args[2:] if args[0] == "-d" else args[1:]
        if not args:
            raise _Usage("Error: input needs a command (text, keyevent, tap, swipe, draganddrop)")
        command, rest = args[0], args[1:]
        if command == "tap":
            if len(rest) != 2:
                raise _Usage("Error: usage: input tap <x> <y>")
            self._execute(Click(x=max(0, _coord(rest[0], "x")), y=max(0, _coord(rest[1], "y"))))
        elif command in ("swipe", "draganddrop"):
            if len(rest) not in (4, 5):
                raise _Usage(f"Error: usage: input {command} <x1> <y1> <x2> <y2> [duration(ms)]")
            x1, y1, x2, y2 = (_coord(v, "coordinate") for v in rest[:4])
            ms = _coord(rest[4], "duration") if len(rest) == 5 else DEFAULT_SWIPE_MS
            if command == "draganddrop":
                self._execute(Drag(x1=max(0, x1), y1=max(0, y1), x2=max(0, x2), y2=max(0, y2)))
            else:
                self._execute(swipe_action(x1, y1, x2, y2, ms))
        elif command == "text":
            if len(rest) != 1:
                raise _Usage("Error: usage: input text <string> (one argument; quote it)")
            self._type(decode_input_text(rest[0]))
        elif command == "keyevent":
            codes = [c for c in rest if c not in ("--longpress", "--doubletap")]
            if not codes:
                raise _Usage("Error: usage: input keyevent [--longpress|--doubletap] <key code or name>...")
            names = [self._key_name(c) for c in codes]
            for name in names:
                self._key(name)
        else:
            raise _Usage(f"Error: unknown input command {command!r}")
        return _ok()

    def _type(self, text: str) -> None:
        # What KeyCharacterMap(VIRTUAL_KEYBOARD) can map: printable ASCII, newline (ENTER)
        # and tab. Anything else makes Android's `input text` fail; we refuse it whole.
        bad = sorted({c for c in text if not (" " <= c <= "~" or c in "\n\t")})
        if bad:
            raise _Usage(
                f"Error: input text cannot type {''.join(bad)!r}: only printable ASCII has key "
                "events; send other text through an IME (am broadcast -a ADB_INPUT_B64)"
            )
        run: list[str] = []
        for ch in text:
            if ch == "\n":
                self.phone.commit_text("".join(run))
                run = []
                self.phone.press_key("enter")
            else:
                run.append(ch)
        self.phone.commit_text("".join(run))

    @staticmethod
    def _key_name(code: str) -> str:
        if code.isdigit():
            name = _KEYS.get(int(code))
            if name is None:
                return "UNKNOWN"
            return name
        name = code.removeprefix("KEYCODE_")
        if name not in _KEY_CODES:
            raise _Usage(f"Error: unknown key event {code!r}")
        return name

    def _key(self, name: str) -> None:
        if name == "HOME":
            self._execute(PressHome())
        elif name in ("BACK", "ESCAPE"):
            self._execute(PressBack())
        elif name == "ENTER":
            self.phone.press_key("enter")
        elif name == "DEL":
            self.phone.press_key("backspace")
        elif len(name) == 1:
            self.phone.press_key(name.lower())
        elif name in _KEY_CHARS:
            self.phone.press_key(_KEY_CHARS[name])
        else:
            logger.debug("%s: key %s has no effect on a SimPhone", self.serial, name)

    def _screencap(self, args: list[str]) -> ShellResult:
        flags = [a for a in args if a != "-p"]
        while flags and flags[0] == "-d" and len(flags) >= 2:
            flags = flags[2:]
        if flags:
            raise _Usage(f"Error: screencap: unsupported arguments {flags!r} (use screencap -p)")
        image = self.phone.screenshot()
        if "-p" not in args:
            h, w, _ = image.shape
            rgba = np.empty((h, w, 4), np.uint8)
            rgba[..., :3] = image
            rgba[..., 3] = 255
            header = np.array([w, h, 1], "<u4").tobytes()  # width, height, RGBA_8888
            return ShellResult(stdout=header + rgba.tobytes())
        if image is not self._png_source:  # SimPhone re-renders (a new array) on any change
            self._png = encode_png(image)
            self._png_source = image
        return ShellResult(stdout=self._png)

    def _wm(self, args: list[str]) -> ShellResult:
        if args == ["size"]:
            return _ok(f"Physical size: {self.phone.width}x{self.phone.height}\n")
        if args == ["density"]:
            return _ok(f"Physical density: {DENSITY_DPI}\n")
        raise _Usage(f"Error: wm {' '.join(args)} is not supported (wm size, wm density)")

    def _focus_component(self) -> str:
        fg = self.phone.foreground
        if fg is None:
            return LAUNCHER_COMPONENT
        app = self.phone.apps[fg]
        return f"{app.package}/{app.activity}"

    def _dumpsys(self, args: list[str]) -> ShellResult:
        w, h = self.phone.width, self.phone.height
        service = args[0] if args else ""
        if service == "window":
            comp = self._focus_component()
            return _ok(
                "WINDOW MANAGER WINDOWS (dumpsys window windows)\n"
                f"  mCurrentFocus=Window{{1a2b3c u0 {comp}}}\n"
                f"  mFocusedApp=ActivityRecord{{4d5e6f u0 {comp} t1}}\n"
                "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n"
                f"  Display: mDisplayId=0 rootTasks=1\n    init={w}x{h} 420dpi cur={w}x{h} app={w}x{h} rng={w}x{w}-{h}x{h}\n"
                "    mRotation=0\n"
            )
        if service == "display":
            return _ok(
                "DISPLAY MANAGER (dumpsys display)\n"
                f"  mDefaultViewport=DisplayViewport{{valid=true, displayId=0, uniqueId='local:0', "
                f"physicalPort=0, orientation=0, logicalFrame=Rect(0, 0 - {w}, {h}), "
                f"deviceWidth={w}, deviceHeight={h}}}\n"
                f'  DisplayDeviceInfo{{"Built-in Screen": uniqueId="local:0", {w} x {h}, '
                f"modeId 1, density {DENSITY_DPI}, rotation 0}}\n"
            )
        if service == "activity":
            return _ok(f"  mResumedActivity: ActivityRecord{{4d5e6f u0 {self._focus_component()} t1}}\n")
        return _ok(f"Can't find service: {service}\n")

    def _uiautomator(self, args: list[str]) -> ShellResult:
        if args[:1] != ["dump"] or args[1:] not in ([], ["/dev/tty"]):
            raise _Usage(f"Error: uiautomator: unsupported arguments {args!r} (use uiautomator dump /dev/tty)")
        return _ok(uiautomator_dump(self.phone.screen_elements()))

    def _getprop(self, args: list[str]) -> ShellResult:
        props = self.props
        if not args:
            return _ok("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
        return _ok(props.get(args[0], args[1] if len(args) > 1 else "") + "\n")

    def _packages(self) -> dict[str, str]:
        return {app.package: app.id for app in self.phone.apps.values()}

    @staticmethod
    def _parse_options(args: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
        options: dict[str, list[str]] = {}
        positional: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            arity = _OPTION_ARITY.get(arg)
            if arity is not None:
                if i + arity >= len(args):
                    raise _Usage(f"Error: option {arg} needs {arity} value(s)")
                options.setdefault(arg, []).extend(args[i + 1 : i + 1 + arity])
                i += 1 + arity
            elif arg.startswith("-") and len(arg) > 1:
                options.setdefault(arg, [])
                i += 1
            else:
                positional.append(arg)
                i += 1
        return options, positional

    def _launch(self, package: str) -> None:
        self._execute(OpenApp(app=package))

    def _am(self, args: list[str]) -> ShellResult:
        if not args:
            raise _Usage("Error: am needs a command (start, broadcast, force-stop)")
        command, rest = args[0], args[1:]
        options, positional = self._parse_options(rest)
        if command in ("start", "start-activity"):
            named = options.get("-n")
            component = named[-1] if named else None
            if component is None:
                if "android.intent.category.HOME" in options.get("-c", []):
                    self._execute(PressHome())
                    return _ok("Starting: Intent { cat=[android.intent.category.HOME] }\n")
                raise _Usage("Error: am start needs -n <package>/<activity> on a SimPhone")
            package, _, activity = component.partition("/")
            if activity.startswith("."):
                activity = package + activity
            app_id = self._packages().get(package)
            if app_id is None or self.phone.apps[app_id].activity != activity:
                return ShellResult(
                    stdout=f"Starting: Intent {{ cmp={component} }}\n".encode(),
                    stderr=(f"Error type 3\nError: Activity class {{{package}/{activity}}} does not exist.\n").encode(),
                    exit_code=255,
                )
            self._launch(package)
            return _ok(f"Starting: Intent {{ cmp={component} }}\n")
        if command == "broadcast":
            return self._broadcast(options)
        if command == "force-stop":
            if not positional:
                raise _Usage("Error: am force-stop needs a package")
            app_id = self._packages().get(positional[0])
            if app_id is not None:
                self.phone.state["apps"][app_id]["stack"] = [{"name": self.phone.apps[app_id].root_screen}]
                if self.phone.foreground == app_id:
                    self.phone.press_home()
            return _ok()
        raise _Usage(f"Error: am {command} is not supported on a SimPhone (start, broadcast, force-stop)")

    def _broadcast(self, options: dict[str, list[str]]) -> ShellResult:
        action = (options.get("-a") or [""])[-1]
        extras = options.get("--es", [])
        strings = dict(zip(extras[::2], extras[1::2], strict=True))
        reply = f"Broadcasting: Intent {{ act={action} flg=0x400000{' (has extras)' if extras else ''} }}\nBroadcast completed: result=0\n"
        if not action.startswith("ADB_") or self.ime != ADB_KEYBOARD_IME:
            if action.startswith("ADB_"):
                logger.info(
                    "%s: %s ignored: the current IME is %s, not %s", self.serial, action, self.ime, ADB_KEYBOARD_IME
                )
            return _ok(reply)  # nobody listens: Android reports success and nothing happens
        if action == "ADB_INPUT_B64":
            try:
                text = base64.b64decode(strings.get("msg", ""), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError) as exc:
                logger.warning("%s: ADB_INPUT_B64 with a bad payload: %s", self.serial, exc)
                return _ok(reply)
            self.phone.commit_text(text)
        elif action == "ADB_INPUT_TEXT":
            self.phone.commit_text(strings.get("msg", ""))
        elif action == "ADB_CLEAR_TEXT":
            field = self.phone.layout().focused_field()
            if field is not None and field.field_key is not None and self.phone.foreground is not None:
                self.phone.top_screen(self.phone.foreground).setdefault("fields", {})[field.field_key] = ""
                self.phone.restore(self.phone.state)  # re-validate and refresh the screen after the edit
        elif action == "ADB_EDITOR_CODE":
            self.phone.press_key("enter")
        return _ok(reply)

    def _monkey(self, args: list[str]) -> ShellResult:
        options, positional = self._parse_options(args)
        packages = options.get("-p", [])
        if not packages:
            raise _Usage("Error: monkey needs -p <package> on a SimPhone")
        package = packages[-1]
        if package not in self._packages():
            return ShellResult(
                stdout=b"  bash arg: -p\n** No activities found to run, monkey aborted.\n", exit_code=252
            )
        self._launch(package)
        return _ok(f"  bash arg: -p\n  bash arg: {package}\nEvents injected: 1\n## Network stats: elapsed time=5ms\n")

    def _pm(self, args: list[str]) -> ShellResult:
        if args[:2] == ["list", "packages"]:
            names = sorted(self._packages()) + ["com.android.adbkeyboard"]
            return _ok("".join(f"package:{p}\n" for p in names))
        raise _Usage(f"Error: pm {' '.join(args)} is not supported (pm list packages)")

    def _ime(self, args: list[str]) -> ShellResult:
        known = {DEFAULT_IME, ADB_KEYBOARD_IME}
        command = args[0] if args else ""
        if command == "list":
            chosen = sorted(known if "-a" in args else self.enabled_imes)
            return _ok("".join(f"{i}\n" for i in chosen))
        if command in ("enable", "disable", "set") and len(args) == 2:
            ime = args[1]
            if ime not in known:
                raise _Usage(f"Unknown input method {ime} cannot be {command}d for user #0")
            if command == "enable":
                self.enabled_imes.add(ime)
                return _ok(f"Input method {ime}: now enabled for user #0\n")
            if command == "disable":
                self.enabled_imes.discard(ime)
                if self.ime == ime:
                    self.ime = DEFAULT_IME
                return _ok(f"Input method {ime}: now disabled for user #0\n")
            if ime not in self.enabled_imes:
                raise _Usage(f"Unknown input method {ime} cannot be selected for user #0")
            self.ime = ime
            return _ok(f"Input method {ime} selected for user #0\n")
        if command == "reset":
            self.ime, self.enabled_imes = DEFAULT_IME, {DEFAULT_IME}
            return _ok()
        raise _Usage("Error: ime list|enable ID|disable ID|set ID|reset")

    def _state(self, args: list[str]) -> ShellResult:
        return ShellResult(stdout=orjson.dumps(self.phone.state) + b"\n")

    def _setup(self, args: list[str]) -> ShellResult:
        if len(args) != 1:
            raise _Usage(f"Error: usage: {SETUP_COMMAND} '<JSON list of setup steps>' (one argument)")
        try:
            steps = [StateSetup.model_validate(item) for item in orjson.loads(args[0])]
            state = apply_setup(self.phone.snapshot(), steps)
        except (orjson.JSONDecodeError, TypeError, ValidationError, TaskDefinitionError) as exc:
            raise _Usage(f"Error: {SETUP_COMMAND}: {exc}") from None
        self.phone.restore(state)
        return _ok()

    def _answer(self, args: list[str]) -> ShellResult:
        if len(args) != 1:
            raise _Usage(f"Error: usage: {ANSWER_COMMAND} <text> (one argument)")
        self._execute(Answer(content=args[0]))
        return _ok()
