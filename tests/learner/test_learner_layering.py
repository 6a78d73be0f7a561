"""The learner does not depend on the sampler: no module under ``darwin/learner`` imports
``darwin.policies.hf`` (log-prob, masking and rope maths live in ``darwin.models.scoring``).

The check parses each module's source with ``ast`` and looks at its import statements
only (module level, in functions, under ``TYPE_CHECKING``), so a docstring or comment that
names the sampler does not count, and an import written in any form does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import darwin.learner

LEARNER_DIR = Path(darwin.learner.__file__).resolve().parent
FORBIDDEN = "darwin.policies.hf"


def _imported_modules(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every module or name an import statement in ``tree`` binds:
    ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a
    submodule); relative imports are resolved against ``package``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _is_forbidden(name: str) -> bool:
    return name == FORBIDDEN or name.startswith(FORBIDDEN + ".")


def _learner_modules() -> list[Path]:
    return sorted(LEARNER_DIR.rglob("*.py"))


def test_the_walk_finds_the_learner_modules():
    names = {p.name for p in _learner_modules()}
    assert {"__init__.py", "local.py", "checkpoint.py", "metrics.py", "networks.py"} <= names


@pytest.mark.parametrize("path", _learner_modules(), ids=lambda p: str(p.relative_to(LEARNER_DIR)))
def test_no_learner_module_imports_the_sampler(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = "darwin.learner" + "".join(f".{part}" for part in path.relative_to(LEARNER_DIR).parent.parts)
    offending = [f"line {line}: {name}" for line, name in _imported_modules(tree, package) if _is_forbidden(name)]
    assert not offending, f"{path} imports the sampler ({', '.join(offending)}); use darwin.models.scoring"


@pytest.mark.parametrize(
    "source",
    [
        "import darwin.policies.hf",
        "from darwin.policies.hf import HFPolicy",
        "from darwin.policies import hf",
        "def f():\n    from darwin.policies.hf import compute_response_logprobs",
        "from ..policies.hf import HFPolicy",
        "from ..policies import hf",
    ],
)
def test_the_check_catches_every_import_form(source: str):
    names = [name for _, name in _imported_modules(ast.parse(source), "darwin.learner")]
    assert any(_is_forbidden(n) for n in names), names


def test_the_check_ignores_docstrings_and_other_modules():
    source = '"""Works with :class:`darwin.policies.hf.HFPolicy`."""\nfrom darwin.policies.base import Policy\n'
    names = [name for _, name in _imported_modules(ast.parse(source), "darwin.learner")]
    assert not any(_is_forbidden(n) for n in names), names
