import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from darwin.cli.main import main
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.problems import ExperimentError
from darwin.run.build import build_policy_pool, build_store, build_workflow, load_run_policy, warm_start_checkpoint
from darwin.run.load import apply_overrides, load_experiment

ROOT = Path(__file__).resolve().parents[1]

SMALL = """
from darwin.run.config import EvaluationConfig, ExperimentConfig, PhonesConfig, PolicyConfig
from darwin.learner.config import LearnerConfig
from darwin.sft.config import SFTConfig

def build(preset):
    return ExperimentConfig(
        name="small", tasks=("settings_dark_theme", "amazon_0"), horizon=6,
        phones=PhonesConfig(count=2, seed=3),
        sft=SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0),
        cache_dir=CACHE,
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        learner=LearnerConfig(critic={"warmup_updates": 1}, ppo_epochs=1, mini_batch_size=8, speed={"micro_batch_size": 4}),
        rollout_steps=12, updates=UPDATES, evaluation=EvaluationConfig(samples=1, phones=2),
    )
"""


def small_experiment(tmp_path: Path, updates: int) -> Path:
    path = tmp_path / "small.py"
    path.write_text(SMALL.replace("CACHE", repr(str(tmp_path / "cache"))).replace("UPDATES", str(updates)))
    return path


def test_spa_bench_dry_run_validates_the_default():
    result = CliRunner().invoke(main, ["run", str(ROOT / "examples" / "spa_bench.py"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "(valid)" in result.output and "clock_1" in result.output
    assert "action guard: none (SimPhones" in result.output
    guarded = CliRunner().invoke(
        main, ["run", str(ROOT / "examples" / "spa_bench.py"), "--dry-run", "--set", "phones.guard=rules"]
    )
    assert guarded.exit_code == 0, guarded.output
    assert "action guard: rules from" in guarded.output and "- delete (deletes data" in guarded.output


def test_paper_preset_dry_run_names_every_missing_part(monkeypatch, tmp_path):
    for var in ("DARWIN_DEVICES", "DARWIN_CHECKPOINT", "DARWIN_POLICY_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DARWIN_POLICY_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    result = CliRunner().invoke(
        main, ["run", str(ROOT / "examples" / "spa_bench.py"), "--dry-run", "--preset", "paper"]
    )
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    for part in (
        "policy server: http://127.0.0.1:9/v1/models is unreachable",
        "phones: phones.provider='adb' needs 8 devices",
        "verl learner:",
        "checkpoint:",
        "verifier: gemini/gemini-2.5-flash: no API key: export GOOGLE_API_KEY or GEMINI_API_KEY",
    ):
        assert part in out, part


def test_paper_preset_dry_run_passes_each_part_it_can_reach(monkeypatch, tmp_path, openai_server):
    """Server, devices, checkpoint and judge key given: only what needs a GPU is left. The
    checkpoint is a tiny Qwen2-VL in Hugging Face layout (model + processor), as UI-TARS-1.5-7B
    arrives; tests/test_preflight.py checks what is read from it."""
    from darwin.models.factory import build_tiny_vlm

    openai_server.models = ["ui-tars-1.5-7b"]
    vlm = build_tiny_vlm(seed=0)
    vlm.model.save_pretrained(tmp_path / "ckpt")
    vlm.processor.save_pretrained(tmp_path / "ckpt")
    monkeypatch.delenv("DARWIN_AGENT_FORMAT", raising=False)
    monkeypatch.setenv("DARWIN_POLICY_URL", openai_server.api_base)
    monkeypatch.setenv("DARWIN_DEVICES", "cloud-1:5555,cloud-2:5555")
    monkeypatch.setenv("DARWIN_CHECKPOINT", str(tmp_path / "ckpt"))
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    from darwin.run.preflight import preflight

    config = load_experiment(ROOT / "examples" / "spa_bench.py", "paper")
    problems = preflight(config)
    assert [p.part for p in problems] == ["verl learner"] and "no GPU" in problems[0].message
    openai_server.models = ["other-model"]
    assert "serves ['other-model'], not 'ui-tars-1.5-7b'" in str(preflight(config)[0])


def test_paper_preset_keeps_table_1_values():
    config = load_experiment(ROOT / "examples" / "spa_bench.py", "paper")
    assert (config.rollout_steps, config.horizon, config.learner.critic.warmup_updates) == (256, 32, 30)
    assert (
        config.learner.gamma,
        config.learner.lam,
        config.learner.ppo.clip_ratio,
        config.learner.critic.value_head_bias,
    ) == (
        1.0,
        0.95,
        0.2,
        0.1,
    )
    assert (config.learner.actor_lr, config.learner.critic.lr, config.learner.mini_batch_size) == (1e-6, 1e-5, 64)


def test_set_overrides_nested_fields_and_revalidates():
    base = load_experiment(ROOT / "examples" / "spa_bench.py")
    config = apply_overrides(
        base,
        [
            "horizon=16",
            "learner.ppo.kl_coef=0.05",
            "sft.steps=180",
            "mode=sync",
            "sft.observation_size=[168, 364]",
            'learner.finetunes.lora={"rank": 4}',
            "checkpoint=null",
        ],
    )
    assert (config.horizon, config.learner.ppo.kl_coef, config.sft.steps, config.mode) == (16, 0.05, 180, "sync")
    assert config.learner.finetunes.lora is not None and config.learner.finetunes.lora.rank == 4
    assert config.sft.observation_size == (168, 364) and config.checkpoint is None
    # everything else is untouched, and the sub-configs stay frozen, validated models
    assert config.learner.actor_lr == base.learner.actor_lr and config.phones == base.phones
    assert config.sft.config_hash() != base.sft.config_hash()
    assert [t.step_budget for t in config.resolve_tasks()] == [16] * 8
    assert apply_overrides(base, []) == base


def test_set_overrides_report_every_problem_with_a_fix():
    base = load_experiment(ROOT / "examples" / "spa_bench.py")
    with pytest.raises(ExperimentError) as err:
        apply_overrides(base, ["learner.ppo.kl_cof=0.1", "hoizon=3", "justtext", "learner.finetunes.lora.rank=4"])
    message = str(err.value)
    assert "learner.ppo has no field 'kl_cof' (did you mean 'kl_coef'?)" in message
    assert "the experiment has no field 'hoizon' (did you mean 'horizon'?)" in message
    assert "--set justtext: expected KEY=VALUE" in message
    assert "learner.finetunes.lora is null; set it whole" in message
    with pytest.raises(ExperimentError, match=r"(?s)learner: .*kl_coef: Input should be greater than or equal to 0"):
        apply_overrides(base, ["learner.ppo.kl_coef=-1"])
    with pytest.raises(ExperimentError, match="horizon: Input should be a valid integer"):
        apply_overrides(base, ["horizon=abc"])
    # cross-field checks of the experiment still run
    with pytest.raises(ExperimentError, match="leaves no actor update"):
        apply_overrides(base, ["updates=2"])


def test_reward_shaping_is_set_in_the_learner():
    base = load_experiment(ROOT / "examples" / "spa_bench.py")
    shaped = apply_overrides(
        base, ["learner.levers.parse_error_penalty=0.5", "learner.levers.format_penalty_advantage=0"]
    )
    assert shaped.learner.levers.parse_error_penalty == 0.5
    with pytest.raises(ExperimentError, match="charges them again through the return"):
        apply_overrides(base, ["learner.levers.parse_error_penalty=0.5"])  # the default's local format penalty is on


def test_run_cli_applies_set_overrides():
    spa = str(ROOT / "examples" / "spa_bench.py")
    result = CliRunner().invoke(main, ["run", spa, "--dry-run", "--set", "horizon=16", "--set", "updates=7"])
    assert result.exit_code == 0, result.output
    assert "│ horizon    │ 16" in result.output and "│ updates    │ 7," in result.output
    bad = CliRunner().invoke(main, ["run", spa, "--dry-run", "--set", "learner.ppo.kl_cof=1"])
    assert bad.exit_code != 0 and "did you mean 'kl_coef'" in bad.output


def test_bad_experiment_files_say_what_and_how(tmp_path):
    with pytest.raises(ExperimentError, match="no such experiment file"):
        load_experiment(tmp_path / "missing.py")
    (tmp_path / "nobuild.py").write_text("x = 1\n")
    with pytest.raises(ExperimentError, match="defines no build"):
        load_experiment(tmp_path / "nobuild.py")
    (tmp_path / "bad.py").write_text(
        textwrap.dedent("""
        from darwin.run.config import ExperimentConfig
        def build(preset):
            return ExperimentConfig(name="bad name", horizon=0, phones={"count": 0})
    """)
    )
    with pytest.raises(ExperimentError) as info:
        load_experiment(tmp_path / "bad.py")
    msg = str(info.value)
    assert "3 problem(s)" in msg and "name" in msg and "horizon" in msg and "phones.count" in msg
    (tmp_path / "badtask.py").write_text(
        textwrap.dedent("""
        from darwin.run.config import ExperimentConfig
        def build(preset):
            return ExperimentConfig(name="x", tasks=("clock1",))
    """)
    )
    with pytest.raises(ExperimentError, match="did you mean 'clock_1'"):
        load_experiment(tmp_path / "badtask.py")


def test_small_run_trains_logs_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(small_experiment(tmp_path, 2)), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "success.png").is_file() and any((run_dir / "tensorboard").glob("events.*"))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["group"] == "update"] == [1, 2]
    # Per-task training success of each batch, as the run database records its episodes.
    with sqlite3.connect(run_dir / "run.db") as db:
        outcome = {
            eid: (task, success) for eid, task, success in db.execute("select id, task_id, success from episodes")
        }
    for trained, logged in zip(
        (json.loads(line) for line in (run_dir / "updates.jsonl").read_text().splitlines()),
        (r for r in rows if r["group"] == "rollout"),
        strict=True,
    ):
        by_task: dict[str, list[int]] = {}
        for eid in trained["episode_ids"]:
            task, success = outcome[eid]
            if success is not None:
                by_task.setdefault(task, []).append(success)
        assert by_task and {k: v for k, v in logged.items() if k.startswith("success_by_task/")} == {
            f"success_by_task/{task}": sum(v) / len(v) for task, v in by_task.items()
        }
    manifest = json.loads((run_dir / "checkpoint" / "learner.json").read_text())
    assert manifest["updates"] == 2
    # The warm start and the final policy are evaluated on their own 2 phones: per task and phone, a greedy and a sampled episode.
    evals = json.loads((run_dir / "eval.json").read_text())
    assert (evals["warm_start"]["updates"], evals["warm_start"]["policy_version"]) == (0, 0)
    assert (evals["final"]["updates"], evals["final"]["policy_version"]) == (2, manifest["policy_version"])
    assert evals["final"]["episodes"] == 4 and set(evals["final"]["per_task"]) <= {"settings_dark_theme", "amazon_0"}
    assert len(evals["final"]["records"]) == 8 and evals["final"]["greedy"] is not None
    assert set(evals["final"]["pass_at_k"]) == {"1"}
    assert [r["step"] for r in rows if r["group"] == "eval"] == [0, 2]
    assert "warm start" in result.output and "points" in result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] == 2 and summary["rl_s"] > 0 and summary["eval_final_s"] > 0
    compared = CliRunner().invoke(main, ["compare", str(run_dir), "--plot", str(tmp_path / "cmp.png")])
    assert compared.exit_code == 0, compared.output
    gain = 100 * (evals["final"]["success_rate"] - evals["warm_start"]["success_rate"])
    row = next(line for line in compared.output.splitlines() if line.startswith(f"| {run_dir.name} |"))
    assert f"| {gain:+.1f} |" in row and (tmp_path / "cmp.png").is_file()
    missing = CliRunner().invoke(main, ["compare", str(tmp_path / "cache")])
    assert missing.exit_code != 0 and "no success_points.json" in missing.output
    # `darwin eval --agent tiny:<run dir>` plays the trained weights, not the warm start.
    pool = load_run_policy(run_dir)
    try:
        assert pool.policy.version == manifest["policy_version"] > 0
        saved = torch.load(run_dir / "checkpoint" / "actor.pt", map_location="cpu", weights_only=True)
        live = pool.policy.vlm.model.state_dict()
        assert all(torch.equal(live[k], v) for k, v in saved.items() if k in live) and saved.keys() & live.keys()
    finally:
        pool.policy.close()
    evaluated = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            f"tiny:{run_dir}",
            "--phones",
            "2",
            "--tasks",
            "amazon_0",
            "--run-dir",
            str(tmp_path / "ev"),
        ],
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert "overall" in evaluated.output
    result = CliRunner().invoke(
        main, ["run", str(small_experiment(tmp_path, 3)), "--run-dir", str(run_dir), "--resume"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["group"] == "update"] == [1, 2, 3]
    resumed = json.loads((run_dir / "eval.json").read_text())
    assert resumed["warm_start"] == evals["warm_start"]  # not re-run on resume
    assert resumed["final"]["updates"] == 3


@pytest.mark.parametrize("group_size", [None, 2], ids=["episodes", "groups"])
def test_kill_9_during_training_then_resume(tmp_path, group_size):
    run_dir = tmp_path / "run"
    exp = small_experiment(tmp_path, 30)
    if group_size is not None:  # GRPO-style groups: pending groups must come back whole
        exp.write_text(exp.read_text().replace("rollout_steps=12,", f"rollout_steps=12, group_size={group_size},"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "darwin.cli", "run", str(exp), "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env={**os.environ, "CI": "true"},
    )
    manifest = run_dir / "checkpoint" / "learner.json"
    deadline = time.time() + 300
    while time.time() < deadline and not (manifest.is_file() and json.loads(manifest.read_text())["updates"] >= 2):
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = json.loads(manifest.read_text())
    assert saved["updates"] >= 2
    pending = set(saved["pending_episode_ids"])
    exp.write_text(exp.read_text().replace("updates=30", f"updates={saved['updates'] + 1}"))
    result = CliRunner().invoke(main, ["run", str(exp), "--run-dir", str(run_dir), "--resume"])
    assert result.exit_code == 0, result.output
    resumed = json.loads(manifest.read_text())
    assert resumed["updates"] == saved["updates"] + 1
    # Every completed trajectory the checkpoint carried was trained after the resume or is still carried.
    trained_after = {
        e
        for line in (run_dir / "updates.jsonl").read_text().splitlines()
        for e in json.loads(line)["episode_ids"]
        if json.loads(line)["update"] > saved["updates"]
    }
    assert pending <= trained_after | set(resumed["pending_episode_ids"])
    if group_size is not None:  # the resumed run kept group mode (a partial group whose members died is released)
        assert json.loads((run_dir / "experiment.json").read_text())["group_size"] == group_size


def _episodes_of(db_path: Path, run_name: str) -> list[tuple]:
    """Each episode of one stored run: task, phone, actions taken and outcome, in a stable order."""
    with sqlite3.connect(db_path) as db:
        (run_id,) = db.execute("select id from runs where name = ?", (run_name,)).fetchone()
        episodes = db.execute(
            "select id, task_id, phone, success, num_steps from episodes where run_id = ?", (run_id,)
        ).fetchall()
        played = []
        for eid, task, phone, success, steps in episodes:
            actions = tuple(
                a for (a,) in db.execute("select action_json from steps where episode_id = ? order by step", (eid,))
            )
            played.append((task, phone, actions, success, steps))
    return sorted(played, key=repr)


def test_eval_of_an_experiment_plays_the_runs_warm_start_evaluation(tmp_path):
    """`darwin eval --experiment F` is the run's evaluation (same engine, phones, seeds and
    policy): it plays the same episodes as `darwin run F`'s warm-start evaluation, and both
    store them with their verdicts in the run database."""
    path = tmp_path / "one_eval_phone.py"
    path.write_text(
        small_experiment(tmp_path, 2)
        .read_text()
        .replace("EvaluationConfig(samples=1, phones=2)", "EvaluationConfig(samples=2, phones=1)")
    )
    run_dir = tmp_path / "run"
    trained = CliRunner().invoke(main, ["run", str(path), "--run-dir", str(run_dir)])
    assert trained.exit_code == 0, trained.output
    evaluated = CliRunner().invoke(main, ["eval", "--experiment", str(path), "--run-dir", str(tmp_path / "ev")])
    assert evaluated.exit_code == 0, evaluated.output
    in_run = _episodes_of(run_dir / "run.db", "small evaluation warm_start")
    alone = _episodes_of(tmp_path / "ev" / "run.db", "eval warm start of small")
    assert len(in_run) == 6 and all(steps for *_, steps in in_run)  # 2 tasks x (greedy + 2 sampled), each played
    assert alone == in_run
    with sqlite3.connect(run_dir / "run.db") as db:
        verdicts = db.execute(
            "select count(*) from verdicts join episodes on verdicts.episode_id = episodes.id "
            "join runs on episodes.run_id = runs.id where runs.name = 'small evaluation warm_start'"
        ).fetchone()[0]
    assert verdicts >= 4


def test_a_ui_tars_format_checkpoint_trains_in_the_loop(tmp_path):
    """`agent.format` names the agent over any Qwen2-VL-family model directory (a UI-TARS
    checkpoint; here a tiny random one saved in Hugging Face layout): the run samples with
    the UI-TARS prompt and parser and the learner updates that model."""
    from darwin.agents.uitars import UITarsAgent
    from darwin.learner.config import LearnerConfig
    from darwin.models.factory import build_tiny_vlm
    from darwin.run.config import AgentConfig, EvaluationConfig, ExperimentConfig, PhonesConfig, PolicyConfig
    from darwin.run.recipe import run_experiment

    build_tiny_vlm(seed=0).save_pretrained(tmp_path / "ui-tars")
    config = ExperimentConfig(
        name="uitars",
        tasks=("settings_dark_theme",),
        horizon=3,
        checkpoint=str(tmp_path / "ui-tars"),
        agent=AgentConfig(format="uitars-1.5", observation_size=(252, 560), max_new_tokens=24),
        phones=PhonesConfig(count=2),
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        learner=LearnerConfig(
            critic={"warmup_updates": 0}, speed={"micro_batch_size": 2}, ppo_epochs=1, mini_batch_size=4
        ),
        rollout_steps=6,
        updates=1,
        evaluation=EvaluationConfig(samples=1, phones=1),
    )
    pool = build_policy_pool(config, warm_start_checkpoint(config))
    try:
        assert isinstance(pool(0).agent, UITarsAgent) and pool.observation_size == (252, 560)
    finally:
        pool.policy.close()
    result = run_experiment(config, tmp_path / "run")
    update = next(
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"update"' in line
    )
    assert result.updates == 1 and update["actor_updated"] == 1.0 and update["policy_version"] == 1.0
    with sqlite3.connect(tmp_path / "run" / "run.db") as db:
        responses = [r for (r,) in db.execute("select response_text from steps") if r is not None]
    assert responses  # the model's raw outputs, parsed by the UI-TARS parser (mostly parse errors for a random model)


def test_a_run_whose_every_episode_errors_stops_and_names_the_cause(tmp_path, monkeypatch):
    """No batch can come when every episode ends in an error (a server refusing every request):
    the run stops with the cause instead of waiting out its time budget."""
    import darwin.run.recipe
    from darwin.learner.config import LearnerConfig
    from darwin.models.factory import build_tiny_vlm
    from darwin.policies.hf import HFPolicy
    from darwin.run.config import AgentConfig, ExperimentConfig, PhonesConfig, PolicyConfig
    from darwin.run.recipe import run_experiment
    from darwin.types import RunAbort

    async def refuse(self, prompts, **kwargs):
        raise RuntimeError("HTTP 400: max_tokens=256 exceeds this server's 24")

    monkeypatch.setattr(HFPolicy, "generate", refuse)
    monkeypatch.setattr(darwin.run.recipe, "ERROR_STREAK", 6)
    build_tiny_vlm(seed=0).save_pretrained(tmp_path / "ui-tars")
    config = ExperimentConfig(
        name="refused",
        tasks=("settings_dark_theme",),
        horizon=3,
        checkpoint=str(tmp_path / "ui-tars"),
        agent=AgentConfig(format="uitars-1.5", observation_size=(252, 560), max_new_tokens=24),
        phones=PhonesConfig(count=2),
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        rollout_steps=6,
        updates=1,
        learner=LearnerConfig(critic={"warmup_updates": 0}, speed={"micro_batch_size": 2}, mini_batch_size=4),
        time_budget_s=600,
    )
    with pytest.raises(RunAbort, match=r"all ended in an error.*max_tokens=256 exceeds this server's 24.*--resume"):
        run_experiment(config, tmp_path / "run")


def test_agent_format_needs_a_model_directory_and_a_screen_size():
    from darwin.run.config import AgentConfig, ExperimentConfig

    with pytest.raises(ValueError, match="needs agent.observation_size"):
        AgentConfig(format="uitars-1.5")
    with pytest.raises(ValueError, match="did you mean 'uitars-1.5'"):
        AgentConfig(format="uitars1.5", observation_size=(252, 560))
    with pytest.raises(ValueError, match="set checkpoint"):
        ExperimentConfig(name="x", agent=AgentConfig(format="uitars-1.5", observation_size=(252, 560)))


def test_store_url_comes_from_the_environment(tmp_path, monkeypatch):
    from darwin.problems import ExperimentError
    from darwin.run.config import StoreConfig

    store = StoreConfig(url_env="DARWIN_TEST_DB")
    with pytest.raises(ExperimentError, match=r"\$DARWIN_TEST_DB is not set"):
        build_store(store, tmp_path)
    monkeypatch.setenv("DARWIN_TEST_DB", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    opened = build_store(store, tmp_path / "run")
    try:
        opened.start_run("x", config=None)
    finally:
        opened.close()
    assert (tmp_path / "elsewhere.db").is_file() and not (tmp_path / "run" / "run.db").exists()
    shots = build_store(StoreConfig(screenshot_dir=str(tmp_path / "shots")), tmp_path / "run2")
    try:
        assert shots.screenshot_dir == tmp_path / "shots" and (tmp_path / "run2" / "run.db").is_file()
    finally:
        shots.close()


def test_a_run_says_what_its_warm_start_does_and_no_third_party_bar_leaks(tmp_path):
    """A fresh process, stdout not a terminal (a log, CI): lines for each warm-start stage
    (demonstrations, encoding, training: when it starts and when its work is done), then the
    run's own lines; transformers' "Loading weights" bar never shows."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "darwin.cli",
            "run",
            str(small_experiment(tmp_path, 2)),
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "CI": "true"},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stages = [
        line.split("] warm start: ", 1)[1].split(":")[0].split(" (")[0]  # the stage, without its detail (the loss)
        for line in done.stdout.splitlines()
        if "] warm start: SFT" in line
    ]
    assert list(dict.fromkeys(stages)) == ["SFT demonstrations", "SFT encoding", "SFT training"], done.stdout
    assert stages == sorted(stages, key=["SFT demonstrations", "SFT encoding", "SFT training"].index), done.stdout
    before_rl = [
        line for line in done.stdout.splitlines() if "] warm start" in line or "] evaluation (warm start)" in line
    ]
    assert before_rl and not any("update" in line or "env steps" in line for line in before_rl), before_rl
    for bar in ("Loading weights", "Writing model shards", "it/s]"):
        assert bar not in done.stdout + done.stderr, bar


def test_the_recipe_shows_the_sft_loss_every_two_seconds_and_the_last(tmp_path, monkeypatch):
    """The loss is the SFT stage's detail; its steps done and left are on the stage clock
    (tests/test_progress.py)."""
    from darwin.run.recipe import TrainingRecipe
    from darwin.sft.training import StepStats

    shown = []
    recipe = TrainingRecipe(
        load_experiment(small_experiment(tmp_path, 2)), tmp_path / "run", on_progress=lambda p: shown.append(p.detail)
    )
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    for step in range(1, 11):  # one step a second
        recipe._sft_step(StepStats(step=step, steps=10, loss=1.0 / step, lr=1e-3, tokens_per_s=1.0, elapsed_s=0.0))
        now[0] += 1.0
    assert shown == ["loss 1.000", "loss 0.333", "loss 0.200", "loss 0.143", "loss 0.111", "loss 0.100"]


def test_a_bootstrapping_learner_has_its_training_workflow_record_the_next_state(tmp_path):
    config = load_experiment(small_experiment(tmp_path, 2))
    assert not build_workflow(config, (168, 364)).config.record_next_prompt  # truncation='zero': nothing to read
    boot = apply_overrides(config, ["learner.truncation=bootstrap"])
    assert build_workflow(boot, (168, 364)).config.record_next_prompt
    assert not build_workflow(boot, (168, 364), evaluation=True).config.record_next_prompt  # evaluation never trains


def test_phone_faults_wrap_the_training_simphones_only_and_a_bad_spec_says_how(tmp_path):
    from darwin.envs.base import InfraError
    from darwin.envs.faults import FaultyEnv
    from darwin.run.build import build_eval_phones, build_fleet

    config = load_experiment(small_experiment(tmp_path, 2))
    assert not any(isinstance(p, FaultyEnv) for p in build_fleet(config).envs)
    faulty = apply_overrides(config, ["phones.faults=crash=1.0:0"])
    training = build_fleet(faulty).envs
    assert all(isinstance(p, FaultyEnv) for p in training) and len(training) == 2
    with pytest.raises(InfraError, match="crash"):
        training[0].screenshot((54, 120))
    assert not any(isinstance(p, FaultyEnv) for p in build_eval_phones(faulty, training))
    with pytest.raises(
        ExperimentError, match=r"phones.faults: fault entry 'crash=often'.*comma-separated entries like 'drop="
    ):
        apply_overrides(config, ["phones.faults=crash=often"])
    with pytest.raises(ExperimentError, match=r"in-process SimPhones .*'sim_farm', kwargs = \{faults"):
        apply_overrides(config, ["phones.faults=crash=0.1", "phones.provider=sim_farm"])


def test_fresh_initial_states_start_every_training_episode_anew_and_never_on_an_evaluation_phone(tmp_path):
    """`phones.initial_states='fresh'`: each training episode starts from a new factory-reset
    state (other list order, app data, look); 'fixed' (the default) from the same one; the
    evaluation phones are the same either way; a setting it cannot honour is refused, and 'auto'
    falls back to fixed starts there."""
    from darwin.envs.sim.env import FRESH_SEED_STRIDE, SimPhoneEnv
    from darwin.run.build import build_eval_phones, build_fleet

    config = load_experiment(small_experiment(tmp_path, 2))
    fresh = apply_overrides(config, ["phones.initial_states=fresh"])
    fixed_env, fresh_env = build_fleet(config).envs[0], build_fleet(fresh).envs[0]
    first = fresh_env.phone.snapshot()
    assert fixed_env.phone.snapshot() == first  # the first episode starts where a fixed phone's do
    starts = []
    for env in (fixed_env, fresh_env):
        env.phone.press_home()
        env.go_home()
        starts.append(env.phone.snapshot())
    assert starts[0] == first and starts[1] != first
    assert fresh_env.phone.seed == config.phones.seed + FRESH_SEED_STRIDE
    assert starts[1]["perturb"]["seed"] == fresh_env.phone.seed
    fresh_env.go_home()
    assert fresh_env.phone.seed == config.phones.seed + 2 * FRESH_SEED_STRIDE  # and the next one anew again
    eval_fixed, eval_fresh = build_eval_phones(config), build_eval_phones(fresh)
    assert [e.phone.snapshot() for e in eval_fixed] == [e.phone.snapshot() for e in eval_fresh]
    assert not any(e.fresh_initial_states for e in eval_fresh)
    with pytest.raises(ExperimentError, match=r"initial_states = 'fresh'.*reset_between_episodes = true"):
        apply_overrides(fresh, ["phones.reset_between_episodes=false"])
    with pytest.raises(ExperimentError, match=r"initial_states = 'fresh'.*provider = 'sim'.*got provider 'sim_farm'"):
        apply_overrides(fresh, ["phones.provider=sim_farm"])
    with pytest.raises(ValueError, match=r"needs reset_between_episodes=True"):
        SimPhoneEnv(seed=1, fresh_initial_states=True)
    # 'auto' renews the starts where the phones can and keeps them where they cannot, without an error
    auto = apply_overrides(config, ["phones.initial_states=auto"])
    assert auto.phones.fresh_initial_states and build_fleet(auto).envs[0].fresh_initial_states
    assert not apply_overrides(auto, ["phones.reset_between_episodes=false"]).phones.fresh_initial_states
    assert not apply_overrides(auto, ["phones.provider=sim_farm"]).phones.fresh_initial_states
    assert not config.phones.fresh_initial_states and fresh.phones.fresh_initial_states


def test_best_preset_is_the_default_from_the_strongest_warm_start():
    """`--preset best` changes only the warm start (and gives its RL the 14 minutes, the trained
    vision tower, the fixed initial states and the pop-up rate it was measured with): a user choosing "the best
    agent" gets the default's RL from the 1,000-step warm start."""
    default = load_experiment(ROOT / "examples" / "spa_bench.py")
    best = load_experiment(ROOT / "examples" / "spa_bench.py", "best")
    run_fields = {"name", "notes", "time_budget_s", "sft", "learner", "phones"}
    sft_fields = {"steps", "phones", "episodes"}
    assert best.model_dump(exclude=run_fields) == default.model_dump(exclude=run_fields)
    # ... its training phones start each episode from their one initial state, as when it was measured
    changed = {"initial_states", "perturbation"}
    assert best.phones.model_dump(exclude=changed) == default.phones.model_dump(exclude=changed)
    assert (default.phones.initial_states, best.phones.initial_states) == ("auto", "fixed")
    # ... and pop-ups at the evaluation phones' rate; the evaluation phones are the default's
    assert (default.phones.perturbation.popup_rate, best.phones.perturbation.popup_rate) == (0.5, 0.25)
    assert best.phones.perturbation == best.evaluation.perturbation == PerturbationConfig()
    # ... and its RL trains the vision tower, the setting its recorded numbers were measured with
    assert best.learner.model_dump(exclude={"speed"}) == default.learner.model_dump(exclude={"speed"})
    assert best.learner.speed.model_dump(exclude={"freeze_vision"}) == default.learner.speed.model_dump(
        exclude={"freeze_vision"}
    )
    assert default.learner.speed.freeze_vision and not best.learner.speed.freeze_vision
    assert best.sft.model_dump(exclude=sft_fields) == default.sft.model_dump(exclude=sft_fields)
    assert (best.sft.steps, best.sft.phones, best.sft.episodes) == (1000, 128, 1024)
    assert best.sft.prefer_typing and best.time_budget_s == 14 * 60


def test_best_preset_trains_the_warm_start_whose_numbers_results_md_records():
    """docs/results.md quotes the strongest warm start's SFT config hash beside its numbers. SFT is
    deterministic for its config, so the same hash is the same weights; a change to SimPhone's
    screens or to the tiny agent changes the hash and fails this test until the numbers are re-measured."""
    section = (ROOT / "docs" / "results.md").read_text().split("## The strongest warm start")[1].split("\n## ")[0]
    best = load_experiment(ROOT / "examples" / "spa_bench.py", "best")
    assert f"`{best.sft.config_hash()}`" in section


def test_the_default_leaves_room_for_rl_and_fits_the_demo_budget():
    """`make demo`'s warm start is the short one and its RL at most 10 minutes (docs/results.md,
    "The default run")."""
    config = load_experiment(ROOT / "examples" / "spa_bench.py")
    assert (config.sft.steps, config.sft.phones, config.sft.episodes) == (200, 32, 256)
    assert config.time_budget_s == 10 * 60


def test_evaluation_phones_keep_their_own_perturbation_when_training_phones_change_theirs(tmp_path):
    """`evaluation.perturbation` measures on the usual mix while the training phones see another
    (here every app launch under a pop-up); unset, the evaluation phones take the training phones'."""
    from darwin.run.build import build_eval_phones, build_fleet

    config = load_experiment(small_experiment(tmp_path, 2))
    popups = apply_overrides(config, ["phones.perturbation.popup_rate=1.0"])
    kept = apply_overrides(popups, ['evaluation.perturbation={"popup_rate": 0.25}'])
    assert build_fleet(popups).envs[0].phone.state["perturb"]["popup_rate"] == 1.0
    assert [e.phone.state["perturb"]["popup_rate"] for e in build_eval_phones(popups)] == [1.0, 1.0]
    assert [e.phone.state["perturb"]["popup_rate"] for e in build_eval_phones(kept)] == [0.25, 0.25]
    # the same evaluation phones as an experiment that never changed its training phones
    assert [e.phone.snapshot() for e in build_eval_phones(kept)] == [
        e.phone.snapshot() for e in build_eval_phones(config)
    ]
