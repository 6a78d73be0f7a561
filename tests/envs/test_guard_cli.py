"""``darwin eval --guard`` takes a rules file (``my.yaml``) or a guard spec as JSON, and says
what is wrong with one it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.cli.eval_setup import guard_spec
from darwin.cli.main import main
from darwin.components import ComponentError, ComponentSpec
from darwin.store import RunStore
from darwin.types import TerminationReason

pytestmark = pytest.mark.timeout(300)

RULES = "rules:\n  - name: no_clock_changes\n    why: keeps the alarms\n    changes: ['apps.clock.data']\n"


def _eval(tmp_path: Path, guard: str) -> tuple[int, str]:
    args = ["eval", "--agent", "oracle", "--tasks", "clock_1", "--phones", "1", "--samples", "0", "--no-perturb"]
    result = CliRunner().invoke(main, [*args, "--guard", guard, "--run-dir", str(tmp_path / "run")])
    return result.exit_code, result.output


def test_darwin_eval_guard_takes_a_rules_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("my.yaml").write_text(RULES)
    code, output = _eval(tmp_path, "my.yaml")  # a relative path, as a user types it
    assert code == 0, output
    assert "action guard: rules from my.yaml" in output and "no_clock_changes (keeps the alarms)" in output
    assert "blocked by the action guard (counted as failures): 1 episode(s): clock_1 1" in output
    (run,) = RunStore.for_run_dir(tmp_path / "run").runs()
    (episode,) = RunStore.for_run_dir(tmp_path / "run").episodes(run.run_id)
    assert episode.termination_reason == TerminationReason.BLOCKED
    assert (episode.termination_cause or "").startswith("no_clock_changes: ")


def test_darwin_eval_guard_takes_a_json_spec(tmp_path: Path) -> None:
    rules = tmp_path / "my.yaml"
    rules.write_text(RULES)
    spec = json.dumps({"name": "rules", "kwargs": {"rules": str(rules), "penalty": 0.5}})
    code, output = _eval(tmp_path, spec)
    assert code == 0, output
    assert f"action guard: rules from {rules} (a blocked step's reward is -0.5)" in output
    assert "blocked by the action guard (counted as failures): 1 episode(s): clock_1 1" in output


@pytest.mark.parametrize(
    ("guard", "message"),
    [
        ("missing.yaml", "guard rules file missing.yaml: cannot read it"),
        ('{"name": "rules", "kwargs": {"penalty": -1}}', "guard penalty must be >= 0"),
        ('{"name": "rules", "colour": 1}', "is not a guard spec (colour: "),
        ('{"name": "rules"', "is not a guard spec"),
    ],
)
def test_darwin_eval_guard_says_what_is_wrong(guard: str, message: str, tmp_path: Path) -> None:
    code, output = _eval(tmp_path, guard)
    assert code == 2 and "--guard" in output and message in " ".join(output.split()), output
    assert "cannot import module" not in output


def test_guard_spec_reads_each_form() -> None:
    assert guard_spec("rules") == ComponentSpec(name="rules")
    assert guard_spec("vendor/rules.YML") == ComponentSpec(name="rules", kwargs={"rules": "vendor/rules.YML"})
    assert guard_spec("my_pkg.guards:NoBanking") == ComponentSpec(name="my_pkg.guards:NoBanking")
    assert guard_spec(' {"name": "rules", "kwargs": {"penalty": 2}}') == ComponentSpec(
        name="rules", kwargs={"penalty": 2}
    )
    with pytest.raises(ComponentError, match=r"not a guard spec \(name: Field required\); write"):
        guard_spec('{"kwargs": {}}')
