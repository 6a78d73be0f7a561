"""Seeded visual perturbations: they change pixels, never what a task needs.

Every phone seed picks an accent palette, a wallpaper, a launcher icon order, an order for
content lists and a pop-up rate. All choices are stored in the phone state, so the same
state renders to the same bytes.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")

ACCENTS: tuple[tuple[int, int, int], ...] = (
    (26, 115, 232),
    (0, 137, 123),
    (142, 36, 170),
    (230, 81, 0),
    (198, 40, 40),
    (46, 125, 50),
)
WALLPAPERS: tuple[tuple[tuple[int, int, int], tuple[int, int, int]], ...] = (
    ((32, 58, 110), (120, 170, 220)),
    ((60, 30, 80), (220, 120, 150)),
    ((20, 70, 60), (150, 210, 160)),
    ((90, 60, 20), (240, 200, 120)),
    ((30, 30, 30), (110, 110, 130)),
    ((10, 80, 120), (240, 240, 200)),
)


class PerturbationConfig(BaseModel):
    """Which perturbations a phone applies. ``enabled=False`` gives the canonical look."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    theme: bool = Field(default=True, description="random accent colour")
    wallpaper: bool = Field(default=True, description="random launcher wallpaper")
    icon_order: bool = Field(default=True, description="shuffle launcher icons")
    list_order: bool = Field(default=True, description="shuffle content lists (results, feeds)")
    popup_rate: float = Field(default=0.25, ge=0.0, le=1.0, description="chance of a dismissable pop-up at app launch")


def _stable_int(*parts: object) -> int:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class Perturbation:
    """Reads the perturbation choices stored in a phone state."""

    def __init__(self, state: dict) -> None:
        self._p = state["perturb"]

    @staticmethod
    def initial(seed: int, config: PerturbationConfig, app_ids: Sequence[str], page_size: int | None = None) -> dict:
        """The JSON perturbation record for a new phone.

        With ``page_size``, launcher icons are shuffled within pages of that many apps (in
        ``app_ids`` order), the first page exactly as a phone with only those apps shuffles
        them and the later pages afterwards: installing more apps never moves the first
        page's icons, nor changes the accent or the wallpaper.
        """
        rng = random.Random(_stable_int("perturb", seed))
        on = config.enabled
        size = page_size or max(1, len(app_ids))
        pages = [list(app_ids[i : i + size]) for i in range(0, len(app_ids), size)] or [[]]
        if on and config.icon_order:
            rng.shuffle(pages[0])
        accent = rng.randrange(len(ACCENTS)) if on and config.theme else 0
        wallpaper = rng.randrange(len(WALLPAPERS)) if on and config.wallpaper else 0
        for page in pages[1:]:
            if on and config.icon_order:
                rng.shuffle(page)
        return {
            "seed": seed,
            "accent": accent,
            "wallpaper": wallpaper,
            "icon_order": [app for page in pages for app in page],
            "list_order": bool(on and config.list_order),
            "popup_rate": config.popup_rate if on else 0.0,
        }

    @property
    def accent(self) -> tuple[int, int, int]:
        return ACCENTS[self._p["accent"]]

    @property
    def wallpaper(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        return WALLPAPERS[self._p["wallpaper"]]

    @property
    def icon_order(self) -> list[str]:
        return self._p["icon_order"]

    def order(self, items: Sequence[T], key: str) -> list[T]:
        out = list(items)
        if self._p["list_order"]:
            random.Random(_stable_int(self._p["seed"], key)).shuffle(out)
        return out

    def shows_popup(self, app_id: str, launch_count: int) -> bool:
        rate = self._p["popup_rate"]
        if rate <= 0.0:
            return False
        return (_stable_int(self._p["seed"], "popup", app_id, launch_count) % 10_000) < rate * 10_000
