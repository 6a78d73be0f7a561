"""Google Play Store: app search and the account menu's settings (General section)."""

from __future__ import annotations

import random
from typing import Any

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.predicates import (
    Check,
    NoParams,
    PredicateParams,
    nav_cost,
    norm,
    on_screen,
    predicate,
    top,
)
from darwin.envs.sim.ui import UI, Row

CATALOG = ("WhatsApp Messenger", "Facebook", "Instagram", "TikTok", "Spotify: Music and Podcasts", "Netflix",
           "Google Maps", "Duolingo", "Candy Crush Saga", "Telegram", "Zoom", "Uber")
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

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {"installed": rng.sample(CATALOG, k=3), "theme": "System default"}

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        if name == "home":
            ui.app_bar("Google Play", actions=[("play.account", "A", ctx.pusher("account"))])
            ctx.text_field(ui, "play.search", "Search apps & games", on_submit=self._search(ctx))
            ui.title("Recommended for you", size="small")
            rows = [Row(f"play.app.{i}", a, "Free - Install", on_tap=ctx.pusher("app_page", title=a), glyph=a[0]) for i, a in enumerate(CATALOG)]
            ui.list("recommended", ctx.scroll_offset("recommended"), ctx.shuffled(rows, "recommended"))
        elif name == "results":
            query = ctx.screen["query"]
            ui.app_bar("Google Play", on_back=ctx.popper())
            ctx.text_field(ui, "play.search", "Search apps & games", on_submit=self._search(ctx))
            ui.label("play.results_label", f'Results for "{query}"', role="text")
            q = norm(query)
            hits = [a for a in CATALOG if q and q in norm(a)] + [f"{query.strip().title()} Lite", f"{query.strip().title()} Tools"]
            rows = [Row(f"play.result.{i}", a, "Install", on_tap=ctx.pusher("app_page", title=a), glyph=a[0]) for i, a in enumerate(hits)]
            ui.list("results", ctx.scroll_offset("results"), rows)
        elif name == "app_page":
            title = ctx.screen["title"]
            installed = title in ctx.data["installed"]
            ui.app_bar(title, on_back=ctx.popper())
            ui.card("play.app_card", title, "4.3 stars - 1B+ downloads\nRated for 12+")
            ui.button("play.install", "Open" if installed else "Install", None if installed else lambda: ctx.data["installed"].append(title))
        elif name == "account":
            ui.app_bar("Account", on_back=ctx.popper())
            for key, label in (("manage", "Manage apps & device"), ("payments", "Payments & subscriptions"),
                               ("protect", "Play Protect"), ("library", "Library"), ("settings", "Settings"), ("help", "Help & feedback")):
                ui.row(f"play.account.{key}", label, on_tap=ctx.pusher("settings") if key == "settings" else None)
        elif name == "settings":
            ui.app_bar("Settings", on_back=ctx.popper())
            expanded = ctx.screen.get("expanded")
            for key in SECTIONS:
                ui.row(f"play.settings.{key}", key.title(), "Tap to collapse" if expanded == key else "Tap to expand", on_tap=self._expand(ctx, key))
                if expanded == key:
                    for i, item in enumerate(SECTIONS[key]):
                        sub = ctx.data["theme"] if item == "Theme" else ""
                        ui.row(f"play.settings.{key}.{i}", f"    {item}", sub)
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
