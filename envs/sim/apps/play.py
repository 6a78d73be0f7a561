"""Google Play Store: app search, app pages (rating, developer; install, uninstall), the account menu's settings (General section, theme)."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field, field_validator

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.play_zh import ZH
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

CATALOG = (
    "WhatsApp Messenger",
    "Facebook",
    "Instagram",
    "TikTok",
    "Spotify: Music and Podcasts",
    "Netflix",
    "Google Maps",
    "Duolingo",
    "Candy Crush Saga",
    "Telegram",
    "Zoom",
    "Uber",
)
APP_INFO = {  # rating, downloads, developer, age rating
    "WhatsApp Messenger": ("4.2", "5B+", "WhatsApp LLC", "12+"),
    "Facebook": ("3.9", "5B+", "Meta Platforms, Inc.", "12+"),
    "Instagram": ("4.1", "1B+", "Instagram", "12+"),
    "TikTok": ("4.4", "1B+", "TikTok Pte. Ltd.", "12+"),
    "Spotify: Music and Podcasts": ("4.3", "1B+", "Spotify AB", "12+"),
    "Netflix": ("4.5", "1B+", "Netflix, Inc.", "12+"),
    "Google Maps": ("4.0", "10B+", "Google LLC", "3+"),
    "Duolingo": ("4.6", "500M+", "Duolingo", "3+"),
    "Candy Crush Saga": ("4.7", "1B+", "King", "3+"),
    "Telegram": ("4.8", "1B+", "Telegram FZ-LLC", "16+"),
    "Zoom": ("3.8", "1B+", "zoom.us", "3+"),
    "Uber": ("4.1", "500M+", "Uber Technologies, Inc.", "3+"),
}
OTHER_APP_INFO = ("4.3", "1B+", "Play developer", "12+")
"""What an app page shows for titles outside the catalogue (search fillers)."""
THEMES = ("Light", "Dark", "System default")
SECTIONS = {
    "general": ("Account and device preferences", "Notifications", "Theme", "Download preferences", "Auto-update apps"),
    "family": ("Parental controls", "Family library"),
    "about": ("Play Store version", "Play Protect certification"),
}


class PlayApp(SimApp):
    """Google Play Store with search, app pages, account menu and settings."""

    id = "play"
    label = "Google Play"
    package = "com.android.vending"
    activity = "com.android.vending.AssetBrowserActivity"
    color = (1, 135, 95)
    glyph = "P"
    aliases = ("play store", "google play store", "playstore")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {"installed": rng.sample(CATALOG, k=3), "theme": "System default"}

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        if name == "home":
            ui.app_bar("Google Play", actions=[("play.account", "A", ctx.pusher("account"))])
            ctx.text_field(ui, "play.search", "Search apps & games", on_submit=self._search(ctx))
            ui.title("Recommended for you", size="small")
            rows = [
                Row(f"play.app.{i}", a, "Free - Install", on_tap=ctx.pusher("app_page", title=a), glyph=a[0])
                for i, a in enumerate(CATALOG)
            ]
            ui.list("recommended", ctx.scroll_offset("recommended"), ctx.shuffled(rows, "recommended"))
        elif name == "results":
            query = ctx.screen["query"]
            ui.app_bar("Google Play", on_back=ctx.popper())
            ctx.text_field(ui, "play.search", "Search apps & games", on_submit=self._search(ctx))
            ui.label("play.results_label", f'Results for "{query}"', role="text")
            q = norm(query)
            hits = [a for a in CATALOG if q and q in norm(a)] + [
                f"{query.strip().title()} Lite",
                f"{query.strip().title()} Tools",
            ]
            rows = [
                Row(f"play.result.{i}", a, "Install", on_tap=ctx.pusher("app_page", title=a), glyph=a[0])
                for i, a in enumerate(hits)
            ]
            ui.list("results", ctx.scroll_offset("results"), rows)
        elif name == "app_page":
            title = ctx.screen["title"]
            installed = title in ctx.data["installed"]
            rating, downloads, developer, age = APP_INFO.get(title, OTHER_APP_INFO)
            ui.app_bar(title, on_back=ctx.popper())
            ui.card("play.app_card", title, f"{developer}\n{rating} stars - {downloads} downloads\nRated for {age}")
            ui.button(
                "play.install",
                "Open" if installed else "Install",
                None if installed else lambda: ctx.data["installed"].append(title),
            )
            if installed:
                ui.button("play.uninstall", "Uninstall", lambda: ctx.data["installed"].remove(title), role="secondary")
        elif name == "account":
            ui.app_bar("Account", on_back=ctx.popper())
            for key, label in (
                ("manage", "Manage apps & device"),
                ("payments", "Payments & subscriptions"),
                ("protect", "Play Protect"),
                ("library", "Library"),
                ("settings", "Settings"),
                ("help", "Help & feedback"),
            ):
                ui.row(f"play.account.{key}", label, on_tap=ctx.pusher("settings") if key == "settings" else None)
        elif name == "settings":
            ui.app_bar("Settings", on_back=ctx.popper())
            expanded = ctx.screen.get("expanded")
            for key in SECTIONS:
                ui.row(
                    f"play.settings.{key}",
                    key.title(),
                    "Tap to collapse" if expanded == key else "Tap to expand",
                    on_tap=self._expand(ctx, key),
                )
                if expanded == key:
                    for i, item in enumerate(SECTIONS[key]):
                        sub = ctx.data["theme"] if item == "Theme" else ""
                        ui.row(
                            f"play.settings.{key}.{i}",
                            f"    {item}",
                            sub,
                            on_tap=ctx.pusher("theme") if item == "Theme" else None,
                        )
        elif name == "theme":
            ui.app_bar("Theme", on_back=ctx.popper())
            for t in THEMES:
                ui.row(f"play.theme.{t}", t, checked=(ctx.data["theme"] == t), on_tap=self._set_theme(ctx, t))
        else:
            raise ValueError(f"play: unknown screen {name!r}")

    @staticmethod
    def _search(ctx: AppContext):
        def submit(query: str) -> None:
            if query.strip():
                params = {"query": query, "fields": {"play.search": query}}
                if ctx.screen["name"] == "results":
                    ctx.replace("results", **params)
                else:
                    ctx.push("results", **params)

        return submit

    @staticmethod
    def _set_theme(ctx: AppContext, theme: str):
        def set_theme() -> None:
            ctx.data["theme"] = theme
            ctx.pop()

        return set_theme

    @staticmethod
    def _expand(ctx: AppContext, key: str):
        def expand() -> None:
            ctx.screen["expanded"] = None if ctx.screen.get("expanded") == key else key

        return expand


class Query(PredicateParams):
    query: str

    def texts(self) -> list[str]:
        return [self.query]


@predicate("play.search_results", Query)
def search_results(state: dict[str, Any], p: Query) -> Check:
    """Google Play shows the search results for ``query``."""
    ok = on_screen(state, "play", "results") and norm(top(state, "play")["query"]) == norm(p.query)
    return Check.of(0 if ok else 1)


@predicate("play.general_settings", NoParams)
def general_settings(state: dict[str, Any], p: NoParams) -> Check:
    """Google Play's settings show the details of the General section."""
    if on_screen(state, "play", "settings") and top(state, "play").get("expanded") == "general":
        return Check.of(0)
    return Check.of(nav_cost(state, "play", ("account", "settings")) + 1)


def _in_front(state: dict[str, Any]) -> bool:
    return state["foreground"] == "play" and state["popup"] is None


class App(PredicateParams):
    app: str = Field(description="the app's title in the catalogue ('Duolingo')")

    def texts(self) -> list[str]:
        return [self.app]


def _on_page(state: dict[str, Any], title: str) -> bool:
    return _in_front(state) and top(state, "play")["name"] == "app_page" and top(state, "play")["title"] == title


@predicate("play.installed", App)
def installed(state: dict[str, Any], p: App) -> Check:
    """``app`` is installed."""
    if p.app in data(state, "play")["installed"]:
        return Check.of(0)
    # 'Install' on its page; reaching the page takes a tap (a row) at least, opening the app one more.
    return Check.of(1 if _on_page(state, p.app) else 2 + (0 if _in_front(state) else 1))


@predicate("play.not_installed", App)
def not_installed(state: dict[str, Any], p: App) -> Check:
    """``app`` is not installed."""
    if p.app not in data(state, "play")["installed"]:
        return Check.of(0)
    return Check.of(1 if _on_page(state, p.app) else 2 + (0 if _in_front(state) else 1))


class Theme(PredicateParams):
    theme: str

    @field_validator("theme")
    @classmethod
    def _theme(cls, v: str) -> str:
        if v not in THEMES:
            raise ValueError(f"unknown theme {v!r}; use one of {', '.join(THEMES)}")
        return v


@predicate("play.theme", Theme)
def theme(state: dict[str, Any], p: Theme) -> Check:
    """Google Play's theme (Settings > General > Theme) is ``theme``."""
    if data(state, "play")["theme"] == p.theme:
        return Check.of(0)
    screen = top(state, "play")
    if _in_front(state) and screen["name"] == "settings":
        return Check.of(2 + (screen.get("expanded") != "general"))  # (expand General,) open Theme, pick
    return Check.of(nav_cost(state, "play", ("account", "settings", "theme")) + 1 + (screen["name"] != "theme"))


class Apps(PredicateParams):
    install: tuple[str, ...] = ()
    uninstall: tuple[str, ...] = ()


@setup_step("play.apps", Apps)
def _apps(state: dict[str, Any], p: Apps) -> None:
    """Install and uninstall the given apps (titles of the catalogue)."""
    d = data(state, "play")
    d["installed"] = [a for a in d["installed"] if a not in p.uninstall] + [
        a for a in p.install if a not in d["installed"]
    ]


@setup_step("play.theme", Theme)
def _theme(state: dict[str, Any], p: Theme) -> None:
    """Set Google Play's theme."""
    data(state, "play")["theme"] = p.theme
