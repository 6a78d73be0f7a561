"""X (Twitter): timeline, compose with save-as-draft, drafts, search people, profiles and follow."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.x_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, nav_cost, norm, predicate, top

ACCOUNTS = (
    ("Mayday_EN", "Mayday"),
    ("Nintendo", "Nintendo of America"),
    ("animalcrossing", "Animal Crossing"),
    ("NASA", "NASA"),
    ("BBCWorld", "BBC News (World)"),
    ("Mayday_Parade", "Mayday Parade"),
    ("elonmusk", "Elon Musk"),
)
FOLLOWERS = {
    "Mayday_EN": "1.2M",
    "Nintendo": "14.1M",
    "animalcrossing": "2.3M",
    "NASA": "88.4M",
    "BBCWorld": "40.1M",
    "Mayday_Parade": "312K",
    "elonmusk": "219.5M",
}
"""Follower counts as profiles show them."""
TIMELINE = (
    ("NASA", "A new image from the James Webb telescope"),
    ("BBCWorld", "Markets rally as inflation eases"),
    ("Nintendo", "New Switch games this week"),
    ("animalcrossing", "Timmy and Tommy have a new shop"),
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
    zh = ZH

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
            posts = [(f"@{p['author']}", p["text"]) for p in reversed(d["posts"])] + [
                (f"@{a}", t) for a, t in ctx.shuffled(TIMELINE, "timeline")
            ]
            rows = [Row(f"x.post.{i}", text, author) for i, (author, text) in enumerate(posts)]
            ui.list("timeline", ctx.scroll_offset("timeline"), rows, reserve_bottom=240)
            ui.fab("x.compose", "+", self._compose(ctx))
        elif name == "compose":
            ui.app_bar(
                "New post", on_back=self._close_compose(ctx), actions=[("x.post_button", "Post", self._post(ctx))]
            )
            ctx.text_field(ui, "x.compose_text", "What's happening?", multiline=True, h=400)
            if ctx.screen.get("confirm"):
                ui.dialog(
                    "x.save_dialog",
                    "Save post?",
                    "You can save this to send later from your drafts.",
                    [
                        ("x.discard", "Discard", ctx.popper()),
                        ("x.save_draft", "Save", self._save_draft(ctx)),
                    ],
                )
        elif name == "search":
            ui.app_bar("Search")
            ctx.text_field(ui, "x.search", "Search X", on_submit=self._search(ctx))
            query = ctx.screen.get("query")
            if query is not None:
                q = norm(query).lstrip("@")
                hits = [(h, n) for h, n in ACCOUNTS if q and (q in norm(h) or q in norm(n))]
                ui.label(
                    "x.people_label", f"People matching '{query}'" if hits else f"No results for '{query}'", role="text"
                )
                rows = [
                    Row(
                        f"x.account.{h}",
                        n,
                        f"@{h}",
                        on_tap=ctx.pusher("profile", handle=h),
                        trailing="Following" if h in d["following"] else "Follow",
                        on_trailing=_follow_toggler(d, h),
                    )
                    for h, n in hits
                ]
                ui.list("people", ctx.scroll_offset("people"), rows)
        elif name == "profile":
            handle = ctx.screen["handle"]
            ui.app_bar(dict(ACCOUNTS)[handle], on_back=ctx.popper())
            ui.card("x.profile", f"@{handle}", f"{FOLLOWERS[handle]} followers", h=220)
            ui.button(
                "x.profile.follow", "Following" if handle in d["following"] else "Follow", _follow_toggler(d, handle)
            )
        elif name == "drafts":
            ui.app_bar("Drafts")
            if not d["drafts"]:
                ui.label("x.no_drafts", "You don't have any drafts")
            rows = [
                Row(
                    f"x.draft.{i}",
                    text.replace("\n", " "),
                    "Draft",
                    trailing="Delete",
                    on_trailing=_remover(d["drafts"], i),
                )
                for i, text in enumerate(d["drafts"])
            ]
            ui.list("drafts", ctx.scroll_offset("drafts"), rows)
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


def _remover(items: list[str], index: int):
    def remove() -> None:
        del items[index]

    return remove


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
    return Check.of(_follow_cost(state, [p.handle]))


def _follow_cost(state: dict[str, Any], handles: list[str]) -> int:
    """Lower bound on the taps that (un)follow ``handles``: one each, and reaching the search first.

    On the profile of one of them, its own button is one tap away.
    """
    screen = top(state, "x")
    on_profile = (
        state["foreground"] == "x"
        and state["popup"] is None
        and screen["name"] == "profile"
        and norm(screen["handle"]) in {norm(h).lstrip("@") for h in handles}
    )
    return len(handles) + (0 if on_profile else nav_cost(state, "x", ("search",)))


def _shown(screen: dict[str, Any], handle: str) -> bool:
    """Whether ``handle``'s row (or profile) is on this X screen."""
    h = norm(handle).lstrip("@")
    if screen["name"] == "profile":
        return norm(screen["handle"]) == h
    query = screen.get("query") if screen["name"] == "search" else None
    if query is None:
        return False
    q = norm(query).lstrip("@")
    return bool(q) and any(norm(a) == h and (q in norm(a) or q in norm(n)) for a, n in ACCOUNTS)


def _follow_all_cost(state: dict[str, Any], handles: list[str]) -> int:
    """Lower bound for following every one of ``handles``: a tap each, and one search at least if one is not shown.

    One query can list several accounts, so only one search (focus and type) is counted.
    """
    screen = top(state, "x")
    in_front = state["foreground"] == "x" and state["popup"] is None
    cost = len(handles) + (0 if in_front else 1)
    if not all(_shown(screen, h) for h in handles):
        focused = in_front and state["focus"] == "x.search"
        cost += (1 if focused else 2) + (0 if screen["name"] == "search" else 1)
    return cost


def _in_front(state: dict[str, Any]) -> bool:
    return state["foreground"] == "x" and state["popup"] is None


@predicate("x.not_following", Handle)
def not_following(state: dict[str, Any], p: Handle) -> Check:
    """The account ``@handle`` is not followed."""
    if norm(p.handle).lstrip("@") not in {norm(h) for h in data(state, "x")["following"]}:
        return Check.of(0)
    return Check.of(_follow_cost(state, [p.handle]))


class Handles(PredicateParams):
    handles: tuple[str, ...] = Field(min_length=1)

    def texts(self) -> list[str]:
        return list(self.handles)


@predicate("x.following_all", Handles)
def following_all(state: dict[str, Any], p: Handles) -> Check:
    """Every account of ``handles`` is followed (each missing one needs its own 'Follow')."""
    followed = {norm(h) for h in data(state, "x")["following"]}
    missing = [h for h in p.handles if norm(h).lstrip("@") not in followed]
    return Check.of(_follow_all_cost(state, missing) if missing else 0)


@predicate("x.posted", Draft)
def posted(state: dict[str, Any], p: Draft) -> Check:
    """A post of mine with exactly ``content`` (case and spacing aside) was sent."""
    if any(post["author"] == "me" and norm(post["text"]) == norm(p.content) for post in data(state, "x")["posts"]):
        return Check.of(0)
    # Lower bound: type the text, tap 'Post' (plus opening the composer).
    screen = top(state, "x")
    if _in_front(state) and screen["name"] == "compose" and not screen.get("confirm"):
        typed = norm(screen.get("fields", {}).get("x.compose_text", "")) == norm(p.content)
        return Check.of(1 if typed else 2)
    return Check.of(3)


@predicate("x.no_draft", Draft)
def no_draft(state: dict[str, Any], p: Draft) -> Check:
    """No draft with ``content`` is saved (each copy needs its own 'Delete')."""
    left = sum(1 for t in data(state, "x")["drafts"] if norm(t) == norm(p.content))
    if left == 0:
        return Check.of(0)
    return Check.of(nav_cost(state, "x", ("drafts",)) + left)


class Follows(PredicateParams):
    follow: tuple[str, ...] = ()
    unfollow: tuple[str, ...] = ()


@setup_step("x.follows", Follows)
def _follows(state: dict[str, Any], p: Follows) -> None:
    """Follow and unfollow the given handles."""
    d = data(state, "x")
    d["following"] = [h for h in d["following"] if h not in p.unfollow] + [
        h for h in p.follow if h not in d["following"]
    ]


class Drafts(PredicateParams):
    drafts: tuple[str, ...] = Field(min_length=1)


@setup_step("x.drafts", Drafts)
def _drafts(state: dict[str, Any], p: Drafts) -> None:
    """Save the given drafts (after the saved ones)."""
    data(state, "x")["drafts"].extend(p.drafts)
