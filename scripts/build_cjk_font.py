"""Build SimPhone's fallback fonts: a Chinese subset of Droid Sans Fallback and an emoji subset of Symbola.

Reproducible from Debian packages (``apt-get install fonts-droid-fallback fonts-symbola``) and
fontTools (a build-time tool only: ``pip install fonttools``)::

    .venv/bin/python scripts/build_cjk_font.py            # writes envs/sim/fonts/
    .venv/bin/python scripts/build_cjk_font.py --check    # only reports what is missing

The Chinese subset holds

* the 3,755 level-1 characters of GB 2312 (the standard's "commonly used" hanzi, ordered by
  pinyin; the 通用规范汉字表 level-1 list of 3,500 is not available offline, and GB 2312 level 1
  covers the same everyday vocabulary),
* the 5,401 common traditional characters of Big5 (0xA440..0xC67E), so traditional text renders,
* every character of the apps' ``zh`` dictionaries and the system catalog
  (:mod:`darwin.envs.sim.i18n`),
* every character of the task templates' instances in both languages (seeds 0..199),
* every character of ``darwin/data/spa-bench/*CHN*.csv``,
* CJK punctuation and full-width forms (U+3000..U+303F, U+FF00..U+FFEF).

The emoji subset is Symbola's emoji and pictographs (U+1F300..U+1F6FF, U+1F900..U+1F9FF) plus the
symbols DejaVu lacks in U+2600..U+27BF and U+2B00..U+2BFF, monochrome (SimPhone draws text in one
colour).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FONTS = ROOT / "envs" / "sim" / "fonts"
DROID = Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf")
SYMBOLA = Path("/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf")
CJK_OUT = FONTS / "DroidSansFallback-SimPhone.ttf"
EMOJI_OUT = FONTS / "Symbola-SimPhone-emoji.ttf"
APACHE = Path("/usr/share/common-licenses/Apache-2.0")
TEMPLATE_SEEDS = 200


def gb2312_level1() -> set[str]:
    """GB 2312 rows 16..55: the 3,755 level-1 (most common) hanzi."""
    chars = set()
    for row in range(16, 56):
        for cell in range(1, 95):
            try:
                chars.add(bytes([0xA0 + row, 0xA0 + cell]).decode("gb2312"))
            except UnicodeDecodeError:
                continue
    return chars


def big5_common() -> set[str]:
    """Big5 0xA440..0xC67E: the 5,401 常用字 (frequently used traditional characters), so
    traditional text (model output, user data) renders too."""
    chars = set()
    for lead in range(0xA4, 0xC7):
        for trail in (*range(0x40, 0x7F), *range(0xA1, 0xFF)):
            if (lead << 8 | trail) > 0xC67E:
                continue
            try:
                chars.add(bytes([lead, trail]).decode("big5"))
            except UnicodeDecodeError:
                continue
    return chars


def used_text() -> str:
    """All the Chinese SimPhone may show or be asked about: UI dictionaries, goals, SPA-Bench."""
    from darwin.envs.sim.apps import default_apps
    from darwin.envs.sim.i18n import COMMON_ZH
    from darwin.templates import templates

    parts: list[str] = [*COMMON_ZH.values()]
    for app in default_apps():
        parts.extend(app.zh.values())
    for template in templates().values():
        for seed in range(TEMPLATE_SEEDS):
            for language in template.phrasings:
                task = template.instance(seed, language)
                parts.append(task.instruction)
                parts.append(repr(task.params))
    for path in sorted((ROOT / "darwin" / "data" / "spa-bench").glob("*CHN*.csv")):
        parts.append(path.read_text(encoding="utf-8"))
    return "".join(parts)


def is_cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x2E80 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0xFF00 <= o <= 0xFFEF or 0x20000 <= o <= 0x2FA1F


def cjk_codepoints() -> set[int]:
    chars = gb2312_level1() | big5_common() | {c for c in used_text() if is_cjk(c)}
    chars |= {chr(o) for o in (*range(0x3000, 0x3040), *range(0xFF00, 0xFFF0))}
    return {ord(c) for c in chars}


def emoji_codepoints() -> set[int]:
    """Emoji and pictographs, less what DejaVu Sans already draws (the fallback is never asked for those)."""
    from fontTools.ttLib import TTFont

    dejavu = set(TTFont(str(FONTS / "DejaVuSans.ttf")).getBestCmap())
    wanted = {*range(0x1F300, 0x1F700), *range(0x1F900, 0x1FA00), *range(0x2600, 0x27C0), *range(0x2B00, 0x2C00)}
    return wanted - dejavu


def subset(src: Path, dst: Path, codepoints: set[int]) -> tuple[int, int]:
    """Write the subset of ``src`` with ``codepoints`` it has; returns (glyph codepoints, bytes)."""
    from fontTools import subset as ft_subset
    from fontTools.ttLib import TTFont

    font = TTFont(str(src))
    have = set(font.getBestCmap())
    wanted = sorted(codepoints & have)
    options = ft_subset.Options()
    options.hinting = False  # PIL renders unhinted outlines well at phone sizes; halves the file
    options.layout_features = []
    options.name_IDs = ["*"]
    options.notdef_outline = True
    subsetter = ft_subset.Subsetter(options)
    subsetter.populate(unicodes=wanted)
    subsetter.subset(font)
    font.save(str(dst))
    return len(wanted), dst.stat().st_size


def write_licences() -> None:
    droid = Path("/usr/share/doc/fonts-droid-fallback/copyright").read_text(encoding="utf-8")
    header = droid.split("\nFiles: debian/*", 1)[0]
    (FONTS / "LICENSE-DroidSansFallback").write_text(
        "DroidSansFallback-SimPhone.ttf is a subset of DroidSansFallbackFull.ttf (Debian package\n"
        "fonts-droid-fallback), made by scripts/build_cjk_font.py.\n\n"
        + header.strip()
        + "\n\n"
        + APACHE.read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    symbola = Path("/usr/share/doc/fonts-symbola/copyright").read_text(encoding="utf-8")
    licence = symbola.split("The Debian packaging is:", 1)[0]
    (FONTS / "LICENSE-Symbola").write_text(
        "Symbola-SimPhone-emoji.ttf is a subset of Symbola_hint.ttf (Debian package fonts-symbola,\n"
        "Symbola 2.60 by George Douros), made by scripts/build_cjk_font.py.\n\n" + licence.strip() + "\n",
        encoding="utf-8",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--check", action="store_true", help="report the characters the shipped font lacks; write nothing"
    )
    args = parser.parse_args()
    for path in (DROID, SYMBOLA):
        if not path.exists():
            sys.stderr.write(f"{path} is missing: apt-get install fonts-droid-fallback fonts-symbola\n")
            return 1
    wanted = cjk_codepoints()
    if args.check:
        from fontTools.ttLib import TTFont

        have = set(TTFont(str(CJK_OUT)).getBestCmap())
        missing = sorted(chr(o) for o in wanted - have if o in set(TTFont(str(DROID)).getBestCmap()))
        sys.stdout.write(f"{len(missing)} characters missing from {CJK_OUT.name}: {''.join(missing)}\n")
        return 1 if missing else 0
    n_cjk, size_cjk = subset(DROID, CJK_OUT, wanted)
    n_emoji, size_emoji = subset(SYMBOLA, EMOJI_OUT, emoji_codepoints())
    write_licences()
    sys.stdout.write(
        f"{CJK_OUT.name}: {n_cjk} characters, {size_cjk / 1e6:.2f} MB\n"
        f"{EMOJI_OUT.name}: {n_emoji} characters, {size_emoji / 1e6:.2f} MB\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
