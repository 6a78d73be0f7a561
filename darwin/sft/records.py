"""The JSONL demonstration format: one episode per line, validated with a message that names
the line, the field and the fix.

A line is one JSON object (:class:`EpisodeRecord`)::

    {"goal": "Clock: Set an alarm for 7:30.", "app": "Clock", "task_id": "clock_alarm",
     "device_size": [1080, 2400],
     "steps": [
       {"screenshot": "shots/ep0-0.png", "thought": "The Clock app is on the home screen.",
        "action": {"type": "open_app", "app": "Clock"}},
       {"screenshot": "data:image/png;base64,iVBORw0KGgo...",
        "action": {"type": "click", "x": 540, "y": 1210}},
       {"screenshot": "shots/ep0-2.png", "action": {"type": "finished"}}]}

``goal`` is the text the agent is given (for SimPhone tasks ``"<App>: <instruction>"``, as
:func:`darwin.task_registry.goal_text` writes it); ``steps[i].action`` is one of darwin's action
types (:mod:`darwin.actions`, coordinates in device pixels of ``device_size``, which defaults
to the first screenshot's size); ``screenshot`` is a PNG path relative to the JSONL file's
folder, or an inline ``data:image/png;base64,...`` PNG; ``thought`` (optional) becomes the
target's reasoning in formats that have one (UI-TARS, Qwen3-VL).

    >>> from darwin.sft.records import parse_record_line
    >>> line = '{"goal": "Open Clock", "steps": [{"screenshot": "a.png", "action": {"type": "tapp"}}]}'
    >>> try:
    ...     parse_record_line(line, "demos.jsonl", 7)
    ... except ValueError as err:
    ...     print(str(err)[:88])
    demos.jsonl line 7: steps[0].action.type: 'tapp' is not an action type; use one of click
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from darwin.actions import ACTION_TYPES, Action

__all__ = [
    "DemoFileError",
    "EpisodeRecord",
    "LoadedEpisode",
    "StepRecord",
    "load_records",
    "parse_record_line",
    "write_records",
]

ACTION_TYPE_NAMES: tuple[str, ...] = tuple(t.model_fields["type"].default for t in ACTION_TYPES)

# A side of the phone in pixels: a zero or negative size would scale every screenshot and
# coordinate of the episode to nothing (or flip it) and still train.
SidePixels = Annotated[int, Field(gt=0, strict=True)]
"""Every action type's name (``click``, ``long_press``, ...)."""
INLINE_PNG = "data:image/png;base64,"


class DemoFileError(ValueError):
    """A demonstration file is unusable; the message names the file, line, field and fix."""


class StepRecord(BaseModel):
    """One demonstrated step: the screen, the action taken on it, optionally the reasoning."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    screenshot: str = Field(
        min_length=1, description="PNG path relative to the JSONL file's folder, or data:image/png;base64,<PNG>"
    )
    action: Action = Field(description="one of darwin's action types (darwin.actions), device pixels")
    thought: str = Field("", max_length=20_000, description="the reasoning before the action (optional)")
    target_box: tuple[int, int, int, int] | None = Field(
        None,
        description="(x1, y1, x2, y2) of the element the action targets, device pixels (optional; "
        "step-level rewards: darwin.verifiers.demo_steps)",
    )


class EpisodeRecord(BaseModel):
    """One demonstrated episode (one JSONL line)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str = Field(min_length=1, description="the goal text the agent is given")
    steps: tuple[StepRecord, ...] = Field(min_length=1, description="the steps in order")
    app: str | None = Field(None, description="the app the task is about (optional)")
    task_id: str | None = Field(
        None, description="a task id (optional; SimPhone task ids allow task-success evaluation)"
    )
    device_size: tuple[SidePixels, SidePixels] | None = Field(
        None,
        description="(width, height) of the phone in pixels, which action coordinates refer to; "
        "default: the first screenshot's size",
    )


@dataclass(frozen=True)
class LoadedEpisode:
    """An :class:`EpisodeRecord` with its screenshots decoded (``(H, W, 3)`` uint8)."""

    record: EpisodeRecord
    screenshots: tuple[np.ndarray, ...]
    device_size: tuple[int, int]
    line: int
    source: str
    """``<file>:<line>``."""


def _loc(parts: tuple[int | str, ...]) -> str:
    """``('steps', 2, 'action', 'click', 'x')`` -> ``steps[2].action.x`` (union tags dropped)."""
    out = ""
    previous: int | str | None = None
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif previous == "action" and part in ACTION_TYPE_NAMES:
            pass  # pydantic's tagged-union branch name, not a field
        else:
            out += ("." if out else "") + part
        previous = part
    return out or "(line)"


def _describe(err: ErrorDetails) -> str:
    """One pydantic error as ``field: problem; fix``."""
    kind, loc, ctx = err["type"], tuple(err["loc"]), err.get("ctx") or {}
    kinds = ", ".join(ACTION_TYPE_NAMES)
    if kind == "union_tag_invalid":
        return f"{_loc(loc)}.type: {ctx.get('tag')!r} is not an action type; use one of {kinds}"
    if kind == "union_tag_not_found":
        return f'{_loc(loc)}.type: missing; add "type" with one of {kinds}'
    if kind == "missing":
        return f"{_loc(loc)}: required field is missing; add it"
    if kind == "extra_forbidden":
        where = _loc(loc[:-1])
        model = (
            EpisodeRecord
            if where == "(line)"
            else StepRecord
            if where.startswith("steps") and where.count(".") == 0
            else None
        )
        known = f" (fields: {', '.join(model.model_fields)})" if model is not None else ""
        return f"{_loc(loc)}: unknown field; remove it or fix its name{known}"
    if loc[:1] == ("device_size",) and len(loc) == 2:
        return (
            f"{_loc(loc)}: {err.get('input')!r} is not a side in pixels; give the phone's [width, height], "
            "both whole numbers above 0, or leave device_size out to use the first screenshot's size"
        )
    if kind == "too_short" and loc == ("steps",):
        return "steps: an episode needs at least one step; add its steps or drop the line"
    return f"{_loc(loc)}: {err['msg']}"


def _decode_png(spec: str, folder: Path) -> np.ndarray:
    """The screenshot a step names (raises ``ValueError`` with the fix)."""
    from PIL import Image, UnidentifiedImageError

    if spec.startswith(INLINE_PNG):
        try:
            data = base64.b64decode(spec[len(INLINE_PNG) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(
                f"not valid base64 ({exc}); write data:image/png;base64,<base64 of the PNG bytes>"
            ) from None
        source: io.BytesIO | Path = io.BytesIO(data)
    else:
        path = folder / spec
        if not path.is_file():
            raise ValueError(f"no file {path} (screenshot paths are relative to the JSONL file's folder)")
        source = path
    try:
        with Image.open(source) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"not a readable image ({exc}); give a PNG file or an inline base64 PNG") from None


def parse_record_line(text: str, name: str, line: int) -> EpisodeRecord:
    """Validate one JSONL line; raises :class:`DemoFileError` naming ``name``, the line, field and fix."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DemoFileError(
            f"{name} line {line}: not valid JSON ({exc.msg} at column {exc.colno}); "
            "each line must be one JSON object (one episode)"
        ) from None
    if not isinstance(data, dict):
        raise DemoFileError(f"{name} line {line}: expected a JSON object (one episode), got {type(data).__name__}")
    try:
        return EpisodeRecord.model_validate(data)
    except ValidationError as exc:
        problems = [
            _describe(e)
            for e in exc.errors()
            if not (e["type"] == "too_short" and e["loc"] == ("steps",) and e.get("input"))  # follows item errors
        ]
        raise DemoFileError(f"{name} line {line}: " + "\n  ".join(problems)) from None


def load_records(path: str | os.PathLike[str]) -> list[LoadedEpisode]:
    """Read and validate a JSONL demonstration file (blank lines and ``#`` comments skipped).

    Raises :class:`DemoFileError` at the first bad line, e.g. ``demos.jsonl line 7:
    steps[2].action.type: 'tapp' is not an action type; use one of click, long_press, ...``.
    """
    src = Path(path)
    if not src.is_file():
        raise DemoFileError(f"{src}: no such file; pass a JSONL demonstration file (docs/sft.md)")
    out: list[LoadedEpisode] = []
    with src.open(encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            record = parse_record_line(text, src.name, number)
            shots = []
            for i, step in enumerate(record.steps):
                try:
                    shots.append(_decode_png(step.screenshot, src.parent))
                except ValueError as exc:
                    raise DemoFileError(f"{src.name} line {number}: steps[{i}].screenshot: {exc}") from None
            size = record.device_size or (int(shots[0].shape[1]), int(shots[0].shape[0]))
            for i, step in enumerate(record.steps):
                for name, value in step.action.model_dump().items():
                    limit = {
                        "x": size[0],
                        "x1": size[0],
                        "x2": size[0],
                        "y": size[1],
                        "y1": size[1],
                        "y2": size[1],
                    }.get(name)
                    if limit is not None and value >= limit:
                        raise DemoFileError(
                            f"{src.name} line {number}: steps[{i}].action.{name}: {value} lies outside the "
                            f"{size[0]}x{size[1]} device; coordinates are device pixels (set device_size if the phone is larger)"
                        )
            out.append(
                LoadedEpisode(
                    record=record, screenshots=tuple(shots), device_size=size, line=number, source=f"{src}:{number}"
                )
            )
    if not out:
        raise DemoFileError(f"{src}: no episodes; write one JSON object per line (docs/sft.md)")
    return out


def write_records(path: str | os.PathLike[str], episodes: Sequence[tuple[EpisodeRecord, Sequence[np.ndarray]]]) -> Path:
    """Write a JSONL demonstration file that :func:`load_records` reads back: each
    ``(record, screenshots)`` pair becomes one line, its screenshots PNG files in
    ``<file stem>-screens/`` (the records' ``screenshot`` fields are replaced by those paths).
    The file is written whole or not at all (a temporary file, then a rename)."""
    from PIL import Image

    target = Path(path)
    screens = target.parent / f"{target.stem}-screens"
    screens.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for number, (record, shots) in enumerate(episodes, start=1):
        if len(shots) != len(record.steps):
            raise ValueError(f"episode {number}: {len(record.steps)} steps but {len(shots)} screenshots")
        steps = []
        for i, (step, shot) in enumerate(zip(record.steps, shots, strict=True)):
            name = f"{number:05d}-{i:02d}.png"
            Image.fromarray(np.asarray(shot, dtype=np.uint8)).save(screens / name)
            steps.append(step.model_copy(update={"screenshot": f"{screens.name}/{name}"}))
        lines.append(record.model_copy(update={"steps": tuple(steps)}).model_dump_json(exclude_none=True))
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(target)
    return target
