"""SPA-Bench's rows on SimPhone (envs/sim/spa.py): every row is mapped or has a reason, every
mapped row resolves to a valid task the oracle solves, and the named sets run in `darwin eval`."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from click.testing import CliRunner

from darwin.agents.scripted import OracleActor
from darwin.cli.main import main
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.spa import (
    FEATURE_GAPS,
    MAPPING,
    SPA_FILES,
    SPA_SETS,
    coverage,
    mapping_key,
    rows,
    spa_tasks,
    unmapped,
)
from darwin.task_registry import get_task, registry, resolve_tasks, task_set, task_set_names
from darwin.templates import task_apps
from darwin.workflows.step import LifecycleWorkflow

ALL = [t for name in SPA_SETS for t in spa_tasks(name)]


def test_every_row_is_mapped_or_has_a_reason() -> None:
    assert sum(len(rows(f)) for f in SPA_FILES) == 340
    keys = {f"{f}/{r}" for f in SPA_FILES for r in rows(f)}
    assert set(MAPPING) <= keys and set(FEATURE_GAPS) <= keys and not set(MAPPING) & set(FEATURE_GAPS)
    gaps = unmapped()
    assert set(gaps) | set(MAPPING) == keys and not set(gaps) & set(MAPPING)
    assert {reason for reason, _ in gaps.values()} == {"app not modelled", "feature not modelled"}
    assert all(detail and "not yet" not in detail for _, detail in gaps.values())
    by_file = {c.file: c for c in coverage()}
    for c in by_file.values():
        assert c.rows == c.mapped + c.app_not_modelled + c.feature_not_modelled and c.adapted <= c.mapped
    assert by_file["single-app-ENG"].mapped >= 20 and all(c.mapped >= 1 for c in by_file.values())
    # An adapted row says how; one naming another app gets an instruction that names SimPhone's.
    for key, entry in MAPPING.items():
        assert not entry.adapted or len(entry.adapted) > 10, key


def test_every_mapped_row_resolves_to_a_valid_task() -> None:
    assert len(ALL) == len(MAPPING) and len({t.id for t in ALL}) == len(ALL)
    for task in ALL:
        key = mapping_key(task)
        assert key is not None and task.id.startswith("spa.") and get_task(task.id) == task
        file, row_id = key.split("/", 1)
        row = rows(file)[row_id]
        assert task.language == row["task_language"] and task.golden_steps == int(row["golden_steps"])
        assert task.instruction == (MAPPING[key].instruction or row["task_description"]).strip()
        assert task.source == "spa-bench-sim"
    assert [t.language for t in task_set("spa.zh")] == ["CHN"] * len(task_set("spa.zh"))
    assert {"spa.en", "spa.zh", "spa.cross"} <= set(task_set_names())
    assert [t.id for t in resolve_tasks(["spa.cross", "spa.zh"])] == [
        t.id for t in spa_tasks("spa.cross") + spa_tasks("spa.zh")
    ]
    assert all(len(task_apps(t)) >= 2 for t in spa_tasks("spa.cross"))
    # The rows behind the paper's tasks (darwin.task_registry) keep those tasks' checks.
    builtin = registry()
    same = [t for t in spa_tasks("spa.en") if t.id.removeprefix("spa.en.") in builtin]
    assert len(same) == 13
    for task in same:
        assert task.verifier == builtin[task.id.removeprefix("spa.en.")].verifier, task.id


@pytest.mark.parametrize("task_id", [t.id for t in ALL])
def test_the_oracle_solves_every_mapped_row(task_id: str) -> None:
    task = get_task(task_id)
    for i, perturbation in enumerate((PerturbationConfig(enabled=False), PerturbationConfig(popup_rate=1.0))):
        env = SimPhoneEnv(seed=20 + i, perturbation=perturbation, reset_between_episodes=True)
        assert asyncio.run(LifecycleWorkflow().run(env, task, OracleActor())).success is True, (task_id, perturbation)


def test_darwin_eval_runs_the_chinese_and_cross_app_sets(tmp_path) -> None:
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            "oracle",
            "--phones",
            "2",
            "--samples",
            "1",
            "--tasks",
            "spa.zh,spa.cross",
            "--run-dir",
            str(run_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "100%" in result.output
    n = len(spa_tasks("spa.zh")) + len(spa_tasks("spa.cross"))
    assert (
        sqlite3.connect(run_dir / "run.db").execute("select count(*) from episodes where success = 1").fetchone()[0]
        == n * 2 * 2  # 2 phones, each a greedy and a sampled episode of every task
    )


def test_darwin_tasks_spa_prints_the_coverage() -> None:
    result = CliRunner().invoke(main, ["tasks", "spa", "--unmapped"])
    assert result.exit_code == 0, result.output
    assert "single-app-ENG" in result.output and "340" in result.output
    assert "feature not modelled: flights" in result.output
