"""The public API (issue 74): each package users build from exports its base class and its
built-ins, lazily, and every import the README and docs show runs.

A package's public names are served by :mod:`darwin.lazy_exports` and imported under
``if TYPE_CHECKING:`` for type checkers; ``__all__``, the type checker's list and what
``__getattr__`` serves must be the same names, each the object of the module that holds it.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = {
    "darwin": ROOT / "darwin/__init__.py",
    "darwin.workflows": ROOT / "workflows/__init__.py",
    "darwin.verifiers": ROOT / "verifiers/__init__.py",
    "darwin.curricula": ROOT / "curricula/__init__.py",
    "darwin.memory": ROOT / "memory/__init__.py",
    "darwin.envs": ROOT / "envs/__init__.py",
    "darwin.envs.sim": ROOT / "envs/sim/__init__.py",
    "darwin.agents": ROOT / "darwin/agents/__init__.py",
    "darwin.readers": ROOT / "darwin/readers/__init__.py",
    "darwin.policies": ROOT / "darwin/policies/__init__.py",
    "darwin.algos": ROOT / "darwin/algos/__init__.py",
}
"""Every package with a public surface -> its ``__init__``."""

# The names issue 74 found missing, and what a script or a plug-in needs first.
PROMISED = [
    ("darwin", "ExperimentConfig"),
    ("darwin", "run_experiment"),
    ("darwin", "load_experiment"),
    ("darwin.workflows", "Workflow"),
    ("darwin.workflows", "StepWorkflow"),
    ("darwin.workflows", "LifecycleWorkflow"),
    ("darwin.workflows", "PlannerWorkflow"),
    ("darwin.workflows", "SelfVerifyWorkflow"),
    ("darwin.workflows", "ReflectionWorkflow"),
    ("darwin.verifiers", "Verifier"),
    ("darwin.verifiers", "RuleVerifier"),
    ("darwin.verifiers", "LLMJudge"),
    ("darwin.verifiers", "LearnedVerifier"),
    ("darwin.verifiers", "CompositeVerifier"),
    ("darwin.curricula", "Curriculum"),
    ("darwin.curricula", "LearnabilityCurriculum"),
    ("darwin.memory", "Memory"),
    ("darwin.memory", "SlidingWindowMemory"),
    ("darwin.memory", "LLMMemoryManager"),
    ("darwin.envs", "PhoneEnv"),
    ("darwin.envs", "AdbPhoneEnv"),
    ("darwin.envs", "InfraError"),
    ("darwin.envs.sim", "SimPhone"),
    ("darwin.agents", "Agent"),
    ("darwin.readers", "Reader"),
    ("darwin.readers", "OCRReader"),
    ("darwin.readers", "ElementsReader"),
    ("darwin.agents", "Actor"),
    ("darwin.agents", "ModelActor"),
    ("darwin.agents", "TinyAgent"),
    ("darwin.agents", "UITarsAgent"),
    ("darwin.agents", "QwenVLAgent"),
    ("darwin.policies", "Policy"),
    ("darwin.algos", "trajectory_gae"),
    ("darwin.algos", "ppo_policy_loss"),
]


def type_checking_names(path: Path) -> dict[str, str]:
    """What a package ``__init__`` imports under ``if TYPE_CHECKING:``: name -> module."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for item in (n for statement in node.body for n in ast.walk(statement)):
                if isinstance(item, ast.ImportFrom):
                    found |= {a.asname or a.name: item.module or "" for a in item.names}
    return found


@pytest.mark.parametrize(("package", "name"), PROMISED)
def test_the_promised_names_import_from_their_package(package: str, name: str) -> None:
    scope: dict[str, object] = {}
    exec(f"from {package} import {name}", scope)  # the statement a user writes
    assert name in importlib.import_module(package).__all__


@pytest.mark.parametrize("package", sorted(SOURCE))
def test_every_public_name_imports_and_is_the_object_of_its_module(package: str) -> None:
    module = importlib.import_module(package)
    listed = type_checking_names(SOURCE[package])
    assert listed, f"{package} lists no public names under TYPE_CHECKING"
    assert sorted(module.__all__) == sorted(listed), "__all__ and the TYPE_CHECKING imports differ"
    assert list(module.__all__) == sorted(module.__all__), "keep __all__ sorted"
    for name, holder in listed.items():
        scope: dict[str, object] = {}
        exec(f"from {package} import {name}", scope)
        assert scope[name] is getattr(importlib.import_module(holder), name), (package, name, holder)
        assert name in dir(module)
    # a public name that shares a submodule's name would turn into the module once that is imported
    submodules = {p.stem for p in SOURCE[package].parent.glob("*.py")} | {
        p.parent.name for p in SOURCE[package].parent.glob("*/__init__.py")
    }
    assert not set(listed) & submodules, f"{package}: public names that are also submodules"


def test_an_unknown_name_is_an_import_error_naming_the_package() -> None:
    with pytest.raises(ImportError, match="cannot import name 'RuleVerfier' from 'darwin.verifiers'"):
        exec("from darwin.verifiers import RuleVerfier", {})


def test_importing_a_package_loads_none_of_its_built_ins() -> None:
    """Lazy: ``import darwin.verifiers.base`` runs ``darwin.verifiers``'s ``__init__`` and must not
    load the learned verifier (torch) or the judge (litellm); ``import darwin`` loads no run."""
    code = (
        "import sys\n"
        "import darwin, darwin.envs, darwin.envs.sim, darwin.workflows, darwin.curricula, darwin.memory\n"
        "import darwin.verifiers.base, darwin.agents, darwin.policies, darwin.algos\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('darwin.run', 'darwin.verifiers.learned',"
        " 'darwin.verifiers.judge', 'darwin.agents.tiny', 'darwin.policies.hf', 'darwin.algos.losses', 'torch',"
        " 'litellm')))\n"
        "assert not loaded, loaded\n"
        "from darwin.verifiers import RuleVerifier\n"
        "assert 'darwin.verifiers.rule' in sys.modules and 'darwin.verifiers.learned.model' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ``` fences (any language) and their bodies; an import in a `code span` outside them
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`((?:from|import)\s[^`]+)`")
IMPORT_START = re.compile(r"(from\s+[\w.]+\s+import\s|import\s+[\w.])")


def shown_imports(text: str) -> list[str]:
    """The import statements of a markdown page: lines of its code blocks (``>>>`` prompts
    dropped, parenthesised continuations joined) and code spans in its prose that parse as one."""
    found: list[str] = []
    for block in FENCE.findall(text):
        lines = [re.sub(r"^(>>>|\.\.\.) ?", "", line.strip()) for line in block.splitlines()]
        i = 0
        while i < len(lines):
            statement = lines[i].split("#")[0].strip()
            if IMPORT_START.match(statement):
                while statement.endswith(("(", ",")) and i + 1 < len(lines):
                    i += 1
                    statement += " " + lines[i].split("#")[0].strip()
                found.append(statement.replace("( ", "("))
            i += 1
    for span in SPAN.findall(FENCE.sub("", text)):
        statement = " ".join(span.split())
        try:
            tree = ast.parse(statement)
        except SyntaxError:
            continue  # prose like `from darwin.sft import ...`
        if all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in tree.body):
            found.append(statement)
    return found


def test_shown_imports_reads_blocks_prompts_continuations_and_spans() -> None:
    page = "See `from a import\nb` and `from x import ...`.\n```python\n>>> import c  # note\nfrom d import (\n    e,\n)\nx = 1\n```\n"
    assert shown_imports(page) == ["import c", "from d import (e, )", "from a import b"]


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHOWN = sorted({(page.relative_to(ROOT).as_posix(), s) for page in PAGES for s in shown_imports(page.read_text())})


def test_the_docs_show_imports() -> None:
    pages = {page for page, _ in SHOWN}
    assert {"README.md", "docs/agents.md", "docs/phones.md", "docs/simphone.md"} <= pages
    assert ("README.md", "from darwin.verifiers import RuleVerifier") in SHOWN


@pytest.mark.parametrize(("page", "statement"), SHOWN, ids=[f"{p}: {s}" for p, s in SHOWN])
def test_every_import_the_docs_show_runs(page: str, statement: str) -> None:
    exec(compile(statement, page, "exec"), {})
