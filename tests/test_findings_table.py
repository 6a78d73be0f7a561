"""The findings table of docs/results.md quotes the paper, with section and figure.

A guard against drift (the Fig. 6b row once stated the paper's finding the wrong way round):
each row names the paper's figure and section, its "the paper" column quotes the paper, and
every quoted passage is found word for word in docs/paper-findings.md, in the row of that
section and figure, so a reviewer checks a row against the paper's text in one look. Where the
reference has no sentence of the paper to quote (Fig. 5), the row is marked ``summary:`` and
copies the reference's summary.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
TABLE_HEADER = "| finding | the paper (quoted, with its section) | ours (probe protocol) | agree? |"
FINDING = re.compile(r"^Fig\. (?P<figure>\d+[ab]?), [^()]+ \((?P<section>\d+\.\d+)\)$")
REFERENCE_PLACE = re.compile(r"^(?P<section>\d+\.\d+), Fig\. (?P<figure>\d+[ab]?)$")
QUOTE = re.compile(r"\"([^\"]+)\"")
SUMMARY = "summary: "


def _rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table under ``header`` (its separator line skipped)."""
    lines = text.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def _reference() -> dict[tuple[str, str], str]:
    """(figure, section) -> what the paper states, from docs/paper-findings.md."""
    text = (DOCS / "paper-findings.md").read_text()
    out = {}
    for _, place, states in _rows(text, "| finding | section / figure | what the paper states |"):
        match = REFERENCE_PLACE.match(place)
        if match:
            out[(match["figure"], match["section"])] = states
    return out


def _normalise(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").split())


def test_the_reference_names_the_papers_figures():
    assert set(_reference()) >= {("2", "5.2"), ("3", "5.3"), ("4", "5.4"), ("5", "5.5"), ("6a", "5.6"), ("6b", "5.6")}


def test_every_row_quotes_the_paper_in_the_row_of_its_section_and_figure():
    reference = _reference()
    rows = _rows((DOCS / "results.md").read_text(), TABLE_HEADER)
    assert len(rows) >= 6
    problems = []
    for finding, paper, ours, agree in rows:
        place = FINDING.match(finding)
        if place is None:
            problems.append(f"{finding!r}: name the figure and the section, as 'Fig. 6b, truncation (5.6)'")
            continue
        states = reference.get((place["figure"], place["section"]))
        if states is None:
            problems.append(
                f"{finding!r}: docs/paper-findings.md has no row for section {place['section']}, Fig. {place['figure']}"
            )
            continue
        quotes = QUOTE.findall(paper)
        if paper.startswith(SUMMARY):
            # the reference gives no sentence of the paper to quote: the row copies its summary
            if _normalise(paper.removeprefix(SUMMARY)) not in _normalise(states):
                problems.append(f"{finding!r}: a summary must be the reference's own words (docs/paper-findings.md)")
        elif not any(len(q.split()) >= 4 for q in quotes):
            problems.append(f"{finding!r}: quote the paper's claim (at least four words in double quotes)")
        for quote in quotes:
            if _normalise(quote) not in _normalise(states):
                problems.append(f"{finding!r}: {quote!r} is not in the paper's row (docs/paper-findings.md)")
        if not ours or not agree:
            problems.append(f"{finding!r}: say what we measured and whether it agrees")
    assert not problems, "\n".join(problems)


def test_a_misquote_is_caught():
    reference = _reference()
    reversed_claim = "bootstrapping from a learned critic outperforms treating truncated trajectories as terminal"
    assert _normalise(reversed_claim) not in _normalise(reference[("6b", "5.6")])
