"""Deterministic rendering of a laid-out :class:`Screen` with Pillow.

Widgets are drawn straight at the requested size (drawing small is cheaper than drawing
full size and resizing); the same state and size always give the same bytes.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from darwin.envs.sim.ui import HEIGHT, WIDTH, Screen, Widget

if TYPE_CHECKING:
    from darwin.envs.sim.phone_view import PhoneView

RGB = tuple[int, int, int]

LIGHT = {
    "bg": (250, 250, 250),
    "surface": (255, 255, 255),
    "text": (24, 24, 24),
    "muted": (105, 105, 110),
    "divider": (226, 226, 230),
    "bar": (243, 243, 246),
    "key": (255, 255, 255),
    "kbd": (214, 217, 222),
    "nav": (240, 240, 240),
    "navglyph": (60, 60, 60),
}
DARK = {
    "bg": (18, 18, 20),
    "surface": (32, 32, 36),
    "text": (236, 236, 240),
    "muted": (160, 160, 168),
    "divider": (52, 52, 58),
    "bar": (28, 28, 32),
    "key": (70, 70, 76),
    "kbd": (40, 40, 44),
    "nav": (10, 10, 10),
    "navglyph": (200, 200, 200),
}
WHITE: RGB = (255, 255, 255)
_CONTROL_CHARS = {c: None for c in (*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2029)}
"""Dropped before drawing: control bytes, and U+2029 (paragraph separator), which makes Pillow's
raqm layout fail (the only such code point below U+30000)."""


CJK_FONT = "DroidSansFallback-SimPhone.ttf"
EMOJI_FONT = "Symbola-SimPhone-emoji.ttf"
_FALLBACKS = (CJK_FONT, EMOJI_FONT)
"""Fonts for the characters DejaVu Sans lacks, tried in order (Chinese, then emoji and symbols)."""


@lru_cache(maxsize=64)
def _font(px: int, bold: bool) -> ImageFont.FreeTypeFont:
    return _font_file("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf", px)


@lru_cache(maxsize=64)
def _font_file(name: str, px: int) -> ImageFont.FreeTypeFont:
    path = resources.files("darwin.envs.sim") / "fonts" / name
    with resources.as_file(path) as p:
        return ImageFont.truetype(str(p), size=max(6, px))


@lru_cache(maxsize=8)
def _notdef(name: str) -> tuple[tuple[int, int], bytes]:
    mask = _font_file(name, 40).getmask("􏿽")  # a private-use code point no font here draws
    return mask.size, bytes(mask)


@lru_cache(maxsize=16384)
def _has_glyph(name: str, ch: str) -> bool:
    """Whether font file ``name`` draws ``ch`` (not its missing-glyph box); separators and
    control or format characters count as drawn (DejaVu keeps them, as before fallbacks)."""
    if unicodedata.category(ch)[0] in "ZC":
        return True
    try:
        mask = _font_file(name, 40).getmask(ch)
    except (OSError, RuntimeError, ValueError):  # FreeType refuses some code points outright
        return False
    return (mask.size, bytes(mask)) != _notdef(name)


def _runs(text: str, primary: str) -> list[tuple[str, str]]:
    """``text`` split into ``(font file, run)`` pieces: DejaVu where it has the glyph, else the first
    fallback that has it (else DejaVu's box)."""
    runs: list[tuple[str, str]] = []
    for ch in text:
        name = primary
        if not _has_glyph(primary, ch):
            name = next((f for f in _FALLBACKS if _has_glyph(f, ch)), primary)
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + ch)
        else:
            runs.append((name, ch))
    return runs


def _units(ch: str) -> float:
    """Width of ``ch`` in average Latin characters (wide CJK and emoji take about 1.7)."""
    return 1.0 if ch.isascii() or unicodedata.east_asian_width(ch) not in ("W", "F") else 1.7


def _text_units(text: str) -> float:
    return sum(_units(c) for c in text)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (Latin text: a character count)."""
    return text[: max(1, limit - 1)] + "…" if len(text) > limit else text


def _width(text: str, primary: str, size: int) -> float:
    return sum(_font_file(name, size).getlength(run) for name, run in _runs(text, primary))


def _clip_measured(text: str, primary: str, size: int, max_px: float) -> str:
    """``text`` cut with an ellipsis to fit ``max_px`` pixels, measured in the fonts that draw it."""
    if _width(text, primary, size) <= max_px:
        return text
    for end in range(len(text) - 1, 0, -1):
        if _width(text[:end] + "…", primary, size) <= max_px:
            return text[:end] + "…"
    return text[:1] + "…"


@lru_cache(maxsize=32)
def _gradient(top: RGB, bottom: RGB, w: int, h: int) -> Image.Image:
    t = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
    col = (np.array(top, np.float32) * (1 - t) + np.array(bottom, np.float32) * t).astype(np.uint8)
    return Image.fromarray(np.ascontiguousarray(np.broadcast_to(col[:, None, :], (h, w, 3))))


class Renderer:
    """Draws screens; stateless apart from font and wallpaper caches."""

    def render(self, screen: Screen, phone: PhoneView, size: tuple[int, int]) -> np.ndarray:
        w, h = size
        sx, sy = w / WIDTH, h / HEIGHT
        pal = DARK if phone.dark else LIGHT
        accent = phone.perturbation.accent
        img = Image.new("RGB", (w, h), pal["bg"])
        d = ImageDraw.Draw(img)
        ctx = _Ctx(img, d, sx, sy, pal, accent, phone)
        for widget in screen.widgets:
            if widget.kind == "dialog":
                # Dim everything under a modal dialog.
                arr = np.asarray(img) // 2
                img.paste(Image.fromarray(arr))
            ctx.draw(widget)
        return np.asarray(img)


class _Ctx:
    def __init__(
        self,
        img: Image.Image,
        d: ImageDraw.ImageDraw,
        sx: float,
        sy: float,
        pal: dict[str, RGB],
        accent: RGB,
        phone: PhoneView,
    ) -> None:
        self.img, self.d, self.sx, self.sy, self.pal, self.accent, self.phone = img, d, sx, sy, pal, accent, phone
        self.s = min(sx, sy)

    def box(self, b: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        return (round(b[0] * self.sx), round(b[1] * self.sy), round(b[2] * self.sx) - 1, round(b[3] * self.sy) - 1)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        px: int,
        fill: RGB,
        bold: bool = False,
        anchor: str = "lm",
        max_w: float | None = None,
    ) -> None:
        text = text.translate(_CONTROL_CHARS)  # model-typed control bytes must not break layout
        if not text:
            return
        size = max(6, round(px * self.s))
        primary = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
        if max_w is not None:
            if text.isascii() or not any(_units(c) > 1 for c in text):
                text = _clip(text, max(1, int(max_w / (0.58 * px))))
            else:  # wide (CJK) characters: measure instead of counting
                text = _clip_measured(text, primary, size, max_w * self.sx)
        font = _font(size, bold)
        xy = (round(x * self.sx), round(y * self.sy))
        if text.isascii() or all(_has_glyph(primary, c) for c in text):
            self.d.text(xy, text, font=font, fill=fill, anchor=anchor)
            return
        self._mixed_text(xy, _runs(text, primary), size, font, fill, anchor, bold)

    def _mixed_text(
        self,
        xy: tuple[int, int],
        runs: list[tuple[str, str]],
        size: int,
        font: ImageFont.FreeTypeFont,
        fill: RGB,
        anchor: str,
        bold: bool,
    ) -> None:
        """Text in several fonts (per-character fallback), laid out on DejaVu's baseline; the
        fallback fonts have no bold face, so bold runs get a thin outline at readable sizes."""
        stroke = max(1, size // 40) if bold and size >= 30 else 0
        fonts = [font if name.startswith("DejaVu") else _font_file(name, size) for name, _ in runs]
        widths = [f.getlength(run) for f, (_, run) in zip(fonts, runs, strict=True)]
        x = xy[0] - {"l": 0.0, "m": sum(widths) / 2, "r": sum(widths)}[anchor[0]]
        ascent, descent = font.getmetrics()
        baseline = xy[1] + {"m": (ascent - descent) / 2, "s": 0.0, "a": ascent, "d": -descent}.get(anchor[1], 0.0)
        for f, (_, run), w in zip(fonts, runs, widths, strict=True):
            width = 0 if f is font else stroke
            self.d.text(
                (round(x), round(baseline)), run, font=f, fill=fill, anchor="ls", stroke_width=width, stroke_fill=fill
            )
            x += w

    def rrect(
        self, b: tuple[int, int, int, int], r: int, fill: RGB | None = None, outline: RGB | None = None, width: int = 3
    ) -> None:
        bb = self.box(b)
        rad = max(1, round(r * self.s))
        lw = max(1, round(width * self.s)) if outline is not None else 0
        if bb[2] <= bb[0] or bb[3] <= bb[1]:
            return
        self.d.rounded_rectangle(bb, radius=rad, fill=fill, outline=outline, width=lw)

    def rect(self, b: tuple[int, int, int, int], fill: RGB) -> None:
        bb = self.box(b)
        if bb[2] >= bb[0] and bb[3] >= bb[1]:
            self.d.rectangle(bb, fill=fill)

    def draw(self, w: Widget) -> None:
        getattr(self, f"_k_{w.kind}", self._k_default)(w)

    # -- widget kinds -----------------------------------------------------------------
    def _k_default(self, w: Widget) -> None:
        x0, y0, x1, y1 = w.box
        self.text(x0 + 24, (y0 + y1) / 2, w.text, 44, self.pal["text"], max_w=x1 - x0 - 48)

    def _k_wallpaper(self, w: Widget) -> None:
        top, bottom = self.phone.perturbation.wallpaper
        self.img.paste(_gradient(top, bottom, self.img.width, self.img.height), (0, 0))

    def _k_statusbar(self, w: Widget) -> None:
        on_launcher = self.phone.foreground is None
        if not on_launcher:
            self.rect(w.box, self.pal["bar"])
        fg = WHITE if on_launcher else self.pal["text"]
        self.text(48, 48, w.text, 40, fg, bold=True)
        # Battery and signal glyphs.
        self.rrect((WIDTH - 140, 30, WIDTH - 60, 66), 8, outline=fg, width=4)
        self.rect((WIDTH - 134, 36, WIDTH - 84, 61), fg)
        for i in range(4):
            self.rect((WIDTH - 260 + i * 22, 66 - 10 * (i + 1), WIDTH - 246 + i * 22, 66), fg)

    def _k_launcher_date(self, w: Widget) -> None:
        self.text(WIDTH / 2, (w.box[1] + w.box[3]) / 2, w.text, 64, WHITE, bold=True, anchor="mm")

    def _k_app_icon(self, w: Widget) -> None:
        x0, y0, x1, _ = w.box
        cx = (x0 + x1) / 2
        app = self.phone.apps[w.role.split(":", 1)[1]]
        self.rrect((int(cx - 88), y0 + 20, int(cx + 88), y0 + 196), 44, fill=app.color)
        self.text(cx, y0 + 108, w.glyph, 84, WHITE, bold=True, anchor="mm")
        self.text(cx, y0 + 240, w.text, 36, WHITE, anchor="mm", max_w=x1 - x0)

    def _k_appbar(self, w: Widget) -> None:
        self.rect(w.box, self.pal["bar"])
        # The title indent is fixed (room for a back arrow) so titles never shift.
        self.text(168, (w.box[1] + w.box[3]) / 2, w.text, 56, self.pal["text"], bold=True, max_w=700)

    def _k_icon(self, w: Widget) -> None:
        cx, cy = w.center
        glyph = {"<": "←", "x": "✕", "menu": "⋮", "search": "⌕"}.get(w.glyph, w.glyph)
        self.text(cx, cy, glyph, 64, self.pal["text"], bold=True, anchor="mm")

    def _k_title_large(self, w: Widget) -> None:
        self.text(
            w.box[0], (w.box[1] + w.box[3]) / 2, w.text, 64, self.pal["text"], bold=True, max_w=w.box[2] - w.box[0]
        )

    def _k_title_small(self, w: Widget) -> None:
        self.text(w.box[0], (w.box[1] + w.box[3]) / 2, w.text, 44, self.accent, bold=True, max_w=w.box[2] - w.box[0])

    def _k_label(self, w: Widget) -> None:
        color = self.pal["text"] if w.role == "text" else self.pal["muted"]
        lines = w.text.split("\n")
        x0, y0, x1, y1 = w.box
        step = (y1 - y0) / max(1, len(lines))
        for i, line in enumerate(lines):
            self.text(x0, y0 + step * (i + 0.5), line, 40, color, max_w=x1 - x0)

    def _k_field(self, w: Widget) -> None:
        x0, y0, x1, y1 = w.box
        self.rrect(
            w.box,
            36,
            fill=self.pal["surface"],
            outline=self.accent if w.focused else self.pal["divider"],
            width=5 if w.focused else 3,
        )
        shown = w.text.replace("\n", " ⏎ ") if w.text else w.placeholder
        color = self.pal["text"] if w.text else self.pal["muted"]
        self.text(x0 + 40, (y0 + y1) / 2, shown, 44, color, max_w=x1 - x0 - 200)
        if w.focused:
            self.rect((x1 - 170, y0 + 30, x1 - 164, y1 - 30), self.accent)

    def _k_button(self, w: Widget) -> None:
        if w.role == "primary":
            self.rrect(w.box, 70, fill=self.accent)
            fg = WHITE
        else:
            self.rrect(w.box, 70, outline=self.accent, width=4)
            fg = self.accent
        cx, cy = w.center
        self.text(cx, cy, w.text, 46, fg, bold=True, anchor="mm", max_w=w.box[2] - w.box[0] - 40)

    def _k_row(self, w: Widget) -> None:
        x0, y0, x1, y1 = w.box
        tx = 48
        if w.glyph:
            self.d.ellipse(self.box((48, y0 + 34, 148, y0 + 134)), fill=self.accent)
            self.text(98, y0 + 84, w.glyph, 48, WHITE, bold=True, anchor="mm")
            tx = 190
        right = x1 - (260 if w.checked is not None else 48)
        if w.subtitle:
            self.text(tx, y0 + 62, w.text, 46, self.pal["text"], max_w=right - tx)
            self.text(tx, y0 + 118, w.subtitle, 36, self.pal["muted"], max_w=right - tx)
        else:
            self.text(tx, (y0 + y1) / 2, w.text, 46, self.pal["text"], max_w=right - tx)
        self.rect((tx, y1 - 2, x1, y1), self.pal["divider"])
        if w.checked is not None:
            self._switch(x1 - 200, (y0 + y1) // 2, w.checked)

    _k_toggle_row = _k_row

    def _switch(self, x: int, cy: int, on: bool) -> None:
        track = self.accent if on else self.pal["divider"]
        self.rrect((x, cy - 36, x + 150, cy + 36), 36, fill=track)
        kx = x + 114 if on else x + 36
        self.d.ellipse(self.box((kx - 30, cy - 30, kx + 30, cy + 30)), fill=WHITE)

    def _k_chip(self, w: Widget) -> None:
        if w.checked:
            self.rrect(w.box, 40, fill=self.accent)
            fg = WHITE
        else:
            self.rrect(w.box, 40, fill=self.pal["surface"], outline=self.pal["divider"], width=3)
            fg = self.pal["text"]
        cx, cy = w.center
        self.text(cx, cy, w.text, 40, fg, bold=bool(w.checked), anchor="mm", max_w=w.box[2] - w.box[0] - 16)

    def _k_pill(self, w: Widget) -> None:
        self.rrect(w.box, 50, fill=self.pal["text"])
        cx, cy = w.center
        self.text(cx, cy, w.text, 38, self.pal["bg"], bold=True, anchor="mm", max_w=w.box[2] - w.box[0] - 16)

    def _k_tab(self, w: Widget) -> None:
        cx, cy = w.center
        color = self.accent if w.checked else self.pal["muted"]
        self.text(cx, cy, w.text, 42, color, bold=bool(w.checked), anchor="mm", max_w=w.box[2] - w.box[0] - 8)
        if w.checked:
            self.rect((w.box[0] + 40, w.box[3] - 10, w.box[2] - 40, w.box[3]), self.accent)

    def _k_navitem(self, w: Widget) -> None:
        self.rect((w.box[0], w.box[1], w.box[2], w.box[1] + 2), self.pal["divider"])
        cx, _ = w.center
        color = self.accent if w.checked else self.pal["muted"]
        self.d.ellipse(
            self.box((cx - 26, w.box[1] + 30, cx + 26, w.box[1] + 82)), outline=color, width=max(1, round(6 * self.s))
        )
        self.text(cx, w.box[1] + 124, w.text, 34, color, bold=bool(w.checked), anchor="mm", max_w=w.box[2] - w.box[0])

    def _k_fab(self, w: Widget) -> None:
        self.rrect(w.box, 48, fill=self.accent)
        cx, cy = w.center
        self.text(cx, cy, w.glyph, 80, WHITE, bold=True, anchor="mm")

    def _k_scroller(self, w: Widget) -> None:
        if w.scroll_max <= 0:
            return
        x0, y0, x1, y1 = w.box
        offset = int(w.text or 0)
        span = y1 - y0
        thumb = max(80, span // (w.scroll_max + 1))
        top = y0 + (span - thumb) * offset // max(1, w.scroll_max)
        self.rrect((x1 - 14, top, x1 - 4, top + thumb), 5, fill=self.pal["muted"])

    def _k_card(self, w: Widget) -> None:
        x0, y0, x1, y1 = w.box
        self.rrect(w.box, 32, fill=self.pal["surface"], outline=self.pal["divider"], width=3)
        self.text(x0 + 40, y0 + 70, w.text, 48, self.pal["text"], bold=True, max_w=x1 - x0 - 80)
        for i, line in enumerate(w.subtitle.split("\n")[:4]):
            self.text(x0 + 40, y0 + 140 + i * 52, line, 36, self.pal["muted"], max_w=x1 - x0 - 80)

    def _k_dialog(self, w: Widget) -> None:
        x0, y0, x1, y1 = w.box
        self.rrect(w.box, 48, fill=self.pal["surface"])
        self.text(x0 + 56, y0 + 100, w.text, 50, self.pal["text"], bold=True, max_w=x1 - x0 - 112)
        for i, line in enumerate(_wrap(w.subtitle, 34)[:4]):
            self.text(x0 + 56, y0 + 190 + i * 54, line, 38, self.pal["muted"])

    def _k_dialog_button(self, w: Widget) -> None:
        cx, cy = w.center
        self.text(cx, cy, w.text, 44, self.accent, bold=True, anchor="mm", max_w=w.box[2] - w.box[0])

    def _k_keyboard(self, w: Widget) -> None:
        self.rect(w.box, self.pal["kbd"])

    def _k_key(self, w: Widget) -> None:
        fill = self.accent if w.role == "primary" else self.pal["key"]
        self.rrect(w.box, 16, fill=fill)
        cx, cy = w.center
        fg = WHITE if w.role == "primary" else self.pal["text"]
        self.text(cx, cy, w.text, 48 if len(w.text) == 1 else 36, fg, anchor="mm")

    def _k_toast(self, w: Widget) -> None:
        self.rrect(w.box, 60, fill=(50, 50, 54))
        cx, cy = w.center
        self.text(cx, cy, w.text, 38, WHITE, anchor="mm", max_w=w.box[2] - w.box[0] - 40)

    def _k_navbar(self, w: Widget) -> None:
        self.rect(w.box, self.pal["nav"])

    def _k_navbutton(self, w: Widget) -> None:
        cx, cy = w.center
        g = self.pal["navglyph"]
        lw = max(1, round(5 * self.s))
        if w.glyph == "<":
            pts = [self._pt(cx + 22, cy - 28), self._pt(cx - 24, cy), self._pt(cx + 22, cy + 28)]
            self.d.polygon(pts, outline=g, width=lw)
        else:
            self.d.ellipse(self.box((cx - 30, cy - 30, cx + 30, cy + 30)), outline=g, width=lw)

    def _pt(self, x: float, y: float) -> tuple[int, int]:
        return round(x * self.sx), round(y * self.sy)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    current = ""
    words = text.split()
    size: Callable[[str], float] = len
    if not text.isascii():  # Chinese has no spaces: a word wider than a line breaks between characters
        words = [piece for word in words for piece in _split_wide(word, width)]
        size = _text_units
    for word in words:
        if current and size(current) + 1 + size(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    if current:
        lines.append(current)
    return lines


def _split_wide(word: str, width: int) -> list[str]:
    if sum(_units(c) for c in word) <= width:
        return [word]
    pieces, current, used = [], "", 0.0
    for ch in word:
        if current and used + _units(ch) > width:
            pieces.append(current)
            current, used = "", 0.0
        current += ch
        used += _units(ch)
    return [*pieces, current] if current else pieces
