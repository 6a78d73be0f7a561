"""A user's curriculum, verifier, memory, workflow, advantage estimator, learner and policy,
defined in a file outside the package, run through `darwin run --dry-run`, a short `darwin run`
and `darwin eval` from the experiment file alone; a user's agent format built by name."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.cli.main import main
from darwin.problems import ExperimentError
from darwin.run.load import apply_overrides, load_experiment

PLUGINS = """
import os
from darwin.agents.tiny import TinyAgent
from darwin.algos.estimators import advantage_estimator, get_estimator
from darwin.curricula.base import Curriculum
from darwin.learner.local import LocalLearner
from darwin.policies.hf import HFPolicy
from darwin.memory.sliding_window import SlidingWindowMemory
from darwin.verifiers.rule import RuleVerifier
from darwin.workflows.step import StepWorkflow


def log(event):
    with open(os.environ["LAB_EVENTS"], "a") as fh:
        fh.write(event + "\\n")


class OnlyTask(Curriculum):
    def __init__(self, tasks, seed=0, task_id=""):
        self.task = next(t for t in tasks if t.id == task_id)

    def next_task(self):
        log("curriculum.next_task " + self.task.id)
        return self.task


class CountingMemory(SlidingWindowMemory):
    def reset(self):
        log("memory.reset")


async def rule_and_log(request):
    verdict = await RuleVerifier().verify(request)
    log(f"verifier {verdict.success}")
    return verdict


class LoggingWorkflow(StepWorkflow):
    async def run(self, env, task, actor, emit=None, episode_id=None):
        log("workflow.run " + task.id)
        return await super().run(env, task, actor, emit=emit, episode_id=episode_id)


@advantage_estimator(needs_critic=True)
def logged_gae(inputs):
    log("estimator")
    return get_estimator("gae").fn(inputs)


class LoggingLearner(LocalLearner):
    def update(self, trajectories, *, group_ids=None):
        log("learner.update")
        return super().update(trajectories, group_ids=group_ids)


class TaggedPolicy(HFPolicy):
    def __init__(self, vlm, config, tag=""):
        super().__init__(vlm, config)
        log("policy " + tag)


class LabAgent(TinyAgent):
    pass
"""

EXPERIMENT = """
from darwin.components import ComponentSpec
from darwin.run.config import EvaluationConfig, ExperimentConfig, PhonesConfig, PolicyConfig
from darwin.learner.config import LearnerConfig
from darwin.sft.config import SFTConfig

def build(preset):
    return ExperimentConfig(
        name="lab", tasks=("settings_dark_theme", "amazon_0"), horizon=4,
        phones=PhonesConfig(count=2, seed=3),
        sft=SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0),
        cache_dir=CACHE,
        policy=PolicyConfig(max_batch=2, max_wait=0.01, backend={"name": "lab_plugins:TaggedPolicy", "kwargs": {"tag": "lab"}}),
        learner=LearnerConfig(
            critic={"warmup_updates": 1}, ppo_epochs=1, mini_batch_size=8, speed={"micro_batch_size": 4},
            algorithm="lab_plugins:logged_gae", backend="lab_plugins:LoggingLearner",
        ),
        rollout_steps=8, updates=2,
        curriculum=ComponentSpec(name="lab_plugins:OnlyTask", kwargs={"task_id": "settings_dark_theme"}),
        verifier=ComponentSpec(name="lab_plugins:rule_and_log"),
        memory=ComponentSpec(name="lab_plugins:CountingMemory"),
        workflow=ComponentSpec(name="lab_plugins:LoggingWorkflow"),
    )
"""


@pytest.fixture
def lab(tmp_path, monkeypatch):
    (tmp_path / "lab_plugins.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LAB_EVENTS", str(tmp_path / "events.txt"))
    path = tmp_path / "lab.py"
    path.write_text(EXPERIMENT.replace("CACHE", repr(str(tmp_path / "cache"))))
    return path


def events(lab: Path) -> list[str]:
    file = lab.parent / "events.txt"
    return file.read_text().splitlines() if file.exists() else []


def test_dry_run_builds_every_plugin_and_names_bad_ones(lab):
    result = CliRunner().invoke(main, ["run", str(lab), "--dry-run"])
    assert result.exit_code == 0, result.output
    config = load_experiment(lab)
    with pytest.raises(
        ExperimentError, match=r"curriculum 'learnabilty' is not built in \(did you mean 'learnability'\?\)"
    ):
        apply_overrides(config, ["curriculum.name=learnabilty"])
    with pytest.raises(ExperimentError, match="module 'lab_plugins' has no 'Missing'"):
        apply_overrides(config, ["workflow.name=lab_plugins:Missing"])
    with pytest.raises(ExperimentError, match="is not a subclass of darwin.curricula.base.Curriculum"):
        apply_overrides(config, ["curriculum.name=lab_plugins:CountingMemory"])
    with pytest.raises(ExperimentError, match="unexpected keyword argument 'colour'"):
        apply_overrides(config, ['curriculum.kwargs={"colour": 1}'])
    with pytest.raises(ExperimentError, match=r"algorithm 'gpro' is not built in \(did you mean 'grpo'\?\)"):
        apply_overrides(config, ["learner.algorithm=gpro"])
    with pytest.raises(ExperimentError, match="is not an advantage estimator: decorate the function"):
        apply_overrides(config, ["learner.algorithm=lab_plugins:log"])
    with pytest.raises(ExperimentError, match="is not a learner class"):
        apply_overrides(config, ["learner.backend=lab_plugins:CountingMemory"])
    with pytest.raises(ExperimentError, match="is not a subclass of darwin.policies.base.Policy"):
        apply_overrides(config, ["policy.backend=lab_plugins:CountingMemory"])
    with pytest.raises(ExperimentError, match="unexpected keyword argument 'colour'"):
        apply_overrides(config, ['policy.backend={"name": "lab_plugins:TaggedPolicy", "kwargs": {"colour": 1}}'])


def test_an_agent_format_by_import_path(lab):
    from darwin.agents.formats import make_agent
    from darwin.run.config import AgentConfig

    assert type(make_agent("lab_plugins:LabAgent")).__name__ == "LabAgent"
    assert AgentConfig(format="lab_plugins:LabAgent", observation_size=(56, 112)).format.name == "lab_plugins:LabAgent"
    with pytest.raises(ValueError, match="is not a subclass of darwin.agents.vlm.VLMAgent"):
        AgentConfig(format="lab_plugins:CountingMemory", observation_size=(56, 112))


def test_short_run_and_eval_use_the_plugins(lab, tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(lab), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    seen = events(lab)
    assert "curriculum.next_task settings_dark_theme" in seen
    runs = [e for e in seen if e.startswith("workflow.run")]
    assert runs and set(runs) == {"workflow.run settings_dark_theme"}  # the curriculum chose every training task
    assert seen.count("memory.reset") >= len(runs)  # at every episode start
    assert any(e.startswith("verifier ") for e in seen)
    # the user's policy served the run, its learner updated with the user's estimator
    assert "policy lab" in seen and seen.count("learner.update") == 2 and "estimator" in seen
    updates = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"update"' in line]
    assert [u["step"] for u in updates if u["group"] == "update"] == [1, 2]

    (tmp_path / "events.txt").unlink()
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--experiment",
            str(lab),
            "--phones",
            "1",
            "--samples",
            "1",
            "--no-greedy",
            "--run-dir",
            str(tmp_path / "eval"),
        ],
    )
    assert result.exit_code == 0, result.output
    seen = events(lab)
    # eval runs the experiment's tasks (not the curriculum: a fixed queue) through its workflow and verifier
    assert sorted(e for e in seen if e.startswith("workflow.run")) == [
        "workflow.run amazon_0",
        "workflow.run settings_dark_theme",
    ]
    assert seen.count("memory.reset") >= 2 and any(e.startswith("verifier ") for e in seen)
    assert "overall" in result.output


def test_eval_without_agent_or_experiment_says_what_to_pass():
    result = CliRunner().invoke(main, ["eval"])
    assert result.exit_code != 0 and "pass --agent, or --experiment" in result.output
