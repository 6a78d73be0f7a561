"""Tolerant, bounded scanners for model text: function calls, arguments, numbers, JSON.

Everything here is linear in the input (no backtracking regexes over unbounded input)
and never raises on any ``str``: model output is data, not code (no ``eval``/``ast``).

    >>> from darwin.agents.parsing import find_calls
    >>> (call,) = find_calls("Action: click(start_box='(10, 20)')", frozenset({"click"}))
    >>> call.name, call.kwarg("start_box")
    ('click', '(10, 20)')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

MAX_PARSE_CHARS = 65_536
"""Model text beyond this many characters is ignored by the parsers (a 512-token response
is a few thousand characters; anything longer is degenerate)."""

MAX_CALLS = 16
"""At most this many candidate calls are examined per response."""

MAX_CALL_CHARS = 16_384
"""A call's argument list is scanned for at most this many characters."""

_CLOSERS = frozenset(",)]}")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_KWARG = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*=")


@dataclass(frozen=True)
class Call:
    """One ``name(args...)`` found in text; argument values are unquoted and unescaped."""

    name: str
    """Lower-cased function name."""
    args: tuple[str, ...]
    """Positional arguments, in order."""
    kwargs: tuple[tuple[str, str], ...]
    """Keyword arguments as ``(lower-cased key, value)`` pairs, in order."""
    text: str
    """The call as written (``name(...)``), cut at the matching parenthesis."""
    start: int
    end: int
    terminated: bool
    """False when the text ended before the closing parenthesis."""

    def kwarg(self, *keys: str) -> str | None:
        """The value of the first of ``keys`` present, else ``None``."""
        for key in keys:
            for k, v in self.kwargs:
                if k == key:
                    return v
        return None


def _closes(text: str, i: int) -> bool:
    """A quote at ``i`` ends a string if what follows (spaces skipped) ends an argument."""
    j = i + 1
    n = len(text)
    while j < n and text[j] in " \t\r\n":
        j += 1
    return j >= n or text[j] in _CLOSERS


def _scan_string(text: str, i: int, limit: int) -> int:
    """Index just past the string starting with the quote at ``i`` (or ``limit``).

    A quote of the same kind closes the string only when an argument boundary follows,
    so unescaped apostrophes inside (``'it's'``) stay part of the text.
    """
    quote = text[i]
    j = i + 1
    while j < limit:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote and _closes(text, j):
            return j + 1
        j += 1
    return limit


def _scan_args(text: str, start: int, limit: int) -> tuple[int, bool]:
    """From just after ``(``, the index of the matching ``)`` and whether it was found."""
    stack: list[str] = []
    i = start
    while i < limit:
        c = text[i]
        if c in "'\"":
            i = _scan_string(text, i, limit)
            continue
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in ")]}":
            if not stack:
                if c == ")":
                    return i, True
            elif stack[-1] == c:
                stack.pop()
            elif c == ")":
                # Unbalanced brackets inside: close them all at this parenthesis.
                while stack and stack[-1] != ")":
                    stack.pop()
                if not stack:
                    return i, True
                stack.pop()
        i += 1
    return limit, False


def split_top_level(text: str) -> list[str]:
    """Split on commas outside strings and brackets."""
    parts: list[str] = []
    depth = 0
    i = 0
    last = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            i = _scan_string(text, i, n)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            parts.append(text[last:i])
            last = i + 1
        i += 1
    parts.append(text[last:])
    return parts


def decode_escapes(text: str) -> str:
    r"""Python-style ``\n``, ``\t``, ``\r``, ``\\``, ``\'`` and ``\"``; other backslashes stay."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def unquote(value: str) -> str:
    """Strip surrounding quotes (a missing closing quote is tolerated) and decode escapes.

    Unquoted values are returned stripped and as written.
    """
    v = value.strip()
    if v[:1] in ("'", '"'):
        q = v[0]
        inner = v[1:-1] if len(v) >= 2 and v[-1] == q else v[1:]
        return decode_escapes(inner)
    return v


def parse_arguments(text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Positional and keyword arguments of an argument list (without the parentheses)."""
    if not text.strip():
        return (), ()
    args: list[str] = []
    kwargs: list[tuple[str, str]] = []
    for part in split_top_level(text):
        m = _KWARG.match(part)
        if m is not None and part[m.end() : m.end() + 1] != "=":
            kwargs.append((m.group(1).lower(), unquote(part[m.end() :])))
        elif part.strip():
            args.append(unquote(part))
    return tuple(args), tuple(kwargs)


@lru_cache(maxsize=64)
def _call_pattern(names: frozenset[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_])({alternatives})[ \t]{{0,8}}\(", re.IGNORECASE)


def find_calls(text: str, names: frozenset[str], limit: int = MAX_CALLS) -> list[Call]:
    """Calls of any of ``names`` (case-insensitive) in order of appearance, non-overlapping.

    A call with no closing parenthesis runs to the end of the text (a response cut by the
    token limit) and is marked ``terminated=False``.
    """
    if not names:
        return []
    pattern = _call_pattern(names)
    calls: list[Call] = []
    pos = 0
    n = len(text)
    while len(calls) < limit:
        m = pattern.search(text, pos)
        if m is None:
            break
        open_end = m.end()
        limit_at = min(n, open_end + MAX_CALL_CHARS)
        close, found = _scan_args(text, open_end, limit_at)
        args, kwargs = parse_arguments(text[open_end:close])
        end = close + 1 if found else close
        calls.append(
            Call(
                name=m.group(1).lower(),
                args=args,
                kwargs=kwargs,
                text=text[m.start() : end],
                start=m.start(),
                end=end,
                terminated=found,
            )
        )
        pos = max(end, m.end())
    return calls


def numbers(text: str, limit: int = 8) -> list[float]:
    """The first ``limit`` decimal numbers in ``text`` (``-12``, ``3.5``)."""
    out: list[float] = []
    for m in _NUMBER.finditer(text):
        out.append(float(m.group(0)))
        if len(out) >= limit:
            break
    return out


def balanced_json_object(text: str, start: int = 0) -> tuple[int, int] | None:
    """Span of the first ``{...}`` at or after ``start`` with balanced braces outside strings."""
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    in_str = False
    j = i
    n = min(len(text), i + MAX_PARSE_CHARS)
    while j < n:
        c = text[j]
        if in_str:
            if c == "\\":
                j += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i, j + 1
        j += 1
    return None


def load_json(text: str) -> object | None:
    """``json.loads`` that returns ``None`` instead of raising (bad syntax, deep nesting)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


__all__ = [
    "MAX_CALLS",
    "MAX_CALL_CHARS",
    "MAX_PARSE_CHARS",
    "Call",
    "balanced_json_object",
    "decode_escapes",
    "find_calls",
    "load_json",
    "numbers",
    "parse_arguments",
    "split_top_level",
    "unquote",
]
