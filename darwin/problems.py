"""One way to report what is wrong with a config or an input: every problem at once, each
naming the field and its fix.

    >>> print(problems_message("SFTConfig", ["steps=0 must be >= 1", "lr=-1 must be > 0"]))
    invalid SFTConfig (2 problem(s)):
    - steps=0 must be >= 1
    - lr=-1 must be > 0
    >>> from pydantic import BaseModel, ValidationError
    >>> class Demo(BaseModel):
    ...     steps: int
    >>> try:
    ...     Demo(steps="many")
    ... except ValidationError as exc:
    ...     validation_lines(exc)
    ['steps: Input should be a valid integer, unable to parse string as an integer']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError


class ExperimentError(ValueError):
    """An experiment file or config is invalid, or a component cannot be built from it; the
    message lists every problem and its fix."""


def validation_lines(exc: ValidationError, root: str = "(config)") -> list[str]:
    """One ``field.path: message`` line per problem pydantic found (``root`` for the model itself)."""
    return [f"{'.'.join(map(str, e['loc'])) or root}: {e['msg']}" for e in exc.errors()]


def validation_summary(exc: ValidationError, root: str = "(config)") -> str:
    """The problems of ``exc`` on one line, ``; ``-separated (for messages that name their input first)."""
    return "; ".join(validation_lines(exc, root))


def refuse_fields(data: object, refused: Mapping[str, str]) -> object:
    """A config's ``mode="before"`` check: ``data`` unchanged, or ``ValueError`` naming each key
    of ``refused`` that ``data`` (a mapping) holds, with the fix ``refused`` gives for it.

        >>> refuse_fields({"a": 1}, {"b": "b is never part of a config"})
        {'a': 1}
        >>> refuse_fields({"b": 1}, {"b": "b is never part of a config"})
        Traceback (most recent call last):
        ValueError: b is never part of a config
    """
    if isinstance(data, Mapping):
        found = [fix for key, fix in refused.items() if key in data]
        if found:
            raise ValueError("; ".join(found))
    return data


def problems_message(what: str, problems: Sequence[str]) -> str:
    """``invalid <what> (n problem(s)):`` and one ``- problem`` line each."""
    return f"invalid {what} ({len(problems)} problem(s)):\n- " + "\n- ".join(problems)
