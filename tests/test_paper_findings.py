"""The paper-finding presets: each is the default with its own change, validates, and the
mechanisms new to the default (a random value head without warm-up, a bootstrapped truncation)
train end to end in a few updates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.cli import main
from darwin.experiment import load_experiment
from darwin.figures import trained_episodes
from darwin.types import Phase

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
    """The fields (dotted, two levels) in which a preset differs from the default, besides its name."""
    got = load_experiment(FINDINGS, preset).model_dump(mode="json")
    want = load_experiment(SPA).model_dump(mode="json")
    out: dict[str, object] = {}
    for key, value in got.items():
        if key == "name" or value == want[key]:
            continue
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items() if v != want[key].get(k)})
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("preset", _presets())
def test_every_preset_validates_with_dry_run(preset):
    result = CliRunner().invoke(main, ["run", str(FINDINGS), "--preset", preset, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "(valid)" in result.output


def test_presets_change_only_what_they_name():
    assert _changed("fig2") == {}
    assert _changed("fig6a-random-init") == {"learner.value_head_init": "random", "learner.critic_warmup_updates": 0}
    assert _changed("fig6a-bias") == {"learner.critic_warmup_updates": 0}
    assert _changed("fig6a-bias-warmup") == {}
    assert _changed("fig6a-random-init-paper-lr") == {**_changed("fig6a-random-init"), "learner.critic_lr": 1e-5}
    assert _changed("fig6a-bias-paper-lr") == {**_changed("fig6a-bias"), "learner.critic_lr": 1e-5}
    assert _changed("fig6b-zero") == {"horizon": 6}
    assert _changed("fig6b-bootstrap") == {"horizon": 6, "learner.truncation": "bootstrap"}
    assert _changed("fig3-phones32") == {"phones.count": 32}
    assert _changed("fig4-tasks16") == {
        "tasks": ["paper16"],
        "sft.tasks": ["paper16"],
        "phones.count": 32,
        "rollout_steps": 512,
        "learner.mini_batch_size": 64,
    }
    assert _changed("fig5-cycle")["lifecycle"] is True  # the lifecycle workflow plays setup and teardown
    assert "lifecycle" not in _changed("fig5-plain")
    assert _changed("fig5-cycle")["phones.reset_between_episodes"] is False
    assert _changed("fig5-cycle")["phones.hard_reset_every"] == _changed("fig5-plain")["phones.hard_reset_every"] == 8
    with pytest.raises(Exception, match="unknown preset 'fig9'"):
        load_experiment(FINDINGS, "fig9")


SMALL = [
    'tasks=["settings_dark_theme","amazon_0"]',
    "phones.count=2",
    "sft.steps=3",
    "sft.warmup_steps=1",
    "sft.batch_size=4",
    "sft.phones=2",
    "sft.episodes=4",
    "sft.heldout_episodes=0",
    "policy.max_batch=2",
    "policy.max_wait=0.01",
    "learner.mini_batch_size=8",
    "learner.micro_batch_size=4",
    "rollout_steps=12",
    "updates=2",
    "evaluation.episodes_per_task=0",
    "time_budget_s=null",
]


@pytest.mark.parametrize("preset", ["fig6a-random-init", "fig6b-bootstrap", "fig5-cycle"])
def test_a_preset_trains_in_a_few_updates(preset, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "findings-warm-start"
    run_dir = tmp_path_factory.mktemp(preset)
    extra = {
        # horizon 3: every episode is cut by the budget; one critic warm-up update, then the actor
        "fig6b-bootstrap": ["horizon=3", "learner.critic_warmup_updates=1"],
        # one lifecycle task (setup, execution, teardown), warm-started on its own demonstrations
        "fig5-cycle": [
            'tasks=["settings_dark_theme.cycle"]',
            'sft.tasks=["settings_dark_theme.cycle"]',
            "learner.critic_warmup_updates=1",
        ],
    }.get(preset, [])
    overrides = [*SMALL, *extra, f"cache_dir={json.dumps(str(cache))}"]
    args = ["run", str(FINDINGS), "--preset", preset, "--run-dir", str(run_dir)]
    result = CliRunner().invoke(main, args + [a for kv in overrides for a in ("--set", kv)])
    assert result.exit_code == 0, result.output
    updates = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    updates = [u for u in updates if u["group"] == "update"]
    assert len(updates) == 2
    if preset == "fig6b-bootstrap":
        # Every trained trajectory ran out of steps; the phones answered, so V(s') came from the next screen.
        assert sum(u["bootstrapped_from_next"] for u in updates) > 0
        assert all(u["bootstrapped_from_last"] == 0 for u in updates)
    elif preset == "fig5-cycle":
        # The task's phases are execution then teardown, each with its own verdict (Fig. 5's
        # curves); the teardown is played only after a successful execution.
        episodes = trained_episodes(run_dir)
        assert episodes
        for e in episodes:
            assert Phase.EXECUTION in e.phase_success
            assert (Phase.TEARDOWN in e.phase_success) == (e.phase_success[Phase.EXECUTION] is True)
    else:
        assert updates[0]["actor_updated"] == 1  # no critic warm-up: the first update trains the actor
