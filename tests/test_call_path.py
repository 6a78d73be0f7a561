"""From `darwin run` to the optimizer's step: the call path crosses few files of darwin.

issue 42's rule for a readable house: `darwin run` reaches ``optimizer.step()`` through at
most three places of darwin, the command (``darwin/cli``), the recipe (``darwin/run/recipe.py``)
and the learner (``darwin/learner``). The test records the stack at every optimizer step of a
short run and names the files between the command and the step.
"""

from __future__ import annotations

import asyncio
import contextvars
import traceback
from pathlib import Path

import torch
from click.testing import CliRunner

from darwin.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DARWIN = ROOT / "darwin"
CALLER: contextvars.ContextVar[tuple[traceback.FrameSummary, ...]] = contextvars.ContextVar("caller", default=())
"""The stack that handed the current thread its work (``asyncio.to_thread``), outermost first."""


def _places(stack: list[traceback.FrameSummary]) -> list[str]:
    """The darwin files on ``stack`` (outermost first), consecutive repeats merged, as
    paths relative to ``darwin/``."""
    out: list[str] = []
    for frame in stack:
        path = Path(frame.filename).resolve()
        if not path.is_relative_to(DARWIN):
            continue
        name = path.relative_to(DARWIN).as_posix()
        if not out or out[-1] != name:
            out.append(name)
    return out


def _area(place: str) -> str:
    """The part of darwin a file belongs to: the command, the recipe, or the learner."""
    if place.startswith("cli/"):
        return "cli"
    if place.startswith("learner/"):
        return "learner"
    return place


def test_darwin_run_reaches_the_optimizer_step_through_the_command_the_recipe_and_the_learner(
    tmp_path, monkeypatch, small_run
):
    stacks: list[list[str]] = []
    original_step, original_to_thread = torch.optim.AdamW.step, asyncio.to_thread

    def recording_step(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - torch's signature
        stacks.append(_places([*CALLER.get(), *traceback.extract_stack()]))
        return original_step(self, *args, **kwargs)

    async def to_thread_with_caller(func, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        # the recipe hands the update to a thread; asyncio.to_thread copies the context into
        # it, so the step sees the stack that called it across the hop
        token = CALLER.set((*CALLER.get(), *traceback.extract_stack()))
        try:
            return await original_to_thread(func, *args, **kwargs)
        finally:
            CALLER.reset(token)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    monkeypatch.setattr(asyncio, "to_thread", to_thread_with_caller)
    experiment = ROOT / "examples" / "spa_bench.py"
    overrides = {**small_run, "cache_dir": f'"{tmp_path / "cache"}"', "sft.steps": "1"}
    args = ["run", str(experiment), "--run-dir", str(tmp_path / "run")]
    result = CliRunner().invoke(main, args + [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")])
    assert result.exit_code == 0, result.output
    rl = [s for s in stacks if "run/recipe.py" in s and not any(p.startswith("sft/") for p in s)]
    assert rl, stacks  # the critic warm-up and the actor's update step
    for stack in rl:
        areas = []
        for place in stack:
            area = _area(place)
            if not areas or areas[-1] != area:
                areas.append(area)
        assert areas == ["cli", "run/recipe.py", "learner"], stack
