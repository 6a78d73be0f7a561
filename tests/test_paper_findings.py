"""The paper-finding presets: each is the default with its own change, validates, and trains
end to end in a few updates with that change acting (a random value head, a bootstrapped
truncation, scheduled hard resets, more phones, other tasks, the shortest-path adjustment)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from darwin.cli.main import main
from darwin.run.figures import trained_episodes
from darwin.run.load import load_experiment
from darwin.store import RunStore
from darwin.task_registry import task_set
from darwin.types import Phase, TerminationReason

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "examples" / "paper_findings.py"
SPA = ROOT / "examples" / "spa_bench.py"


def _presets() -> list[str]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper_findings", FINDINGS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.PRESETS)


def _changed(preset: str) -> dict[str, object]:
    """The fields (dotted, down to the learner's sections) in which a preset differs from the default, besides its name."""
    got = load_experiment(FINDINGS, preset).model_dump(mode="json")
    want = load_experiment(SPA).model_dump(mode="json")
    return _differences(got, want, "", depth=3)


def _differences(got: dict, want: dict, prefix: str, depth: int) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in got.items():
        if (not prefix and key == "name") or value == want.get(key):
            continue
        if isinstance(value, dict) and isinstance(want.get(key), dict) and depth > 1:
            out.update(_differences(value, want[key], f"{prefix}{key}.", depth - 1))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("preset", _presets())
def test_every_preset_validates_with_dry_run(preset):
    result = CliRunner().invoke(main, ["run", str(FINDINGS), "--preset", preset, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "(valid)" in result.output


def test_presets_change_only_what_they_name():
    assert _changed("fig2") == {}
    assert _changed("fig6a-random-init") == {
        "learner.critic.value_head_init": "random",
        "learner.critic.warmup_updates": 0,
    }
    assert _changed("fig6a-bias") == {"learner.critic.warmup_updates": 0}
    assert _changed("fig6a-bias-warmup") == {}
    assert _changed("fig6a-random-init-paper-lr") == {**_changed("fig6a-random-init"), "learner.critic.lr": 1e-5}
    assert _changed("fig6a-bias-paper-lr") == {**_changed("fig6a-bias"), "learner.critic.lr": 1e-5}
    crashes = {"phones.faults": "crash=0.008:0.5", "learner.step_budget": "terminal"}
    assert _changed("fig6b-zero") == crashes
    assert _changed("fig6b-bootstrap") == {**crashes, "learner.truncation": "bootstrap"}
    assert _changed("fig3-phones32") == {"phones.count": 32}
    assert _changed("fig4-tasks16") == {
        "tasks": ["paper16"],
        "sft.tasks": ["paper16"],
        "phones.count": 32,
        "rollout_steps": 512,
        "learner.mini_batch_size": 64,
    }
    assert _changed("fig5-cycle")["workflow.name"] == "lifecycle"  # the lifecycle workflow plays setup and teardown
    assert "workflow.name" not in _changed("fig5-plain")
    assert _changed("fig5-cycle")["phones.reset_between_episodes"] is False
    assert _changed("fig5-cycle")["phones.hard_reset_every"] == _changed("fig5-plain")["phones.hard_reset_every"] == 8
    with pytest.raises(Exception, match="unknown preset 'fig9'"):
        load_experiment(FINDINGS, "fig9")


KEEP = None
"""A value in :data:`PRESET_RUNS` that drops ``small_run``'s setting, so the preset's own stands."""

PRESET_RUNS: dict[str, dict[str, str | None]] = {
    # the default's 2 critic warm-up updates, then the actor's first
    "fig2": {"updates": "3", "learner.critic.warmup_updates": KEEP},
    "fig6a-bias-warmup": {"updates": "3", "learner.critic.warmup_updates": KEEP},
    # no warm-up: the first update trains the actor
    "fig6a-random-init": {"learner.critic.warmup_updates": KEEP},
    "fig6a-bias": {"learner.critic.warmup_updates": KEEP},
    "fig6a-random-init-paper-lr": {"learner.critic.warmup_updates": KEEP},
    "fig6a-bias-paper-lr": {"learner.critic.warmup_updates": KEEP},
    # horizon 3 and a crash on one call in five: episodes end by the budget and by crashes
    "fig6b-zero": {"horizon": "3", "phones.faults": "crash=0.2:0"},
    "fig6b-bootstrap": {"horizon": "3", "phones.faults": "crash=0.2:0"},
    # one lifecycle task (setup, execution, teardown), warm-started on its own demonstrations
    "fig5-cycle": {
        "tasks": '["settings_dark_theme.cycle"]',
        "sft.tasks": '["settings_dark_theme.cycle"]',
    },
    # one phone playing 2-step episodes, so that two updates reach the preset's hard reset after 8
    "fig5-plain": {"phones.count": "1", "sft.phones": "1", "horizon": "2"},
    "fig3-phones8": {"phones.count": KEEP},
    "fig3-phones16": {"phones.count": KEEP},
    "fig3-phones32": {"phones.count": KEEP},
    "fig4-tasks8": {"phones.count": KEEP, "tasks": KEEP},
    # the experience per update and the mini-batch doubled, as the preset doubles the default's
    "fig4-tasks16": {"phones.count": KEEP, "tasks": KEEP, "rollout_steps": "24", "learner.mini_batch_size": "16"},
    "shortest-path-on": {},
    "shortest-path-off": {},
}
"""Preset -> how its short run differs from ``small_run`` (tests/conftest.py): kept where the preset's change is the
phones or the tasks, scaled where the preset's size does not fit a test."""


def test_every_preset_has_a_short_run():
    assert set(PRESET_RUNS) == set(_presets())


def _short_run(preset: str, tmp_path_factory, small_run: dict[str, str]) -> Path:
    cache = tmp_path_factory.getbasetemp() / "findings-warm-start"
    run_dir = tmp_path_factory.mktemp(preset)
    settings = {**small_run, **PRESET_RUNS[preset], "cache_dir": json.dumps(str(cache))}
    overrides = [f"{k}={v}" for k, v in settings.items() if v is not KEEP]
    args = ["run", str(FINDINGS), "--preset", preset, "--run-dir", str(run_dir)]
    result = CliRunner().invoke(main, args + [a for kv in overrides for a in ("--set", kv)])
    assert result.exit_code == 0, result.output
    return run_dir


def _rows(run_dir: Path, group: str) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["group"] == group]


@pytest.mark.parametrize("preset", _presets())
def test_a_preset_trains_in_a_few_updates(preset, tmp_path_factory, small_run):
    """Each preset's short run trains, and the one thing the preset changes acts in it."""
    run_dir = _short_run(preset, tmp_path_factory, small_run)
    updates = _rows(run_dir, "update")
    assert len(updates) == int(PRESET_RUNS[preset].get("updates") or small_run["updates"])
    assert all(math.isfinite(u["value_loss"]) for u in updates)
    # The critic warm-up trains only the critic (the default's 2 updates where the preset keeps
    # them, 1 in the short runs of the others); without it the first update trains the actor.
    warmup = 2 if preset in ("fig2", "fig6a-bias-warmup") else 0 if preset.startswith("fig6a") else 1
    assert [u["actor_updated"] for u in updates] == [float(i >= warmup) for i in range(len(updates))]
    if preset.startswith("fig6a"):
        # The calibrated head's first values are its bias for every token; a random head's are not.
        first = updates[0]["value_mean"]
        assert (abs(first - 0.1) < 1e-4) == ("random-init" not in preset), first
        critic_lr = torch.load(run_dir / "checkpoint" / "optimizers.pt")["critic"]["param_groups"][0]["lr"]
        assert critic_lr == (1e-5 if preset.endswith("paper-lr") else 1e-3)
    elif preset.startswith("fig6b"):
        # Crashes cut episodes (infrastructure truncations) beside those that ran out of steps;
        # only the crashes are bootstrapped, the budget's end being terminal.
        store = RunStore.for_run_dir(run_dir)
        ends = Counter(e.termination_reason for e in store.episodes(store.runs()[0].run_id))
        assert ends[TerminationReason.INFRA_TRUNCATED] > 0 and ends[TerminationReason.STEP_BUDGET] > 0, ends
        if preset == "fig6b-bootstrap":
            bootstrapped = sum(u["bootstrapped_from_next"] + u["bootstrapped_from_last"] for u in updates)
            assert 0 < bootstrapped <= ends[TerminationReason.INFRA_TRUNCATED], (bootstrapped, ends)
        else:
            assert not any("bootstrapped_from_next" in u for u in updates)  # V(s') = 0: nothing read
    elif preset == "fig5-cycle":
        # The task's phases are execution then teardown, each with its own verdict (Fig. 5's
        # curves); the teardown is played only after a successful execution.
        episodes = trained_episodes(run_dir)
        assert episodes
        for e in episodes:
            assert Phase.EXECUTION in e.phase_success
            assert (Phase.TEARDOWN in e.phase_success) == (e.phase_success[Phase.EXECUTION] is True)
    elif preset == "fig5-plain":
        # Phones only go home between episodes; each is hard-reset on the preset's schedule.
        store = RunStore.for_run_dir(run_dir)
        resets = [e for e in store.phone_events(store.runs()[0].run_id) if e.kind == "hard_reset"]
        assert resets and all(e.reason == "every 8 episodes" and e.episodes % 8 == 0 for e in resets), resets
    elif preset.startswith("fig3") or preset.startswith("fig4"):
        phones = {"fig3-phones8": 8, "fig3-phones16": 16, "fig3-phones32": 32, "fig4-tasks8": 16, "fig4-tasks16": 32}
        assert {r["cost/phones"] for r in _rows(run_dir, "rollout")} == {phones[preset]}
        if preset.startswith("fig4"):
            store = RunStore.for_run_dir(run_dir)
            played = {e.task_id for e in store.episodes(store.runs()[0].run_id)}
            base8 = {t.id for t in task_set("base8")}
            if preset == "fig4-tasks16":  # the 16 tasks, beyond the default's 8
                assert played <= {t.id for t in task_set("paper16")} and played - base8, played
            else:
                assert played <= base8 and len(played) > 2, played
            assert all(
                u["steps"] >= int(PRESET_RUNS[preset].get("rollout_steps") or small_run["rollout_steps"])
                for u in updates
            )
    elif preset.startswith("shortest-path"):
        # The adjustment is counted on every update where it is on, and nowhere else.
        assert all(("shortest_path_adjusted" in u) == preset.endswith("-on") for u in updates)
