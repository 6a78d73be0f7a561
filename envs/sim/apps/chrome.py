"""Chrome: omnibox search, tab switcher with 'Close all tabs', history with 'Clear browsing data'."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.chrome_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import (
    Check,
    NoParams,
    PredicateParams,
    data,
    nav_cost,
    norm,
    on_screen,
    predicate,
    top,
)

SEED_TABS = ("weather today", "news", "football scores", "pasta recipe", "train times", "best laptops 2026")
SHORTCUTS = ("YouTube", "Wikipedia", "Gmail", "Maps")


class ChromeApp(SimApp):
    """A browser with tabs: the omnibox searches in the current tab."""

    id = "chrome"
    label = "Chrome"
    package = "com.android.chrome"
    activity = "com.google.android.apps.chrome.Main"
    color = (66, 133, 244)
    glyph = "C"
    aliases = ("google chrome", "browser")
    root_screen = "browser"
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        queries = rng.sample(SEED_TABS, k=rng.randint(2, 4))
        return {"tabs": [{"query": q} for q in queries], "current": len(queries) - 1, "history": []}

    def popup(self) -> tuple[str, str, str]:
        return ("Make Chrome your own", "Sign in to sync your bookmarks, passwords and more.", "No thanks")

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        if name == "browser":
            current = d["current"] if d["tabs"] else None
            query = d["tabs"][current]["query"] if current is not None else ""
            ui.app_bar(
                "Chrome",
                actions=[
                    ("chrome.tab_switcher", str(len(d["tabs"])), ctx.pusher("tabs")),
                    ("chrome.menu", "menu", ctx.pusher("menu")),
                ],
            )
            ctx.text_field(ui, "chrome.omnibox", "Search or type web address", on_submit=self._search(ctx))
            if query:
                ui.label("chrome.page_title", f"{query} - Google Search", role="text")
                results = [
                    f"{query.title()} - Wikipedia",
                    f"{query.title()} - Official site",
                    f"Images for {query}",
                    f"{query.title()} - News",
                    f"Videos: {query}",
                ]
                rows = [Row(f"chrome.result.{i}", r, f"www.example{i}.com") for i, r in enumerate(results)]
                ui.list("results", ctx.scroll_offset("results"), rows)
            else:
                ui.title("Google", size="large")
                for i, s in enumerate(SHORTCUTS):
                    ui.row(f"chrome.shortcut.{i}", s, glyph=s[0])
        elif name == "tabs":
            n = len(d["tabs"])
            ui.app_bar(
                f"{n} open tab{'s' if n != 1 else ''}",
                on_back=ctx.popper(),
                actions=[
                    ("chrome.new_tab", "+", self._new_tab(ctx)),
                    ("chrome.tabs_menu", "menu", lambda: ctx.replace("tabs", menu=True)),
                ],
            )
            if n == 0:
                ui.label("chrome.no_tabs", "No open tabs")
            rows = [
                Row(
                    f"chrome.tab.{i}",
                    t["query"] or "New tab",
                    "Google Search" if t["query"] else "chrome://newtab",
                    on_tap=self._select_tab(ctx, i),
                    trailing="Close",
                    on_trailing=self._close_tab(ctx, i),
                )
                for i, t in enumerate(d["tabs"])
            ]
            ui.list("tabs", ctx.scroll_offset("tabs"), rows)
            if ctx.screen.get("menu"):
                ui.dialog(
                    "chrome.tabs_menu_dialog",
                    "Tabs",
                    "Manage your open tabs.",
                    [
                        ("chrome.menu.cancel", "Cancel", lambda: ctx.replace("tabs")),
                        ("chrome.menu.close_all", "Close all tabs", lambda: ctx.replace("tabs", confirm=True)),
                    ],
                )
            elif ctx.screen.get("confirm"):
                ui.dialog(
                    "chrome.confirm_dialog",
                    "Close all tabs?",
                    f"This closes {n} tab{'s' if n != 1 else ''}.",
                    [
                        ("chrome.confirm.cancel", "Cancel", lambda: ctx.replace("tabs")),
                        ("chrome.confirm.close_all", "Close all", self._close_all(ctx)),
                    ],
                )
        elif name == "menu":
            ui.app_bar("Chrome menu", on_back=ctx.popper())
            ui.row("chrome.menu.new_tab", "New tab", on_tap=self._new_tab(ctx))
            ui.row("chrome.menu.incognito", "New Incognito tab", on_tap=lambda: ctx.toast("Incognito is disabled"))
            ui.row("chrome.menu.history", "History", on_tap=ctx.pusher("history"))
            ui.row("chrome.menu.bookmarks", "Bookmarks")
            ui.row("chrome.menu.settings", "Settings")
        elif name == "history":
            ui.app_bar("History", on_back=ctx.popper())
            if not d["history"]:
                ui.label("chrome.history_empty", "Your history appears here")
            for i, q in enumerate(d["history"][:8]):
                ui.row(f"chrome.history.{i}", q, "Google Search")
            if d["history"]:
                ui.button("chrome.clear_history", "Clear browsing data", self._clear_history(ctx), role="secondary")
        else:
            raise ValueError(f"chrome: unknown screen {name!r}")

    def handle_back(self, ctx: AppContext) -> bool:
        if ctx.screen["name"] == "tabs" and (ctx.screen.get("menu") or ctx.screen.get("confirm")):
            ctx.replace("tabs")
            return True
        return False

    @staticmethod
    def _search(ctx: AppContext):
        def submit(query: str) -> None:
            q = query.strip()
            if not q:
                return
            d = ctx.data
            if not d["tabs"]:
                d["tabs"].append({"query": q})
                d["current"] = 0
            else:
                d["tabs"][d["current"]]["query"] = q
            d["history"] = ([q] + d["history"])[:20]
            ctx.set_field("chrome.omnibox", "")
            ctx.phone.state["focus"] = None

        return submit

    @staticmethod
    def _clear_history(ctx: AppContext):
        def clear() -> None:
            ctx.data["history"] = []
            ctx.toast("Browsing data cleared")

        return clear

    @staticmethod
    def _new_tab(ctx: AppContext):
        def new_tab() -> None:
            ctx.data["tabs"].append({"query": ""})
            ctx.data["current"] = len(ctx.data["tabs"]) - 1
            ctx.reset_to("browser")

        return new_tab

    @staticmethod
    def _select_tab(ctx: AppContext, i: int):
        def select() -> None:
            ctx.data["current"] = i
            ctx.reset_to("browser")

        return select

    @staticmethod
    def _close_tab(ctx: AppContext, i: int):
        def close() -> None:
            tabs = ctx.data["tabs"]
            del tabs[i]
            ctx.data["current"] = min(ctx.data["current"], len(tabs) - 1) if tabs else 0

        return close

    @staticmethod
    def _close_all(ctx: AppContext):
        def close_all() -> None:
            ctx.data["tabs"] = []
            ctx.data["current"] = 0
            ctx.reset_to("browser")

        return close_all


class Query(PredicateParams):
    query: str

    def texts(self) -> list[str]:
        return [self.query]


@predicate("chrome.search_results", Query)
def search_results(state: dict[str, Any], p: Query) -> Check:
    """Chrome shows the Google results for ``query`` in the current tab."""
    d = data(state, "chrome")
    ok = (
        on_screen(state, "chrome", "browser")
        and bool(d["tabs"])
        and norm(d["tabs"][d["current"]]["query"]) == norm(p.query)
    )
    return Check.of(0 if ok else 1)


@predicate("chrome.no_tabs", NoParams)
def no_tabs(state: dict[str, Any], p: NoParams) -> Check:
    """Chrome has no open tabs."""
    if not data(state, "chrome")["tabs"]:
        return Check.of(0)
    # Closing needs the tab switcher: one 'Close' per tab, or menu -> 'Close all tabs' -> confirm.
    screen = top(state, "chrome")
    in_front = state["foreground"] == "chrome" and state["popup"] is None
    if in_front and screen["name"] == "tabs" and screen.get("confirm"):
        left = 1
    elif in_front and screen["name"] == "tabs" and screen.get("menu"):
        left = 2
    else:
        left = min(3, len(data(state, "chrome")["tabs"]))
    return Check.of(nav_cost(state, "chrome", ("tabs",)) + left)


@predicate("chrome.tab_with_query", Query)
def tab_with_query(state: dict[str, Any], p: Query) -> Check:
    """Some Chrome tab shows the results for ``query``."""
    ok = any(norm(t["query"]) == norm(p.query) for t in data(state, "chrome")["tabs"])
    return Check.of(0 if ok else 1)


def _in_front(state: dict[str, Any]) -> bool:
    return state["foreground"] == "chrome" and state["popup"] is None


@predicate("chrome.no_tab_with_query", Query)
def no_tab_with_query(state: dict[str, Any], p: Query) -> Check:
    """No open Chrome tab shows the results for ``query`` (each such tab needs its own 'Close')."""
    left = sum(1 for t in data(state, "chrome")["tabs"] if norm(t["query"]) == norm(p.query))
    if left == 0:
        return Check.of(0)
    # In the switcher: one 'Close' per tab, or 'Close all tabs' + confirm. Elsewhere at least two actions:
    # open the switcher and close, or search something else in the current tab (focus, type).
    screen = top(state, "chrome")
    if _in_front(state) and screen["name"] == "tabs":
        if screen.get("confirm"):
            return Check.of(1)
        return Check.of(min(2, left) if screen.get("menu") else min(3, left))
    return Check.of(2)


class OpenTabs(PredicateParams):
    """The open tabs, by query (``""`` is a new tab), in any order; and which one is shown, if given."""

    queries: tuple[str, ...]
    current: str | None = None

    def texts(self) -> list[str]:
        return sorted({q for q in self.queries if q})


@predicate("chrome.open_tabs", OpenTabs)
def open_tabs(state: dict[str, Any], p: OpenTabs) -> Check:
    """Exactly the tabs ``queries`` are open (as a multiset) and, if ``current`` is given, Chrome shows that one."""
    d = data(state, "chrome")
    have = sorted(norm(t["query"]) for t in d["tabs"])
    want = sorted(norm(q) for q in p.queries)
    shown = norm(d["tabs"][d["current"]]["query"]) if d["tabs"] else None
    tabs_ok = have == want
    current_ok = p.current is None or (on_screen(state, "chrome", "browser") and shown == norm(p.current))
    if tabs_ok and current_ok:
        return Check.of(0)
    # Disjoint lower bounds on the actions of each kind still needed:
    # - each missing tab needs a search: focus the omnibox (a search unfocuses it) and type;
    # - tabs beyond the open ones need 'New tab' each (a search on no tab at all opens one);
    # - surplus tabs not searched over need a 'Close' each, or 'Close all tabs' (three taps in
    #   the switcher, fewer once its dialogs are open);
    # - showing the right tab takes an action when nothing else is left to do.
    surplus = missing = missing_queries = 0
    for q in set(have) | set(want):
        diff = have.count(q) - want.count(q)
        surplus += max(diff, 0)
        missing += max(-diff, 0)
        missing_queries += max(-diff, 0) if q else 0  # a missing blank tab is a 'New tab' only
    screen = top(state, "chrome")
    in_front = _in_front(state)
    on_tabs = in_front and screen["name"] == "tabs"
    focused = in_front and state["focus"] == "chrome.omnibox"
    searches = 2 * missing_queries - (1 if missing_queries and focused else 0)
    new_tabs = max(0, missing - surplus - (0 if d["tabs"] else 1))
    close_all = 1 if on_tabs and screen.get("confirm") else 2 if on_tabs and screen.get("menu") else 3
    closes = min(max(0, surplus - missing), close_all)
    show = 0
    if not (current_ok or missing or surplus):
        # Only the shown tab is wrong: the switcher and a tap (from the switcher a tap; back shows the browser).
        right_tab = shown == norm(p.current or "")
        show = {"tabs": 1, "browser": 0 if right_tab else 2}.get(screen["name"], 1 if right_tab else 2)
    return Check.of(max(1, (0 if in_front else 1) + searches + new_tabs + closes + show))


@predicate("chrome.history_empty", NoParams)
def history_empty(state: dict[str, Any], p: NoParams) -> Check:
    """Chrome's history is empty."""
    if not data(state, "chrome")["history"]:
        return Check.of(0)
    return Check.of(nav_cost(state, "chrome", ("menu", "history")) + 1)


class Tabs(PredicateParams):
    """Tabs to open (by query, ``""`` for a new tab), and whether they replace the open ones."""

    queries: tuple[str, ...] = Field(min_length=1)
    replace: bool = False
    current: int = Field(-1, description="index of the tab shown afterwards (-1: the last)")


@setup_step("chrome.tabs", Tabs)
def _tabs(state: dict[str, Any], p: Tabs) -> None:
    """Open the given tabs (after the open ones, or instead of them) and show one of them."""
    d = data(state, "chrome")
    tabs = ([] if p.replace else d["tabs"]) + [{"query": q} for q in p.queries]
    d["tabs"] = tabs
    d["current"] = p.current % len(tabs)


class History(PredicateParams):
    queries: tuple[str, ...] = Field(min_length=1, description="most recent first")


@setup_step("chrome.history", History)
def _history(state: dict[str, Any], p: History) -> None:
    """Put the given searches at the top of Chrome's history (most recent first)."""
    d = data(state, "chrome")
    d["history"] = (list(p.queries) + d["history"])[:20]
