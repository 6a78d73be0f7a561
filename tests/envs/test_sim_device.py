"""SimDeviceBackend: the shell a served SimPhone understands (no adb needed), then adbutils
driving served SimPhones through the real adb server."""

from __future__ import annotations

import base64
import contextlib
import io
import time

import numpy as np
import orjson
import pytest
from PIL import Image

from darwin.actions import Click, Direction, Drag, LongPress, OpenApp, Scroll, Type
from darwin.envs.sim.adbd_backend import DeviceBackend
from darwin.envs.sim.device import (
    ADB_KEYBOARD_IME,
    SimDeviceBackend,
    decode_input_text,
    swipe_action,
)
from darwin.envs.sim.phone import SimPhone

pytestmark = pytest.mark.timeout(120)


def run(dev: SimDeviceBackend, *argv: str):
    return dev.run(list(argv), " ".join(argv))


def compose_field(dev: SimDeviceBackend) -> None:
    """Open X's compose screen and focus its multi-line text field."""
    phone = dev.phone
    phone.execute(OpenApp(app="X"))
    phone.dismiss_popup_if_any()
    x, y = next(w for w in phone.interactive_widgets() if w.id == "x.compose").center
    phone.execute(Click(x=x, y=y))
    x, y = phone.layout().find("x.compose_text").center
    phone.execute(Click(x=x, y=y))
    assert phone.layout().focused_field() is not None


def field_value(dev: SimDeviceBackend, key: str = "x.compose_text") -> str:
    phone = dev.phone
    return phone.top_screen(phone.foreground).get("fields", {}).get(key, "")


def test_is_a_device_backend() -> None:
    assert isinstance(SimDeviceBackend(), DeviceBackend)


@pytest.mark.parametrize(
    ("arg", "typed"),
    [
        ("a%sb", "a b"),
        ("%%s", "% "),
        ("100%", "100%"),
        ("%x", "%x"),
        ("%s%s", "  "),
        ("s%", "s%"),
        ("%", "%"),
        ("", ""),
    ],
)
def test_android_input_text_decoding(arg: str, typed: str) -> None:
    assert decode_input_text(arg) == typed


def test_swipe_semantics() -> None:
    assert swipe_action(100, 500, 100, 500, 1000) == LongPress(x=100, y=500)
    assert swipe_action(100, 500, 110, 505, 100) == Click(x=100, y=500)
    assert swipe_action(500, 1500, 500, 540, 300) == Scroll(x=500, y=1500, direction=Direction.DOWN)
    assert swipe_action(500, 540, 500, 1500, 300) == Scroll(x=500, y=540, direction=Direction.UP)
    assert swipe_action(900, 800, 100, 800, 300) == Scroll(x=900, y=800, direction=Direction.RIGHT)
    assert swipe_action(500, 1500, 500, 900, 1000) == Drag(x1=500, y1=1500, x2=500, y2=900)


def test_swipes_match_in_process_actions() -> None:
    """A fling from (x, y) is the in-process scroll; a slow swipe is the in-process drag."""
    for action, argv in [
        (Scroll(x=540, y=1400, direction=Direction.DOWN), ["input", "swipe", "540", "1400", "540", "440", "300"]),
        (Drag(x1=540, y1=1800, x2=540, y2=900), ["input", "swipe", "540", "1800", "540", "900", "1000"]),
    ]:
        served = SimDeviceBackend(seed=4)
        local = SimPhone(seed=4)
        for phone in (served.phone, local):
            phone.execute(OpenApp(app="Clock"))
            phone.dismiss_popup_if_any()
        assert served.run(argv, "").exit_code == 0
        local.execute(action)
        assert served.phone.state == local.state


def test_input_text_and_keys_in_a_multiline_field() -> None:
    dev = SimDeviceBackend(seed=1)
    compose_field(dev)
    assert run(dev, "input", "text", "a%sb%").exit_code == 0
    assert run(dev, "input", "keyevent", "66").exit_code == 0
    assert run(dev, "input", "keyevent", "KEYCODE_X", "KEYCODE_DEL", "KEYCODE_Y").exit_code == 0
    assert field_value(dev) == "a b%\ny"
    bad = run(dev, "input", "text", "中")
    assert bad.exit_code == 1 and b"IME" in bad.stderr
    assert field_value(dev) == "a b%\ny"


def test_ime_broadcast_needs_the_ime_selected() -> None:
    dev = SimDeviceBackend(seed=1)
    compose_field(dev)
    text = "中文\t`$(x)`\n\\ 😀"
    payload = base64.b64encode(text.encode()).decode()
    ignored = run(dev, "am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", payload)
    assert ignored.exit_code == 0 and b"Broadcast completed" in ignored.stdout
    assert field_value(dev) == ""  # the stock keyboard does not listen
    assert run(dev, "ime", "enable", ADB_KEYBOARD_IME).exit_code == 0
    assert run(dev, "ime", "set", ADB_KEYBOARD_IME).exit_code == 0
    assert run(dev, "am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", payload).exit_code == 0
    assert field_value(dev) == text  # committed verbatim: the newline did not submit
    assert run(dev, "am", "broadcast", "-a", "ADB_CLEAR_TEXT").exit_code == 0
    assert field_value(dev) == ""
    assert run(dev, "ime", "set", "com.evil/.Ime").exit_code == 1


def test_single_line_enter_submits_like_type() -> None:
    served, local = SimDeviceBackend(seed=2), SimPhone(seed=2)
    for phone in (served.phone, local):
        phone.execute(OpenApp(app="Chrome"))
        phone.dismiss_popup_if_any()
        x, y = phone.layout().find("chrome.omnibox").center
        phone.execute(Click(x=x, y=y))
    run(served, "input", "text", "Taylor%sSwift")
    run(served, "input", "keyevent", "66")
    local.execute(Type(content="Taylor Swift\n"))
    assert served.phone.state == local.state


def test_am_start_monkey_and_errors() -> None:
    dev = SimDeviceBackend(seed=0)
    ok = run(dev, "am", "start", "-W", "-n", "com.android.chrome/com.google.android.apps.chrome.Main")
    assert ok.exit_code == 0 and dev.phone.foreground == "chrome"
    rel = run(dev, "am", "start", "-n", "com.android.settings/.Settings")
    assert rel.exit_code == 0 and dev.phone.foreground == "settings"
    bad = run(dev, "am", "start", "-n", "com.android.chrome/.Nope")
    assert bad.exit_code == 255 and b"does not exist" in bad.stderr
    assert dev.phone.foreground == "settings"
    assert run(dev, "monkey", "-p", "com.twitter.android", "-c", "android.intent.category.LAUNCHER", "1").exit_code == 0
    assert dev.phone.foreground == "x"
    missing = run(dev, "monkey", "-p", "com.not.there", "-c", "android.intent.category.LAUNCHER", "1")
    assert missing.exit_code == 252 and b"No activities found" in missing.stdout
    assert run(dev, "input", "keyevent", "3").exit_code == 0 and dev.phone.foreground is None
    assert run(dev, "frobnicate").exit_code == 127


def test_screencap_state_probe_and_info() -> None:
    dev = SimDeviceBackend(seed=3)
    png = run(dev, "screencap", "-p").stdout
    assert png == run(dev, "screencap", "-p").stdout  # cached while the screen is unchanged
    image = np.asarray(Image.open(io.BytesIO(png)))
    assert image.shape == (2400, 1080, 3)
    assert np.array_equal(image, dev.phone.screenshot())
    raw = run(dev, "screencap").stdout
    assert np.frombuffer(raw[:12], "<u4").tolist() == [1080, 2400, 1] and len(raw) == 12 + 1080 * 2400 * 4
    assert orjson.loads(run(dev, "darwin-state").stdout) == dev.phone.snapshot()
    assert run(dev, "darwin-answer", "42 km").exit_code == 0 and dev.phone.state["answer"] == "42 km"
    assert run(dev, "getprop", "ro.product.model").stdout == b"DarwinSim\n"
    assert b"[sys.boot_completed]: [1]" in run(dev, "getprop").stdout
    assert b"package:com.android.chrome\n" in run(dev, "pm", "list", "packages").stdout


def test_reboot_keeps_or_resets_data() -> None:
    dev = SimDeviceBackend(seed=5)
    dev.phone.execute(OpenApp(app="Settings"))
    dev.phone.dismiss_popup_if_any()
    dev.phone.state["apps"]["settings"]["data"]["dark_theme"] = True
    dev.phone.state["apps"]["settings"]["stack"].append({"name": "display"})
    dev.reboot(reset=False)
    assert dev.phone.foreground is None
    assert dev.phone.state["apps"]["settings"]["stack"] == [{"name": "home"}]
    assert dev.phone.state["apps"]["settings"]["data"]["dark_theme"] is True
    dev.reboot(reset=True)
    assert dev.phone.state == SimPhone(seed=5).state


# --------------------------------------------------------------------------------------
# adbutils drives a served SimPhone through the real adb server
# --------------------------------------------------------------------------------------


def test_adbutils_drives_a_served_simphone(adb_server_port: int) -> None:
    import adbutils

    from darwin.envs.providers import SimFarm

    with SimFarm(1, seed=6, adb_port=adb_server_port) as farm:
        address = farm.addresses[0]
        client = adbutils.AdbClient(host="127.0.0.1", port=adb_server_port, socket_timeout=20)
        assert client.connect(address, timeout=10) in (f"connected to {address}", f"already connected to {address}")
        try:
            deadline = time.monotonic() + 10
            while client.device(address).get_state() != "device" and time.monotonic() < deadline:
                time.sleep(0.05)
            d = client.device(address)
            assert tuple(d.window_size()) == (1080, 2400)
            assert d.rotation() == 0
            assert d.prop.model == "DarwinSim"
            image = d.screenshot(error_ok=False)
            assert image.size == (1080, 2400)
            d.app_start("com.android.settings", "com.android.settings.Settings")
            assert d.app_current().package == "com.android.settings"
            d.keyevent("HOME")
            d.app_start("com.google.android.deskclock")  # monkey
            assert farm.backends[0].phone.foreground == "clock"
            argvs = [r.argv for r in farm.servers[0].command_log]
            assert ("am", "start", "-n", "com.android.settings/com.android.settings.Settings") in argvs
            assert (
                "monkey",
                "-p",
                "com.google.android.deskclock",
                "-c",
                "android.intent.category.LAUNCHER",
                "1",
            ) in argvs
        finally:
            client.disconnect(address)


def test_adbd_additions_log_limit_restart_and_redial(adb_server_port: int) -> None:
    """The small adbd additions SimFarm relies on: a capped command log, a restart on the
    same port, a backend that cuts the connection after a command, and adb's own redial."""
    from darwin.envs.adb_client import AdbServerClient
    from darwin.envs.adb_config import AdbEnvConfig
    from darwin.envs.providers import SimFarm

    # Generous deadlines: under a full parallel test run adb's redial of a restarted device once took
    # over 5 s (CI, 2026-11-27); the test is about coming back, not about how fast.
    config = AdbEnvConfig.for_sim(adb_port=adb_server_port, reconnect_timeout_s=30.0)
    with SimFarm(1, seed=9, config=config, log_limit=3) as farm:
        env = farm.acquire()
        server = farm.servers[0]
        for i in range(5):
            env.shell(["getprop", f"p{i}"])
        assert [r.argv[1] for r in server.command_log] == ["p2", "p3", "p4"]
        port = server.port
        farm.farm.call(server.stop())
        assert not server.running
        farm.farm.call(server.start())
        assert server.running and server.port == port
        from darwin.envs.base import InfraError

        with contextlib.suppress(InfraError):  # the restart cut the transport: this may fail...
            env.shell(["echo", "after restart"])
        assert env.shell(["echo", "again"]).stdout == b"again\n"  # ...and this reconnects first
        # drop after the command: it ran, the client saw no answer, adb redials by itself
        farm.set_faults("drop=1:after")
        with pytest.raises(InfraError):
            env.shell(["input", "keyevent", "3"])
        farm.set_faults("none")
        record = server.command_log[-1]
        assert record.argv == ("input", "keyevent", "3") and "after the command ran" in (record.error or "")
        client = AdbServerClient(port=adb_server_port)
        deadline = time.monotonic() + 30
        while client.device_state(env.serial, time.monotonic() + 1) != "device":
            assert time.monotonic() < deadline, "adb did not redial the device"
            time.sleep(0.05)
        assert client.shell(env.serial, ["echo", "back"], time.monotonic() + 2).stdout == b"back\n"
        farm.release(env)
