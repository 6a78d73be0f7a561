"""The package's import graph has no circles, and its layers point one way (docs/architecture.md).

The graph is read from the source with ``ast``: every ``import`` and ``from ... import``
statement of every module the project installs (module level, inside functions and under
``if TYPE_CHECKING:`` alike: an import for annotations is still a dependency the type checker
follows), plus the implicit edge from a module to the packages whose ``__init__`` runs when it
is imported. Two plugin registries load their
plugins on first lookup from inside a function (:data:`REGISTRY_LOADS`); those loads are
the one kind of back edge allowed.

Public names (issue 74): a package ``__init__`` may export its base class and built-ins lazily
(:mod:`darwin.lazy_exports`: a module ``__getattr__``, with the same names imported under
``if TYPE_CHECKING:`` for type checkers). Those ``TYPE_CHECKING`` imports of a package are not
edges of the package: nothing of them runs when the package is imported, and counting them would
make every module of a package depend on all its built-ins (``darwin.verifiers.base`` on the
learned verifier's torch model), circles that do not exist. Instead a module that imports a
public name (``from darwin.verifiers import RuleVerifier``) gets an edge to the module that holds
it (:func:`public_names`), so the graph still has every dependency, through whichever path.
Inside the library every name is still imported from the module that holds it
(:func:`test_the_library_imports_names_from_their_modules`): the public names are for users.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
SETUP = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]

REGISTRY_LOADS = {
    "darwin.envs.sim.apps": "the apps register their predicates and setup steps; darwin.predicates and "
    "darwin.envs.sim.setups load them on first lookup",
    "darwin.envs.sim.templates": "the templates live next to the apps; darwin.templates loads them on first lookup",
}

# layer -> layers it must not import (darwin.<layer> and everything below it).
LAYERS: dict[str, set[str]] = {
    "envs": {
        "agents",
        "learner",
        "workflows",
        "policies",
        "sft",
        "curricula",
        "memory",
        "verifiers",
        "run",
        "evaluate",
        "bench",
        "rollout",
    },
    "algos": {"learner", "envs", "policies", "agents", "workflows", "models", "sft", "verifiers", "rollout"},
    "models": {"learner", "policies", "agents", "envs", "sft", "workflows", "verifiers", "rollout"},
    "learner": {
        "envs",
        "workflows",
        "agents",
        "curricula",
        "memory",
        "run",
        "evaluate",
        "sft",
        "policies.hf",
        "rollout",
        "verifiers",
    },
    "policies": {"agents", "sft", "learner", "envs", "workflows", "run", "rollout", "verifiers"},
    "verifiers": {"learner", "run", "rollout", "curricula"},
    "evaluate": {"run"},
    "rollout": {"learner", "run", "sft"},
    "sft": {"run"},
    # the config is a schema: darwin.run.build makes the components from it
    "run.config": {"run.build", "run.recipe", "run.load"},
}

# A reader turns a screen into marks: it knows phones (their elements), never who acts on them.
LAYERS["readers"] = LAYERS["envs"] | {"models"}

# Everything a run is made of lives below darwin.run; only darwin.run and the command line import it.
RUN_IMPORTERS = ("darwin.run", "darwin.cli")


def _package_dir(package: str) -> Path:
    mapped = [k for k in SETUP["package-dir"] if package == k or package.startswith(k + ".")]
    if not mapped:
        return ROOT.joinpath(*package.split("."))
    base = max(mapped, key=len)
    return (
        ROOT / SETUP["package-dir"][base] / Path(*package[len(base) + 1 :].split("."))
        if package != base
        else ROOT / SETUP["package-dir"][base]
    )


@functools.cache
def modules() -> dict[str, Path]:
    """Every installed module: dotted name -> source file."""
    found = {}
    for package in SETUP["packages"]:
        for path in _package_dir(package).glob("*.py"):
            found[package if path.name == "__init__.py" else f"{package}.{path.stem}"] = path
    return found


def _type_checking_blocks(tree: ast.Module) -> list[ast.If]:
    """The module-level ``if TYPE_CHECKING:`` blocks of ``tree``."""
    return [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        )
    ]


def public_names_in(source: str) -> dict[str, str]:
    """A package ``__init__``'s lazy public names (name -> the module that holds it): what it
    imports under ``if TYPE_CHECKING:`` (:mod:`darwin.lazy_exports`)."""
    return {
        alias.asname or alias.name: node.module or ""
        for block in _type_checking_blocks(ast.parse(source))
        for statement in block.body
        for node in ast.walk(statement)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


@functools.cache
def public_names() -> dict[str, dict[str, str]]:
    """Package -> its lazy public names (name -> module); packages without any left out."""
    return {
        name: names
        for name, path in modules().items()
        if path.name == "__init__.py" and (names := public_names_in(path.read_text(encoding="utf-8")))
    }


def imported(source: str, name: str, is_package: bool) -> set[str]:
    """Dotted names that the import statements of ``source`` (module ``name``) bind, wherever
    they are; function-level loads of :data:`REGISTRY_LOADS` and a package's lazy public names
    (its ``TYPE_CHECKING`` imports, see the module docstring) left out."""
    tree = ast.parse(source)
    registry = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(node)
        if isinstance(n, ast.Import) and all(a.name in REGISTRY_LOADS for a in n.names)
    }
    if is_package:
        registry |= {id(n) for block in _type_checking_blocks(tree) for s in block.body for n in ast.walk(s)}
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in registry:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out |= {base, *(f"{base}.{a.name}" for a in node.names)}
    return out


def graph(extra: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the project's modules it imports; ``extra`` appends source to modules (the tests' probes)."""
    files = modules()
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        if extra and name in extra:
            source = path.read_text(encoding="utf-8") + "\n" + extra[name]
            found = imported(source, name, path.name == "__init__.py")
        else:
            found = _imports_of(name)
        # a public name resolves to the module that holds it (darwin.verifiers.RuleVerifier -> darwin.verifiers.rule)
        lazy = public_names()
        found = found | {
            lazy[package][attr]
            for t in found
            if (package := t.rpartition(".")[0]) in lazy and (attr := t.rpartition(".")[2]) in lazy[package]
        }
        targets = {t for t in found if t in files and t != name}
        for target in list(targets):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            parts = target.split(".")
            targets |= {
                p
                for i in range(2, len(parts))
                if (p := ".".join(parts[:i])) in files and not name.startswith(p + ".") and p != name
            }
        edges[name] = targets
    return edges


@functools.cache
def _imports_of(name: str) -> frozenset[str]:
    """:func:`imported` of module ``name``'s source as it is on disk (parsed once per test process)."""
    path = modules()[name]
    return frozenset(imported(path.read_text(encoding="utf-8"), name, path.name == "__init__.py"))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _forbidden(module: str) -> set[str]:
    """What ``module`` must not import: the rules of every layer it sits in (``run`` and ``run.config``)."""
    rest = module.split(".", 1)[1] if "." in module else module
    rules = [f for layer, fs in LAYERS.items() if rest == layer or rest.startswith(layer + ".") for f in fs]
    if not module.startswith(RUN_IMPORTERS):
        rules.append("run")
    return set(rules)


def violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        forbidden = _forbidden(module)
        for target in sorted(targets):
            rest = target.split(".", 1)[1] if "." in target else target
            if any(rest == f or rest.startswith(f + ".") for f in forbidden):
                bad.append(f"{module} imports {target}")
    return bad


def test_the_walk_finds_every_folder() -> None:
    names = set(modules())
    for name in (
        "darwin.envs.fleet",
        "darwin.verifiers.judge.calibration",
        "darwin.learner.local",
        "darwin.agents.pool",
        "darwin.algos.gigpo",
        "darwin.memory.base",
        "darwin.curricula.learnability",
        "darwin.envs.sim.apps.clock",
    ):
        assert name in names


def test_no_import_circles() -> None:
    found = cycles(graph())
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_layers_point_one_way() -> None:
    bad = violations(graph())
    assert not bad, "layering (docs/architecture.md): " + "; ".join(bad)


@pytest.mark.parametrize(
    "probe",
    [
        "from darwin.learner.local import LocalLearner",
        "def f():\n    import darwin.learner.step_rows",
        "from darwin.learner import local",
    ],
)
def test_a_learner_import_added_to_envs_fails(probe: str) -> None:
    bad = violations(graph({"darwin.envs.base": probe}))
    assert any(b.startswith("darwin.envs.base imports darwin.learner") for b in bad), bad


def test_a_circle_added_by_hand_is_found() -> None:
    found = cycles(graph({"darwin.actions": "def f():\n    import darwin.rollout"}))
    assert any("darwin.actions" in c and "darwin.rollout" in c for c in found), found


def test_type_checking_imports_count_and_registry_loads_do_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from darwin.learner.local import LocalLearner\n"
        "def load():\n    import darwin.envs.sim.apps  # noqa: F401\n"
    )
    assert imported(source, "darwin.predicates", False) == {
        "typing",
        "typing.TYPE_CHECKING",
        "darwin.learner.local",
        "darwin.learner.local.LocalLearner",
    }


def test_a_circle_through_an_annotation_import_is_found() -> None:
    probe = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from darwin.envs.sim.phone import SimPhone\n"
    found = cycles(graph({"darwin.envs.sim.render": probe}))
    assert any("darwin.envs.sim.render" in c and "darwin.envs.sim.phone" in c for c in found), found


# Package __init__ files that run code: the SimPhone app and template registries.
REGISTRY_PACKAGES = set(REGISTRY_LOADS)


# What a package __init__ imports to serve its public names lazily (issue 74).
LAZY_EXPORTS = "darwin.lazy_exports"


def re_exports(source: str, is_package: bool, name: str) -> list[str]:
    """Names a module hands on from another darwin module: a package ``__init__``'s darwin
    imports that run when it is imported (registries and :data:`LAZY_EXPORTS` excepted; its lazy
    public names are under ``if TYPE_CHECKING:``, not here), or a module's ``__all__`` entries
    and ``import x as x`` that it imported rather than defined."""
    tree = ast.parse(source)
    imported = {
        a.asname or a.name: a
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("darwin")
        and not (is_package and node.module == LAZY_EXPORTS)
        for a in node.names
    }
    if is_package:
        return [] if name in REGISTRY_PACKAGES else sorted(imported)
    listed = [
        e.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
        for e in getattr(node.value, "elts", [])
        if isinstance(e, ast.Constant)
    ]
    return sorted({n for n in listed if n in imported} | {n for n, a in imported.items() if a.asname == a.name})


def test_no_module_re_exports_a_name() -> None:
    """No module hands on another's names when it is imported (issue 42: no second name kept for
    compatibility with an old path, no package ``__init__`` that loads its whole package).

    A package's public surface is the one exception (issue 74): its base class and built-ins,
    served lazily by :mod:`darwin.lazy_exports` and listed under ``if TYPE_CHECKING:``, which this
    check does not read; ``tests/test_public_api.py`` checks that surface, and
    :func:`test_the_library_imports_names_from_their_modules` keeps it out of the library."""
    found = {
        name: names
        for name, path in modules().items()
        if (names := re_exports(path.read_text(encoding="utf-8"), path.name == "__init__.py", name))
    }
    assert not found, f"re-exported names (import them from where they live): {found}"


def library_imports_of_public_names(source: str) -> list[str]:
    """``from <package> import <public name>`` statements of ``source``, anywhere in it."""
    lazy = public_names()
    return sorted(
        f"from {node.module} import {alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module in lazy
        for alias in node.names
        if alias.name in lazy[node.module]
    )


def test_the_library_imports_names_from_their_modules() -> None:
    """Inside darwin every name comes from the module that holds it, not from a package's
    public surface: the graph stays readable module by module, and a module never loads
    another through a lazy name by accident."""
    found = {
        name: bad
        for name, path in modules().items()
        if (bad := library_imports_of_public_names(path.read_text(encoding="utf-8")))
    }
    assert not found, f"import these from the module that holds them: {found}"


def test_public_names_are_edges_of_their_importers_not_of_the_package() -> None:
    lazy = public_names()
    assert lazy["darwin.verifiers"]["RuleVerifier"] == "darwin.verifiers.rule"
    assert lazy["darwin"]["ExperimentConfig"] == "darwin.run.config"
    edges = graph({"darwin.envs.base": "from darwin.verifiers import RuleVerifier"})
    assert "darwin.verifiers.rule" in edges["darwin.envs.base"]
    assert any(b == "darwin.envs.base imports darwin.verifiers.rule" for b in violations(edges))
    # the package itself runs none of them: darwin.verifiers.base does not depend on the learned verifier
    assert not edges["darwin.verifiers"] & set(lazy["darwin.verifiers"].values())
    assert library_imports_of_public_names("def f():\n    from darwin.agents import TinyAgent\n") == [
        "from darwin.agents import TinyAgent"
    ]


@pytest.mark.parametrize(
    ("source", "is_package"),
    [
        ("from darwin.types import Task\n__all__ = ['Task']\n", False),
        ("from darwin.types import Task as Task\n", False),
        ("from darwin.types import Task\n", True),
    ],
)
def test_a_re_export_is_found(source: str, is_package: bool) -> None:
    assert re_exports(source, is_package, "darwin.probe") == ["Task"]
