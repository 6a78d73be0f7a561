"""The ``no_process_left_behind`` fixture finds what a test leaves running, orphans included."""

from __future__ import annotations

from pathlib import Path

import pytest

LEAKY = """
import subprocess


def test_leaks_an_orphan(no_process_left_behind):
    # `sh` exits at once; its `sleep` child is orphaned (without the fixture: adopted by init)
    subprocess.run(["sh", "-c", "sleep 300 & echo started"], check=True)


def test_cleans_up(no_process_left_behind):
    process = subprocess.Popen(["sleep", "300"])
    process.terminate()
    process.wait()
"""


def test_an_orphan_that_outlives_its_test_is_named_and_killed(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2, errors=1)  # the fixture's teardown fails the leaky test
    result.stdout.fnmatch_lines(["*processes outlived the test that started them:*", "*sleep 300*"])
