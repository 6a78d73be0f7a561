"""Amazon templates: searches, the cart (add from results or deals, remove), prices, stars and discounts."""

from __future__ import annotations

import random

from pydantic import Field, ValidationInfo, field_validator

from darwin.envs.sim.apps.amazon import (
    DEALS,
    STYLES,
    deal_discount,
    result_price,
    result_stars,
    result_title,
)
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

QUERIES = (
    "headphones",
    "running shoes",
    "water bottle",
    "phone case",
    "desk lamp",
    "backpack",
    "yoga mat",
    "coffee beans",
    "notebook",
    "umbrella",
    "charger",
    "sunglasses",
)
"""Things users search for (any query gives results; these read naturally)."""
CART = ("apps.amazon.data.cart",)
SEARCHES = ("apps.amazon.data.recent_searches",)


class SearchParams(TemplateParams):
    query: str = Field(min_length=1)


register(
    TaskTemplate(
        id="amazon.search",
        app="Amazon",
        params=SearchParams,
        difficulty=1,
        step_budget=12,
        description="search Amazon for a product",
        sample=lambda rng: SearchParams(query=rng.choice(QUERIES)),
        phrasings={
            "ENG": (
                "Search Amazon for {query}.",
                "Get the search results for '{query}' on Amazon.",
                "Find {query} on Amazon.",
            ),
            "CHN": ("在亚马逊上搜索“{query}”。", "用亚马逊查找{query}的搜索结果。"),
        },
        verifier=lambda p: VerifierSpec(predicate="amazon.search_results", params={"query": p.query}),
        allowed_changes=lambda p: SEARCHES,
    )
)


class ResultParams(TemplateParams):
    """One search result: the query and the style that names it (``Polarized`` + ``headphones``)."""

    query: str = Field(min_length=1)
    style: str

    @field_validator("style")
    @classmethod
    def _style(cls, v: str) -> str:
        if v not in STYLES:
            raise ValueError(f"unknown style {v!r}; Amazon lists {', '.join(STYLES)}")
        return v


def _result(rng: random.Random) -> ResultParams:
    return ResultParams(query=rng.choice(QUERIES), style=rng.choice(STYLES))


def _result_words(p: ResultParams) -> dict[str, str]:
    return {"query": p.query, "style": p.style, "title": result_title(p.style, p.query)}


register(
    TaskTemplate(
        id="amazon.add_result_to_cart",
        app="Amazon",
        params=ResultParams,
        difficulty=2,
        step_budget=20,
        description="search for a product and add one result (by its style) to the cart",
        sample=_result,
        phrasings={
            "ENG": (
                "Search Amazon for {query} and add the {style} one to my cart.",
                "Add the '{title}' to my Amazon cart (search for {query}).",
                "On Amazon, look up {query} and put the {style} version in the cart.",
            ),
            "CHN": (
                "在亚马逊搜索“{query}”，把{style}款加入购物车。",
                "把亚马逊上的“{title}”加入购物车（搜索{query}）。",
            ),
        },
        wording=_result_words,
        verifier=lambda p: VerifierSpec(
            predicate="amazon.in_cart", params={"titles": [result_title(p.style, p.query)], "queries": [p.query]}
        ),
        allowed_changes=lambda p: CART + SEARCHES,
    )
)


class DealParams(TemplateParams):
    deal: str

    @field_validator("deal")
    @classmethod
    def _deal(cls, v: str) -> str:
        if v not in DEALS:
            raise ValueError(f"{v!r} is not among today's deals: {', '.join(DEALS)}")
        return v


register(
    TaskTemplate(
        id="amazon.add_deal_to_cart",
        app="Amazon",
        params=DealParams,
        difficulty=1,
        step_budget=16,
        description="add a product from today's deals to the cart",
        sample=lambda rng: DealParams(deal=rng.choice(DEALS)),
        phrasings={
            "ENG": (
                "Add the {deal} from today's deals to my Amazon cart.",
                "Put the {deal} deal in my cart on Amazon.",
                "Open today's deal on the {deal} in Amazon and add it to the cart.",
            ),
            "CHN": ("把亚马逊今日特惠中的“{deal}”加入购物车。", "在亚马逊的今日特惠里找到{deal}，加入购物车。"),
        },
        verifier=lambda p: VerifierSpec(predicate="amazon.in_cart", params={"titles": [p.deal]}),
        allowed_changes=lambda p: CART,
    )
)


class CartParams(TemplateParams):
    """The cart the instance starts with and the product to remove from it."""

    cart: tuple[str, ...] = Field(min_length=2, max_length=4)
    remove: str

    @field_validator("cart")
    @classmethod
    def _cart(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in v if t not in DEALS]
        if unknown or len(set(v)) != len(v):
            raise ValueError(f"cart must be distinct products of today's deals ({', '.join(DEALS)}); got {list(v)}")
        return v

    @field_validator("remove")
    @classmethod
    def _remove(cls, v: str, info: ValidationInfo) -> str:
        if v not in info.data.get("cart", ()):
            raise ValueError(f"remove={v!r} must be one of the cart's products")
        return v


def _cart(rng: random.Random) -> CartParams:
    cart = tuple(rng.sample(DEALS, k=rng.randint(2, 4)))
    return CartParams(cart=cart, remove=rng.choice(cart))


register(
    TaskTemplate(
        id="amazon.remove_from_cart",
        app="Amazon",
        params=CartParams,
        difficulty=2,
        step_budget=16,
        description="remove one product from a cart that holds several (the instance fills the cart)",
        sample=_cart,
        phrasings={
            "ENG": (
                "Remove the {remove} from my Amazon cart.",
                "Take the {remove} out of my cart on Amazon.",
                "I no longer want the {remove}: delete it from the Amazon cart.",
            ),
            "CHN": ("把{remove}从亚马逊购物车中移除。", "删除亚马逊购物车里的{remove}。"),
        },
        wording=lambda p: {"remove": p.remove},
        setup=lambda p: (StateSetup(step="amazon.cart", params={"titles": list(p.cart)}),),
        verifier=lambda p: VerifierSpec(predicate="amazon.not_in_cart", params={"titles": [p.remove]}),
        allowed_changes=lambda p: CART,
    )
)


def _answer(expected: str, p: ResultParams, tolerance: float) -> VerifierSpec:
    return VerifierSpec(
        predicate="answer.matches",
        params={
            "kind": "number",
            "expected": expected,
            "tolerance": tolerance,
            "app": "amazon",
            "via": ["results"],
            "inputs": [p.query],
        },
    )


register(
    TaskTemplate(
        id="amazon.price",
        app="Amazon",
        params=ResultParams,
        difficulty=2,
        step_budget=16,
        description="answer: the price of a search result",
        sample=_result,
        phrasings={
            "ENG": (
                "What is the price of the {title} on Amazon? (Search for {query}.)",
                "Search Amazon for {query}: how much does the {style} one cost?",
            ),
            "CHN": ("亚马逊上“{title}”的价格是多少？（搜索{query}）", "在亚马逊搜索{query}，{style}款卖多少钱？"),
        },
        wording=_result_words,
        verifier=lambda p: _answer(result_price(STYLES.index(p.style)), p, 0.01),
        allowed_changes=lambda p: SEARCHES,
    )
)

register(
    TaskTemplate(
        id="amazon.stars",
        app="Amazon",
        params=ResultParams,
        difficulty=2,
        step_budget=16,
        description="answer: the star rating of a search result",
        sample=_result,
        phrasings={
            "ENG": (
                "How many stars does the {title} have on Amazon? (Search for {query}.)",
                "Search Amazon for {query} and tell me the star rating of the {style} one.",
            ),
            "CHN": ("亚马逊上“{title}”有几颗星？（搜索{query}）", "在亚马逊搜索{query}，{style}款的评分是多少星？"),
        },
        wording=_result_words,
        verifier=lambda p: _answer(result_stars(STYLES.index(p.style)), p, 0.05),
        allowed_changes=lambda p: SEARCHES,
    )
)

register(
    TaskTemplate(
        id="amazon.deal_discount",
        app="Amazon",
        params=DealParams,
        difficulty=1,
        step_budget=12,
        description="answer: the discount of one of today's deals",
        sample=lambda rng: DealParams(deal=rng.choice(DEALS)),
        phrasings={
            "ENG": (
                "How much is the {deal} discounted in Amazon's deals today?",
                "What discount does today's Amazon deal on the {deal} give?",
            ),
            "CHN": ("亚马逊今日特惠中{deal}打几折（优惠百分之多少）？", "今天亚马逊特惠里{deal}优惠多少？"),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "number", "expected": deal_discount(DEALS.index(p.deal)), "app": "amazon", "via": ["home"]},
        ),
        allowed_changes=lambda p: (),
    )
)


class TwoResults(TemplateParams):
    first: ResultParams
    second: ResultParams

    @field_validator("second")
    @classmethod
    def _distinct(cls, v: ResultParams, info: ValidationInfo) -> ResultParams:
        first = info.data.get("first")
        if first is not None and first.query == v.query:
            raise ValueError("second must be a result of another query than first")
        return v


def _two(rng: random.Random) -> TwoResults:
    a, b = rng.sample(QUERIES, k=2)
    return TwoResults(
        first=ResultParams(query=a, style=rng.choice(STYLES)), second=ResultParams(query=b, style=rng.choice(STYLES))
    )


def _two_words(p: TwoResults) -> dict[str, str]:
    return {
        "a": result_title(p.first.style, p.first.query),
        "b": result_title(p.second.style, p.second.query),
        "qa": p.first.query,
        "qb": p.second.query,
    }


def _in_cart(*items: ResultParams) -> VerifierSpec:
    return VerifierSpec(
        predicate="amazon.in_cart",
        params={"titles": [result_title(i.style, i.query) for i in items], "queries": [i.query for i in items]},
    )


register(
    TaskTemplate(
        id="amazon.add_two_to_cart",
        app="Amazon",
        params=TwoResults,
        difficulty=3,
        step_budget=32,
        description="two searches, adding one result of each to the cart",
        sample=_two,
        phrasings={
            "ENG": (
                "Add the {a} (search {qa}) and the {b} (search {qb}) to my Amazon cart.",
                "On Amazon, search {qa} and {qb} and put both the '{a}' and the '{b}' in the cart.",
            ),
            "CHN": ("把亚马逊上的“{a}”（搜索{qa}）和“{b}”（搜索{qb}）都加入购物车。", "在亚马逊把{a}和{b}加入购物车。"),
        },
        wording=_two_words,
        verifier=lambda p: _in_cart(p.first, p.second),
        allowed_changes=lambda p: CART + SEARCHES,
        subgoals=lambda p: (_in_cart(p.first), _in_cart(p.second), _in_cart(p.first, p.second)),
    )
)
