"""Predicates are phone-agnostic: the core registry and the rule verifier import nothing from
the simulator, and a rule verdict is the same whether SimPhone hands its state over in
process or an ADB state probe delivers it as JSON."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import darwin.predicates
import darwin.verifiers.rule
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.task_registry import get_task
from darwin.templates import get_template
from darwin.types import Phase, Task, Verdict
from darwin.verifiers.base import VerificationRequest
from darwin.verifiers.rule import RuleVerifier

# Built-in tasks and template instances covering app-state goals and an answer task.
TASKS = [
    get_task("settings_dark_theme"),
    get_task("x_0"),
    get_task("chrome_clear_tabs"),
    get_template("clock.set_alarm").instance(2),
    get_template("contacts.add_contact").instance(2),
    get_template("chrome.tab_count").instance(2),
]


def _import_time_modules(source: str, package: str = "darwin") -> list[str]:
    """Modules imported when the module runs: every import outside function bodies, with
    relative imports resolved against ``package``."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue  # runs on call, not at import time
            if isinstance(child, ast.Import):
                found.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - child.level + 1] if child.level else []
                found.append(".".join([*base, *([child.module] if child.module else [])]))
            visit(child)

    visit(ast.parse(source))
    return found


@pytest.mark.parametrize("module", [darwin.predicates, darwin.verifiers.rule], ids=lambda m: m.__name__)
def test_core_modules_import_nothing_from_envs_at_import_time(module) -> None:
    modules = _import_time_modules(Path(module.__file__).read_text(), module.__package__)
    assert modules, "the walk found no imports at all"
    assert not [m for m in modules if m == "darwin.envs" or m.startswith("darwin.envs.")], modules


def test_importing_them_loads_no_simulator() -> None:
    # The same, transitively: a fresh interpreter imports both and finds no darwin.envs module.
    code = (
        "import sys, darwin.predicates, darwin.verifiers.rule; "
        "print(sorted(m for m in sys.modules if m.startswith('darwin.envs')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_walk_skips_imports_inside_functions() -> None:
    source = "import os\nfrom darwin.envs import x\ndef f():\n    import darwin.envs.sim\nif True:\n    from ..envs.sim import y\n"
    assert _import_time_modules(source, "darwin.verifiers") == ["os", "darwin.envs", "darwin.envs.sim"]


def _verdict(task: Task, state: dict[str, Any]) -> Verdict:
    request = VerificationRequest(
        task=task,
        phase=Phase.EXECUTION,
        instruction=task.instruction,
        spec=task.verifier,
        transitions=[],
        final_state=state,
        final_screenshot=np.zeros((8, 4, 3), np.uint8),
    )
    return asyncio.run(RuleVerifier().verify(request))


def _over_adb(state: dict[str, Any]) -> dict[str, Any]:
    # What an ADB state probe delivers: the state printed as JSON on the phone, parsed here
    # (tuples come back as lists, nothing is shared with the phone's objects).
    return json.loads(json.dumps(state))


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_rule_verdict_is_the_same_for_simphone_and_json_state(task: Task) -> None:
    phone = SimPhone(seed=5, perturbation=PerturbationConfig(enabled=False))
    phone.restore(apply_setup(phone.snapshot(), task.setup))
    verdicts = []
    for actions in ([], shortest_plan(phone, task.verifier, apps=[task.app])):
        for action in actions:
            phone.execute(action)
        state = phone.snapshot()
        in_process, probed = _verdict(task, state), _verdict(task, _over_adb(state))
        assert (probed.success, probed.reason) == (in_process.success, in_process.reason)
        verdicts.append(in_process.success)
    assert verdicts == [False, True], "the check needs a failing start and a met goal"
