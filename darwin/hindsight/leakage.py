"""The leakage guard: no training data from a split's held-out templates or apps.

A generalisation result means something only if nothing the evaluation holds out reached
training. Tasks synthesised from explorations carry no template (``Task.template`` is
``None``), so exploring a held-out app stays allowed, which is the point of self-evolution on
apps never shown; a task, a synthesised task or an episode whose template the split holds out
(a held-out template, or one that needs a held-out app) is refused.

    >>> from darwin.hindsight.leakage import refuse_held_out
    >>> from darwin.templates import default_split
    >>> split = default_split()
    >>> refuse_held_out(split.sets["train"], split)  # the training set itself passes
    >>> refuse_held_out(split.sets["unseen_templates"][:1], split)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    darwin.hindsight.leakage.LeakageError: training data holds 1 task(s) the split holds out: ...
"""

from __future__ import annotations

from collections.abc import Iterable

from darwin.hindsight.base import SynthesisedTask
from darwin.templates import TemplateSplit, templates
from darwin.types import Task, Trajectory

__all__ = ["LeakageError", "held_out_reason", "refuse_held_out"]


class LeakageError(ValueError):
    """Training data that holds something the split keeps for evaluation; the message names it and the fix."""


def held_out_reason(template: str | None, split: TemplateSplit) -> str | None:
    """Why ``split`` holds ``template`` out (``None``: it does not, or there is no template)."""
    if template is None:
        return None
    if template in split.held_out_templates:
        return "a held-out template"
    known = templates().get(template)
    needs = known.needs if known is not None else ()
    held_apps = [app for app in needs if app in split.held_out_apps]
    if held_apps:
        return f"a template of the held-out app {', '.join(held_apps)}"
    return None


def refuse_held_out(training: Iterable[Task | SynthesisedTask | Trajectory], split: TemplateSplit) -> None:
    """Raise :class:`LeakageError` if any task or episode of ``training`` comes from a template
    ``split`` holds out (a held-out template, or a template of a held-out app)."""
    offenders: list[str] = []
    for item in training:
        task = item if isinstance(item, Task) else item.task
        reason = held_out_reason(task.template, split)
        if reason is not None:
            kind = "episode of task" if isinstance(item, Trajectory) else "task"
            offenders.append(f"{kind} {task.id!r} (template {task.template!r}: {reason})")
    if offenders:
        shown = "; ".join(offenders[:5]) + (f"; and {len(offenders) - 5} more" if len(offenders) > 5 else "")
        raise LeakageError(
            f"training data holds {len(offenders)} task(s) the split holds out: {shown}. Fix: train on "
            "split.sets['train'] and tasks synthesised from explorations (template None), and keep the "
            f"held-out templates ({len(split.held_out_templates)}) and apps ({', '.join(split.held_out_apps)}) "
            "for evaluation; or choose the split that holds out what you meant to"
        )
