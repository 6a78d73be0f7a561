"""Every `>>>` example in the package runs: one test per module, found by walking `darwin`
(no hand-kept list), so an example that rots fails here."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest
import tomllib

# Every package the project installs (the plugin folders map onto darwin.* subpackages).
PACKAGES = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"][
    "packages"
]


def _modules() -> list[str]:
    names = set(PACKAGES)
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        names |= {f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if not m.ispkg and m.name != "__main__"}
    return sorted(names)


MODULES = _modules()


def test_the_walk_finds_the_plugin_folders():
    for name in ("darwin.curricula.learnability", "darwin.envs.sim.phone", "darwin.algos.gigpo", "darwin.memory.base"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed (run python -m doctest -v on it)"
    )
