"""The figures a newcomer reads first agree with docs/results.md (issue 74).

docs/results.md is the page of the present: every measured percentage (``99.0%``) and every
signed gain in points (``+15.2``, ``-2.5``) that README.md or an example's module docstring
states must be written there too, so a figure cannot be updated in one place and left stale in
another. The page itself stays short (the dated record is docs/results-archive.md).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
MAX_RESULTS_LINES = 300

# A figure starts after neither a word character nor a point, so the "-12" of "2026-12-02", the
# "-5" of "1e-5" and the "5%" of "2.5%" are not read as figures of their own.
PERCENTAGE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?%")
# A signed figure ends where its digits do: not "+15" of "+15.2%" or "-5" of "-5%".
SIGNED_POINTS = re.compile(r"(?<![\w.])[+-]\d+(?:\.\d+)?(?!\.?\d|%)")


def figures(text: str) -> set[str]:
    """The percentages and signed gains written in ``text``, as written."""
    return set(PERCENTAGE.findall(text)) | set(SIGNED_POINTS.findall(text))


def stated_figures() -> dict[str, set[str]]:
    """File (relative to the repository) -> the figures README.md or its module docstring states."""
    stated = {"README.md": figures((ROOT / "README.md").read_text(encoding="utf-8"))}
    for example in sorted((ROOT / "examples").glob("*.py")):
        docstring = ast.get_docstring(ast.parse(example.read_text(encoding="utf-8"))) or ""
        stated[example.relative_to(ROOT).as_posix()] = figures(docstring)
    return stated


def test_the_extraction_reads_percentages_and_signed_points_and_nothing_else() -> None:
    text = (
        "greedy 99.0% and 100% (12.5%, 1,024%); sampled +15.2, greedy -2.5 (+-4.4 points), +0.0;"
        " not 2026-12-02, lr 1e-5, pass@8, 0.8 M, 40-54 minutes, v1.2; +7.5% is only the percentage"
    )
    assert figures(text) == {"99.0%", "100%", "12.5%", "1,024%", "+15.2", "-2.5", "-4.4", "+0.0", "7.5%"}


def test_results_is_a_page_of_the_present() -> None:
    lines = RESULTS.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_RESULTS_LINES, (
        f"docs/results.md has {lines} lines (at most {MAX_RESULTS_LINES}): move dated sections "
        "to docs/results-archive.md"
    )


def test_every_figure_of_the_readme_and_the_examples_is_in_results() -> None:
    in_results = figures(RESULTS.read_text(encoding="utf-8"))
    missing = [
        f"{name}: {figure}" for name, stated in stated_figures().items() for figure in sorted(stated - in_results)
    ]
    assert not missing, "figures not in docs/results.md (copy them there, or drop them):\n" + "\n".join(missing)
