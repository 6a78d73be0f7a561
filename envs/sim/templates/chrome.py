"""Chrome templates: searches, tabs (close one, close the others, switch, open a new one), history, tab counts."""

from __future__ import annotations

import random

from pydantic import Field, ValidationInfo, field_validator

from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

QUERIES = (
    "weather in Paris",
    "bitcoin price",
    "how to tie a tie",
    "NBA scores",
    "cheap flights to Rome",
    "chocolate cake recipe",
    "python tutorial",
    "movie times",
    "translate hello to Spanish",
    "world cup 2026",
    "marathon training plan",
    "best hiking boots",
)
"""Searches for instances (none is one of the tabs a phone starts with)."""
HISTORY = (
    "electric cars",
    "Lisbon hotels",
    "sourdough starter",
    "jazz concerts",
    "tax deadline",
    "bike repair",
    "moon phases",
    "vegan lasagna",
)
"""Searches an instance puts in the history (apart from QUERIES, so no tab shows them)."""
TABS = ("apps.chrome.data.tabs", "apps.chrome.data.current")
HISTORY_PATH = ("apps.chrome.data.history",)


class SearchParams(TemplateParams):
    query: str = Field(min_length=1)


register(
    TaskTemplate(
        id="chrome.search",
        app="Chrome",
        params=SearchParams,
        difficulty=1,
        step_budget=12,
        description="search Google in Chrome",
        sample=lambda rng: SearchParams(query=rng.choice(QUERIES)),
        phrasings={
            "ENG": (
                "Search for '{query}' in Chrome.",
                "Get the Google results for {query} in Chrome.",
                "Use Chrome to look up {query}.",
            ),
            "CHN": ("在Chrome中搜索“{query}”。", "用Chrome查一下{query}。"),
        },
        verifier=lambda p: VerifierSpec(predicate="chrome.search_results", params={"query": p.query}),
        allowed_changes=lambda p: TABS + HISTORY_PATH,
    )
)


class TabsParams(TemplateParams):
    """The tabs the instance opens (instead of the phone's) and the one the task is about."""

    tabs: tuple[str, ...] = Field(min_length=2, max_length=5)
    target: str

    @field_validator("tabs")
    @classmethod
    def _tabs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise ValueError("tabs must be distinct searches")
        return v

    @field_validator("target")
    @classmethod
    def _target(cls, v: str, info: ValidationInfo) -> str:
        if v not in info.data.get("tabs", ()):
            raise ValueError(f"target={v!r} must be one of the tabs")
        return v


def _tabs(rng: random.Random, low: int, high: int) -> TabsParams:
    tabs = tuple(rng.sample(QUERIES, k=rng.randint(low, high)))
    # The target is never the tab shown at the start (the last one).
    return TabsParams(tabs=tabs, target=rng.choice(tabs[:-1]))


def _open_tabs(p: TabsParams, current: int = -1) -> StateSetup:
    return StateSetup(step="chrome.tabs", params={"queries": list(p.tabs), "replace": True, "current": current})


register(
    TaskTemplate(
        id="chrome.close_tab",
        app="Chrome",
        params=TabsParams,
        difficulty=1,
        step_budget=16,
        description="close one tab, keeping the others (the instance opens the tabs)",
        sample=lambda rng: _tabs(rng, 3, 5),
        phrasings={
            "ENG": (
                "Close the Chrome tab with the results for '{target}'.",
                "In Chrome, close the '{target}' tab and keep the others.",
                "Get rid of the tab showing {target} in Chrome.",
            ),
            "CHN": ("关闭Chrome中“{target}”的标签页。", "在Chrome里关掉{target}那个标签页，其他的保留。"),
        },
        wording=lambda p: {"target": p.target},
        setup=lambda p: (_open_tabs(p),),
        verifier=lambda p: VerifierSpec(
            predicate="chrome.open_tabs", params={"queries": [t for t in p.tabs if t != p.target]}
        ),
        allowed_changes=lambda p: TABS,
        subgoals=lambda p: (VerifierSpec(predicate="chrome.no_tab_with_query", params={"query": p.target}),),
    )
)

register(
    TaskTemplate(
        id="chrome.close_other_tabs",
        app="Chrome",
        params=TabsParams,
        difficulty=2,
        step_budget=24,
        description="close every tab but one (the instance opens the tabs)",
        sample=lambda rng: _tabs(rng, 3, 4),
        phrasings={
            "ENG": (
                "Close every Chrome tab except the one for '{target}'.",
                "In Chrome, keep only the '{target}' tab open.",
            ),
            "CHN": ("关闭Chrome中除“{target}”以外的所有标签页。", "在Chrome里只保留{target}这个标签页。"),
        },
        wording=lambda p: {"target": p.target},
        setup=lambda p: (_open_tabs(p),),
        verifier=lambda p: VerifierSpec(predicate="chrome.open_tabs", params={"queries": [p.target]}),
        allowed_changes=lambda p: TABS,
        subgoals=lambda p: (
            tuple(
                VerifierSpec(predicate="chrome.no_tab_with_query", params={"query": t}) for t in p.tabs if t != p.target
            )
            + (VerifierSpec(predicate="chrome.open_tabs", params={"queries": [p.target]}),)
        ),
    )
)

register(
    TaskTemplate(
        id="chrome.switch_tab",
        app="Chrome",
        params=TabsParams,
        difficulty=1,
        step_budget=12,
        description="show another open tab (the instance opens the tabs)",
        sample=lambda rng: _tabs(rng, 2, 4),
        phrasings={
            "ENG": (
                "Switch to the Chrome tab with '{target}'.",
                "In Chrome, go back to the tab where I searched {target}.",
            ),
            "CHN": ("切换到Chrome中“{target}”的标签页。", "在Chrome里回到搜索{target}的那个标签页。"),
        },
        wording=lambda p: {"target": p.target},
        setup=lambda p: (_open_tabs(p),),
        verifier=lambda p: VerifierSpec(
            predicate="chrome.open_tabs", params={"queries": list(p.tabs), "current": p.target}
        ),
        allowed_changes=lambda p: ("apps.chrome.data.current",),
    )
)


class NewTabParams(TemplateParams):
    tabs: tuple[str, ...] = Field(min_length=1, max_length=4)
    query: str = Field(min_length=1)

    @field_validator("query")
    @classmethod
    def _query(cls, v: str, info: ValidationInfo) -> str:
        if v in info.data.get("tabs", ()):
            raise ValueError(f"query={v!r} is already an open tab")
        return v


def _new_tab(rng: random.Random) -> NewTabParams:
    picked = rng.sample(QUERIES, k=rng.randint(2, 4))
    return NewTabParams(tabs=tuple(picked[:-1]), query=picked[-1])


register(
    TaskTemplate(
        id="chrome.new_tab_search",
        app="Chrome",
        params=NewTabParams,
        difficulty=2,
        step_budget=20,
        description="open a new tab and search in it, keeping the open tabs",
        sample=_new_tab,
        phrasings={
            "ENG": (
                "Open a new tab in Chrome and search for '{query}' (keep my other tabs).",
                "Without closing any tab, search {query} in a new Chrome tab.",
            ),
            "CHN": (
                "在Chrome中新建一个标签页搜索“{query}”（保留其他标签页）。",
                "不要关闭任何标签页，在新标签页里搜索{query}。",
            ),
        },
        wording=lambda p: {"query": p.query},
        setup=lambda p: (StateSetup(step="chrome.tabs", params={"queries": list(p.tabs), "replace": True}),),
        verifier=lambda p: VerifierSpec(
            predicate="chrome.open_tabs", params={"queries": [*p.tabs, p.query], "current": p.query}
        ),
        allowed_changes=lambda p: TABS + HISTORY_PATH,
        subgoals=lambda p: (VerifierSpec(predicate="chrome.tab_with_query", params={"query": p.query}),),
    )
)


class CountParams(TemplateParams):
    tabs: tuple[str, ...] = Field(min_length=1, max_length=8)


register(
    TaskTemplate(
        id="chrome.tab_count",
        app="Chrome",
        params=CountParams,
        difficulty=1,
        step_budget=12,
        description="answer: how many tabs are open (the instance opens them)",
        sample=lambda rng: CountParams(tabs=tuple(rng.sample(QUERIES, k=rng.randint(2, 7)))),
        phrasings={
            "ENG": ("How many tabs are open in Chrome?", "Count my open Chrome tabs."),
            "CHN": ("Chrome里打开了几个标签页？", "数一数Chrome当前打开的标签页。"),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="chrome.tabs", params={"queries": list(p.tabs), "replace": True}),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": f"{len(p.tabs)} open tab{'s' if len(p.tabs) != 1 else ''}",
                "app": "chrome",
                "via": ["tabs"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)


class HistoryParams(TemplateParams):
    history: tuple[str, ...] = Field(min_length=1, max_length=6, description="most recent first")


def _history(rng: random.Random) -> HistoryParams:
    return HistoryParams(history=tuple(rng.sample(HISTORY, k=rng.randint(2, 5))))


register(
    TaskTemplate(
        id="chrome.last_search",
        app="Chrome",
        params=HistoryParams,
        difficulty=2,
        step_budget=16,
        description="answer: the most recent search in Chrome's history (the instance fills it)",
        sample=_history,
        phrasings={
            "ENG": (
                "What did I search for most recently in Chrome? Check the history.",
                "Look at Chrome's history: what was the last search?",
            ),
            "CHN": ("我在Chrome里最近一次搜索的是什么？请查看历史记录。", "查看Chrome历史记录，最后一次搜索了什么？"),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="chrome.history", params={"queries": list(p.history)}),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.history[0], "app": "chrome", "via": ["menu", "history"]},
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="chrome.clear_history",
        app="Chrome",
        params=HistoryParams,
        difficulty=2,
        step_budget=16,
        description="clear the browsing history (the instance fills it)",
        sample=_history,
        phrasings={
            "ENG": (
                "Clear my browsing history in Chrome.",
                "Delete Chrome's browsing data from the history page.",
                "Wipe the Chrome history.",
            ),
            "CHN": ("清除Chrome的浏览记录。", "在Chrome历史记录页面清除浏览数据。"),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="chrome.history", params={"queries": list(p.history)}),),
        verifier=lambda p: VerifierSpec(predicate="chrome.history_empty"),
        allowed_changes=lambda p: HISTORY_PATH,
    )
)
