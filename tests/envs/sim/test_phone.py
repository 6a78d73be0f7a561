import random

import numpy as np
import pytest
from PIL import Image

from darwin.actions import Click, Drag, OpenApp, PressBack, PressHome, Scroll, Type
from darwin.bench.sim import _exploring_actions
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone, UnknownAppError
from darwin.png import encode_png


def tap(phone: SimPhone, widget_id: str) -> None:
    widget = phone.layout().find(widget_id)
    assert widget is not None, f"{widget_id} not on screen: {[w.id for w in phone.layout().widgets]}"
    x, y = widget.center
    phone.execute(Click(x=x, y=y))


def wander(phone: SimPhone, steps: int, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(steps):
        phone.execute(_exploring_actions(phone, rng))


def test_snapshot_restore_round_trips_exactly():
    phone = SimPhone(seed=5)
    wander(phone, 60, seed=1)
    saved = phone.snapshot()
    pixels = phone.screenshot().copy()
    other = SimPhone(seed=99)
    other.restore(saved)
    assert other.snapshot() == saved
    assert np.array_equal(other.screenshot(), pixels)
    wander(phone, 10, seed=2)
    assert phone.snapshot() != saved  # the snapshot was a copy
    phone.restore(saved)
    assert phone.snapshot() == saved


def test_fork_is_independent():
    phone = SimPhone(seed=1)
    child = phone.fork()
    child.execute(OpenApp(app="Clock"))
    assert phone.foreground is None and child.foreground == "clock"


def test_restore_rejects_foreign_state():
    phone = SimPhone()
    bad = phone.snapshot()
    bad["version"] = 999
    with pytest.raises(ValueError, match="version"):
        phone.restore(bad)


@pytest.mark.parametrize("size", [None, (540, 1200), (252, 560), (100, 222)])
def test_rendering_is_deterministic(size):
    a, b = SimPhone(seed=3), SimPhone(seed=3)
    for p in (a, b):
        wander(p, 25, seed=4)
    assert a.snapshot() == b.snapshot()
    assert a.screenshot(size).tobytes() == b.screenshot(size).tobytes()
    assert a.screenshot_png(size) == b.screenshot_png(size)


def test_png_encoder_decodes_to_the_same_pixels():
    phone = SimPhone(seed=2)
    phone.execute(OpenApp(app="Amazon"))
    arr = phone.screenshot()
    decoded = np.asarray(Image.open(__import__("io").BytesIO(encode_png(arr))).convert("RGB"))
    assert np.array_equal(decoded, arr)


def test_screenshot_size_is_validated():
    with pytest.raises(ValueError, match="within"):
        SimPhone().screenshot((2000, 100))


def test_perturbations_change_pixels_not_semantics():
    phones = [SimPhone(seed=s) for s in range(6)]
    shots = {p.screenshot((252, 560)).tobytes() for p in phones}
    assert len(shots) == 6  # wallpaper, accent and icon order differ
    for p in phones:
        p.execute(OpenApp(app="Settings"))
    signatures = {p.layout().signature() for p in phones}
    assert len(signatures) == 1  # same widgets and texts on every seed
    plain = [SimPhone(seed=s, perturbation=PerturbationConfig(enabled=False)) for s in range(3)]
    assert len({p.screenshot((252, 560)).tobytes() for p in plain}) == 1


def test_typing_with_keyboard_and_submit():
    phone = SimPhone(seed=0, perturbation=PerturbationConfig(enabled=False))
    phone.execute(OpenApp(app="Amazon"))
    assert phone.layout().find("keyboard") is None
    tap(phone, "amazon.search")
    assert phone.layout().find("keyboard") is not None
    tap(phone, "key.h")
    tap(phone, "key.i")
    assert phone.layout().focused_field().text == "hi"
    tap(phone, "key.backspace")
    phone.execute(Type(content="at; & | $ ` ' \" % \\ 你好\n"))
    top = phone.top_screen("amazon")
    assert top["name"] == "results"
    assert top["query"] == "hat; & | $ ` ' \" % \\ 你好"


def test_type_without_focus_is_a_no_op():
    phone = SimPhone(seed=0)
    before = phone.snapshot()
    phone.execute(Type(content="hello"))
    assert phone.snapshot() == before


def test_back_hides_keyboard_then_pops_then_goes_home():
    phone = SimPhone(seed=0, perturbation=PerturbationConfig(enabled=False))
    phone.execute(OpenApp(app="Settings"))
    tap(phone, "settings.display")
    assert phone.top_screen("settings")["name"] == "display"
    phone.execute(PressBack())
    assert phone.top_screen("settings")["name"] == "home"
    phone.execute(PressBack())
    assert phone.foreground is None


def test_home_keeps_the_app_stack_and_state_persists():
    phone = SimPhone(seed=0, perturbation=PerturbationConfig(enabled=False))
    phone.execute(OpenApp(app="Settings"))
    tap(phone, "settings.display")
    tap(phone, "settings.dark_theme")
    phone.execute(PressHome())
    assert phone.dark
    phone.execute(OpenApp(app="settings"))
    assert phone.top_screen("settings")["name"] == "display"


def test_scroll_and_drag_move_lists_within_bounds():
    phone = SimPhone(seed=0, perturbation=PerturbationConfig(enabled=False))
    phone.execute(OpenApp(app="Clock"))
    tap(phone, "clock.menu")
    tap(phone, "clock.settings.home_tz")
    scroller = next(w for w in phone.layout().widgets if w.scroll_key == "tz")
    x, y = scroller.center
    for _ in range(10):
        phone.execute(Scroll(x=x, y=y, direction="down"))
    assert phone.top_screen("clock")["scroll"]["tz"] == scroller.scroll_max
    phone.execute(Drag(x1=x, y1=y - 400, x2=x, y2=y + 400))  # drag content down: reveals the top
    assert phone.top_screen("clock")["scroll"]["tz"] < scroller.scroll_max
    phone.execute(Scroll(x=x, y=y, direction="left"))  # horizontal scroll of a vertical list: nothing


def test_open_unknown_app_names_installed_apps():
    with pytest.raises(UnknownAppError, match="Clock"):
        SimPhone().execute(OpenApp(app="Snapchat"))


def test_popup_is_modal_and_dismissable():
    phone = next(
        p for p in (SimPhone(seed=s) for s in range(50)) if (p.execute(OpenApp(app="Amazon")) or p.state["popup"])
    )
    search = next(w for w in phone.layout().widgets if w.id == "amazon.search")
    phone.execute(Click(x=search.center[0], y=search.center[1]))
    assert phone.state["focus"] is None  # blocked by the dialog
    tap(phone, "popup.dismiss")
    assert phone.state["popup"] is None


def test_out_of_screen_taps_do_nothing():
    phone = SimPhone()
    before = phone.snapshot()
    phone.execute(Click(x=5000, y=5000))
    assert phone.snapshot() == before


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_any_typed_text_is_kept_and_renders(text):
    phone = SimPhone(seed=0, perturbation=PerturbationConfig(enabled=False))
    phone.execute(OpenApp(app="X"))
    tap(phone, "x.compose")  # the composer is multiline: newlines are text, nothing submits
    phone.execute(Type(content=text))
    assert phone.top_screen("x").get("fields", {}).get("x.compose_text", "") == text
    phone.screenshot((252, 560))
    phone.screenshot()
