"""The paper's path in miniature (``darwin paper-path``): the paper preset's real parts on this
machine, stand-ins only for what cannot exist here (docs/scale.md).

One run of ``darwin run examples/spa_bench.py --preset paper-miniature`` against the
stand-ins: UI-TARS-1.5-format checkpoint, ``darwin serve-policy`` (vLLM's protocol, weight sync
from disk), SimPhones over the adbd protocol through a real adb server, the LLM judge through
LiteLLM, verl's actor and critic on 2 Ray CPU workers. The run is killed with SIGKILL during
its first actor update and resumed; the test then reads what reached the learner, the server
and the run database.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from darwin.miniature import PaperPathStandIns

pytestmark = [
    pytest.mark.paper_path,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("adb") is None, reason="the `adb` binary is not installed (apt-get install adb)"),
]

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "examples" / "spa_bench.py"


def _run(run_dir: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "darwin.cli",
        "run",
        str(EXPERIMENT),
        "--preset",
        "paper-miniature",
        "--run-dir",
        str(run_dir),
        *extra,
    ]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=ROOT
    )


def _checkpoint_updates(run_dir: Path) -> int:
    manifest = run_dir / "checkpoint" / "learner.json"
    return int(json.loads(manifest.read_text())["updates"]) if manifest.exists() else 0


def _updates(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("group") == "update"]


def test_paper_preset_in_miniature_trains_through_every_real_part_and_survives_kill_9(
    tmp_path: Path, no_process_left_behind: None
) -> None:
    with PaperPathStandIns(tmp_path / "stand-ins", phones=2, judge_success_rate=0.3) as stand_ins:
        env = {**os.environ, **stand_ins.env(), "PYTHONUNBUFFERED": "1"}
        run_dir = tmp_path / "run"

        # 1. Train until the first actor update starts (the warm-up's checkpoint is on disk), then kill -9.
        first = _run(run_dir, env)
        output: list[str] = []
        assert first.stdout is not None
        deadline = time.monotonic() + 420
        for line in first.stdout:
            output.append(line)
            if line.split("] ", 1)[-1].startswith("update: update 1/3"):  # the first actor update has begun
                break
            assert time.monotonic() < deadline, "no actor update within 420 s:\n" + "".join(output[-40:])
        else:
            pytest.fail(f"the run ended before its first actor update (exit {first.wait()}):\n" + "".join(output[-60:]))
        time.sleep(2.0)  # inside the update: scoring and training take longer than this on any machine
        served_at_kill = stand_ins.served_weight_version()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
        assert first.returncode == -signal.SIGKILL
        assert _checkpoint_updates(run_dir) == 1, "the kill came after the actor update was saved"
        assert served_at_kill == "0", "the kill came after the actor update reached the server"

        # 2. Resume: the warm-up is not repeated; the actor updates run to the end.
        resumed = _run(run_dir, env, "--resume")
        out, _ = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, out[-4000:]
        served = stand_ins.served_weight_version()
        judge_requests = stand_ins.judge.requests

    updates = _updates(run_dir)
    assert [u["update"] for u in updates] == [1, 2, 3], "an update was lost or repeated across the kill"
    warmup, *actor = updates
    # critic-only updates, then actor updates (which train the critic too)
    assert warmup["actor_updated"] == 0 and warmup["value_loss"] is not None and "policy_loss" not in warmup
    assert all(u["actor_updated"] == 1 and "policy_loss" in u and "value_loss" in u for u in actor)
    assert [u["policy_version"] for u in updates] == [0, 1, 2]
    # every step's screenshot reached verl's workers as pixels
    assert all(u["screenshots"] == u["steps"] > 0 for u in updates)
    assert abs(warmup["value_mean"] - 0.1) < 1e-5, "the critic did not start from the calibrated head"
    # the server serves the last actor update's weights
    assert served == "2"
    manifest = json.loads((run_dir / "checkpoint" / "learner.json").read_text())
    assert (manifest["backend"], manifest["updates"], manifest["policy_version"]) == ("verl", 3, 2)

    # a judge verdict for every episode that ended on its own (through LiteLLM; retries and repeats are cached)
    with sqlite3.connect(run_dir / "run.db") as db:
        ended = {
            row[0]
            for row in db.execute(
                "select id from episodes where termination_reason in ('success', 'agent_finished', 'step_budget')"
            )
        }
        judged = {row[0] for row in db.execute("select episode_id from verdicts where verifier_kind = 'llm_judge'")}
        phones = {row[0] for row in db.execute("select distinct phone from episodes")}
    assert ended and ended <= judged
    assert judge_requests > 0
    assert phones == set(stand_ins.devices), "the episodes did not run on the adb phones"
