"""Amazon Shopping: search, results (price and stars per row), product pages, cart (remove items),
Buy Now and its checkout (placing an order adds it to ``orders``)."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field, model_validator

from darwin.envs.sim.apps.amazon_zh import ZH
from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, norm, on_screen, predicate, top

DEALS = (
    "Echo Dot (5th Gen)",
    "Kindle Paperwhite",
    "Fire TV Stick 4K",
    "Running shoes",
    "Coffee maker",
    "Noise-cancelling headphones",
    "Yoga mat",
    "Water bottle",
    "Desk lamp",
    "Backpack",
)
STYLES = ("Classic", "Polarized", "Sport", "Premium", "Kids", "Vintage", "Slim", "Travel", "Pro", "Eco")


class AmazonApp(SimApp):
    """Amazon Shopping with a search box, result lists and product pages."""

    id = "amazon"
    label = "Amazon"
    package = "com.amazon.mShop.android.shopping"
    activity = "com.amazon.mShop.navigation.MainActivity"
    color = (35, 47, 62)
    glyph = "a"
    aliases = ("amazon shopping",)
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {"cart": [], "recent_searches": []}

    def _search(self, ctx: AppContext):
        def submit(query: str) -> None:
            if query.strip():
                ctx.data["recent_searches"] = ([query] + ctx.data["recent_searches"])[:5]
                params = {"query": query, "fields": {"amazon.search": query}}
                if ctx.screen["name"] == "results":
                    ctx.replace("results", **params)
                else:
                    ctx.push("results", **params)

        return submit

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        tab_items = [
            ("amazon.tab.home", "Home", lambda: ctx.reset_to("home")),
            ("amazon.tab.account", "You", lambda: ctx.reset_to("account")),
            ("amazon.tab.cart", f"Cart {len(ctx.data['cart'])}", lambda: ctx.reset_to("cart")),
        ]
        if name == "home":
            ui.app_bar("amazon")
            ctx.text_field(ui, "amazon.search", "Search Amazon", on_submit=self._search(ctx))
            ui.bottom_nav(tab_items, "amazon.tab.home")
            ui.title("Today's deals", size="small")
            rows = [
                Row(f"amazon.deal.{i}", item, f"Deal {deal_discount(i)}", on_tap=ctx.pusher("product", title=item))
                for i, item in enumerate(DEALS)
            ]
            ui.list("deals", ctx.scroll_offset("deals"), ctx.shuffled(rows, "deals"))
        elif name == "results":
            query = ctx.screen["query"]
            ui.app_bar("amazon", on_back=ctx.popper())
            ctx.text_field(ui, "amazon.search", "Search Amazon", on_submit=self._search(ctx))
            ui.bottom_nav(tab_items, "amazon.tab.home")
            ui.label("amazon.results_label", f'Results for "{query}"', role="text")
            titles = [result_title(style, query) for style in STYLES]
            rows = [
                Row(
                    f"amazon.result.{i}",
                    t,
                    f"{result_price(i)} - {result_stars(i)} stars",
                    on_tap=ctx.pusher("product", title=t),
                )
                for i, t in enumerate(titles)
            ]
            ui.list("results", ctx.scroll_offset("results"), ctx.shuffled(rows, "results"))
        elif name == "product":
            title = ctx.screen["title"]
            ui.app_bar("amazon", on_back=ctx.popper())
            ui.card("amazon.product", title, "FREE delivery Tuesday\nIn stock\nShips from Amazon")

            def add_to_cart() -> None:
                ctx.data["cart"].append(title)
                ctx.toast("Added to cart")

            ui.button("amazon.add_to_cart", "Add to Cart", on_tap=add_to_cart)
            ui.button("amazon.buy_now", "Buy Now", on_tap=ctx.pusher("checkout", title=title), role="secondary")
        elif name == "checkout":
            title = ctx.screen["title"]
            ui.app_bar("Checkout", on_back=ctx.popper())
            ui.card("amazon.checkout", title, "Deliver to: Home\nPay with: Visa ending in 4242")

            def place_order() -> None:
                # Orders appear with the first one: phones in older states have no "orders" key.
                ctx.data.setdefault("orders", []).append(title)
                ctx.reset_to("home")
                ctx.toast("Order placed")

            ui.button("amazon.place_order", "Place your order", on_tap=place_order)
        elif name == "account":
            ui.app_bar("Your account")
            ui.bottom_nav(tab_items, "amazon.tab.account")
            for i, entry in enumerate(("Your orders", "Buy again", "Your lists", "Your account settings")):
                ui.row(f"amazon.account.{i}", entry)
        elif name == "cart":
            ui.app_bar("Cart")
            ui.bottom_nav(tab_items, "amazon.tab.cart")
            if not ctx.data["cart"]:
                ui.label("amazon.cart_empty", "Your Amazon Cart is empty")
            rows = [
                Row(f"amazon.cart.{i}", item, trailing="Remove", on_trailing=_remover(ctx.data["cart"], i))
                for i, item in enumerate(ctx.data["cart"])
            ]
            ui.list("cart", ctx.scroll_offset("cart"), rows)
        else:
            raise ValueError(f"amazon: unknown screen {name!r}")


def result_title(style: str, query: str) -> str:
    """The title of the search result of ``style`` for ``query`` (``"Polarized Sunglasses"``)."""
    return f"{style} {query.strip().title()}"


def result_price(index: int) -> str:
    """The price shown for the ``index``-th style's result (``"$12.99"``)."""
    return f"${9 + 3 * index}.99"


def result_stars(index: int) -> str:
    """The star rating shown for the ``index``-th style's result (``"4.1"``)."""
    return f"4.{index % 10}"


def deal_discount(index: int) -> str:
    """The discount shown for the ``index``-th deal (``"25% off"``)."""
    return f"{20 + 5 * index}% off"


def _remover(cart: list[str], index: int):
    def remove() -> None:
        del cart[index]

    return remove


class Query(PredicateParams):
    query: str

    def texts(self) -> list[str]:
        return [self.query]


@predicate("amazon.search_results", Query)
def search_results(state: dict[str, Any], p: Query) -> Check:
    """Amazon shows the search results for ``query``."""
    ok = on_screen(state, "amazon", "results") and norm(top(state, "amazon")["query"]) == norm(p.query)
    return Check.of(0 if ok else 1)


class CartItems(PredicateParams):
    """Products (titles as their pages show them) and, for search results, the query listing each one.

    ``queries`` is empty (every product is one of today's deals) or gives one query per title
    (``""`` for a deal).
    """

    titles: tuple[str, ...] = Field(min_length=1)
    queries: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _aligned(self) -> CartItems:
        if self.queries and len(self.queries) != len(self.titles):
            raise ValueError(
                f"queries must be empty or give one query per title ({len(self.titles)}), got {len(self.queries)}"
            )
        return self

    def texts(self) -> list[str]:
        return [q for q in self.queries if q]


def _lists(screen_query: str, title: str) -> bool:
    return any(result_title(style, screen_query) == title for style in STYLES)


def _cost_now(state: dict[str, Any], title: str, query: str) -> int:
    """Lower bound on the actions that put ``title`` in the cart from this state."""
    stack = state["apps"]["amazon"]["stack"]
    screen = stack[-1]
    in_front = state["foreground"] == "amazon" and state["popup"] is None
    extra = 0 if in_front else 1  # open the app (or dismiss its pop-up); its stack is kept
    name = screen["name"]
    if name == "product" and screen["title"] == title:
        return extra + 1  # 'Add to Cart'
    if not query:  # a deal: its row on home, then 'Add to Cart'
        return extra + (2 if name == "home" else 3)
    if name == "results" and _lists(screen["query"], title):
        return extra + 2  # tap the result, add
    if name == "product" and len(stack) > 1 and stack[-2]["name"] == "results" and _lists(stack[-2]["query"], title):
        return extra + 3  # back to the results, tap, add
    # A search first: focus (or clear) the field and type the query, then tap the result and add.
    on_field = name in ("home", "results")
    focused = in_front and state["focus"] == "amazon.search"
    return extra + (1 if focused else 2) + 2 + (0 if on_field else 1)


def _cost_after_another(query: str, shares_query: bool) -> int:
    """Lower bound for a product added after another one (which leaves its product page open).

    Leave the page, reach this product's page, add; a query no other product shares needs a
    new search (clear the field, type), as the stack holds one results screen at most.
    """
    return 3 if not query or shares_query else 5


@predicate("amazon.in_cart", CartItems)
def in_cart(state: dict[str, Any], p: CartItems) -> Check:
    """Every product of ``titles`` is in the Amazon cart."""
    cart = {norm(t) for t in data(state, "amazon")["cart"]}
    queries = p.queries or ("",) * len(p.titles)
    missing = [(t, q) for t, q in zip(p.titles, queries, strict=True) if norm(t) not in cart]
    if not missing:
        return Check.of(0)
    # One product is done first from here; each other one then costs at least a fresh add.
    later = [_cost_after_another(q, sum(1 for _, q2 in missing if q2 and norm(q2) == norm(q)) > 1) for _, q in missing]
    total = sum(later)
    return Check.of(min(_cost_now(state, t, q) + total - later[i] for i, (t, q) in enumerate(missing)))


class Titles(PredicateParams):
    titles: tuple[str, ...] = Field(min_length=1)


@predicate("amazon.not_in_cart", Titles)
def not_in_cart(state: dict[str, Any], p: Titles) -> Check:
    """None of ``titles`` is in the Amazon cart (each copy left needs its own 'Remove')."""
    left = sum(1 for t in data(state, "amazon")["cart"] if norm(t) in {norm(x) for x in p.titles})
    if left == 0:
        return Check.of(0)
    on_cart = state["foreground"] == "amazon" and state["popup"] is None and top(state, "amazon")["name"] == "cart"
    return Check.of(left + (0 if on_cart else 1))


@setup_step("amazon.cart", Titles)
def _cart(state: dict[str, Any], p: Titles) -> None:
    """Put the given products in the Amazon cart (after what it holds)."""
    data(state, "amazon")["cart"].extend(p.titles)
