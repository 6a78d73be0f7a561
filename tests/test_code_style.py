"""The code style the project keeps on the whole tree: ``ruff check`` (the rules in
pyproject.toml) and ``ruff format`` (line length 120). A failure names the command that fixes it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check_passes() -> None:
    result = _ruff("check", ".")
    assert result.returncode == 0, "fix with `ruff check --fix .`:\n" + result.stdout[-3000:]


def test_the_tree_is_ruff_formatted() -> None:
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, "run `ruff format .`; files it would change:\n" + result.stdout[-3000:]
