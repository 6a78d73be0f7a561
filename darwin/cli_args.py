"""Parsers of command-line values shared by the ``darwin`` commands (click callbacks call them).

>>> parse_size("168x364"), parse_int_list("1, 8,32", "batch sizes")
((168, 364), [1, 8, 32])
"""

from __future__ import annotations

import click

__all__ = ["parse_int_list", "parse_size"]


def parse_size(
    text: str, *, example: str = "252x560", max_size: tuple[int, int] | None = (1080, 2400)
) -> tuple[int, int]:
    """``"WIDTHxHEIGHT"`` -> ``(width, height)``; a bad value raises ``click.BadParameter``."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size; write WIDTHxHEIGHT, e.g. {example}") from None
    if w <= 0 or h <= 0:
        raise click.BadParameter(f"{text!r} must be positive")
    if max_size is not None and (w > max_size[0] or h > max_size[1]):
        raise click.BadParameter(f"{text!r} must fit in {max_size[0]}x{max_size[1]}")
    return w, h


def parse_int_list(text: str, what: str, *, allow_empty: bool = False) -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]``: each ``>= 1`` (``what`` names them); at least one
    unless ``allow_empty`` (``""`` then skips what the list drives)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of {what}") from None
    if (not values and not allow_empty) or (values and min(values) < 1):
        raise click.BadParameter(f"{text!r}: give at least one of the {what}, each >= 1")
    return values
