"""Simplified Chinese UI strings of the Calculator app (``CalculatorApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Calculator": "计算器",
    "History": "历史记录",
    "Clear history": "清除历史记录",
    "No history yet": "暂无历史记录",
    "Error": "错误",
    "Can't divide by 0": "不能除以0",
    "Enter a calculation": "输入算式",
    "= {}": "= {}",
    "History cleared": "历史记录已清除",
}
