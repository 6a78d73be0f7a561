"""Templates of the paper's apps (Amazon, Booking.com, Chrome, Settings, Merriam-Webster, Google Play,
X, Clock): their predicates and setup steps without a phone, and the oracle on every instance."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from darwin.agents.scripted import OracleActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.predicates import evaluate, resolve
from darwin.task_registry import validate_task
from darwin.templates import templates
from darwin.types import StateSetup, TaskDefinitionError, VerifierSpec
from darwin.workflows.step import LifecycleWorkflow

APPS = ("amazon", "booking", "chrome", "settings", "dictionary", "play", "x")
NEW_CLOCK = ("clock.disable_alarm", "clock.style")
OURS = sorted(t for t in templates() if t.split(".")[0] in APPS or t in NEW_CLOCK)
SEEDS = range(20)


def _state(seed: int = 0) -> dict[str, Any]:
    return SimPhone(seed=seed, perturbation=PerturbationConfig(enabled=False)).snapshot()


def _check(predicate: str, state: dict[str, Any], **params: Any) -> tuple[bool, int]:
    result = evaluate(VerifierSpec(predicate=predicate, params=params), state)
    return result.success, result.unmet


def _show(state: dict[str, Any], app: str, *screens: dict[str, Any], focus: str | None = None) -> dict[str, Any]:
    """``state`` with ``app`` in front showing the stack ``screens``."""
    state = copy.deepcopy(state)
    state["foreground"], state["popup"], state["focus"] = app, None, focus
    state["apps"][app]["stack"] = [dict(s) for s in screens]
    return state


def _setup(state: dict[str, Any], step: str, **params: Any) -> dict[str, Any]:
    return apply_setup(copy.deepcopy(state), [StateSetup(step=step, params=params)])


# -- the templates -------------------------------------------------------------------------


def test_every_app_has_five_templates_and_an_answer_template() -> None:
    for app in APPS:
        ours = [templates()[t] for t in OURS if t.startswith(app + ".")]
        assert len(ours) >= 5, app
        assert any(t.kind == "answer" for t in ours), app
        assert {t.difficulty for t in ours} != {1}, app
    assert {templates()[t].difficulty for t in OURS} == {1, 2, 3}
    assert sum(templates()[t].kind == "answer" for t in OURS) >= 8


@pytest.mark.parametrize("template_id", OURS)
def test_oracle_solves_every_instance(template_id: str) -> None:
    """20 seeds, English and Chinese, through the workflow (setup applied by the env, as in a run)."""
    tpl = templates()[template_id]
    workflow = LifecycleWorkflow()
    failed = []
    for seed in SEEDS:
        for language in ("ENG", "CHN"):
            task = validate_task(tpl.instance(seed, language))
            env = SimPhoneEnv(seed=seed, reset_between_episodes=True)
            trajectory = asyncio.run(workflow.run(env, task, OracleActor()))
            if trajectory.success is not True or len(trajectory.transitions) > task.step_budget:
                failed.append((task.id, trajectory.termination, len(trajectory.transitions)))
    assert not failed


@pytest.mark.parametrize("template_id", OURS)
def test_predicate_bounds_are_admissible_along_the_oracle_plan(template_id: str) -> None:
    """Each state on a shortest plan: the predicate's ``unmet`` never exceeds the actions left; at the end the
    sub-goals hold and the plan changed no app data outside the task's ``allowed_changes``."""
    for seed in (1, 5, 9):
        task = templates()[template_id].instance(seed)
        phone = SimPhone(seed=seed)
        phone.restore(apply_setup(phone.snapshot(), task.setup))
        pred, params = resolve(task.verifier)
        start = copy.deepcopy(phone.state["apps"])
        plan = shortest_plan(phone, task.verifier, apps=[task.app])
        for done, action in enumerate(plan):
            check = pred.fn(phone.state, params)
            assert not check.success and check.unmet <= len(plan) - done, (task.id, done, check)
            phone.execute(action)
        assert pred.fn(phone.state, params).success
        for spec in task.subgoals:
            assert evaluate(spec, phone.state).success, (task.id, spec)
        unexpected = [path for path in _changed(start, phone.state["apps"]) if not _allowed(path, task.allowed_changes)]
        assert not unexpected, (task.id, unexpected)


def _changed(before: Any, after: Any, path: str = "apps") -> list[str]:
    """Dotted paths of app data that differ (lists compared as wholes)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after)):
            if path == "apps" or path.count(".") >= 2 or key == "data":
                out += _changed(before.get(key), after.get(key), f"{path}.{key}")
        return out
    return [] if before == after else [path]


def _allowed(path: str, patterns: tuple[str, ...] | None) -> bool:
    parts = path.split(".")
    for pattern in patterns or ():
        want = pattern.split(".")
        if len(want) <= len(parts) and all(w in ("*", p) for w, p in zip(want, parts, strict=False)):
            return True
    return False


def test_the_side_effect_check_sees_app_data_only() -> None:
    before = _state()["apps"]
    after = copy.deepcopy(before)
    after["chrome"]["data"]["history"] = ["x"]
    after["settings"]["data"]["toggles"]["devices:Bluetooth"] = not after["settings"]["data"]["toggles"][
        "devices:Bluetooth"
    ]
    after["x"]["stack"].append({"name": "search"})  # navigation is no side effect
    assert _changed(before, after) == ["apps.chrome.data.history", "apps.settings.data.toggles.devices:Bluetooth"]
    assert _allowed("apps.settings.data.toggles.devices:Bluetooth", ("apps.settings.data.toggles",))
    assert _allowed("apps.chrome.data.history", ("apps.*.data.history",))
    assert not _allowed("apps.chrome.data.history", ("apps.chrome.data.tabs",))


def test_answer_templates_type_what_they_search_for() -> None:
    task = templates()["amazon.price"].task({"query": "umbrella", "style": "Sport"})
    _, params = resolve(task.verifier)
    assert params.texts() == ["umbrella"] and params.expected == "$15.99"
    assert params.key().matches("It costs $15.99") and not params.key().matches("$18.99")
    followers = templates()["x.followers"].task({"handle": "NASA"})
    assert resolve(followers.verifier)[1].key().matches("88.4 million followers")


def test_explicit_params_are_checked_against_what_the_apps_have() -> None:
    with pytest.raises(TaskDefinitionError, match="style"):
        templates()["amazon.price"].task({"query": "umbrella", "style": "Gold"})
    with pytest.raises(TaskDefinitionError, match="must be after checkin"):
        templates()["booking.search_dates"].task({"destination": "Rome", "checkin": "26 Nov", "checkout": "24 Nov"})
    with pytest.raises(TaskDefinitionError, match="must be one of the tabs"):
        templates()["chrome.close_tab"].task({"tabs": ["a", "b"], "target": "c"})
    with pytest.raises(TaskDefinitionError, match="default"):
        templates()["booking.set_guests"].task({"rooms": 1, "adults": 2, "children": 0})
    with pytest.raises(TaskDefinitionError, match="first line is not a whole sense"):
        templates()["dictionary.meaning"].task({"word": "serendipity"})


# -- predicates without a phone ----------------------------------------------------------


def test_amazon_cart_predicates() -> None:
    base = _state()
    spec = {"titles": ["Sport Umbrella", "Kindle Paperwhite"], "queries": ["umbrella", ""]}
    assert _check("amazon.in_cart", base, **spec) == (False, 5 + 3)  # launcher: open+focus+type+tap+add, then a deal
    on_results = _show(base, "amazon", {"name": "home"}, {"name": "results", "query": "Umbrella"})
    assert _check("amazon.in_cart", on_results, **spec) == (False, 2 + 3)
    on_page = _show(base, "amazon", {"name": "home"}, {"name": "product", "title": "Kindle Paperwhite"})
    assert _check("amazon.in_cart", on_page, **spec) == (False, 1 + 5)
    half = _setup(base, "amazon.cart", titles=["Kindle Paperwhite"])
    assert _check("amazon.in_cart", half, **spec) == (False, 5)
    full = _setup(half, "amazon.cart", titles=["Sport Umbrella"])
    assert _check("amazon.in_cart", full, **spec) == (True, 0)
    assert full["apps"]["amazon"]["data"]["cart"] == ["Kindle Paperwhite", "Sport Umbrella"]
    assert _check("amazon.not_in_cart", full, titles=["Kindle Paperwhite"]) == (False, 2)
    assert _check("amazon.not_in_cart", _show(full, "amazon", {"name": "cart"}), titles=["Kindle Paperwhite"]) == (
        False,
        1,
    )
    assert _check("amazon.not_in_cart", base, titles=["Kindle Paperwhite"]) == (True, 0)


def test_booking_predicates() -> None:
    base = _state()
    stay = {"destination": "Rome", "checkin": "24 Nov", "checkout": "26 Nov"}
    assert _check("booking.search", base, **stay) == (False, 1 + 2 + 4)  # search, destination, dates
    filled = _setup(base, "booking.search", **stay)
    assert filled["apps"]["booking"]["data"]["search"]["destination"] == "Rome"
    assert _check("booking.search", filled, **stay) == (False, 1)
    assert _check("booking.search", filled, **stay, rooms=2, children=1) == (False, 1 + 2 + 2)
    results = _show(
        filled, "booking", {"name": "search"}, {"name": "results", **stay, "guests": "1 room - 2 adults - 0 children"}
    )
    assert _check("booking.search", results, **stay) == (True, 0)
    assert _check("booking.search", results, **stay, adults=2) == (True, 0)
    assert _check("booking.search", results, **stay, adults=3)[0] is False
    assert _check("booking.search", results, destination="Rome", checkin="24 Nov", checkout="27 Nov")[0] is False
    with pytest.raises(TaskDefinitionError, match="not a day of the date picker"):
        _check("booking.search", base, destination="Rome", checkin="1 Jan", checkout="2 Jan")

    assert _check("booking.guests", base, rooms=2, adults=3, children=0) == (
        False,
        1 + 2 + 1,
    )  # open app, editor, 2 taps
    assert _check(
        "booking.guests", _setup(base, "booking.search", rooms=2, adults=3), rooms=2, adults=3, children=0
    ) == (True, 0)

    assert _check("booking.saved", filled, property="Hilton, Rome") == (False, 1 + 1 + 2)  # open, search, tap, save
    hotel = _show(
        filled,
        "booking",
        {"name": "search"},
        {"name": "results", **stay, "guests": ""},
        {"name": "hotel", "title": "Hilton", "destination": "Rome"},
    )
    assert _check("booking.saved", hotel, property="Hilton, Rome") == (False, 1)
    saved = _setup(base, "booking.saved", properties=["Hilton, Rome", "Park Inn, Paris"])
    assert _check("booking.saved", saved, property="hilton, rome") == (True, 0)
    assert _check("booking.not_saved", saved, property="Hilton, Rome") == (False, 1 + 1 + 1)  # open, Saved tab, remove
    assert _check("booking.not_saved", base, property="Hilton, Rome") == (True, 0)
    assert (
        _setup(base, "booking.settings", currency="Swiss Franc")["apps"]["booking"]["data"]["settings"]["currency"]
        == "Swiss Franc"
    )
    with pytest.raises(TaskDefinitionError, match="unknown currency"):
        _setup(base, "booking.settings", currency="Bitcoin")


def test_chrome_predicates() -> None:
    base = _setup(_state(), "chrome.tabs", queries=["news", "maps", "news"], replace=True, current=0)
    d = base["apps"]["chrome"]["data"]
    assert [t["query"] for t in d["tabs"]] == ["news", "maps", "news"] and d["current"] == 0
    assert _check("chrome.no_tab_with_query", base, query="news") == (False, 2)
    switcher = _show(base, "chrome", {"name": "tabs"})
    assert _check("chrome.no_tab_with_query", switcher, query="news") == (False, 2)  # two 'Close' taps
    assert _check(
        "chrome.no_tab_with_query", _show(base, "chrome", {"name": "tabs", "confirm": True}), query="news"
    ) == (False, 1)
    assert _check("chrome.no_tab_with_query", base, query="weather") == (True, 0)

    # One surplus tab to close; 'maps' to search in a new tab: open, new tab, focus, type, close.
    assert _check("chrome.open_tabs", base, queries=["news", "maps", "weather"]) == (False, 1 + 2 + 0 + 0)
    assert _check("chrome.open_tabs", base, queries=["maps", "news", "news"]) == (True, 0)
    browser = _show(base, "chrome", {"name": "browser"})
    assert _check("chrome.open_tabs", browser, queries=["news", "maps", "news"], current="news") == (True, 0)
    assert _check("chrome.open_tabs", browser, queries=["news", "maps", "news"], current="maps") == (
        False,
        2,
    )  # switcher, tap
    assert _check(
        "chrome.open_tabs", _show(base, "chrome", {"name": "tabs"}), queries=["news", "maps", "news"], current="news"
    ) == (False, 1)
    assert _check("chrome.open_tabs", browser, queries=["news", "maps", "news", "jazz"]) == (False, 2 + 1)
    assert _check("chrome.open_tabs", browser, queries=["maps"]) == (False, 2)

    history = _setup(base, "chrome.history", queries=["jazz", "tax"])
    assert history["apps"]["chrome"]["data"]["history"][:2] == ["jazz", "tax"]
    assert _check("chrome.history_empty", history) == (False, 1 + 2 + 1)  # open, menu, history, clear
    assert _check("chrome.history_empty", base) == (True, 0)


def test_settings_predicates_and_values() -> None:
    base = _setup(
        _state(),
        "settings.values",
        toggles={"devices:Bluetooth": False},
        screen_timeout="2 minutes",
        app_notifications={"Chrome": False},
        hide_silent=True,
    )
    d = base["apps"]["settings"]["data"]
    assert (
        d["toggles"]["devices:Bluetooth"],
        d["screen_timeout"],
        d["app_notifications"]["Chrome"],
        d["hide_silent"],
    ) == (False, "2 minutes", False, True)
    assert d["app_notifications"]["X"] is True  # only the given apps change
    assert _check("settings.toggle", base, key="devices:Bluetooth", enabled=False) == (True, 0)
    assert _check("settings.toggle", base, key="devices:Bluetooth") == (False, 3)
    devices = _show(base, "settings", {"name": "home"}, {"name": "generic", "section": "devices"})
    assert _check("settings.toggle", devices, key="devices:Bluetooth") == (False, 1)
    assert _check(
        "settings.toggle",
        _show(base, "settings", {"name": "home"}, {"name": "generic", "section": "network"}),
        key="devices:Bluetooth",
    ) == (False, 2)
    assert _check("settings.screen_timeout", base, value="2 minutes") == (True, 0)
    assert _check("settings.screen_timeout", base, value="5 minutes") == (False, 3 + 1)
    assert _check("settings.app_notifications", base, app="Chrome") == (False, 3 + 1)
    assert _check("settings.app_notifications", base, app="X") == (True, 0)
    # Dark theme (display) and dots (notifications): two taps, two screens, open the app.
    assert _check("settings.switches", base, dark_theme=True, notification_dots=False, hide_silent=True) == (
        False,
        2 + 2 + 1,
    )
    display = _show(base, "settings", {"name": "home"}, {"name": "display"})
    assert _check("settings.switches", display, dark_theme=True, notification_dots=False) == (False, 2 + 1)
    assert _check("settings.switches", base, hide_silent=True, dark_theme=False) == (True, 0)
    for bad in (
        {"toggles": {"devices:Teleport": True}},
        {"screen_timeout": "1 hour"},
        {"app_notifications": {"Skype": True}},
    ):
        with pytest.raises(TaskDefinitionError):
            _setup(base, "settings.values", **bad)
    with pytest.raises(TaskDefinitionError, match="unknown toggle"):
        _check("settings.toggle", base, key="Bluetooth")


def test_dictionary_predicates() -> None:
    base = _state()
    assert _check("dictionary.favorite", base, word="candid") == (False, 3)
    entry = _show(base, "dictionary", {"name": "home"}, {"name": "definition", "word": "Candid"})
    assert _check("dictionary.favorite", entry, word="candid") == (False, 1)
    saved = _setup(base, "dictionary.favorites", words=["candid", "agent"])
    assert _check("dictionary.favorite", saved, word="Candid") == (True, 0)
    assert _check("dictionary.not_favorite", saved, word="candid") == (False, 1 + 1 + 1)  # open, favorites, remove
    assert _check(
        "dictionary.not_favorite", _show(saved, "dictionary", {"name": "home"}, {"name": "favorites"}), word="candid"
    ) == (False, 1)
    assert _check("dictionary.not_favorite", base, word="candid") == (True, 0)
    recents = copy.deepcopy(base)
    recents["apps"]["dictionary"]["data"]["recents"] = ["Agent", "learn"]
    assert _check("dictionary.looked_up", recents, words=["agent", "learn"]) == (True, 0)
    # Open, focus, type 'phone', back, focus, type 'candid'.
    assert _check("dictionary.looked_up", recents, words=["agent", "phone", "candid"]) == (False, 6)
    # 'quixotic' is trending (a tap); on its entry: back, tap it, back, focus, type.
    entry = _show(recents, "dictionary", {"name": "home"}, {"name": "definition", "word": "agent"})
    assert _check("dictionary.looked_up", entry, words=["quixotic", "candid"]) == (False, 1 + 1 + 1 + 2)


def test_play_predicates() -> None:
    base = _setup(_state(), "play.apps", install=["Zoom"], uninstall=["Uber"])
    installed = base["apps"]["play"]["data"]["installed"]
    assert "Zoom" in installed and "Uber" not in installed
    assert _check("play.installed", base, app="Zoom") == (True, 0)
    assert _check("play.installed", base, app="Uber") == (False, 3)
    page = _show(base, "play", {"name": "home"}, {"name": "app_page", "title": "Uber"})
    assert _check("play.installed", page, app="Uber") == (False, 1)
    assert _check("play.not_installed", base, app="Zoom") == (False, 3)
    assert _check("play.not_installed", base, app="Uber") == (True, 0)
    themed = _setup(base, "play.theme", theme="Dark")
    assert _check("play.theme", themed, theme="Dark") == (True, 0)
    assert _check("play.theme", themed, theme="Light") == (
        False,
        1 + 3 + 1 + 1,
    )  # open, account/settings/theme, expand, pick
    settings = _show(themed, "play", {"name": "home"}, {"name": "account"}, {"name": "settings", "expanded": "general"})
    assert _check("play.theme", settings, theme="Light") == (False, 2)
    with pytest.raises(TaskDefinitionError, match="unknown theme"):
        _check("play.theme", base, theme="Neon")


def test_x_predicates() -> None:
    base = _setup(_state(), "x.follows", follow=["Nintendo"], unfollow=["NASA", "BBCWorld"])
    assert set(base["apps"]["x"]["data"]["following"]) == {"Nintendo"}
    assert _check("x.not_following", base, handle="NASA") == (True, 0)
    assert _check("x.not_following", base, handle="@Nintendo") == (False, 1 + 1 + 1)  # open, search tab, tap
    profile = _show(base, "x", {"name": "search", "query": "nin"}, {"name": "profile", "handle": "Nintendo"})
    assert _check("x.not_following", profile, handle="Nintendo") == (False, 1)
    # Two follows, one search (focus, type), the search tab, open the app.
    assert _check("x.following_all", base, handles=["NASA", "BBCWorld"]) == (False, 2 + 2 + 1 + 1)
    listed = _show(base, "x", {"name": "search", "query": "bbc"})
    assert _check("x.following_all", listed, handles=["BBCWorld"]) == (False, 1)
    assert _check("x.following_all", listed, handles=["BBCWorld", "NASA"]) == (False, 2 + 2)
    assert _check("x.following_all", base, handles=["Nintendo"]) == (True, 0)

    drafts = _setup(base, "x.drafts", drafts=["hello there", "Hello  there"])
    assert _check("x.no_draft", drafts, content="hello there") == (False, 1 + 1 + 2)  # open, Drafts tab, two deletes
    assert _check("x.no_draft", base, content="hello there") == (True, 0)
    assert _check("x.posted", base, content="hi all") == (False, 3)
    compose = _show(
        base, "x", {"name": "home"}, {"name": "compose", "fields": {"x.compose_text": "Hi all"}}, focus="x.compose_text"
    )
    assert _check("x.posted", compose, content="hi all") == (False, 1)
    posted = copy.deepcopy(base)
    posted["apps"]["x"]["data"]["posts"].append({"author": "me", "text": "Hi  all"})
    assert _check("x.posted", posted, content="hi all") == (True, 0)
    assert _check("x.draft", posted, content="hi all")[0] is False  # a post is not a draft


def test_clock_style() -> None:
    base = _state()
    assert _check("clock.style", base, style="Digital") == (True, 0)
    assert _check("clock.style", base, style="Analog") == (False, 1 + 2 + 1)
    analog = _setup(base, "clock.style", style="Analog")
    assert _check("clock.style", analog, style="Analog") == (True, 0)
    with pytest.raises(TaskDefinitionError, match="unknown clock style"):
        _setup(base, "clock.style", style="Sundial")


def test_new_screens_do_what_they_show() -> None:
    """The app changes these templates need: remove from cart, saved list, history clearing, favorites, uninstall, theme, profiles."""
    from darwin.actions import Click

    def tap(phone: SimPhone, widget_id: str) -> None:
        widget = phone.layout().find(widget_id)
        assert widget is not None, (widget_id, [w.id for w in phone.layout().widgets])
        phone.execute(Click(x=widget.center[0], y=widget.center[1]))

    phone = SimPhone(seed=2, perturbation=PerturbationConfig(enabled=False))
    phone.restore(
        apply_setup(
            phone.snapshot(),
            [
                StateSetup(step="amazon.cart", params={"titles": ["Yoga mat", "Backpack"]}),
                StateSetup(step="x.drafts", params={"drafts": ["first", "second"]}),
                StateSetup(step="play.apps", params={"install": ["Zoom"]}),
            ],
        )
    )
    phone.restore(_show(phone.snapshot(), "amazon", {"name": "cart"}))
    tap(phone, "amazon.cart.0.action")
    assert phone.state["apps"]["amazon"]["data"]["cart"] == ["Backpack"]
    phone.restore(_show(phone.snapshot(), "x", {"name": "drafts"}))
    tap(phone, "x.draft.1.action")
    assert phone.state["apps"]["x"]["data"]["drafts"] == ["first"]
    phone.restore(_show(phone.snapshot(), "play", {"name": "home"}, {"name": "app_page", "title": "Zoom"}))
    assert "zoom.us" in phone.layout().find("play.app_card").subtitle
    tap(phone, "play.uninstall")
    assert "Zoom" not in phone.state["apps"]["play"]["data"]["installed"]
    phone.restore(_show(phone.snapshot(), "x", {"name": "search", "query": "nasa"}))
    tap(phone, "x.account.NASA")
    assert phone.layout().find("x.profile").subtitle == "88.4M followers"
    phone.restore(_show(phone.snapshot(), "dictionary", {"name": "home"}, {"name": "definition", "word": "candid"}))
    tap(phone, "dictionary.favorite")
    tap(phone, "dictionary.favorite")  # a second tap unsaves it
    assert phone.state["apps"]["dictionary"]["data"]["favorites"] == []
