"""The package type-checks: mypy (with pydantic's plugin) over every module darwin installs,
at the level set in ``[tool.mypy]`` of pyproject.toml.

darwin's packages live in several top-level folders (``envs/`` is ``darwin.envs``, ...:
``[tool.setuptools] package-dir``), which mypy cannot map from an editable install; the test
lays the package out as it is installed, in a folder of symbolic links, and checks that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def installed_layout(into: Path) -> Path:
    """``into/darwin``: the package as installed, each entry a link to its source folder or file."""
    package_dir = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    top = into / "darwin"
    top.mkdir(parents=True)
    for entry in (ROOT / "darwin").iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in package_dir.items():
        parts = package.split(".")
        if len(parts) == 2:  # darwin.envs -> envs/ (deeper ones are inside it)
            (top / parts[1]).symlink_to(ROOT / folder)
    return top


def test_the_package_type_checks() -> None:
    pytest.importorskip("mypy")
    tree = ROOT / ".mypy_tree"  # one fixed place, so mypy's cache (.mypy_cache) serves the next run
    shutil.rmtree(tree, ignore_errors=True)
    installed_layout(tree)
    cache = ROOT / ".mypy_cache"
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PYPROJECT), "--cache-dir", str(cache), "-p", "darwin"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": ""},
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
