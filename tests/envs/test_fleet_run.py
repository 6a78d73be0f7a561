"""Chaos through `darwin run`: 16 SimPhones served over the real adb server by a provider, with
a spare, hangs, crashes and reboots, hard resets on a schedule, and one phone that a re-image
bricks. At least 300 episodes; nothing may be lost or punished, every hard reset must follow
the schedule, and the bricked phone must be replaced by the spare."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from darwin.run.load import apply_overrides, load_experiment
from darwin.run.recipe import run_experiment
from darwin.store import RunStore
from darwin.types import TerminationReason

ROOT = Path(__file__).resolve().parents[2]

# test_chaos.py's mix (hangs last forever: the deadlines end them), durations scaled by 0.2.
CHAOS = (
    "drop=0.004,hang=0.002,slow=lognormal:0.05:0.6,stall=0.01:3,crash=0.001:4,reboot=0.0006:keep:6,seed=11,scale=0.2"
)
EVERY = 6

# A user's provider, named by import path: a SimFarm whose phone sim-0 never answers again after
# its first re-image (a cloud phone a bad image bricked).
PROVIDER = textwrap.dedent("""
    from darwin.envs.providers import SimFarm


    class BrickingFarm(SimFarm):
        def hard_reset(self, phone):
            super().hard_reset(phone)
            if phone.id == "sim-0":
                self.set_faults("hang=1.0", index=0)
""")


@pytest.mark.timeout(1500)
def test_chaos_through_darwin_run_with_a_provider_and_a_spare(
    adb_server_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "chaos_provider.py").write_text(PROVIDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    provider = json.dumps({"name": "chaos_provider:BrickingFarm", "kwargs": {"faults": CHAOS}})
    config = apply_overrides(
        load_experiment(ROOT / "examples" / "spa_bench.py"),
        [
            "sft.steps=30",
            "sft.episodes=32",
            "sft.phones=8",
            "sft.heldout_episodes=0",
            f"cache_dir={tmp_path / 'cache'}",
            'tasks=["clock_1","settings_dark_theme"]',
            "horizon=6",
            "evaluation.samples=0",
            "time_budget_s=null",
            "updates=4",
            "learner.critic.warmup_updates=1",
            "rollout_steps=420",
            "learner.mini_batch_size=64",
            "learner.speed.freeze_vision=true",
            "phones.count=16",
            "phones.spares=1",
            f"phones.provider={provider}",
            f"phones.adb_server=127.0.0.1:{adb_server_port}",
            "phones.call_deadline_s=1",
            "phones.screenshot_deadline_s=2",
            "phones.reconnect_deadline_s=5",
            f"phones.hard_reset_every={EVERY}",
            "phones.replace_after_s=3",
        ],
    )
    result = run_experiment(config, tmp_path / "run")

    store = RunStore.for_run_dir(result.run_dir)
    (run,) = [r for r in store.runs() if r.name == config.name]
    episodes = store.episodes(run.run_id)
    finished = [e for e in episodes if e.finished]
    assert len(finished) >= 300, len(finished)
    reasons = Counter(e.termination_reason for e in finished)

    # Nothing lost: every finished episode was trained on or waits in the checkpoint, once.
    trained = [
        i
        for line in (result.run_dir / "updates.jsonl").read_text().splitlines()
        for i in json.loads(line)["episode_ids"]
    ]
    pending = json.loads((result.run_dir / "checkpoint" / "learner.json").read_text())["pending_episode_ids"]
    assert len(trained) == len(set(trained)) and not set(trained) & set(pending)
    assert {e.episode_id for e in finished} == set(trained) | set(pending)

    # Nothing punished: infrastructure failures are truncations with a cause and no verdict.
    assert TerminationReason.ERROR not in reasons, [
        e.termination_cause for e in finished if e.termination_reason == TerminationReason.ERROR
    ][:3]
    truncated = [e for e in finished if e.termination_reason == TerminationReason.INFRA_TRUNCATED]
    assert truncated, "no fault reached an episode: the chaos tests nothing"
    assert all(e.termination_cause and e.success is None for e in truncated)

    # The bricked phone was replaced by the spare, which then played; the run kept 16 phones.
    events = store.phone_events(run.run_id)
    replaced = [e for e in events if e.kind == "replaced"]
    assert [(e.phone, e.replacement) for e in replaced] == [("sim-0", "sim-16")], events
    assert not [e for e in events if e.kind == "retired"]
    after = replaced[0].created_at
    assert not [e for e in episodes if e.phone == "sim-0" and e.started_at > after]
    assert [e for e in finished if e.phone == "sim-16"]

    # Scheduled hard resets: one per EVERY episodes a phone played, at multiples of EVERY.
    scheduled = [e for e in events if e.kind == "hard_reset" and e.reason == f"every {EVERY} episodes"]
    assert scheduled and all(e.episodes % EVERY == 0 for e in scheduled)
    unhealthy = {e.phone for e in events if "health check failed" in e.reason}
    played = Counter(e.phone for e in finished)
    for phone, count in played.items():
        resets = sum(e.phone == phone for e in scheduled)
        if phone in unhealthy:  # an episode that ended quarantined goes to recovery, not the schedule
            assert resets <= count // EVERY
        else:  # the last reset may have been cut by the end of the run
            assert count // EVERY - 1 <= resets <= count // EVERY, (phone, count, resets)
    store.close()
