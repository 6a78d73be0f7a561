"""Base class for SimPhone apps: one module per app, state as plain JSON.

An app has a root screen and a navigation stack of screens (``{"name": ..., ...params}``)
plus app data (``ctx.data``). :meth:`SimApp.build` lays out the top screen with
:class:`darwin.envs.sim.ui.UI` and wires callbacks that change the JSON state.

A complete app in a few lines (see docs/simphone.md for the full walkthrough)::

    >>> import random
    >>> from darwin.envs.sim.apps.base import AppContext, SimApp
    >>> from darwin.envs.sim.ui import UI
    >>> class Groceries(SimApp):
    ...     id = "groceries"; label = "Groceries"; package = "com.example.groceries"
    ...     activity = "com.example.groceries.Main"; color = (250, 200, 60); glyph = "G"
    ...     def initial_data(self, rng: random.Random) -> dict:
    ...         return {"items": []}
    ...     def build(self, ui: UI, ctx: AppContext) -> None:
    ...         ui.app_bar("Groceries")
    ...         ui.field("groceries.new", value=ctx.field("groceries.new"), focused=ctx.is_focused("groceries.new"),
    ...                  placeholder="New item", on_focus=ctx.focuser("groceries.new"),
    ...                  on_submit=lambda text: ctx.data["items"].append(text), on_clear=None)
    >>> from darwin.envs.sim.phone import SimPhone
    >>> phone = SimPhone(seed=0, extra_apps=[Groceries()])
    >>> from darwin.actions import OpenApp, Click, Type
    >>> phone.execute(OpenApp(app="Groceries"))
    >>> phone.dismiss_popup_if_any()
    >>> x, y = phone.layout().find("groceries.new").center
    >>> phone.execute(Click(x=x, y=y)); phone.execute(Type(content="milk\\n"))
    >>> phone.state["apps"]["groceries"]["data"]["items"]
    ['milk']
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from darwin.envs.sim.phone_view import PhoneView
    from darwin.envs.sim.ui import UI

T = TypeVar("T")


class SimApp(ABC):
    """A simulated app. Subclasses set the class attributes and implement two methods.

    Apps build their screens in English. For other phone locales (``SimPhone(locale="zh")``)
    an app lists its UI strings in :attr:`zh`, a mapping from the English string it displays
    (app bar titles, button and tab labels, placeholders, static texts, toasts, pop-up texts
    and its launcher :attr:`label`) to Simplified Chinese; keep it in the app's own module
    (``clock_zh.py``). The phone translates what is shown when it lays a screen out: the app's
    dictionary first, then the system catalog :data:`darwin.envs.sim.i18n.COMMON_ZH`
    ("Save", "Cancel", weekdays ...); strings in neither (user data) are shown unchanged.
    Keys may hold ``{}`` placeholders (``"Repeat: {}": "重复：{}"``) and ``"#<widget id>"``
    keys translate one widget whatever its text. Widget ids and app state never change with
    the locale, so predicates and the oracle work in every locale.
    """

    id: ClassVar[str]
    """Stable identifier used in state and predicates (``"clock"``)."""
    label: ClassVar[str]
    """Name on the launcher, matched by ``open_app`` (``"Clock"``)."""
    package: ClassVar[str]
    activity: ClassVar[str]
    color: ClassVar[tuple[int, int, int]]
    glyph: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    root_screen: ClassVar[str] = "home"
    zh: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """English UI string -> Simplified Chinese, shown on ``locale="zh"`` phones (see above)."""

    @abstractmethod
    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        """Fresh app data (JSON only); ``rng`` is seeded from the phone seed."""

    @abstractmethod
    def build(self, ui: UI, ctx: AppContext) -> None:
        """Lay out the top screen of the stack (``ctx.screen``) onto ``ui``."""

    def handle_back(self, ctx: AppContext) -> bool:
        """Called on system back before the stack is popped; return True if the app handled it."""
        return False

    def popup(self) -> tuple[str, str, str] | None:
        """The dismissable pop-up this app may show at launch: ``(title, body, dismiss label)``."""
        return (f"Enjoying {self.label}?", "Tell us what you think. It only takes a minute.", "Not now")


class AppContext:
    """What an app's :meth:`SimApp.build` may read and change: its data and navigation."""

    def __init__(self, phone: PhoneView, app: SimApp) -> None:
        self.phone = phone
        self.app = app
        self._app_state = phone.state["apps"][app.id]

    @property
    def data(self) -> dict[str, Any]:
        return self._app_state["data"]

    @property
    def stack(self) -> list[dict[str, Any]]:
        return self._app_state["stack"]

    @property
    def screen(self) -> dict[str, Any]:
        """Top screen of the stack: ``{"name": str, "fields": {...}, "scroll": {...}, ...}``."""
        return self.stack[-1]

    def app_data(self, app_id: str) -> dict[str, Any]:
        """Another app's data (e.g. system settings read by every app)."""
        return self.phone.state["apps"][app_id]["data"]

    # -- navigation ------------------------------------------------------------------
    def push(self, name: str, **params: Any) -> None:
        self.phone.state["focus"] = None
        self.stack.append({"name": name, **params})

    def pop(self) -> None:
        self.phone.state["focus"] = None
        if len(self.stack) > 1:
            self.stack.pop()
        else:
            self.phone.go_home(reset_app=True)

    def replace(self, name: str, **params: Any) -> None:
        self.phone.state["focus"] = None
        self.stack[-1] = {"name": name, **params}

    def reset_to(self, name: str, **params: Any) -> None:
        """Clear the stack down to a new root screen (bottom-nav style navigation)."""
        self.phone.state["focus"] = None
        self.stack[:] = [{"name": name, **params}]

    def pusher(self, name: str, **params: Any) -> Callable[[], None]:
        return lambda: self.push(name, **params)

    def popper(self) -> Callable[[], None]:
        return self.pop

    def toast(self, message: str) -> None:
        self.phone.state["toast"] = message

    # -- text fields ------------------------------------------------------------------
    def field(self, key: str) -> str:
        return self.screen.get("fields", {}).get(key, "")

    def set_field(self, key: str, value: str) -> None:
        self.screen.setdefault("fields", {})[key] = value

    def is_focused(self, key: str) -> bool:
        return self.phone.state["focus"] == key

    def focuser(self, key: str) -> Callable[[], None]:
        def focus() -> None:
            self.phone.state["focus"] = key

        return focus

    def text_field(
        self,
        ui: UI,
        key: str,
        placeholder: str,
        on_submit: Callable[[str], None] | None = None,
        multiline: bool = False,
        h: int = 144,
    ) -> None:
        """A text field whose value lives in the top screen's ``fields[key]``."""
        ui.field(
            key,
            value=self.field(key),
            focused=self.is_focused(key),
            placeholder=placeholder,
            on_focus=self.focuser(key),
            on_submit=on_submit,
            on_clear=self.clearer(key),
            multiline=multiline,
            h=h,
        )

    def clearer(self, key: str) -> Callable[[], None]:
        def clear() -> None:
            self.set_field(key, "")
            self.phone.state["focus"] = key

        return clear

    # -- lists ------------------------------------------------------------------------
    def scroll_offset(self, key: str) -> int:
        return int(self.screen.get("scroll", {}).get(key, 0))

    def shuffled(self, items: Sequence[T], key: str) -> list[T]:
        """``items`` in the phone's perturbed order for list ``key`` (identity when unperturbed)."""
        return self.phone.perturbation.order(items, f"{self.app.id}:{key}")
