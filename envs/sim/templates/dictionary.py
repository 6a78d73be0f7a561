"""Merriam-Webster templates: look-ups, meanings, parts of speech and favorites."""

from __future__ import annotations

import random

from pydantic import Field, ValidationInfo, field_validator

from darwin.envs.sim.apps.dictionary import ENTRIES, FIRST_SENSE_WORDS
from darwin.templates import DistinctPair, TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

WORDS = tuple(ENTRIES)
RECENTS = ("apps.dictionary.data.recents",)
FAVORITES = ("apps.dictionary.data.favorites",)
ZH_POS = {"noun": "名词", "verb": "动词", "adjective": "形容词"}


class WordParams(TemplateParams):
    word: str

    @field_validator("word")
    @classmethod
    def _word(cls, v: str) -> str:
        if v not in ENTRIES:
            raise ValueError(f"{v!r} has no entry; the dictionary has {', '.join(ENTRIES)}")
        return v


register(
    TaskTemplate(
        id="dictionary.look_up",
        app="Merriam-Webster",
        params=WordParams,
        difficulty=1,
        step_budget=12,
        description="look up a word's definition",
        sample=lambda rng: WordParams(word=rng.choice(WORDS)),
        phrasings={
            "ENG": (
                "Look up the definition of the word '{word}'.",
                "Find what '{word}' means in Merriam-Webster.",
                "Open the dictionary entry for {word}.",
            ),
            "CHN": ("在韦氏词典中查询单词“{word}”的释义。", "查一下{word}这个词的意思。"),
        },
        verifier=lambda p: VerifierSpec(predicate="dictionary.definition", params={"word": p.word}),
        allowed_changes=lambda p: RECENTS,
    )
)


class MeaningParams(WordParams):
    @field_validator("word")
    @classmethod
    def _first_sense(cls, v: str) -> str:
        if v not in FIRST_SENSE_WORDS:
            raise ValueError(f"{v!r}'s first line is not a whole sense; use one of {', '.join(FIRST_SENSE_WORDS)}")
        return v


register(
    TaskTemplate(
        id="dictionary.meaning",
        app="Merriam-Webster",
        params=MeaningParams,
        difficulty=2,
        step_budget=12,
        description="answer: a word's first definition, word for word",
        sample=lambda rng: MeaningParams(word=rng.choice(FIRST_SENSE_WORDS)),
        phrasings={
            "ENG": (
                "What does '{word}' mean? Answer with its first definition in Merriam-Webster.",
                "Give the first definition Merriam-Webster lists for {word}.",
            ),
            "CHN": (
                "“{word}”是什么意思？请用韦氏词典的第一条释义回答（英文原文）。",
                "韦氏词典中{word}的第一条释义是什么？",
            ),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "exact",
                "expected": ENTRIES[p.word][1].split("\n")[0],
                "app": "dictionary",
                "via": ["definition"],
                "inputs": [p.word],
            },
        ),
        allowed_changes=lambda p: RECENTS,
    )
)

register(
    TaskTemplate(
        id="dictionary.part_of_speech",
        app="Merriam-Webster",
        params=WordParams,
        difficulty=1,
        step_budget=12,
        description="answer: a word's part of speech",
        sample=lambda rng: WordParams(word=rng.choice(WORDS)),
        phrasings={
            "ENG": (
                "Is '{word}' a noun, a verb or an adjective according to Merriam-Webster?",
                "What part of speech is {word}?",
            ),
            "CHN": ("根据韦氏词典，“{word}”是名词、动词还是形容词？（用英文回答）", "{word}是什么词性？"),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "choice",
                "expected": ENTRIES[p.word][0],
                "accepted": [ZH_POS[ENTRIES[p.word][0]]],
                "app": "dictionary",
                "via": ["definition"],
                "inputs": [p.word],
            },
        ),
        allowed_changes=lambda p: RECENTS,
    )
)

register(
    TaskTemplate(
        id="dictionary.favorite",
        app="Merriam-Webster",
        params=WordParams,
        difficulty=2,
        step_budget=16,
        description="save a word to the favorites",
        sample=lambda rng: WordParams(word=rng.choice(WORDS)),
        phrasings={
            "ENG": (
                "Save the word '{word}' to my favorites in Merriam-Webster.",
                "Look up {word} and add it to my favorite words.",
            ),
            "CHN": ("把单词“{word}”收藏到韦氏词典的收藏夹。", "查询{word}并把它加入收藏。"),
        },
        verifier=lambda p: VerifierSpec(predicate="dictionary.favorite", params={"word": p.word}),
        allowed_changes=lambda p: FAVORITES + RECENTS,
        subgoals=lambda p: (
            VerifierSpec(predicate="dictionary.definition", params={"word": p.word}),
            VerifierSpec(predicate="dictionary.favorite", params={"word": p.word}),
        ),
    )
)


class FavoritesParams(TemplateParams):
    favorites: tuple[str, ...] = Field(min_length=2, max_length=4)
    remove: str

    @field_validator("favorites")
    @classmethod
    def _favorites(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(w not in ENTRIES for w in v) or len(set(v)) != len(v):
            raise ValueError(f"favorites must be distinct words of the dictionary ({', '.join(ENTRIES)})")
        return v

    @field_validator("remove")
    @classmethod
    def _remove(cls, v: str, info: ValidationInfo) -> str:
        if v not in info.data.get("favorites", ()):
            raise ValueError(f"remove={v!r} must be one of the favorites")
        return v


def _favorites(rng: random.Random) -> FavoritesParams:
    words = tuple(rng.sample(WORDS, k=rng.randint(2, 4)))
    return FavoritesParams(favorites=words, remove=rng.choice(words))


register(
    TaskTemplate(
        id="dictionary.remove_favorite",
        app="Merriam-Webster",
        params=FavoritesParams,
        difficulty=2,
        step_budget=12,
        description="remove a word from the favorites (the instance saves a few first)",
        sample=_favorites,
        phrasings={
            "ENG": (
                "Remove '{remove}' from my favorite words in Merriam-Webster.",
                "Unfavorite the word {remove} in the dictionary app.",
            ),
            "CHN": ("把“{remove}”从韦氏词典的收藏中删除。", "取消收藏单词{remove}。"),
        },
        wording=lambda p: {"remove": p.remove},
        setup=lambda p: (StateSetup(step="dictionary.favorites", params={"words": list(p.favorites)}),),
        verifier=lambda p: VerifierSpec(predicate="dictionary.not_favorite", params={"word": p.remove}),
        allowed_changes=lambda p: FAVORITES + RECENTS,
    )
)


class TwoWords(DistinctPair):
    choices = WORDS
    what = "dictionary word"


register(
    TaskTemplate(
        id="dictionary.look_up_two",
        app="Merriam-Webster",
        params=TwoWords,
        difficulty=2,
        step_budget=20,
        description="look up two words one after the other",
        sample=TwoWords.draw,
        phrasings={
            "ENG": (
                "Look up '{first}' and then '{second}' in Merriam-Webster.",
                "Check the definitions of {first} and {second}.",
            ),
            "CHN": ("在韦氏词典中先查“{first}”，再查“{second}”。", "查一下{first}和{second}的释义。"),
        },
        verifier=lambda p: VerifierSpec(predicate="dictionary.looked_up", params={"words": [p.first, p.second]}),
        allowed_changes=lambda p: RECENTS,
        subgoals=lambda p: (
            VerifierSpec(predicate="dictionary.looked_up", params={"words": [p.first]}),
            VerifierSpec(predicate="dictionary.looked_up", params={"words": [p.second]}),
        ),
    )
)
