"""Tests for darwin.store: round trip, content-addressed screenshots, counts, secrets, threads."""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from darwin.actions import Click, Finished, Type
from darwin.database import StoreError, StoreOpenError
from darwin.store import RunStore
from darwin.store_rows import SuccessStats
from darwin.store_secrets import is_secret_name, redact_secrets
from darwin.types import (
    Decision,
    Generation,
    Observation,
    ParseError,
    Phase,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    Verdict,
    VerifierSpec,
)


def _task(task_id: str = "settings_dark") -> Task:
    return Task(
        id=task_id,
        instruction="Turn on dark theme.",
        app="Settings",
        verifier=VerifierSpec(predicate="settings.dark_theme", params={"enabled": True}),
    )


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(8, 6, 3), dtype=np.uint8)


def _transition(episode_id: str, task: Task, step: int, decision: Decision, **kw: object) -> Transition:
    obs = Observation(
        screenshot=_image(step),
        goal=task.instruction,
        device_size=(1080, 2400),
        task_id=task.id,
        step=step,
    )
    return Transition(
        episode_id=episode_id,
        task_id=task.id,
        step=step,
        phase=Phase.EXECUTION,
        observation=obs,
        decision=decision,
        **kw,
    )  # type: ignore[arg-type]


def _trajectory(episode_id: str, task: Task) -> Trajectory:
    gen = Generation(
        text="click(540, 1200)",
        prompt_ids=(1, 2, 3),
        response_ids=(4, 5),
        response_logprobs=(-0.1, -0.2),
        policy_version=3,
    )
    t0 = _transition(episode_id, task, 0, Decision(action=Click(x=540, y=1200), generation=gen))
    t1 = _transition(
        episode_id,
        task,
        1,
        Decision(
            action=None,
            parse_error=ParseError(reason="no action", text="??"),
            generation=Generation(text="??", policy_version=3),
        ),
        reward=-0.1,
    )
    t2 = _transition(
        episode_id,
        task,
        2,
        Decision(action=Finished(content="done")),
        reward=1.0,
        done=True,
        termination=Termination(TerminationReason.AGENT_FINISHED),
    )
    return Trajectory(
        episode_id=episode_id,
        task=task,
        transitions=[t0, t1, t2],
        termination=Termination(TerminationReason.AGENT_FINISHED),
        verdicts={Phase.EXECUTION: Verdict(True)},
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    s = RunStore.for_run_dir(tmp_path / "run")
    yield s
    s.close()


def test_round_trip(store: RunStore) -> None:
    task = _task()
    run_id = store.start_run("round-trip", config=None)
    store.start_episode(run_id, "ep1", task, phone="emulator-5554", seed=7)
    traj = _trajectory("ep1", task)
    for t in traj.transitions:
        store.record_step(t, t.observation.screenshot)
    store.record_verdict("ep1", Phase.EXECUTION, "rule", True, 1.0, "dark theme on")
    store.finish_episode(traj)

    (ep,) = store.episodes(run_id)
    assert (ep.episode_id, ep.task_id, ep.phone, ep.seed) == ("ep1", task.id, "emulator-5554", 7)
    assert ep.success is True and ep.num_steps == 3 and ep.finished
    assert ep.termination_reason is TerminationReason.AGENT_FINISHED
    assert ep.phase_success == {Phase.EXECUTION: True}
    assert ep.started_at.tzinfo is not None and ep.ended_at is not None and ep.ended_at >= ep.started_at
    assert store.task(task.id) == task

    steps = store.steps("ep1")
    assert [s.step for s in steps] == [0, 1, 2]
    assert steps[0].action == Click(x=540, y=1200)
    assert (steps[0].prompt_tokens, steps[0].response_tokens, steps[0].policy_version) == (3, 2, 3)
    assert steps[0].response_text == "click(540, 1200)"
    assert steps[1].action is None and steps[1].parse_error == ParseError(reason="no action", text="??")
    assert steps[1].reward == pytest.approx(-0.1)
    assert steps[2].done and steps[2].termination_reason is TerminationReason.AGENT_FINISHED
    assert steps[2].prompt_tokens is None  # no generation behind this step
    for s, t in zip(steps, traj.transitions, strict=True):
        assert s.screenshot_path is not None
        np.testing.assert_array_equal(store.load_screenshot(s.screenshot_path), t.observation.screenshot)

    (v,) = store.verdicts("ep1")
    assert (v.phase, v.verifier_kind, v.success, v.reward, v.reason) == (
        Phase.EXECUTION,
        "rule",
        True,
        1.0,
        "dark theme on",
    )


def test_finish_episode_records_missing_steps_once(store: RunStore) -> None:
    task = _task()
    run_id = store.start_run("r", config=None)
    store.start_episode(run_id, "ep", task, phone="p0")
    traj = _trajectory("ep", task)
    store.record_step(traj.transitions[0], None)
    store.finish_episode(traj)
    assert [(s.step, s.screenshot_path) for s in store.steps("ep")] == [
        (0, None),
        (1, None),
        (2, None),
    ]
    with pytest.raises(StoreError, match="already recorded"):
        store.record_step(traj.transitions[1])
    assert len(store.steps("ep")) == 3  # the failed write left nothing behind


def test_writes_need_existing_parents(store: RunStore) -> None:
    task = _task()
    with pytest.raises(StoreError, match="start_run"):
        store.start_episode("no-such-run", "ep", task, phone="p")
    run_id = store.start_run("r", config=None)
    with pytest.raises(StoreError, match="start_episode"):
        store.record_step(_trajectory("ghost", task).transitions[0])
    store.start_episode(run_id, "ep", task, phone="p")
    with pytest.raises(StoreError, match="already exists"):
        store.start_episode(run_id, "ep", task, phone="p")


def test_content_addressed_screenshots(tmp_path: Path) -> None:
    img, other = _image(1), _image(2)
    with RunStore.for_run_dir(tmp_path / "a") as a, RunStore.for_run_dir(tmp_path / "b") as b:
        p1 = a.put_screenshot(img)
        f = a.screenshot_file(p1)
        mtime = f.stat().st_mtime_ns
        assert a.put_screenshot(img) == p1
        assert f.stat().st_mtime_ns == mtime  # written once
        assert a.put_screenshot(f.read_bytes()) == p1  # PNG bytes hash to the same address
        assert b.put_screenshot(img) == p1  # stable across runs
        p2 = a.put_screenshot(other)
        assert p2 != p1
        digest = Path(p1).stem
        assert p1 == f"{digest[:2]}/{digest}.png" and f.parent.parent == tmp_path / "a" / "screenshots"
        files = [p for p in (tmp_path / "a" / "screenshots").rglob("*") if p.is_file()]
        assert sorted(files) == sorted([a.screenshot_file(p1), a.screenshot_file(p2)])  # no temp files
        np.testing.assert_array_equal(a.load_screenshot(p1), img)
        np.testing.assert_array_equal(a.load_screenshot(p2), other)
        with pytest.raises(ValueError, match="PNG"):
            a.put_screenshot(b"not a png")
        with pytest.raises(ValueError, match="uint8"):
            a.put_screenshot(np.zeros((4, 4), dtype=np.float32))


def test_success_by_task_counts(store: RunStore) -> None:
    run_id = store.start_run("counts", config=None)
    a, b = _task("task_a"), _task("task_b")
    outcomes = [
        ("a1", a, TerminationReason.AGENT_FINISHED, "", True),
        ("a2", a, TerminationReason.AGENT_FINISHED, "", False),
        ("a3", a, TerminationReason.STEP_BUDGET, "", False),
        ("a4", a, TerminationReason.AGENT_FINISHED, "", None),  # judge unavailable
        ("a5", a, TerminationReason.INFRA_TRUNCATED, "adb disconnected", None),
        ("a6", a, TerminationReason.INFRA_TRUNCATED, "device offline", False),
        ("b1", b, TerminationReason.SUCCESS, "", True),
        ("b2", b, TerminationReason.ERROR, "KeyError in workflow", None),
    ]
    for ep_id, task, reason, cause, success in outcomes:
        store.start_episode(run_id, ep_id, task, phone="p")
        store.finish_episode(
            Trajectory(
                episode_id=ep_id,
                task=task,
                termination=Termination(reason, cause),
                verdicts={Phase.EXECUTION: Verdict(success)},
            )
        )
    store.start_episode(run_id, "b3", b, phone="p")  # still running
    other_run = store.start_run("other", config=None)
    store.start_episode(other_run, "x1", a, phone="p")

    stats = store.success_by_task(run_id)
    assert stats == {
        "task_a": SuccessStats(episodes=6, successes=1, failures=2, unverified=1, infra_truncated=2),
        "task_b": SuccessStats(episodes=3, successes=1, errors=1, unfinished=1),
    }
    assert stats["task_a"].success_rate == pytest.approx(1 / 3)
    assert SuccessStats().success_rate is None
    infra = [e for e in store.episodes(run_id) if e.termination_reason is TerminationReason.INFRA_TRUNCATED]
    assert sorted(e.termination_cause for e in infra) == ["adb disconnected", "device offline"]


class _JudgeConfig(BaseModel):
    model: str = "gemini-2.5-pro"
    api_key: str = "sk-secret"
    max_tokens: int = 512


class _ExperimentConfig(BaseModel):
    name: str = "exp"
    judge: _JudgeConfig = _JudgeConfig()
    headers: dict[str, str] = {"Authorization": "Bearer abcdefghijkl", "X-Trace": "on"}
    endpoints: list[str] = ["http://localhost:8000", "https://sk-xxxxxxxxxxxx.example"]
    key_components: list[str] = ["dark theme"]


def test_config_secrets_never_reach_the_database(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunStore.for_run_dir(run_dir) as s:
        run_id = s.start_run("secret-run", _ExperimentConfig())
        (row,) = s.runs()
        assert row.run_id == run_id
        assert row.config == {
            "name": "exp",
            "judge": {"model": "gemini-2.5-pro", "max_tokens": 512},
            "headers": {"X-Trace": "on"},
            "endpoints": ["http://localhost:8000"],
            "key_components": ["dark theme"],
        }
        db_bytes = b"".join(p.read_bytes() for p in run_dir.glob("run.db*"))  # incl. -wal while open
        assert b"sk-secret" not in db_bytes and b"abcdefghijkl" not in db_bytes
    db_bytes = b"".join(p.read_bytes() for p in run_dir.glob("run.db*"))
    assert b"exp" in db_bytes and b"sk-secret" not in db_bytes


def test_redact_secrets_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "plain-looking-value-123")
    cfg = {
        "hf_token": "x",
        "dbPassword": "x",
        "clientSecret": "x",
        "OPENAI_API_KEY": "x",
        "max_tokens": 5,
        "tokenizer": "qwen",
        "keyboard": "gboard",
        "key_components": ["a"],
        "note": "uses plain-looking-value-123 here",
        "db": "postgresql://u:pw@host/db",
        "nested": [{"apiKey": "y", "ok": 1}, "AIza" + "A" * 30],
    }
    assert redact_secrets(cfg) == {
        "max_tokens": 5,
        "tokenizer": "qwen",
        "keyboard": "gboard",
        "key_components": ["a"],
        "nested": [{"ok": 1}],
    }
    assert is_secret_name("x-api-key") and not is_secret_name("monkey")


@dataclasses.dataclass
class _DataclassConfig:
    lr: float = 1e-6
    token: str = "abc"


def test_dataclass_config_and_resume(store: RunStore) -> None:
    run_id = store.start_run("dc", _DataclassConfig())
    assert store.start_run("dc", _DataclassConfig(), run_id=run_id) == run_id
    (row,) = store.runs()
    assert row.config == {"lr": 1e-6}


def test_concurrent_writes_lose_nothing(store: RunStore) -> None:
    run_id = store.start_run("threads", config=None)
    task = _task()
    n_threads, n_episodes, n_steps = 4, 5, 6
    barrier = threading.Barrier(n_threads)

    def worker(w: int) -> None:
        barrier.wait()
        for e in range(n_episodes):
            ep_id = f"w{w}-e{e}"
            store.record_task(task)
            store.start_episode(run_id, ep_id, task, phone=f"phone-{w}", seed=e)
            transitions = [
                _transition(ep_id, task, i, Decision(action=Type(content=f"{w}-{e}-{i}"))) for i in range(n_steps)
            ]
            for t in transitions:
                store.record_step(t, t.observation.screenshot)
            store.record_verdict(ep_id, Phase.EXECUTION, "rule", e % 2 == 0, float(e % 2 == 0))
            store.finish_episode(
                Trajectory(
                    episode_id=ep_id,
                    task=task,
                    transitions=transitions,
                    termination=Termination(TerminationReason.AGENT_FINISHED),
                    verdicts={Phase.EXECUTION: Verdict(e % 2 == 0)},
                )
            )

    with ThreadPoolExecutor(n_threads) as pool:
        for fut in [pool.submit(worker, w) for w in range(n_threads)]:
            fut.result(timeout=60)  # re-raises any worker's error
    episodes = store.episodes(run_id)
    assert len(episodes) == n_threads * n_episodes
    for ep in episodes:
        steps = store.steps(ep.episode_id)
        assert [s.step for s in steps] == list(range(n_steps))
        assert [s.action.content for s in steps] == [
            f"{ep.episode_id[1:].replace('-e', '-')}-{i}" for i in range(n_steps)
        ]
        assert len(store.verdicts(ep.episode_id)) == 1
    stats = store.success_by_task(run_id)[task.id]
    assert (stats.episodes, stats.successes, stats.failures) == (20, 12, 8)
    assert len({p for p in (store.screenshot_dir or Path()).rglob("*.png")}) == n_steps  # deduplicated


def test_in_memory_url(tmp_path: Path) -> None:
    with RunStore("sqlite://") as s:
        run_id = s.start_run("mem", config=None)
        task = _task()
        s.start_episode(run_id, "ep", task, phone="p")
        traj = _trajectory("ep", task)
        s.record_step(traj.transitions[0])
        with pytest.raises(StoreError, match="screenshot_dir"):
            s.record_step(traj.transitions[1], traj.transitions[1].observation.screenshot)
        s.finish_episode(traj)
        assert [e.success for e in s.episodes(run_id)] == [True]
        assert len(s.steps("ep")) == 3
    with RunStore("sqlite://", screenshot_dir=tmp_path / "shots") as s:
        rel = s.put_screenshot(_image())
        assert (tmp_path / "shots" / rel).is_file()


def test_sqlite_url_and_plain_path(tmp_path: Path) -> None:
    with RunStore(f"sqlite:///{tmp_path / 'x.db'}") as s:
        s.start_run("url", config=None)
        assert s.screenshot_dir == tmp_path / "screenshots"
    with RunStore(tmp_path / "x.db") as s:  # reopen: tables exist, data persists
        assert [r.name for r in s.runs()] == ["url"]


def test_bad_path_error_names_path_and_fix(tmp_path: Path) -> None:
    bad = tmp_path / "missing" / "run.db"
    with pytest.raises(StoreOpenError) as info:
        RunStore(bad)
    msg = str(info.value)
    assert str(bad) in msg and "does not exist" in msg and "for_run_dir" in msg
    with pytest.raises(StoreOpenError, match="missing"):
        RunStore(f"sqlite:///{bad}")
    with pytest.raises(StoreOpenError, match="is a directory"):
        RunStore(tmp_path)


def test_unreachable_url_error_names_url_and_fix() -> None:
    # Either the driver is missing or nothing listens on port 1: both must say what to do.
    with pytest.raises(StoreOpenError) as info:
        RunStore("postgresql://darwin:hunter22@127.0.0.1:1/runs")
    msg = str(info.value)
    assert "127.0.0.1:1/runs" in msg and "hunter22" not in msg
    assert "pip install" in msg or "reachable" in msg
    with pytest.raises(StoreOpenError, match="cannot parse"):
        RunStore("not a url://")


def test_hostile_text_is_stored(store: RunStore) -> None:
    task = _task()
    run_id = store.start_run("hostile", config=None)
    store.start_episode(run_id, "ep", task, phone="p")
    weird = "\x00\ud800 ünïcødé 🚀" + "x" * 200_000
    t = _transition(
        "ep",
        task,
        0,
        Decision(
            action=None,
            parse_error=ParseError(reason="bad", text=weird),
            generation=Generation(text=weird),
        ),
    )
    store.record_step(t)
    (row,) = store.steps("ep")
    assert row.response_text is not None and "\x00" not in row.response_text
    assert len(row.response_text) == 100_000 and "🚀" in row.response_text


@pytest.mark.skipif(
    not os.environ.get("DARWIN_TEST_POSTGRES_URL"),
    reason="set DARWIN_TEST_POSTGRES_URL=postgresql://... to test PostgreSQL",
)
def test_postgres_round_trip(tmp_path: Path) -> None:
    url = os.environ["DARWIN_TEST_POSTGRES_URL"]
    with RunStore(url, screenshot_dir=tmp_path / "shots") as s:
        task = _task()
        run_id = s.start_run("pg", _ExperimentConfig())
        ep_id = f"pg-{uuid.uuid4().hex}"
        s.start_episode(run_id, ep_id, task, phone="p")
        traj = _trajectory(ep_id, task)
        for t in traj.transitions:
            s.record_step(t, t.observation.screenshot)
        s.record_verdict(ep_id, Phase.EXECUTION, "llm_judge", None, None, "judge unavailable")
        s.finish_episode(traj)
        assert [e.success for e in s.episodes(run_id)] == [True]
        assert [st.step for st in s.steps(ep_id)] == [0, 1, 2]
        assert s.success_by_task(run_id) == {task.id: SuccessStats(episodes=1, successes=1)}
        assert "sk-secret" not in str(next(r for r in s.runs() if r.run_id == run_id).config)
