"""Calculator: a keypad (digits, + − × ÷, %, ±, clear, backspace, =), a display that also takes typed input,
and a history of past calculations."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.calculator_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, predicate, top

DISPLAY = "calculator.display"
OPERATORS = "+−×÷"
ASCII = str.maketrans({"*": "×", "x": "×", "X": "×", "/": "÷", "-": "−", ":": "÷", ",": ".", " ": None})
KEYS = (
    ("clear", "C"),
    ("percent", "%"),
    ("sign", "±"),
    ("divide", "÷"),
    ("7", "7"),
    ("8", "8"),
    ("9", "9"),
    ("multiply", "×"),
    ("4", "4"),
    ("5", "5"),
    ("6", "6"),
    ("minus", "−"),
    ("1", "1"),
    ("2", "2"),
    ("3", "3"),
    ("plus", "+"),
    ("0", "0"),
    ("point", "."),
    ("backspace", "⌫"),
    ("equals", "="),
)
"""The keypad, row by row: (id suffix, label)."""
_TOKEN = re.compile(r"\d+(?:\.\d*)?%?|\.\d+%?|[+−×÷]")


class CalcError(ValueError):
    """An expression the calculator cannot evaluate (shown as 'Error' or 'Can't divide by 0')."""


def canonical(expr: str) -> str:
    """``expr`` with ASCII operators as the keypad's symbols and no spaces (``"12 * 3"`` -> ``"12×3"``)."""
    return expr.translate(ASCII)


def evaluate(expr: str) -> Fraction:
    """The value of ``expr`` (``×`` and ``÷`` before ``+`` and ``−``; ``x%`` is x/100; a ``−`` that starts
    the expression or follows an operator negates). Exact, with fractions. Raises :class:`CalcError`.

    >>> str(evaluate("12+7×3")), str(evaluate("80×15%")), str(evaluate("−5×4")), format_value(evaluate("7÷8"))
    ('33', '12', '-20', '0.875')
    """
    text = canonical(expr)
    pos, tokens = 0, []
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CalcError(f"cannot read {text[pos:]!r}")
        tokens.append(match.group())
        pos = match.end()
    if not tokens:
        raise CalcError("empty expression")
    # Unary minus: a '−' first or after an operator belongs to the number after it.
    values: list[Fraction] = []
    ops: list[str] = []
    sign = 1
    expect_number = True
    for tok in tokens:
        if expect_number:
            if tok == "−":
                sign = -sign
                continue
            if tok in OPERATORS:
                raise CalcError(f"operator {tok} where a number belongs")
            digits = tok.rstrip("%")
            number = Fraction(digits.rstrip(".") or "0") if not digits.startswith(".") else Fraction("0" + digits)
            if tok.endswith("%"):
                number /= 100
            values.append(sign * number)
            sign, expect_number = 1, False
        else:
            ops.append(tok)
            expect_number = True
    if expect_number:
        raise CalcError("the expression ends with an operator")
    # × and ÷ first, then + and − left to right.
    terms, term_ops = [values[0]], []
    for op, value in zip(ops, values[1:], strict=True):
        if op == "×":
            terms[-1] *= value
        elif op == "÷":
            if value == 0:
                raise CalcError("Can't divide by 0")
            terms[-1] /= value
        else:
            terms.append(value)
            term_ops.append(op)
    total = terms[0]
    for op, value in zip(term_ops, terms[1:], strict=True):
        total = total + value if op == "+" else total - value
    return total


def format_value(value: Fraction) -> str:
    """A result as the display shows it: an integer, or up to 10 decimals without trailing zeros."""
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(value):.10f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def result_text(expr: str) -> str:
    """What ``=`` shows for ``expr``: its value, or the error."""
    try:
        return format_value(evaluate(expr))
    except CalcError as exc:
        return "Can't divide by 0" if "divide" in str(exc) else "Error"


class CalculatorApp(SimApp):
    """Calculator (like Google's): a display with a live result preview, a keypad and a history screen."""

    id = "calculator"
    label = "Calculator"
    package = "com.google.android.calculator"
    activity = "com.android.calculator2.Calculator"
    color = (66, 66, 66)
    glyph = "÷"
    aliases = ("calc", "calculator app")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        history = []
        for _ in range(rng.randint(1, 3)):
            a, b, op = rng.randint(2, 99), rng.randint(2, 20), rng.choice("+−×")
            expr = f"{a}{op}{b}"
            history.append({"expr": expr, "result": result_text(expr)})
        return {"history": history}

    def popup(self) -> None:
        return None

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        if name == "home":
            ui.app_bar("Calculator", actions=[("calculator.history", "↺", ctx.pusher("history"))])
            ctx.text_field(ui, DISPLAY, "Enter a calculation", on_submit=lambda _text: _equals(ctx))
            shown = ctx.field(DISPLAY)
            preview = ""
            if ctx.screen.get("error"):
                preview = ctx.screen["error"]
            elif shown and not ctx.screen.get("fresh") and any(op in canonical(shown)[1:] for op in OPERATORS + "%"):
                value = result_text(shown)
                preview = "" if value in ("Error", "Can't divide by 0") else f"= {value}"
            ui.label("calculator.preview", preview, role="text")
            items = [(f"calculator.key.{key}", text, _press(ctx, key, text), False) for key, text in KEYS]
            ui.grid(items, columns=4, cell_h=150)
        elif name == "history":
            d = ctx.data
            ui.app_bar(
                "History", on_back=ctx.popper(), actions=[("calculator.history.clear", "✕", _clear_history(ctx))]
            )
            rows = [
                Row(f"calculator.entry.{i}", h["expr"], f"= {h['result']}", on_tap=_recall(ctx, h["expr"]))
                for i, h in reversed(list(enumerate(d["history"])))
            ]
            if not rows:
                ui.label("calculator.history.empty", "No history yet")
            ui.list("history", ctx.scroll_offset("history"), rows)
        else:
            raise ValueError(f"calculator: unknown screen {name!r}")


# -- keypad -------------------------------------------------------------------------------
def _last_number_start(expr: str) -> int:
    i = len(expr)
    while i > 0 and (expr[i - 1].isdigit() or expr[i - 1] in ".%"):
        i -= 1
    return i


def _press(ctx: AppContext, key: str, text: str) -> Callable[[], None]:
    def press() -> None:
        s = ctx.screen
        shown = canonical(ctx.field(DISPLAY))
        fresh = bool(s.get("fresh"))
        s.pop("error", None)
        s["fresh"] = False
        if key == "clear":
            shown = ""
        elif key == "backspace":
            shown = "" if fresh else shown[:-1]
        elif key == "equals":
            _equals(ctx)
            return
        elif key == "sign":
            start = _last_number_start(shown)
            before = shown[:start]
            if before.endswith("−") and (len(before) == 1 or before[-2] in OPERATORS):
                shown = before[:-1] + shown[start:]
            else:
                shown = before + "−" + shown[start:]
        elif text in OPERATORS or key == "percent":
            shown += text  # an operator goes on from a result
        else:
            shown = text if fresh else shown + text  # a digit after a result starts anew
        ctx.set_field(DISPLAY, shown)

    return press


def _equals(ctx: AppContext) -> None:
    s = ctx.screen
    expr = canonical(ctx.field(DISPLAY))
    if not expr or s.get("fresh"):
        return
    result = result_text(expr)
    if result in ("Error", "Can't divide by 0"):
        s["error"] = result
        return
    ctx.data["history"].append({"expr": expr, "result": result})
    ctx.set_field(DISPLAY, result)
    s["fresh"] = True
    ctx.phone.state["focus"] = None


def _recall(ctx: AppContext, expr: str) -> Callable[[], None]:
    def recall() -> None:
        ctx.pop()
        ctx.set_field(DISPLAY, expr)
        ctx.screen["fresh"] = False
        ctx.screen.pop("error", None)

    return recall


def _clear_history(ctx: AppContext) -> Callable[[], None]:
    def clear() -> None:
        ctx.data["history"] = []
        ctx.toast("History cleared")

    return clear


# -- predicates -----------------------------------------------------------------------------
def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "calculator" and state["popup"] is None else 1


class Computed(PredicateParams):
    expr: str = Field(min_length=1, description="the calculation, keypad symbols or ASCII (12*3, 7/8, -5*4)")

    def texts(self) -> list[str]:
        return [canonical(self.expr)]


@predicate("calculator.computed", Computed)
def computed(state: dict[str, Any], p: Computed) -> Check:
    """The latest calculation in the history is ``expr`` (entered and '=' pressed)."""
    history = data(state, "calculator")["history"]
    want = canonical(p.expr)
    if history and history[-1]["expr"] == want:
        return Check.of(0)
    s = top(state, "calculator")
    if _fg(state) or s["name"] != "home":
        return Check.of(_fg(state) + int(s["name"] != "home") + 2)  # enter it (a tap and a type at least), '='
    shown = canonical(s.get("fields", {}).get(DISPLAY, ""))
    if shown == want and not s.get("fresh"):
        return Check.of(1)  # '=' (or Enter)
    # Typing the rest with Enter into the focused display is one action; otherwise a tap (or key) comes first.
    typed_on = state["focus"] == DISPLAY and want.startswith(shown) and not s.get("fresh")
    return Check.of(1 if typed_on else 2)


@predicate("calculator.history_empty")
def history_empty(state: dict[str, Any], p: PredicateParams) -> Check:
    """The calculator's history is cleared."""
    if not data(state, "calculator")["history"]:
        return Check.of(0)
    on_history = _fg(state) == 0 and top(state, "calculator")["name"] == "history"
    return Check.of(1 if on_history else _fg(state) + 2)


# -- setup steps ----------------------------------------------------------------------------
class History(PredicateParams):
    """Calculations to put in the history (oldest first) after what is there; ``clear`` empties it first."""

    exprs: list[str] = Field(min_length=1)
    clear: bool = False


@setup_step("calculator.history", History)
def _history(state: dict[str, Any], p: History) -> None:
    """Append the calculations (with their results) to the history."""
    d = data(state, "calculator")
    if p.clear:
        d["history"] = []
    for expr in p.exprs:
        d["history"].append({"expr": canonical(expr), "result": result_text(expr)})
