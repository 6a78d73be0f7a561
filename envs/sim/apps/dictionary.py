"""Merriam-Webster dictionary: search a word, read its definition."""

from __future__ import annotations

import random
from typing import Any

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.predicates import Check, PredicateParams, norm, on_screen, predicate, top
from darwin.envs.sim.ui import UI

ENTRIES = {
    "agent": ("noun", "one that acts or exerts power\none who is authorized to act for another\na means by which something is done"),
    "serendipity": ("noun", "the faculty of finding valuable things\nnot sought for"),
    "evolve": ("verb", "to develop gradually\nto undergo evolutionary change"),
    "learn": ("verb", "to gain knowledge or skill\nby study, instruction or experience"),
    "phone": ("noun", "a telephone, especially a cell phone"),
    "reward": ("noun", "something given in return for good\nor useful behaviour"),
}
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

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {"recents": [], "favorites": []}

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        if name == "home":
            ui.app_bar("Merriam-Webster")
            ctx.text_field(ui, "dictionary.search", "Search the dictionary", on_submit=self._lookup(ctx))
            ui.card("dictionary.wotd", "Word of the Day: serendipity", "the faculty of finding valuable things\nnot sought for", h=260, on_tap=ctx.pusher("definition", word="serendipity"))
            ui.title("Trending now", size="small")
            for w in ctx.shuffled(TRENDING, "trending"):
                ui.row(f"dictionary.trending.{w}", w)
        elif name == "definition":
            word = ctx.screen["word"]
            ui.app_bar(word, on_back=ctx.popper())
            ui.buttons_row([("dictionary.tab.dictionary", "Dictionary", None, True), ("dictionary.tab.thesaurus", "Thesaurus", lambda: ctx.toast("Thesaurus needs a subscription"), False)])
            entry = ENTRIES.get(norm(word))
            if entry is None:
                ui.label("dictionary.not_found", f"The word '{word}' isn't in the dictionary.\nTry another spelling.", h=160)
            else:
                pos, text = entry
                ui.title(f"{word} ({pos})", size="small")
                ui.label("dictionary.definition", "Definition:\n" + text, h=80 * (text.count("\n") + 2), role="text")
        else:
            raise ValueError(f"dictionary: unknown screen {name!r}")

    @staticmethod
    def _lookup(ctx: AppContext):
        def lookup(text: str) -> None:
            word = text.strip()
            if word:
                ctx.data["recents"] = ([word] + ctx.data["recents"])[:10]
                ctx.push("definition", word=word)

        return lookup


class Word(PredicateParams):
    word: str

    def texts(self) -> list[str]:
        return [self.word]


@predicate("dictionary.definition", Word)
def definition(state: dict[str, Any], p: Word) -> Check:
    """Merriam-Webster shows the definition of ``word``."""
    ok = on_screen(state, "dictionary", "definition") and norm(top(state, "dictionary")["word"]) == norm(p.word)
    return Check.of(0 if ok else 1)
