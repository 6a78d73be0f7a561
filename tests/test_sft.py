"""Warm-start SFT: demonstrations match rollouts, training learns, checkpoints load and evaluate."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from pydantic import ValidationError

from darwin.actions import Click, Drag, LongPress, Scroll
from darwin.agents.base import ModelActor
from darwin.agents.warm_start import AGENT_FILE, SFT_FILE, load_warm_start
from darwin.cli.main import main
from darwin.envs.sim.env import SimPhoneEnv
from darwin.models.factory import build_tiny_vlm, load_tiny_vlm
from darwin.policies.base import Policy
from darwin.policies.hf import HFPolicy
from darwin.run.build import warm_start_checkpoint
from darwin.sft.cache import ensure_warm_start
from darwin.sft.config import SFTConfig
from darwin.sft.demonstrations import collect_demonstrations
from darwin.sft.encoding import encode_demonstrations
from darwin.sft.training import HeldoutMetrics, heldout_metrics, train_sft
from darwin.task_registry import get_task
from darwin.types import Generation, Prompt
from darwin.workflows.step import LifecycleWorkflow, StepConfig

TASKS = ("amazon_0", "settings_dark_theme", "clock_4")


def small_config(**overrides: Any) -> SFTConfig:
    fields: dict[str, Any] = {
        "tasks": TASKS,
        "phones": 2,
        "episodes": 4,
        "heldout_phones": 1,
        "heldout_episodes": 2,
        "steps": 8,
        "batch_size": 8,
        "warmup_steps": 1,
        "lr": 3e-3,
    }
    fields.update(overrides)
    return SFTConfig(**fields)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_warm_start(tmp_path_factory.mktemp("warm"), small_config())


def test_module_doctests() -> None:
    result = doctest.testmod(importlib.import_module("darwin.sft"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_config_reports_every_problem_with_a_fix() -> None:
    with pytest.raises(ValidationError) as err:
        SFTConfig(observation_size=(250, 560), steps=5, warmup_steps=10, stop_threshold=0.5)
    text = str(err.value)
    assert "multiples of 28" in text and "warmup_steps=10" in text and "eval_every" in text
    assert SFTConfig().config_hash() == SFTConfig(threads=8).config_hash()  # threads do not change weights
    assert SFTConfig().config_hash() != SFTConfig(steps=301).config_hash()


def test_a_reading_warm_starts_cache_key_holds_how_pointing_calls_are_written(monkeypatch) -> None:
    import darwin.agents.pointing as pointing

    reading, plain = SFTConfig(agent={"reader": {"name": "elements"}}), SFTConfig()
    before = reading.config_hash(), plain.config_hash()
    monkeypatch.setattr(pointing, "POINTING_VERSION", pointing.POINTING_VERSION + 1)
    assert reading.config_hash() != before[0]  # retrained, never reused with the old targets
    assert plain.config_hash() == before[1]  # a pixels-only warm start writes no pointing call


def test_demonstrations_round_trip_through_the_agent() -> None:
    config = small_config()
    demos, stats = collect_demonstrations(config)
    again, _ = collect_demonstrations(config)
    assert [d.target for d in demos] == [d.target for d in again]  # deterministic
    assert stats.episodes == 4 and stats.successes == 4 and stats.steps == len(demos) > 4
    agent = config.make_agent()
    w, h = 1080, 2400
    for d in demos:
        assert d.observation.screenshot.shape == (364, 168, 3)
        parsed = agent.parse(d.target, d.observation)
        assert parsed.action == d.action and parsed.num_actions == 1 and not parsed.warnings
        assert agent.format_action(parsed.action, d.observation) == d.target
        o, a = d.oracle_action, d.action
        if isinstance(o, Click | LongPress | Scroll):  # within half a grid cell (100 cells per side)
            assert abs(a.x - o.x) <= w / 200 + 1 and abs(a.y - o.y) <= h / 200 + 1  # type: ignore[union-attr]
        elif isinstance(o, Drag):
            assert abs(a.x1 - o.x1) <= w / 200 + 1 and abs(a.y2 - o.y2) <= h / 200 + 1  # type: ignore[union-attr]
        else:
            assert a == o


def test_demonstrations_played_in_worker_processes_are_those_of_one_process() -> None:
    """Two worker processes (spawned) give the same demonstrations, in the same order, and the
    same counts as one; progress comes back a phone at a time and reaches the total."""
    one = small_config(phones=3, episodes=7, demo_workers=1)
    two = small_config(phones=3, episodes=7, demo_workers=2)
    assert one.config_hash() == two.config_hash()  # the warm start's cache key ignores it
    demos, stats = collect_demonstrations(one)
    progress: list[tuple[int, int]] = []
    fanned, fanned_stats = collect_demonstrations(two, on_episode=lambda done, total: progress.append((done, total)))
    assert [(d.phone_seed, d.step, d.target) for d in fanned] == [(d.phone_seed, d.step, d.target) for d in demos]
    assert all(
        np.array_equal(a.observation.screenshot, b.observation.screenshot) for a, b in zip(fanned, demos, strict=True)
    )
    assert [m.text for d in fanned for m in d.prompt.messages] == [m.text for d in demos for m in d.prompt.messages]
    assert fanned_stats == stats and stats.episodes == 7
    assert len(progress) == 3 and progress[-1] == (7, 7)


def test_task_weights_demonstrate_a_task_more_often() -> None:
    _, even_stats = collect_demonstrations(small_config(tasks=("clock_1", "amazon_0"), phones=2, episodes=12))
    weighted = small_config(tasks=("clock_1", "amazon_0"), phones=2, episodes=12, task_weights={"amazon_0": 5})
    assert [t.id for t in weighted.demonstration_round()] == ["clock_1"] + ["amazon_0"] * 5
    _, stats = collect_demonstrations(weighted)
    # Each phone plays 6 episodes: three shuffled rounds of both tasks evenly, one round of six
    # weighted, so amazon_0 is demonstrated 5 times per phone instead of 3.
    assert stats.per_task_steps["amazon_0"] > even_stats.per_task_steps["amazon_0"] > 0
    assert weighted.config_hash() != small_config(tasks=("clock_1", "amazon_0"), phones=2, episodes=12).config_hash()
    with pytest.raises(ValidationError) as err:
        small_config(task_weights={"settings_3": 2, "clock_4": 0})
    assert "task_weights['clock_4']=0 must be at least 1" in str(err.value)
    assert "task_weights names ['settings_3'], not among the demonstrated tasks" in str(err.value)


class ReplayPolicy(Policy):
    """Answers each prompt with the next scripted text, the way a model policy answers."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        return [Generation(text=self.texts.pop(0)) for _ in prompts]


def test_demo_prompts_are_the_prompts_of_a_model_rollout() -> None:
    """A ModelActor whose policy writes the demo targets sees exactly the demo prompts."""
    config = small_config(phones=1, episodes=3)
    demos, _ = collect_demonstrations(config)
    env = SimPhoneEnv(seed=config.phone_seed, perturbation=config.perturbation)
    actor = ModelActor(config.make_agent(), ReplayPolicy([d.target for d in demos]))
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=config.observation_size))
    prompts: list[Prompt] = []

    async def rollout() -> None:
        for task_id in _task_order(demos):
            trajectory = await workflow.run(env, get_task(task_id), actor)
            await env.ago_home()
            prompts.extend(t.decision.prompt for t in trajectory.transitions)  # type: ignore[misc]

    asyncio.run(rollout())
    assert len(prompts) == len(demos)
    for mine, demo in zip(prompts, demos, strict=True):
        assert [(m.role, m.text) for m in mine.messages] == [(m.role, m.text) for m in demo.prompt.messages]
        assert all((a == b).all() for a, b in zip(mine.images, demo.prompt.images, strict=True))
    assert any("Done: " in d.prompt.messages[-1].text for d in demos)  # histories are rendered


def _task_order(demos: Sequence[Any]) -> list[str]:
    order: list[str] = []
    for d in demos:
        if d.step == 0:
            order.append(d.task_id)
    return order


def test_encoded_batches_are_the_policys_inputs_and_targets_end_with_eos() -> None:
    config = small_config(phones=1, episodes=3)
    demos, _ = collect_demonstrations(config)
    vlm = build_tiny_vlm(config.resolved_model, seed=0)
    encoded = encode_demonstrations(vlm, demos)
    policy = HFPolicy(vlm)
    rows = [0, len(demos) // 2, len(demos) - 1]
    inputs, targets = encoded.batch(rows)
    reference = policy.build_inputs([demos[i].prompt for i in rows])
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw"):
        assert torch.equal(inputs[key], reference[key]), key
    eos = vlm.tokenizer.eos_token_id
    for i, target in zip(rows, targets, strict=True):
        assert target[-1] == eos and eos in policy.eos_token_ids
        assert vlm.tokenizer.decode(target[:-1], skip_special_tokens=False) == demos[i].target
        assert not set(target) & policy.forbidden_token_ids
    # the SFT objective scores targets exactly as the policy does (same mask, temperature 1)
    metrics = heldout_metrics(vlm, encoded, demos, config.make_agent(), step=0)
    scored = policy.teacher_forced_logprobs([d.prompt for d in demos], encoded.target_ids)
    probs = [float(torch.exp(lp.sum())) for lp in scored]
    assert metrics.sequence_prob == pytest.approx(sum(probs) / len(probs), rel=1e-4, abs=1e-12)
    policy.close()


def test_short_run_lowers_the_loss_and_changes_parameters(checkpoint: Path) -> None:
    meta = json.loads((checkpoint / SFT_FILE).read_text())
    config = SFTConfig.model_validate(meta["config"])
    assert meta["config_hash"] == config.config_hash() and checkpoint.name.endswith(config.config_hash())
    assert meta["training"]["steps_run"] == config.steps
    assert meta["training"]["final_loss"] < 0.8 * meta["training"]["first_loss"]
    initial = build_tiny_vlm(config.resolved_model, seed=config.model_seed).model.state_dict()
    trained = load_tiny_vlm(checkpoint).model.state_dict()
    changed = [k for k in initial if not torch.equal(initial[k], trained[k])]
    assert len(changed) > 0.8 * len(initial)  # language model and vision tower both learn
    assert any("visual" in k for k in changed) and any("embed_tokens" in k for k in changed)
    # held-out loss after training is below the untrained model's
    held = meta["training"]["heldout"][-1]
    assert held["greedy_match"] is not None and held["loss"] < meta["training"]["first_loss"]


def test_training_is_deterministic_and_leaves_global_rngs_alone(checkpoint: Path) -> None:
    import random

    import numpy as np

    states = (torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    again = train_sft(small_config()).vlm.model.state_dict()
    assert torch.equal(torch.random.get_rng_state(), states[0])
    assert (np.random.get_state()[1] == states[1]).all() and random.getstate() == states[2]
    saved = load_tiny_vlm(checkpoint).model.state_dict()
    assert all(torch.equal(again[k], saved[k]) for k in saved)


def test_checkpoint_layout_and_loading(checkpoint: Path) -> None:
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "chat_template.jinja",
        "darwin_tiny_vlm.json",
        AGENT_FILE,
        SFT_FILE,
    ):
        assert (checkpoint / name).is_file(), name
    warm = load_warm_start(checkpoint)
    assert warm.observation_size == (168, 364) and warm.vlm.tiny_config is not None
    assert warm.make_agent().config == SFTConfig().agent
    with pytest.raises(FileNotFoundError, match="run `darwin sft --out"):
        load_warm_start(checkpoint.parent / "missing")


def test_ensure_warm_start_reuses_the_cache(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[SFTConfig] = []
    monkeypatch.setattr("darwin.sft.cache.train_sft", lambda config, out, **kw: calls.append(config))
    mtime = (checkpoint / SFT_FILE).stat().st_mtime_ns
    assert ensure_warm_start(checkpoint.parent, small_config()) == checkpoint
    assert ensure_warm_start(checkpoint.parent, small_config(threads=1)) == checkpoint
    assert calls == [] and (checkpoint / SFT_FILE).stat().st_mtime_ns == mtime


def test_early_stop_short_of_mastery(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def fake_metrics(*args: Any, step: int, greedy: bool = False, **kwargs: Any) -> HeldoutMetrics:
        seen.append(step)
        return HeldoutMetrics(step=step, loss=1.0, sequence_prob=0.2 * step, greedy_match=0.0)

    monkeypatch.setattr("darwin.sft.training.heldout_metrics", fake_metrics)
    config = small_config(steps=12, eval_every=2, stop_threshold=0.75, episodes=2, phones=1)
    training = train_sft(config).metadata["training"]
    assert training["stopped_early"] and training["steps_run"] == 4 and seen == [2, 4, 4]


def test_eval_tiny_checkpoint_via_cli(checkpoint: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "eval",
            "--agent",
            f"tiny:{checkpoint}",
            "--tasks",
            "amazon_0",
            "--phones",
            "2",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "amazon_0" in result.output
    missing = tmp_path / "nothing"
    result = runner.invoke(main, ["eval", "--agent", f"tiny:{missing}", "--run-dir", str(tmp_path / "r2")])
    assert (
        result.exit_code == 2 and f"no checkpoint at {missing}" in result.output and "darwin sft --out" in result.output
    )
    result = runner.invoke(
        main,
        ["eval", "--agent", f"tiny:{checkpoint}", "--observation-size", "252x560", "--run-dir", str(tmp_path / "r3")],
    )
    assert result.exit_code == 2 and "168x364" in result.output


def test_sft_cli_trains_saves_and_evaluates(tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    args = [
        "sft",
        "--out",
        str(out),
        "--steps",
        "2",
        "--episodes",
        "2",
        "--phones",
        "1",
        "--batch-size",
        "4",
        "--tasks",
        "amazon_0",
        "--eval-episodes",
        "1",
        "--eval-phones",
        "1",
    ]
    config_file = tmp_path / "sft.yaml"
    config_file.write_text("heldout_phones: 0\nwarmup_steps: 1\n")
    result = CliRunner().invoke(main, [*args, "--config", str(config_file)])
    assert result.exit_code == 0, result.output
    assert "pass@1" in result.output and "greedy" in result.output and "overall" in result.output
    meta = json.loads((out / SFT_FILE).read_text())
    assert len(meta["eval"]["records"]) == 2 and meta["config"]["heldout_phones"] == 0  # 1 greedy + 1 sampled
    assert {"greedy_success_rate", "sampled_success_rate", "pass_at_k"} <= set(meta["eval"]["overall"])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--force" in result.output


def test_sft_cli_builds_an_experiments_warm_start_where_the_run_finds_it(tmp_path: Path) -> None:
    """`darwin sft --experiment F` trains F's `sft` config (flags and --set override it) into
    F's warm-start cache, so `darwin run F` starts from it without training again."""
    from darwin.run.load import load_experiment

    experiment = tmp_path / "exp.py"
    experiment.write_text(
        "from darwin.run.config import ExperimentConfig\n"
        "from darwin.sft.config import SFTConfig\n"
        "def build(preset):\n"
        f"    return ExperimentConfig(name='e', tasks=('amazon_0',), cache_dir={str(tmp_path / 'cache')!r},\n"
        "        sft=SFTConfig(steps=2, warmup_steps=1, episodes=2, phones=1, batch_size=4, heldout_episodes=0, tasks=('amazon_0',)))\n"
    )
    args = ["sft", "--experiment", str(experiment), "--set", "sft.lr=0.001", "--eval-episodes", "0"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    config = load_experiment(experiment)
    from darwin.run.load import apply_overrides

    warm = warm_start_checkpoint(apply_overrides(config, ["sft.lr=0.001"]))  # cached: no training here
    assert warm.parent == tmp_path / "cache" and (warm / SFT_FILE).is_file()
    assert json.loads((warm / SFT_FILE).read_text())["config"]["lr"] == 0.001
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 2 and "already built" in again.output
    both = CliRunner().invoke(main, [*args, "--config", str(experiment)])
    assert both.exit_code == 2 and "not both" in both.output


# ------------------------------------------------------------------------------ litellm
KEY_ENV = "DARWIN_TEST_SFT_LLM_KEY"
SECRET = "sk-darwin-sft-test-0b1d"


@pytest.fixture
def llm_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"authorization": self.headers.get("Authorization"), "body": body})
            text = "Thought: The theme is set.\nAction: finished(content='done')"
            payload = {
                "id": "cmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    httpd.shutdown()
    httpd.server_close()


def test_eval_litellm_agent_end_to_end(
    llm_server: tuple[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api_base, seen = llm_server
    monkeypatch.setenv(KEY_ENV, SECRET)
    result = CliRunner().invoke(
        main,
        [
            "--log-level",
            "debug",
            "eval",
            "--agent",
            "litellm:openai/ui-tars-test",
            "--agent-format",
            "uitars-1.5",
            "--api-base",
            api_base,
            "--api-key-env",
            KEY_ENV,
            "--tasks",
            "settings_dark_theme,amazon_0",
            "--phones",
            "1",
            "--samples",
            "0",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and SECRET not in result.output
    assert len(seen) == 2  # one finished() step per episode: each task's greedy episode
    assert all(r["body"]["temperature"] == 0.0 for r in seen)  # greedy episodes ask for temperature 0
    assert all(r["authorization"] == f"Bearer {SECRET}" for r in seen)
    body = seen[0]["body"]
    assert body["model"] == "ui-tars-test" and body["temperature"] == 0.0
    assert "You are a GUI agent" in json.dumps(body["messages"]) and "data:image/png;base64," in json.dumps(body)
    result = CliRunner().invoke(main, ["eval", "--agent", "litellm:", "--run-dir", str(tmp_path / "r2")])
    assert result.exit_code == 2 and "needs a LiteLLM model name" in result.output


def test_eval_litellm_agent_without_its_key_stops_at_once(
    llm_server: tuple[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's first try: no API key. The command stops before any phone starts, with the
    variable to set; no request is sent, no episode is scored."""
    api_base, seen = llm_server
    for var in ("OPENAI_API_KEY", KEY_ENV):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(
        main,
        ["eval", "--agent", "litellm:openai/gpt-4o-mini", "--tasks", "clock_1", "--run-dir", str(tmp_path / "run")],
    )
    assert result.exit_code == 1 and "OPENAI_API_KEY" in result.output and "overall" not in result.output
    assert "Give Feedback" not in result.output and not (tmp_path / "run").exists()
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            "litellm:openai/ui-tars-test",
            "--api-base",
            api_base,
            "--api-key-env",
            KEY_ENV,
            "--tasks",
            "clock_1",
            "--run-dir",
            str(tmp_path / "r2"),
        ],
    )
    assert result.exit_code == 1 and f"{KEY_ENV} is not set" in result.output and not seen


def test_a_key_rejected_mid_run_stops_the_run_instead_of_scoring_errors(tmp_path: Path, openai_server) -> None:
    """A 401 from the acting model is a :class:`~darwin.types.RunAbort`: the workflow lets it
    stop the evaluation with the provider's message, rather than filing every episode as an error."""
    openai_server.reply = lambda body: 401
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            "litellm:openai/ui-tars-test",
            "--api-base",
            openai_server.api_base,
            "--api-key-env",
            "DARWIN_FAKE_LLM_KEY",
            "--tasks",
            "clock_1,settings_dark_theme",
            "--phones",
            "1",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 1 and "authentication" in result.output.lower() and "overall" not in result.output
    assert len(openai_server.requests) == 1  # the first step's request; no second episode was started
