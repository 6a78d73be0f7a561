"""Every `>>>` example in the package runs: one test per module, found by walking `darwin`
(no hand-kept list), so an example that rots fails here. So does every `>>>` example in a code
block of the README and docs/*.md (one test per page; the blocks of a page share their names, as
a reader going down the page would)."""

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest
import tomllib

# Every package the project installs (the plugin folders map onto darwin.* subpackages).
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


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


# a ``` code block of a markdown page: where its body starts, and the body
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
PAGES = [p for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))) if ">>>" in p.read_text()]


def test_the_docs_have_examples() -> None:
    assert ROOT / "docs/phones.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_examples(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    names: dict[str, object] = {}
    for block in FENCE.finditer(text):
        line = text.count("\n", 0, block.start(1))
        test = parser.get_doctest(block.group(1), names, page.name, str(page), line)
        runner.run(test, clear_globs=False)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {page.name} failed (output above)"
