"""The code style the project keeps on the whole tree: ``ruff check`` (the rules in
pyproject.toml) and ``ruff format`` (line length 120). A failure names the command that fixes it."""

import re
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


PACKAGE_FOLDERS = ("darwin", "envs", "workflows", "curricula", "verifiers", "memory")
REASONED_IGNORE = re.compile(r"# type: ignore\[[a-z, -]+\]  # \S")


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    """``# type: ignore[code]  # why`` (mypy's ``warn_unused_ignores`` drops the ones no longer needed)."""
    bare = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in PACKAGE_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "# type: ignore" in line and not REASONED_IGNORE.search(line)
    ]
    assert not bare, "type: ignore without an error code and a reason: " + ", ".join(bare)
