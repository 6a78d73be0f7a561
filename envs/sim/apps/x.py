"""X (Twitter): timeline, compose with save-as-draft, search people and follow."""

from __future__ import annotations

import random
from typing import Any

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.predicates import Check, PredicateParams, data, nav_cost, norm, predicate, top
from darwin.envs.sim.ui import UI, Row

ACCOUNTS = (
    ("Mayday_EN", "Mayday"), ("Nintendo", "Nintendo of America"), ("animalcrossing", "Animal Crossing"),
    ("NASA", "NASA"), ("BBCWorld", "BBC News (World)"), ("Mayday_Parade", "Mayday Parade"), ("elonmusk", "Elon Musk"),
)
TIMELINE = (
    ("NASA", "A new image from the James Webb telescope"), ("BBCWorld", "Markets rally as inflation eases"),
    ("Nintendo", "New Switch games this week"), ("animalcrossing", "Timmy and Tommy have a new shop"),
    ("Mayday_EN", "World tour 2026 dates announced"),
)


class XApp(SimApp):
    """X with a home timeline, compose (drafts on discard), search and follow buttons."""

    id = "x"
    label = "X"
    package = "com.twitter.android"
    activity = "com.twitter.app.main.MainActivity"
    color = (15, 20, 25)
    glyph = "X"
    aliases = ("twitter",)

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {"following": rng.sample(["NASA", "BBCWorld"], k=1), "drafts": [], "posts": []}

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        tabs = [
            ("x.tab.home", "Home", lambda: ctx.reset_to("home")),
            ("x.tab.search", "Search", lambda: ctx.reset_to("search")),
            ("x.tab.drafts", "Drafts", lambda: ctx.reset_to("drafts")),
        ]
        if name in ("home", "search", "drafts"):
            ui.bottom_nav(tabs, f"x.tab.{name}")
        if name == "home":
            ui.app_bar("X")
            posts = [(f"@{p['author']}", p["text"]) for p in reversed(d["posts"])] + [(f"@{a}", t) for a, t in ctx.shuffled(TIMELINE, "timeline")]
            rows = [Row(f"x.post.{i}", text, author) for i, (author, text) in enumerate(posts)]
            ui.list("timeline", ctx.scroll_offset("timeline"), rows, reserve_bottom=240)
            ui.fab("x.compose", "+", self._compose(ctx))
        elif name == "compose":
            ui.app_bar("New post", on_back=self._close_compose(ctx), actions=[("x.post_button", "Post", self._post(ctx))])
            ctx.text_field(ui, "x.compose_text", "What's happening?", multiline=True, h=400)
            if ctx.screen.get("confirm"):
                ui.dialog("x.save_dialog", "Save post?", "You can save this to send later from your drafts.", [
                    ("x.discard", "Discard", ctx.popper()),
                    ("x.save_draft", "Save", self._save_draft(ctx)),
                ])
        elif name == "search":
            ui.app_bar("Search")
            ctx.text_field(ui, "x.search", "Search X", on_submit=self._search(ctx))
            query = ctx.screen.get("query")
            if query is not None:
                q = norm(query).lstrip("@")
                hits = [(h, n) for h, n in ACCOUNTS if q and (q in norm(h) or q in norm(n))]
                ui.label("x.people_label", f"People matching '{query}'" if hits else f"No results for '{query}'", role="text")
                rows = [Row(f"x.account.{h}", n, f"@{h}", trailing="Following" if h in d["following"] else "Follow", on_trailing=_follow_toggler(d, h)) for h, n in hits]
                ui.list("people", ctx.scroll_offset("people"), rows)
        elif name == "drafts":
            ui.app_bar("Drafts")
            if not d["drafts"]:
                ui.label("x.no_drafts", "You don't have any drafts")
            for i, text in enumerate(d["drafts"][:8]):
                ui.row(f"x.draft.{i}", text.replace("\n", " "), "Draft")
        else:
            raise ValueError(f"x: unknown screen {name!r}")

    @staticmethod
    def _compose(ctx: AppContext):
        def compose() -> None:
            ctx.push("compose")
            ctx.phone.state["focus"] = "x.compose_text"  # the composer opens with the keyboard up

        return compose

    def handle_back(self, ctx: AppContext) -> bool:
        if ctx.screen["name"] != "compose":
            return False
        if ctx.screen.get("confirm"):
            ctx.screen["confirm"] = False
            return True
        if ctx.field("x.compose_text").strip():
            ctx.screen["confirm"] = True
            return True
        return False

    def _close_compose(self, ctx: AppContext):
        def close() -> None:
            if not self.handle_back(ctx):
                ctx.pop()

        return close

    @staticmethod
    def _post(ctx: AppContext):
        def post() -> None:
            text = ctx.field("x.compose_text").strip()
            if text:
                ctx.data["posts"].append({"author": "me", "text": text})
                ctx.pop()
                ctx.toast("Your post was sent")

        return post

    @staticmethod
    def _save_draft(ctx: AppContext):
        def save() -> None:
            ctx.data["drafts"].append(ctx.field("x.compose_text"))
            ctx.pop()
            ctx.toast("Saved to drafts")

        return save

    @staticmethod
    def _search(ctx: AppContext):
        def submit(query: str) -> None:
            if query.strip():
                ctx.screen["query"] = query.strip()
                ctx.phone.state["focus"] = None

        return submit


def _follow_toggler(d: dict[str, Any], handle: str):
    def toggle() -> None:
        if handle in d["following"]:
            d["following"].remove(handle)
        else:
            d["following"].append(handle)

    return toggle


class Draft(PredicateParams):
    content: str

    def texts(self) -> list[str]:
        return [self.content]


@predicate("x.draft", Draft)
def draft(state: dict[str, Any], p: Draft) -> Check:
    """A draft post with exactly ``content`` (case and spacing aside) is saved."""
    if any(norm(t) == norm(p.content) for t in data(state, "x")["drafts"]):
        return Check.of(0)
    # Lower bound: type the text, close the composer, confirm 'Save' (plus opening it).
    screen = top(state, "x")
    if state["foreground"] == "x" and screen["name"] == "compose":
        typed = norm(screen.get("fields", {}).get("x.compose_text", "")) == norm(p.content)
        if typed:
            return Check.of(1 if screen.get("confirm") else 2)
        return Check.of(3)
    return Check.of(4)


class Handle(PredicateParams):
    handle: str

    def texts(self) -> list[str]:
        return [self.handle]


@predicate("x.following", Handle)
def following(state: dict[str, Any], p: Handle) -> Check:
    """The account ``@handle`` is followed."""
    if norm(p.handle).lstrip("@") in {norm(h) for h in data(state, "x")["following"]}:
        return Check.of(0)
    return Check.of(nav_cost(state, "x", ("search",)) + 1)
