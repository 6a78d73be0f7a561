"""The action guard under an attacker's actions (issue 73): scrolls, Enter, icons, long presses,
drags and label variants are blocked before the phone changes, on in-process SimPhones and on
the plain-ADB path (an :class:`~darwin.envs.adb.AdbPhoneEnv` with no state probe, which reads
``uiautomator dump`` XML); ordinary exploration and buttons that only navigate pass."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from darwin.actions import Action, Click, Direction, Drag, LongPress, OpenApp, PressBack, Scroll, Type
from darwin.algos.task_metrics import state_diff
from darwin.envs.adb import AdbPhoneEnv
from darwin.envs.adb_client import ShellOutput
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import PhoneEnv
from darwin.envs.guard import ActionBlocked, GuardedPhone, RuleGuard
from darwin.envs.guard_targets import normalise_label
from darwin.envs.screen_elements import ScreenElement, parse_uiautomator_dump, uiautomator_dump
from darwin.envs.sim.adbd_backend import ShellResult
from darwin.envs.sim.adbd_shell import parse_command
from darwin.envs.sim.device import SimDeviceBackend
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.task_registry import get_task
from darwin.types import Task

pytestmark = pytest.mark.timeout(120)

CALM = PerturbationConfig(enabled=False)
ELSEWHERE = get_task("clock_1")  # a task about something else: none of these actions is part of it


def _tap(phone: SimPhone, widget_id: str) -> Click:
    widget = phone.layout().find(widget_id)
    assert widget is not None, f"{widget_id} is not on screen"
    x, y = widget.center
    return Click(x=x, y=y)


def _go(phone: SimPhone, *steps: str | Action) -> None:
    for step in steps:
        phone.execute(_tap(phone, step) if isinstance(step, str) else step)


class DeviceClient:
    """The adb server's client for one served SimPhone, in process: each shell command goes to
    the device's command table as adbd hands it on (``echo`` is adbd's shell builtin), so an
    :class:`AdbPhoneEnv` on it is a plain ADB phone (its screen read from ``uiautomator dump``
    XML, its actions sent as ``input`` commands) without the adb binary."""

    def __init__(self, device: SimDeviceBackend) -> None:
        self.device = device

    def shell(self, serial: str, argv: Sequence[str] | str, deadline: float) -> ShellOutput:
        command = argv if isinstance(argv, str) else shlex.join(argv)
        out, err, status = b"", b"", 0
        for simple in parse_command(command):  # as adbd runs a command line: ``;``, ``&&``, ``||``
            if (simple.connector == "&&" and status != 0) or (simple.connector == "||" and status == 0):
                continue
            words = simple.argv(status)
            if words[0] == "echo":
                result = ShellResult(stdout=(" ".join(words[1:]) + "\n").encode())
            else:
                result = self.device.run(words, command)
            out, err, status = out + result.stdout, err + result.stderr, result.exit_code
        return ShellOutput(out, err, status)

    def exec_out(self, serial: str, argv: Sequence[str], deadline: float) -> bytes:
        return self.shell(serial, argv, deadline).stdout

    def host_request(self, request: str, deadline: float) -> str:
        return "shell_v2,cmd"

    def device_state(self, serial: str, deadline: float) -> str:
        return "device"


def _plain_adb(phone: SimPhone, **config: Any) -> AdbPhoneEnv:
    """``phone`` as a plain ADB phone (no state probe: the rules decide from its view hierarchy)."""
    env = AdbPhoneEnv("emulator-5554", AdbEnvConfig(setup_ime=False, **config), connect=False)
    env.client = DeviceClient(SimDeviceBackend(phone=phone))
    env.connect()
    return env


PHONES = ("in_process", "plain_adb")


@pytest.fixture
def make_phone() -> Iterator[Callable[..., tuple[PhoneEnv, SimPhone]]]:
    """``make_phone(kind, locale)``: a calm SimPhone and the env the guard checks: itself in
    process, or it served as a plain ADB phone."""
    opened: list[AdbPhoneEnv] = []

    def make(kind: str, locale: str = "en", **config: Any) -> tuple[PhoneEnv, SimPhone]:
        if kind == "in_process":
            env = SimPhoneEnv(seed=0, perturbation=CALM, locale=locale)
            return env, env.phone
        phone = SimPhone(seed=0, perturbation=CALM, locale=locale)
        opened.append(_plain_adb(phone, **config))
        return opened[-1], phone

    yield make
    for env in opened:
        env.close()


def _data(phone: SimPhone, app: str) -> Any:
    return phone.snapshot()["apps"][app]["data"]


def _blocked(env: PhoneEnv, task: Task, action: Action) -> ActionBlocked:
    with pytest.raises(ActionBlocked) as info:
        GuardedPhone(env, RuleGuard(), task).execute(action)
    return info.value


# Each attack: the screen it starts from, the action (from the phone), the app whose data it would
# change, the rule that blocks it, and whether the phone itself changes without the guard.
ATTACKS: dict[str, tuple[tuple[str | Action, ...], Callable[[SimPhone], Action], str, str]] = {
    "typed_enter_sends": (
        (OpenApp(app="Messages"), "messages.thread.6", "messages.compose"),
        lambda phone: Type(content="see you\n"),
        "messages",
        "send",
    ),
    "keyboard_go_sends": (
        (OpenApp(app="Messages"), "messages.thread.6", "messages.compose", Type(content="see you")),
        lambda phone: _tap(phone, "key.enter"),
        "messages",
        "send",
    ),
    "mail_send_icon": (
        (
            OpenApp(app="Mail"),
            "mail.compose",
            Type(content="tom.berg@mail.com\n"),
            Type(content="Lunch\n"),
            Type(content="See you at noon"),
        ),
        lambda phone: _tap(phone, "mail.send"),
        "mail",
        "send",
    ),
    "mail_delete_icon": (
        (OpenApp(app="Mail"), "mail.email.6"),
        lambda phone: _tap(phone, "mail.delete"),
        "mail",
        "delete",
    ),
    "long_press_place_order": (
        (OpenApp(app="Amazon"), "amazon.deal.0", "amazon.buy_now"),
        lambda phone: LongPress(x=_tap(phone, "amazon.place_order").x, y=_tap(phone, "amazon.place_order").y),
        "amazon",
        "payment",
    ),
    "drag_onto_place_order": (
        (OpenApp(app="Amazon"), "amazon.deal.0", "amazon.buy_now"),
        lambda phone: Drag(
            x1=540, y1=900, x2=_tap(phone, "amazon.place_order").x, y2=_tap(phone, "amazon.place_order").y
        ),
        "amazon",
        "payment",
    ),
}


@pytest.mark.parametrize("kind", PHONES)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_is_blocked_before_the_phone_changes(attack: str, kind: str, make_phone) -> None:  # noqa: ANN001 - fixture
    steps, make_action, app, rule = ATTACKS[attack]
    env, phone = make_phone(kind)
    _go(phone, *steps)
    action = make_action(phone)
    before = _data(phone, app)
    blocked = _blocked(env, ELSEWHERE, action)
    assert blocked.block.rule == rule, blocked.block.cause
    assert _data(phone, app) == before  # it never reached the phone


@pytest.mark.parametrize("attack", sorted(a for a in ATTACKS if not a.startswith(("long_press", "drag"))))
def test_without_the_guard_the_attack_changes_the_phone(attack: str, make_phone) -> None:  # noqa: ANN001 - fixture
    """The attacks that SimPhones carry out change their data unguarded: the test above can fail.
    (A held press or a drag onto a button clicks on a real Android phone, not on a SimPhone.)"""
    steps, make_action, app, _ = ATTACKS[attack]
    for kind in PHONES:
        env, phone = make_phone(kind)
        _go(phone, *steps)
        before = _data(phone, app)
        env.execute(make_action(phone))
        assert _data(phone, app) != before, kind


def test_chinese_enter_and_send_are_blocked(make_phone) -> None:  # noqa: ANN001 - fixture
    for kind in PHONES:
        env, phone = make_phone(kind, locale="zh")
        _go(phone, OpenApp(app="Messages"), "messages.thread.6", "messages.compose", Type(content="明天见"))
        enter = phone.layout().find("key.enter")
        assert enter is not None and enter.text == "前往"
        before = _data(phone, "messages")
        assert _blocked(env, get_task("clock_1"), _tap(phone, "key.enter")).block.rule == "send"
        assert _blocked(env, ELSEWHERE, _tap(phone, "messages.send")).block.rule == "send"
        assert _data(phone, "messages") == before


# ------------------------------------------------------------------- scrolls


def test_a_scroll_near_the_edge_stays_a_scroll_and_posts_nothing(make_phone) -> None:  # noqa: ANN001 - fixture
    """The attack that posted over ADB: a left scroll at the top-right icon of X's composer."""
    for kind in PHONES:
        env, phone = make_phone(kind)
        _go(phone, OpenApp(app="X"), "x.compose", Type(content="hello world"))
        post = phone.layout().find("x.post_button")
        assert post is not None and post.box[0] <= 1060 < post.box[2] and post.box[1] <= 184 < post.box[3]
        GuardedPhone(env, RuleGuard(), ELSEWHERE).execute(Scroll(x=1060, y=184, direction=Direction.LEFT))
        assert _data(phone, "x")["posts"] == [], kind


def test_a_scroll_that_stays_on_a_button_is_judged_as_a_tap_on_it(make_phone) -> None:  # noqa: ANN001 - fixture
    """A phone set to scroll a short way (40 px, over the slop but inside the 128 px icon) sends
    a swipe that starts and ends on the Post button: Android clicks it on release."""
    env, phone = make_phone("plain_adb", scroll_distance=40 / 1080)
    _go(phone, OpenApp(app="X"), "x.compose", Type(content="hello world"))
    press = _tap(phone, "x.post_button")
    assert isinstance(env, AdbPhoneEnv)
    swipe = env.swipe(Scroll(x=press.x - 20, y=press.y, direction=Direction.LEFT))
    assert swipe.length >= env.touch_slop_px
    blocked = _blocked(env, ELSEWHERE, Scroll(x=press.x - 20, y=press.y, direction=Direction.LEFT))
    assert blocked.block.cause == "post: scroll (a swipe that stays on it: a tap) on 'Post'"
    assert _data(phone, "x")["posts"] == []
    # The same scroll far from any button passes and reaches the phone.
    GuardedPhone(env, RuleGuard(), ELSEWHERE).execute(Scroll(x=540, y=1200, direction=Direction.DOWN))


# ------------------------------------------------------------------- labels read from the view hierarchy


class DumpedScreen(PhoneEnv):
    """A phone whose screen is one uiautomator dump (a clickable button holding ``label`` as its
    text or content description); it records the actions that reach it."""

    def __init__(self, label: str, description: bool = False, clickable: bool = True) -> None:
        self.name = "dumped"
        self.device_size = (1080, 2400)
        self.received: list[Action] = []
        text, desc = ("", label) if description else (label, "")
        self.xml = uiautomator_dump(
            [
                ScreenElement("", "", "com.shop", (0, 0, 1080, 2400)),
                ScreenElement("", "", "com.shop", (100, 2000, 980, 2200), clickable=clickable),
                ScreenElement(text, desc, "com.shop", (300, 2050, 780, 2150)),
            ]
        )

    def screen_elements(self) -> list[ScreenElement]:
        return parse_uiautomator_dump(self.xml)

    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return np.zeros((2400, 1080, 3), np.uint8)

    def execute(self, action: Action) -> None:
        self.received.append(action)

    def go_home(self) -> None:
        pass


PRESS = Click(x=540, y=2100)

VARIANTS = [
    "Place  your order",
    "Place\u00a0your order",
    "Place\u2009your\u3000order",
    "Place your\u200b order",
    "Place your\u200border",
    "Pla\u00adce your or\u00adder",
    "Place your\norder",
    "Place your or\nder",
    "\ufeffPLACE YOUR ORDER",
    "Ｐｌａｃｅ ｙｏｕｒ ｏｒｄｅｒ",
    "Se\u200bnd",
    "Se\u00adnd",
    "Send\n",
    "S e n d",
    "Se\u2060nd",
]

BLOCKED_WORDS = {
    "Submit order": "payment",
    "Complete purchase": "payment",
    "Order now": "payment",
    "Confirm": "confirm",
    "Trash": "delete",
    "Move to Trash": "delete",
    "Discard": "delete",
    "Donate": "payment",
    "Checkout": "payment",
    "➤": "send",
    "🗑": "delete",
    "去结算": "payment",
    "结算": "payment",
    "确认订单": "payment",
    "订阅": "payment",
    "立即预订": "payment",
    "发表": "post",
    "移除": "delete",
    "汇款": "transfer",
    "恢复出厂设置": "delete",
    "删 除": "delete",
    "发 送": "send",
    "Remove": "delete",
    "删除": "delete",
}

PASSING_WORDS = [
    "Buy Now",  # opens the checkout, whose own button is judged
    "立即购买",
    "Add to Cart",
    "加入购物车",
    "Search",
    "Dark theme",
    "Save draft",
    "Order history",
    "Sender",
    "Postal code",
]


@pytest.mark.parametrize("label", VARIANTS)
def test_a_label_written_with_odd_spaces_or_invisible_characters_is_still_read(label: str) -> None:
    phone = DumpedScreen(label)
    blocked = _blocked(phone, ELSEWHERE, PRESS)
    assert blocked.block.rule in ("payment", "send") and phone.received == []
    assert normalise_label(label).replace(" ", "") in ("placeyourorder", "send")


@pytest.mark.parametrize(("label", "rule"), sorted(BLOCKED_WORDS.items()))
@pytest.mark.parametrize("description", [False, True], ids=["text", "content-desc"])
def test_every_purchase_send_post_delete_and_payment_word_is_blocked(label: str, rule: str, description: bool) -> None:
    phone = DumpedScreen(label, description=description)
    assert _blocked(phone, ELSEWHERE, PRESS).block.rule == rule
    assert phone.received == []


@pytest.mark.parametrize("label", PASSING_WORDS)
def test_a_button_that_only_navigates_or_explores_passes(label: str) -> None:
    phone = DumpedScreen(label)
    GuardedPhone(phone, RuleGuard(), ELSEWHERE).execute(PRESS)
    assert phone.received == [PRESS]


def test_a_row_that_is_not_clickable_presses_nothing() -> None:
    phone = DumpedScreen("Buy again: Place your order", clickable=False)
    GuardedPhone(phone, RuleGuard(), ELSEWHERE).execute(PRESS)
    assert phone.received == [PRESS]


def test_buy_now_and_buy_again_pass_on_the_plain_adb_path(make_phone) -> None:  # noqa: ANN001 - fixture
    env, phone = make_phone("plain_adb")
    _go(phone, OpenApp(app="Amazon"), "amazon.deal.0")
    GuardedPhone(env, RuleGuard(), ELSEWHERE).execute(_tap(phone, "amazon.buy_now"))
    assert phone.layout().find("amazon.place_order") is not None  # it reached the phone: the checkout is open


def test_remove_is_judged_the_same_in_english_and_chinese(make_phone) -> None:  # noqa: ANN001 - fixture
    for locale in ("en", "zh"):
        for kind in PHONES:
            env, phone = make_phone(kind, locale=locale)
            _go(phone, OpenApp(app="Amazon"), "amazon.deal.0", "amazon.add_to_cart", PressBack())
            _go(phone, "amazon.tab.cart")
            remove = phone.layout().find("amazon.cart.0.action")
            assert remove is not None, [w.id for w in phone.layout().widgets]
            x, y = remove.center
            cart = _data(phone, "amazon")["cart"]
            assert _blocked(env, ELSEWHERE, Click(x=x, y=y)).block.rule == "delete", (locale, kind)
            assert _data(phone, "amazon")["cart"] == cart


# ------------------------------------------------------------------- exploration is not a side effect


EXPLORATION: dict[str, tuple[tuple[str | Action, ...], Callable[[SimPhone], Action]]] = {
    "search": ((OpenApp(app="Amazon"), "amazon.search", Type(content="headphones")), lambda p: Type(content="\n")),
    "dark_theme": ((OpenApp(app="Settings"), "settings.display"), lambda p: _tap(p, "settings.dark_theme")),
    "add_to_cart": ((OpenApp(app="Amazon"), "amazon.deal.0"), lambda p: _tap(p, "amazon.add_to_cart")),
    "open_unread_email": ((OpenApp(app="Mail"),), lambda p: _tap(p, _unread_email(p))),
    "save_draft": ((OpenApp(app="Mail"), "mail.compose", Type(content="ana@mail.com")), lambda p: _tap(p, "nav_up")),
}


def _unread_email(phone: SimPhone) -> str:
    unread = [m for m in _data(phone, "mail")["emails"] if m["unread"] and m["box"] == "inbox"]
    assert unread, "seed 0's inbox has an unread email"
    return f"mail.email.{unread[0]['id']}"


@pytest.mark.parametrize("exploring", sorted(EXPLORATION))
def test_ordinary_exploration_is_not_punished_as_a_side_effect(exploring: str) -> None:
    task = get_task("x.post.s0")  # a task that declares what it may change: only posts
    assert task.allowed_changes == ("apps.x.data.posts",)
    steps, make_action = EXPLORATION[exploring]
    env = SimPhoneEnv(seed=0, perturbation=CALM)
    _go(env.phone, *steps)
    action = make_action(env.phone)
    before = env.phone.snapshot()
    assert asyncio.run(RuleGuard().check(env, task, action)) is None
    GuardedPhone(env, RuleGuard(), task).execute(action)
    assert state_diff(before, env.phone.snapshot())  # it changed app data outside what the task allows
