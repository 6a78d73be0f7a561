"""The extension examples (examples/custom_*.py): each validates with `darwin run --dry-run`,
and a short real run of each shows in its outputs that its own component did the work.
Classes defined in an experiment file are named by import path through the module the
loader registers (`f"{__name__}:Class"`)."""

import asyncio
import json
import re
import sqlite3
import sys
import textwrap
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from darwin.agents.scripted import OracleActor
from darwin.cli.main import main
from darwin.components import build_component
from darwin.curricula.base import EpisodeOutcome
from darwin.envs.sim.env import SimPhoneEnv
from darwin.memory.base import Memory, MemoryWindow
from darwin.problems import ExperimentError
from darwin.rollout import RolloutEngine
from darwin.run.build import build_workflow
from darwin.run.config import ExperimentConfig
from darwin.run.load import apply_overrides, experiment_module_name, load_experiment
from darwin.task_registry import get_task
from darwin.types import Phase, TerminationReason, Transition
from darwin.verifiers.base import VerificationRequest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

COMPONENTS = {
    "custom_workflow": ("workflow", "GoldenBudgetWorkflow"),
    "custom_verifier": ("verifier", "final_state_check"),
    "custom_curriculum": ("curriculum", "HardestFirstCurriculum"),
    "custom_memory": ("memory", "FirstAndRecentMemory"),
}

TASKS = ("settings_dark_theme", "amazon_0")  # 3 golden steps each

# The smallest run that trains end to end: a 3-step SFT warm start (built once, shared by
# every run through one cache directory), 2 phones, 2 updates of 12 steps, no evaluation.
SMALL = [
    f"tasks={json.dumps(TASKS)}",
    "horizon=6",
    "phones.count=2",
    "sft.steps=3",
    "sft.warmup_steps=1",
    "sft.batch_size=4",
    "sft.phones=2",
    "sft.episodes=4",
    "sft.heldout_episodes=0",
    "policy.max_batch=2",
    "policy.max_wait=0.01",
    "learner.critic.warmup_updates=1",
    "learner.mini_batch_size=8",
    "learner.speed.micro_batch_size=4",
    "rollout_steps=12",
    "updates=2",
    "evaluation.samples=0",
]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warm-start")


def small_run(example: str, run_dir: Path, cache: Path, *extra: str) -> Result:
    overrides = [*SMALL, f"cache_dir={json.dumps(str(cache))}", *extra]
    args = ["run", str(EXAMPLES / f"{example}.py"), "--run-dir", str(run_dir)]
    result = CliRunner().invoke(main, args + [a for kv in overrides for a in ("--set", kv)])
    assert result.exit_code == 0, result.output
    assert "2 updates" in result.output
    return result


def query(run_dir: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(run_dir / "run.db")) as db:
        return db.execute(sql).fetchall()


@pytest.mark.parametrize("example", sorted(COMPONENTS))
def test_example_validates_with_dry_run(example):
    kind, attr = COMPONENTS[example]
    result = CliRunner().invoke(main, ["run", str(EXAMPLES / f"{example}.py"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"dry run: {example} (valid)" in result.output and attr in result.output
    config = load_experiment(EXAMPLES / f"{example}.py")
    spec = getattr(config, kind)
    assert spec.name == f"darwin_experiment_{example}:{attr}"
    # Only the component differs from the experiment the examples build on.
    spa = load_experiment(EXAMPLES / "spa_bench.py").model_dump(exclude={"name", "notes", kind})
    assert config.model_dump(exclude={"name", "notes", kind}) == spa


def test_bad_example_arguments_fail_before_the_run_with_the_fix():
    cases = {
        "custom_workflow": ('workflow.kwargs={"slack": -1}', "slack must be a number > 0"),
        "custom_curriculum": ('curriculum.kwargs={"window": 0}', "window must be an integer >= 1"),
        "custom_memory": ('memory.kwargs={"recent": -1}', "recent must be an integer >= 0"),
        "custom_verifier": ('verifier.kwargs={"strict": true}', "is a function; it takes no kwargs"),
    }
    for example, (override, message) in cases.items():
        result = CliRunner().invoke(main, ["run", str(EXAMPLES / f"{example}.py"), "--dry-run", "--set", override])
        assert result.exit_code != 0 and message in result.output, result.output
        assert "Traceback" not in result.output


LAB = """
from darwin.components import ComponentSpec
from darwin.curricula.base import Curriculum
from darwin.run.config import ExperimentConfig


class Pick(Curriculum):
    def __init__(self, tasks):
        self.tasks = tasks

    def next_task(self):
        return self.tasks[INDEX]


def build(preset):
    return ExperimentConfig(name="lab", tasks=("settings_dark_theme", "amazon_0"),
                            curriculum=ComponentSpec(name=f"{__name__}:Pick"))
"""


def test_classes_of_an_experiment_file_are_named_by_import_path(tmp_path, monkeypatch):
    path = tmp_path / "registered-lab.py"
    name = experiment_module_name(path)
    assert name == "darwin_experiment_registered_lab"
    monkeypatch.delitem(sys.modules, name, raising=False)  # restored (removed) after the test

    def curriculum_of(config: ExperimentConfig) -> object:
        return build_component("curriculum", config.curriculum, tasks=config.resolve_tasks(), seed=0)

    path.write_text(textwrap.dedent(LAB).replace("INDEX", "0"))
    config = load_experiment(path)
    first = sys.modules[name]
    assert config.curriculum.name == f"{name}:Pick" and type(curriculum_of(config)) is first.Pick
    assert curriculum_of(config).next_task().id == "settings_dark_theme"
    # --set rebuilds the components in the same process: the name still resolves.
    assert apply_overrides(config, ["horizon=5"]).curriculum == config.curriculum
    # Loading the file again runs it afresh: an edit takes effect, the module is replaced.
    path.write_text(textwrap.dedent(LAB).replace("INDEX", "1"))
    config = load_experiment(path)
    assert sys.modules[name] is not first and type(curriculum_of(config)) is sys.modules[name].Pick
    assert curriculum_of(config).next_task().id == "amazon_0"
    # A file that fails to run leaves the module loaded before in place.
    second = sys.modules[name]
    path.write_text("raise RuntimeError('half-edited')\n")
    with pytest.raises(RuntimeError, match="half-edited"):
        load_experiment(path)
    assert sys.modules[name] is second
    # A class that the file does not define is named as such.
    with pytest.raises(ExperimentError, match=f"module '{name}' has no 'Missing'"):
        apply_overrides(config, [f"curriculum.name={name}:Missing"])


@pytest.mark.timeout(300)
def test_custom_workflow_gives_each_task_its_golden_budget(tmp_path, warm_cache):
    run_dir = tmp_path / "run"
    small_run("custom_workflow", run_dir, warm_cache, "horizon=12")
    episodes = query(
        run_dir, "select task_id, termination_reason, num_steps from episodes where termination_reason is not null"
    )
    # Both tasks have 3 golden steps: budget max(4, ceil(2.0 * 3)) = 6 of the horizon 12.
    assert episodes and max(n for *_, n in episodes) <= 6
    assert {n for _, reason, n in episodes if reason == "step_budget"} == {6}


@pytest.mark.timeout(300)
def test_custom_verifier_judges_every_episode(tmp_path, warm_cache):
    run_dir = tmp_path / "run"
    small_run("custom_verifier", run_dir, warm_cache)
    verdicts = query(run_dir, "select verifier_kind, phase, success, reason from verdicts")
    assert verdicts and {kind for kind, *_ in verdicts} == {"final_state_check"}
    for _, phase, success, reason in verdicts:
        assert phase == "execution"
        if success:
            assert re.fullmatch(r"[\w.]+ holds in the final state", reason), reason
        else:
            assert re.fullmatch(
                r"[\w.]+ does not hold in the final state \(at least \d+ action\(s\) short\)", reason
            ), reason
    # The function is asked only when the agent finishes or the budget runs out: no episode
    # ended early on reaching the goal, as under the (cheap) rule.
    ended = query(run_dir, "select termination_reason, num_steps from episodes where termination_reason is not null")
    assert ended and all(n == 6 for reason, n in ended if reason != "agent_finished")
    # A success, through the experiment's own workflow: the oracle reaches the goal and says finished.
    workflow = build_workflow(load_experiment(EXAMPLES / "custom_verifier.py"), (252, 560))
    engine = RolloutEngine([SimPhoneEnv(seed=0)], lambda i: OracleActor(), workflow=workflow)
    [episode] = asyncio.run(engine.run_episodes([get_task("settings_dark_theme")]))
    assert episode.success is True and episode.termination.reason == TerminationReason.AGENT_FINISHED
    assert episode.phase_reasons[Phase.EXECUTION] == "settings.dark_theme holds in the final state"
    # A phone without a state probe: unverified, never a failure.
    check = sys.modules[experiment_module_name(EXAMPLES / "custom_verifier.py")].final_state_check
    task = get_task("settings_dark_theme")
    unprobed = check(VerificationRequest(task, Phase.EXECUTION, task.instruction, task.verifier, [], None, None))
    assert unprobed.success is None and unprobed.reward is None


@pytest.mark.timeout(300)
def test_custom_curriculum_samples_by_failure_rate_and_checkpoints_its_state(tmp_path, warm_cache):
    run_dir = tmp_path / "run"
    small_run("custom_curriculum", run_dir, warm_cache)
    state = json.loads((run_dir / "checkpoint" / "learner.json").read_text())["extra_state"]["curriculum"]
    assert set(state["outcomes"]) == set(TASKS) and sum(map(len, state["outcomes"].values())) > 0
    logged = [
        r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if r["group"] == "curriculum"
    ]
    assert [r["step"] for r in logged] == [1, 2]
    # The weights logged at the last update follow from the state saved with it.
    raw = {tid: max(0.1, (outcomes.count(0) + 1) / (len(outcomes) + 1)) for tid, outcomes in state["outcomes"].items()}
    assert {tid: logged[-1][tid] for tid in TASKS} == pytest.approx(
        {tid: w / sum(raw.values()) for tid, w in raw.items()}
    )
    # Every scored episode the curriculum counted is in the run database.
    scored = dict(query(run_dir, "select task_id, count(*) from episodes where success is not null group by task_id"))
    assert all(len(outcomes) <= scored.get(tid, 0) for tid, outcomes in state["outcomes"].items())
    # The state restores exactly (what --resume does).
    module = sys.modules[experiment_module_name(EXAMPLES / "custom_curriculum.py")]
    tasks = [get_task(tid) for tid in TASKS]
    restored = module.HardestFirstCurriculum(tasks, seed=99)
    restored.load_state_dict(state)
    assert json.loads(json.dumps(restored.state_dict())) == state
    with pytest.raises(ValueError, match="names tasks this run lacks: amazon_0"):
        module.HardestFirstCurriculum(tasks[:1]).load_state_dict(state)
    # Hardest first: a task failing every time is drawn five times as often as one solved 4 of 4.
    curriculum = module.HardestFirstCurriculum(tasks, window=4, floor=0.1, seed=0)
    for _ in range(4):
        curriculum.update(tasks[0], EpisodeOutcome(TASKS[0], True, 3, TerminationReason.SUCCESS))
        curriculum.update(tasks[1], EpisodeOutcome(TASKS[1], False, 6, TerminationReason.STEP_BUDGET))
    curriculum.update(
        tasks[1], EpisodeOutcome(TASKS[1], None, 2, TerminationReason.INFRA_TRUNCATED)
    )  # unscored: ignored
    assert curriculum.weights() == pytest.approx({TASKS[0]: 0.2 / 1.2, TASKS[1]: 1.0 / 1.2})
    draws = Counter(curriculum.next_task().id for _ in range(600))
    assert draws[TASKS[1]] > 3 * draws[TASKS[0]] > 0


@pytest.mark.timeout(300)
def test_custom_memory_chooses_every_prompt_history(tmp_path, warm_cache, monkeypatch):
    windows: list[tuple[str, list[int], list[int]]] = []
    original = Memory.window

    def spy(self: Memory, history: Sequence[Transition], *args: object, **kwargs: object) -> MemoryWindow:
        window = original(self, history, *args, **kwargs)
        windows.append((type(self).__name__, [t.step for t in history], [e.step for e in window.entries]))
        return window

    monkeypatch.setattr(Memory, "window", spy)
    # The 3-step warm start writes mostly unparseable output, which the agent leaves out of
    # the history by default; shown as "invalid" instead, every step reaches the memory.
    small_run(
        "custom_memory", tmp_path / "run", warm_cache, 'memory.kwargs={"recent": 1}', "sft.agent.invalid_history=mark"
    )
    assert windows and {name for name, *_ in windows} == {"FirstAndRecentMemory"}
    for _, history, shown in windows:
        assert shown == (history if len(history) <= 2 else [history[0], history[-1]])
    assert max(len(history) for _, history, _ in windows) == 5  # the last step of a 6-step episode
    memory = sys.modules[experiment_module_name(EXAMPLES / "custom_memory.py")].FirstAndRecentMemory
    assert memory(recent=2).select(list(range(6))) == [0, 4, 5]
    assert memory(recent=2).select([0, 1, 2]) == [0, 1, 2]
    assert memory(recent=0).select([0, 1, 2]) == [0]


def test_planner_example_validates_without_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(main, ["run", str(EXAMPLES / "planner_llm.py"), "--dry-run"])
    assert result.exit_code == 0, result.output
    config = load_experiment(EXAMPLES / "planner_llm.py")
    assert config.workflow.name == "planner"


def test_planner_example_trains_the_actor_beside_an_llm_planner(tmp_path, warm_cache, openai_server):
    openai_server.reply = lambda body: "1. Open the app\n2. Finish the task"
    run_dir = tmp_path / "run"
    small_run(
        "planner_llm",
        run_dir,
        warm_cache,
        f"workflow.kwargs.planner.api_base={json.dumps(openai_server.api_base)}",
        'workflow.kwargs.planner.api_key_env="DARWIN_FAKE_LLM_KEY"',
        'workflow.kwargs.planner.model="openai/fake-planner"',
    )
    plans = query(run_dir, "SELECT message FROM steps WHERE agent = 'planner'")
    assert plans and all(m == "1. Open the app\n2. Finish the task" for (m,) in plans)
    actor_steps = query(run_dir, "SELECT COUNT(*) FROM steps WHERE agent = 'actor'")[0][0]
    assert actor_steps >= 24  # two updates of 12 rollout steps count the actor's steps
    assert all(
        "Open the app" in openai_server.request_text(b) or "Goal:" in openai_server.request_text(b)
        for b in openai_server.requests
    )


def test_generalization_example_trains_on_the_training_split_only():
    result = CliRunner().invoke(main, ["run", str(EXAMPLES / "generalization.py"), "--dry-run"])
    assert result.exit_code == 0, result.output
    config = load_experiment(EXAMPLES / "generalization.py")
    train = {t.template for t in config.resolve_tasks()}
    assert config.sft.tasks == config.tasks  # the warm start sees the training tasks only
    held = config.resolve_eval_sets()
    assert set(held) == {"unseen_instances", "unseen_templates", "unseen_apps"}
    assert {t.template for t in held["unseen_instances"]} <= train
    assert not {t.template for t in held["unseen_templates"] + held["unseen_apps"]} & train
    assert not {t.app for t in held["unseen_apps"]} & {t.app for t in config.resolve_tasks()}
    assert not {t.id for t in held["unseen_instances"]} & set(config.tasks)


def test_reader_rl_presets_differ_from_the_default_and_from_each_other_only_in_what_they_name():
    reader = load_experiment(EXAMPLES / "reader_rl.py")
    pixels = load_experiment(EXAMPLES / "reader_rl.py", "pixels")
    spa = load_experiment(EXAMPLES / "spa_bench.py")
    held_out = {"booking.com_3", "settings_dark_theme"}
    assert reader.tasks == spa.tasks  # RL trains on all eight base tasks
    demonstrated = reader.sft.demonstrated_tasks()
    base = {t.id for t in spa.resolve_tasks()}
    assert {t.id for t in demonstrated} & base == base - held_out
    trained_words = {
        t.verifier.params["destination"] for t in demonstrated if t.verifier.predicate == "booking.stays_results"
    }
    assert trained_words == {"Berlin", "Paris", "London", "Rome", "Vienna"}  # the word varies in training
    assert reader.sft.prefer_typing is False and reader.sft.agent.reader.name == "elements"
    assert pixels.sft.agent.reader.name == "none"
    unseen = reader.resolve_eval_sets()["unseen_words"]
    destinations = {t.verifier.params["destination"] for t in unseen}
    assert len(destinations) == 5
    trained_text = " ".join(t.instruction for t in [*reader.resolve_tasks(), *demonstrated])
    assert not any(d in trained_text for d in destinations)  # no training goal names them
    # Only the warm start's settings and the evaluation's extra set differ from the default ...
    changed = {"name", "notes", "sft", "evaluation"}
    assert reader.model_dump(exclude=changed) == spa.model_dump(exclude=changed)
    assert reader.evaluation.model_dump(exclude={"task_sets"}) == spa.evaluation.model_dump(exclude={"task_sets"})
    sft_changed = {"tasks", "prefer_typing", "agent"}
    assert reader.sft.model_dump(exclude=sft_changed) == spa.sft.model_dump(exclude=sft_changed)
    # ... and the paired control differs from the reader run in its reader alone.
    assert pixels.model_dump(exclude={"name", "notes", "sft"}) == reader.model_dump(exclude={"name", "notes", "sft"})
    assert pixels.sft.model_dump(exclude={"agent"}) == reader.sft.model_dump(exclude={"agent"})
    assert pixels.sft.agent.model_dump(exclude={"reader"}) == reader.sft.agent.model_dump(exclude={"reader"})
    result = CliRunner().invoke(main, ["run", str(EXAMPLES / "reader_rl.py"), "--preset", "ocr", "--dry-run"])
    assert result.exit_code != 0 and "choose one of reader, pixels" in result.output
    assert "Traceback" not in result.output
