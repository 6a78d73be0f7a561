"""Amazon Shopping: search, results, product pages, cart."""

from __future__ import annotations

import random
from typing import Any

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.predicates import Check, PredicateParams, norm, on_screen, predicate, top
from darwin.envs.sim.ui import UI, Row

DEALS = ("Echo Dot (5th Gen)", "Kindle Paperwhite", "Fire TV Stick 4K", "Running shoes", "Coffee maker",
         "Noise-cancelling headphones", "Yoga mat", "Water bottle", "Desk lamp", "Backpack")
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
            rows = [Row(f"amazon.deal.{i}", item, f"Deal {20 + 5 * i}% off", on_tap=ctx.pusher("product", title=item)) for i, item in enumerate(DEALS)]
            ui.list("deals", ctx.scroll_offset("deals"), ctx.shuffled(rows, "deals"))
        elif name == "results":
            query = ctx.screen["query"]
            ui.app_bar("amazon", on_back=ctx.popper())
            ctx.text_field(ui, "amazon.search", "Search Amazon", on_submit=self._search(ctx))
            ui.bottom_nav(tab_items, "amazon.tab.home")
            ui.label("amazon.results_label", f'Results for "{query}"', role="text")
            titles = [f"{style} {query.strip().title()}" for style in STYLES]
            rows = [Row(f"amazon.result.{i}", t, f"${9 + 3 * i}.99 - 4.{i % 10} stars", on_tap=ctx.pusher("product", title=t)) for i, t in enumerate(titles)]
            ui.list("results", ctx.scroll_offset("results"), ctx.shuffled(rows, "results"))
        elif name == "product":
            title = ctx.screen["title"]
            ui.app_bar("amazon", on_back=ctx.popper())
            ui.card("amazon.product", title, "FREE delivery Tuesday\nIn stock\nShips from Amazon")
            ui.button("amazon.add_to_cart", "Add to Cart", on_tap=lambda: (ctx.data["cart"].append(title), ctx.toast("Added to cart")))
            ui.button("amazon.buy_now", "Buy Now", on_tap=lambda: ctx.toast("Sign in to buy"), role="secondary")
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
            for i, item in enumerate(ctx.data["cart"][:8]):
                ui.row(f"amazon.cart.{i}", item)
        else:
            raise ValueError(f"amazon: unknown screen {name!r}")


class Query(PredicateParams):
    query: str

    def texts(self) -> list[str]:
        return [self.query]


@predicate("amazon.search_results", Query)
def search_results(state: dict[str, Any], p: Query) -> Check:
    """Amazon shows the search results for ``query``."""
    ok = on_screen(state, "amazon", "results") and norm(top(state, "amazon")["query"]) == norm(p.query)
    return Check.of(0 if ok else 1)
