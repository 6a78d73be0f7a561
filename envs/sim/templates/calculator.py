"""Calculator templates: enter calculations, answer what they come to (sums, precedence, division, percent,
a tip, an average, a negative number), read and clear the history."""

from __future__ import annotations

import random

from pydantic import Field

from darwin.envs.sim.apps.calculator import result_text
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

HISTORY = ("apps.calculator.data.history",)


class Expr(TemplateParams):
    expr: str = Field(min_length=1, description="a calculation in keypad symbols (12×34, 7÷8, −5×4)")


class Pair(TemplateParams):
    a: int = Field(ge=1)
    b: int = Field(ge=1)


class Tip(TemplateParams):
    bill: str = Field(min_length=1, description="the bill, e.g. 48.50")
    percent: int = Field(ge=1, le=50)


class Three(TemplateParams):
    a: int = Field(ge=1)
    b: int = Field(ge=1)
    c: int = Field(ge=1)


class Past(TemplateParams):
    exprs: tuple[str, ...] = Field(min_length=2, description="calculations in the history, oldest first")


def _answer(expr: str, via: tuple[str, ...] = ("home",), tolerance: float = 0.0) -> VerifierSpec:
    return VerifierSpec(
        predicate="answer.matches",
        params={
            "kind": "number",
            "expected": result_text(expr),
            "tolerance": tolerance,
            "app": "calculator",
            "via": list(via),
            "inputs": [expr],
        },
    )


def _computed(expr: str) -> VerifierSpec:
    return VerifierSpec(predicate="calculator.computed", params={"expr": expr})


def _past(rng: random.Random) -> Past:
    exprs = []
    for _ in range(rng.randint(2, 3)):
        a, b, op = rng.randint(11, 99), rng.randint(3, 19), rng.choice("+×−")
        exprs.append(f"{a}{op}{b}")
    return Past(exprs=tuple(exprs))


register(
    TaskTemplate(
        id="calculator.compute",
        app="Calculator",
        params=Expr,
        difficulty=1,
        step_budget=12,
        description="enter a calculation and press '='",
        sample=lambda rng: Expr(expr=f"{rng.randint(12, 99)}{rng.choice('×+−')}{rng.randint(3, 49)}"),
        phrasings={
            "ENG": (
                "Use the Calculator to compute {expr}.",
                "Calculate {expr} in the Calculator app.",
                "Open the Calculator and work out {expr}.",
            ),
            "CHN": ("用计算器计算 {expr}。", "打开计算器，算一下 {expr}。"),
        },
        verifier=lambda p: _computed(p.expr),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.sum",
        app="Calculator",
        params=Pair,
        difficulty=1,
        step_budget=10,
        description="answer: the sum of two four-digit numbers",
        sample=lambda rng: Pair(a=rng.randint(1000, 9999), b=rng.randint(1000, 9999)),
        phrasings={
            "ENG": (
                "What is {a} + {b}? Use the Calculator.",
                "Add {a} and {b} with the Calculator and tell me the result.",
            ),
            "CHN": ("{a} + {b} 等于多少？请用计算器。", "用计算器把 {a} 和 {b} 相加，告诉我结果。"),
        },
        verifier=lambda p: _answer(f"{p.a}+{p.b}"),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.precedence",
        app="Calculator",
        params=Three,
        difficulty=2,
        step_budget=10,
        description="answer: a sum with a product in it (multiplication first)",
        sample=lambda rng: Three(a=rng.randint(100, 999), b=rng.randint(11, 49), c=rng.randint(11, 49)),
        phrasings={
            "ENG": ("What is {a} + {b} × {c}?", "Work out {a} + {b} × {c} on the Calculator."),
            "CHN": ("{a} + {b} × {c} 等于多少？", "用计算器算出 {a} + {b} × {c}。"),
        },
        verifier=lambda p: _answer(f"{p.a}+{p.b}×{p.c}"),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.divide",
        app="Calculator",
        params=Pair,
        difficulty=2,
        step_budget=10,
        description="answer: a division with a decimal result",
        sample=lambda rng: Pair(
            a=rng.choice([n for n in range(11, 1000, 2) if n % 5]), b=rng.choice((4, 8, 16, 25, 40))
        ),
        phrasings={
            "ENG": ("What is {a} divided by {b}?", "Use the Calculator: {a} ÷ {b} = ?"),
            "CHN": ("{a} 除以 {b} 等于多少？", "用计算器算：{a} ÷ {b} = ？"),
        },
        verifier=lambda p: _answer(f"{p.a}÷{p.b}", tolerance=0.001),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.percent",
        app="Calculator",
        params=Pair,
        difficulty=2,
        step_budget=10,
        description="answer: a percentage of a number (the % key)",
        sample=lambda rng: Pair(a=rng.choice((12, 15, 35, 45, 60)), b=rng.choice((120, 240, 360, 450, 1250))),
        phrasings={
            "ENG": ("What is {a}% of {b}?", "Use the Calculator to find {a} percent of {b}."),
            "CHN": ("{b} 的 {a}% 是多少？", "用计算器算出 {b} 的百分之{a}。"),
        },
        verifier=lambda p: _answer(f"{p.b}×{p.a}%", tolerance=0.001),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.tip",
        app="Calculator",
        params=Tip,
        difficulty=3,
        step_budget=12,
        description="answer: a bill plus a tip in percent (the calculation is the agent's to find)",
        sample=lambda rng: Tip(
            bill=rng.choice(("48.50", "36.20", "92.40", "24.80", "67.00")), percent=rng.choice((10, 15, 18, 20))
        ),
        phrasings={
            "ENG": (
                "The bill is ${bill} and I want to leave a {percent}% tip. What is the total?",
                "Add a {percent}% tip to a bill of ${bill}: how much do I pay in all?",
            ),
            "CHN": (
                "账单是 {bill} 美元，我想付 {percent}% 的小费，一共要付多少？",
                "在 {bill} 元的账单上加 {percent}% 的小费，总共多少钱？",
            ),
        },
        verifier=lambda p: _answer(f"{p.bill}+{p.bill}×{p.percent}%", tolerance=0.01),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.average",
        app="Calculator",
        params=Three,
        difficulty=3,
        step_budget=12,
        description="answer: the average of three numbers (no brackets on the keypad)",
        sample=lambda rng: Three(a=rng.randint(10, 99), b=rng.randint(10, 99), c=rng.randint(10, 99)),
        phrasings={
            "ENG": (
                "What is the average of {a}, {b} and {c}?",
                "Use the Calculator to find the mean of {a}, {b} and {c}.",
            ),
            "CHN": ("{a}、{b} 和 {c} 的平均数是多少？", "用计算器求 {a}、{b}、{c} 的平均值。"),
        },
        verifier=lambda p: _answer(f"{p.a}÷3+{p.b}÷3+{p.c}÷3", tolerance=0.01),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.negative",
        app="Calculator",
        params=Pair,
        difficulty=2,
        step_budget=14,
        description="enter a product with a negative number (the ± key or a typed minus) and press '='",
        sample=lambda rng: Pair(a=rng.randint(2, 99), b=rng.randint(2, 19)),
        phrasings={
            "ENG": ("Calculate −{a} × {b} on the Calculator.", "Use the Calculator to multiply negative {a} by {b}."),
            "CHN": ("用计算器计算 −{a} × {b}。", "用计算器算负 {a} 乘以 {b}。"),
        },
        verifier=lambda p: _computed(f"−{p.a}×{p.b}"),
        allowed_changes=lambda p: HISTORY,
    )
)

register(
    TaskTemplate(
        id="calculator.last_result",
        app="Calculator",
        params=Past,
        difficulty=2,
        step_budget=10,
        description="answer: the result of the latest calculation in the history (the instance adds them)",
        sample=_past,
        phrasings={
            "ENG": (
                "What was the result of my last calculation? Check the Calculator's history.",
                "Open the Calculator history: what did the most recent calculation come to?",
            ),
            "CHN": (
                "我上一次计算的结果是多少？请查看计算器的历史记录。",
                "打开计算器的历史记录：最近一次计算的结果是多少？",
            ),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="calculator.history", params={"exprs": list(p.exprs), "clear": True}),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": f"= {result_text(p.exprs[-1])}",
                "app": "calculator",
                "via": ["home", "history"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="calculator.clear_history",
        app="Calculator",
        params=Past,
        difficulty=1,
        step_budget=8,
        description="clear the calculation history (the instance adds some)",
        sample=_past,
        phrasings={
            "ENG": ("Clear the Calculator's history.", "Delete all past calculations from the Calculator history."),
            "CHN": ("清除计算器的历史记录。", "把计算器里的历史计算全部删除。"),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="calculator.history", params={"exprs": list(p.exprs)}),),
        verifier=lambda p: VerifierSpec(predicate="calculator.history_empty", params={}),
        allowed_changes=lambda p: HISTORY,
    )
)
