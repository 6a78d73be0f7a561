"""Merriam-Webster dictionary: search a word, read its definition, keep favorites."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.dictionary_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import (
    Check,
    PredicateParams,
    data,
    nav_cost,
    norm,
    on_screen,
    predicate,
    top,
)

ENTRIES = {
    "agent": (
        "noun",
        "one that acts or exerts power\none who is authorized to act for another\na means by which something is done",
    ),
    "serendipity": ("noun", "the faculty of finding valuable things\nnot sought for"),
    "evolve": ("verb", "to develop gradually\nto undergo evolutionary change"),
    "learn": ("verb", "to gain knowledge or skill\nby study, instruction or experience"),
    "phone": ("noun", "a telephone, especially a cell phone"),
    "reward": ("noun", "something given in return for good\nor useful behaviour"),
    # From here on each line is one whole sense (the first line is the first definition).
    "ubiquitous": ("adjective", "existing everywhere at the same time\nconstantly encountered"),
    "ephemeral": ("adjective", "lasting a very short time\nliving one day only"),
    "quixotic": ("adjective", "foolishly impractical\nmarked by rash lofty romantic ideas"),
    "cogent": ("adjective", "appealing forcibly to the mind or reason\nconvincing"),
    "laconic": ("adjective", "using a minimum of words\nconcise to the point of seeming rude"),
    "benevolent": ("adjective", "disposed to doing good\nmarked by goodwill"),
    "candid": ("adjective", "frank and sincere\nfree from bias or prejudice"),
    "resilient": ("adjective", "able to recover from misfortune\ncapable of withstanding shock"),
    "wander": ("verb", "to move about without a fixed course\nto go astray"),
    "harbor": ("noun", "a place of security and comfort\na sheltered part of a body of water"),
    "pragmatic": ("adjective", "relating to practical affairs\npractical as opposed to idealistic"),
    "whistle": ("verb", "to make a shrill sound\nto signal by a whistle"),
}
FIRST_SENSE_WORDS = ("agent", "evolve", "phone", *tuple(ENTRIES)[6:])
"""Words whose first definition line is one whole sense (answer tasks ask for it)."""
TRENDING = ("ubiquitous", "ephemeral", "quixotic", "cogent", "laconic")


class DictionaryApp(SimApp):
    """Merriam-Webster Dictionary with word lookup, word of the day and recents."""

    id = "dictionary"
    label = "Merriam-Webster"
    package = "com.merriamwebster"
    activity = "com.merriamwebster.dictionary.activity.dictionary.DictionaryActivity"
    color = (48, 95, 122)
    glyph = "M"
    aliases = ("dictionary", "merriam webster", "dictionary merriam webster")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {"recents": [], "favorites": []}

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        if name == "home":
            ui.app_bar("Merriam-Webster", actions=[("dictionary.favorites", "★", ctx.pusher("favorites"))])
            ctx.text_field(ui, "dictionary.search", "Search the dictionary", on_submit=self._lookup(ctx))
            ui.card(
                "dictionary.wotd",
                "Word of the Day: serendipity",
                "the faculty of finding valuable things\nnot sought for",
                h=260,
                on_tap=self._opener(ctx, "serendipity"),
            )
            ui.title("Trending now", size="small")
            for w in ctx.shuffled(TRENDING, "trending"):
                ui.row(f"dictionary.trending.{w}", w, on_tap=self._opener(ctx, w))
        elif name == "definition":
            word = ctx.screen["word"]
            ui.app_bar(word, on_back=ctx.popper())
            ui.buttons_row(
                [
                    ("dictionary.tab.dictionary", "Dictionary", None, True),
                    (
                        "dictionary.tab.thesaurus",
                        "Thesaurus",
                        lambda: ctx.toast("Thesaurus needs a subscription"),
                        False,
                    ),
                ]
            )
            entry = ENTRIES.get(norm(word))
            if entry is None:
                ui.label(
                    "dictionary.not_found", f"The word '{word}' isn't in the dictionary.\nTry another spelling.", h=160
                )
            else:
                pos, text = entry
                ui.title(f"{word} ({pos})", size="small")
                ui.label("dictionary.definition", "Definition:\n" + text, h=80 * (text.count("\n") + 2), role="text")
                saved = norm(word) in {norm(f) for f in ctx.data["favorites"]}
                ui.button(
                    "dictionary.favorite",
                    "Saved to favorites" if saved else "Save to favorites",
                    self._favorite_toggler(ctx, word),
                    role="secondary",
                )
        elif name == "favorites":
            ui.app_bar("Favorites", on_back=ctx.popper())
            if not ctx.data["favorites"]:
                ui.label("dictionary.no_favorites", "Words you save appear here")
            rows = [
                Row(
                    f"dictionary.fav.{i}",
                    w,
                    on_tap=self._opener(ctx, w),
                    trailing="Remove",
                    on_trailing=_remover(ctx.data["favorites"], i),
                )
                for i, w in enumerate(ctx.data["favorites"])
            ]
            ui.list("favorites", ctx.scroll_offset("favorites"), rows)
        else:
            raise ValueError(f"dictionary: unknown screen {name!r}")

    @staticmethod
    def _opener(ctx: AppContext, word: str):
        def open_word() -> None:
            ctx.data["recents"] = ([word] + ctx.data["recents"])[:10]
            ctx.push("definition", word=word)

        return open_word

    @staticmethod
    def _favorite_toggler(ctx: AppContext, word: str):
        def toggle() -> None:
            favorites = ctx.data["favorites"]
            kept = [f for f in favorites if norm(f) != norm(word)]
            favorites[:] = kept if len(kept) < len(favorites) else favorites + [word]

        return toggle

    @staticmethod
    def _lookup(ctx: AppContext):
        def lookup(text: str) -> None:
            word = text.strip()
            if word:
                ctx.data["recents"] = ([word] + ctx.data["recents"])[:10]
                ctx.push("definition", word=word)

        return lookup


def _remover(items: list[str], index: int):
    def remove() -> None:
        del items[index]

    return remove


class Word(PredicateParams):
    word: str

    def texts(self) -> list[str]:
        return [self.word]


@predicate("dictionary.definition", Word)
def definition(state: dict[str, Any], p: Word) -> Check:
    """Merriam-Webster shows the definition of ``word``."""
    ok = on_screen(state, "dictionary", "definition") and norm(top(state, "dictionary")["word"]) == norm(p.word)
    return Check.of(0 if ok else 1)


def _in_front(state: dict[str, Any]) -> bool:
    return state["foreground"] == "dictionary" and state["popup"] is None


def _showing(state: dict[str, Any], word: str) -> bool:
    return on_screen(state, "dictionary", "definition") and norm(top(state, "dictionary")["word"]) == norm(word)


@predicate("dictionary.favorite", Word)
def favorite(state: dict[str, Any], p: Word) -> Check:
    """``word`` is among the saved favorites."""
    if norm(p.word) in {norm(f) for f in data(state, "dictionary")["favorites"]}:
        return Check.of(0)
    if _showing(state, p.word):
        return Check.of(1)
    # Open its entry (a trending row, or focus and type), then save; one more to open the app.
    return Check.of(2 + (0 if _in_front(state) else 1))


@predicate("dictionary.not_favorite", Word)
def not_favorite(state: dict[str, Any], p: Word) -> Check:
    """``word`` is not among the favorites (each copy needs a 'Remove', or the entry's save button)."""
    left = sum(1 for f in data(state, "dictionary")["favorites"] if norm(f) == norm(p.word))
    if left == 0:
        return Check.of(0)
    if _showing(state, p.word):
        return Check.of(1)
    return Check.of(min(nav_cost(state, "dictionary", ("favorites",)) + left, 2 + (0 if _in_front(state) else 1)))


class Words(PredicateParams):
    words: tuple[str, ...] = Field(min_length=1)

    def texts(self) -> list[str]:
        return list(self.words)


@predicate("dictionary.looked_up", Words)
def looked_up(state: dict[str, Any], p: Words) -> Check:
    """Every word of ``words`` is among the recent lookups (each missing one needs its own lookup)."""
    d = data(state, "dictionary")
    recents = {norm(w) for w in d["recents"]}
    missing = [w for w in p.words if norm(w) not in recents]
    if not missing:
        return Check.of(0)
    # Each look-up is a tap on a listed word (trending, word of the day, a favorite) or a focus
    # and a typed word; each one opens the entry, which has to be left (back) before the next.
    listed = {norm(w) for w in (*TRENDING, "serendipity", *d["favorites"])}
    focus_taps = sum(1 for w in missing if norm(w) not in listed)
    in_front = _in_front(state)
    if focus_taps and in_front and state["focus"] == "dictionary.search":
        focus_taps -= 1
    leave = int(top(state, "dictionary")["name"] == "definition")
    return Check.of(len(missing) + focus_taps + len(missing) - 1 + leave + (0 if in_front else 1))


@setup_step("dictionary.favorites", Words)
def _favorites(state: dict[str, Any], p: Words) -> None:
    """Save the given words as favorites (after the saved ones)."""
    data(state, "dictionary")["favorites"].extend(p.words)
