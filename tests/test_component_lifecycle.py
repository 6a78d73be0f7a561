"""Components are checked without being built, built once by the run, and closed once.

``--dry-run`` (``ExperimentConfig.check_components``) binds each component's arguments and runs
its ``check_arguments`` hook: no model is loaded, no database opened, no thread started. A short
run with the LLM memory and the LLM task proposer leaves no proposer thread and no open
database connection behind.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import psutil
import pytest

from darwin.components import ComponentError, ComponentSpec, check_component
from darwin.learner.config import LearnerConfig
from darwin.problems import ExperimentError
from darwin.run.config import ExperimentConfig, PhonesConfig, PolicyConfig
from darwin.run.recipe import run_recipe
from darwin.sft.config import SFTConfig
from darwin.verifiers.learned import model as learned_model

ALARM, WORLD = "clock.set_alarm.s0", "clock.add_world_clock.s1"


def _open_databases(directory: Path) -> list[str]:
    """Files under ``directory`` this process holds open (SQLite keeps its file open per connection)."""
    return [f.path for f in psutil.Process().open_files() if Path(f.path).resolve().is_relative_to(directory.resolve())]


def _proposer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "llm-proposer" and t.is_alive()]


def test_dry_run_checks_without_loading_a_model_or_opening_a_database(
    tmp_path: Path, openai_server, monkeypatch
) -> None:
    verifier_dir = tmp_path / "verifier"
    verifier_dir.mkdir()
    (verifier_dir / learned_model.VERIFIER_FILE).write_text(
        json.dumps(
            {
                "format_version": learned_model.FORMAT_VERSION,
                "threshold": 0.5,
                "screen_size": [56, 112],
                "inputs": "screen",
            }
        )
    )

    def no_loading(path: object) -> None:
        raise AssertionError(f"the check loaded the learned verifier's model from {path}")

    monkeypatch.setattr(learned_model, "load_classifier", no_loading)
    llm = openai_server.litellm_config()
    config = ExperimentConfig(
        name="checked",
        tasks=(ALARM, WORLD),
        curriculum=ComponentSpec(name="llm_proposer", kwargs={"llm": llm, "url": str(tmp_path / "proposals.db")}),
        memory=ComponentSpec(name="llm", kwargs={"llm": llm, "url": str(tmp_path / "knowledge.db")}),
        verifier=ComponentSpec(
            name="composite", kwargs={"verifiers": ["rule", {"name": "learned", "kwargs": {"path": str(verifier_dir)}}]}
        ),
    )
    threads = {t.ident for t in threading.enumerate()}
    config.check_components()
    assert not (tmp_path / "proposals.db").exists() and not (tmp_path / "knowledge.db").exists()
    assert {t.ident for t in threading.enumerate()} == threads  # no proposer loop, no model worker
    assert openai_server.requests == []

    # ... and the values are still checked, each with the fix
    bad_threshold = {"name": "learned", "kwargs": {"path": str(verifier_dir), "threshold": 1.5}}
    with pytest.raises(ExperimentError, match=r"threshold must lie in \[0, 1\], got 1.5"):
        ExperimentConfig(
            name="c",
            tasks=(ALARM,),
            verifier=ComponentSpec(name="composite", kwargs={"verifiers": ["rule", bad_threshold]}),
        ).check_components()
    with pytest.raises(ExperimentError, match="no learned verifier at .*darwin verifier train --out"):
        ExperimentConfig(
            name="c", tasks=(ALARM,), verifier=ComponentSpec(name="learned", kwargs={"path": str(tmp_path / "missing")})
        ).check_components()
    with pytest.raises(ExperimentError, match="cannot open the proposals database .*nope.*mkdir -p"):
        ExperimentConfig(
            name="c",
            tasks=(ALARM,),
            curriculum=ComponentSpec(name="llm_proposer", kwargs={"llm": llm, "url": str(tmp_path / "nope" / "p.db")}),
        ).check_components()
    with pytest.raises(ExperimentError, match="templates: 'clok.\\*' matches no registered template"):
        ExperimentConfig(
            name="c",
            tasks=(ALARM,),
            curriculum=ComponentSpec(name="llm_proposer", kwargs={"llm": llm, "templates": ["clok.*"]}),
        ).check_components()
    with pytest.raises(ExperimentError, match="invalid llm_judge config"):
        ExperimentConfig(
            name="c",
            tasks=(ALARM,),
            verifier=ComponentSpec(name="llm_judge", kwargs={"llm": llm, "temperature_typo": 1}),
        ).check_components()


def test_check_component_binds_arguments_like_the_build_would() -> None:
    check_component("curriculum", ComponentSpec(name="learnability"), tasks=[], seed=0)
    with pytest.raises(ComponentError, match="unexpected keyword argument 'colour'"):
        check_component("curriculum", ComponentSpec(name="learnability", kwargs={"colour": 1}), tasks=[], seed=0)
    with pytest.raises(ComponentError, match="did you mean 'learnability'"):
        check_component("curriculum", ComponentSpec(name="learnabilty"), tasks=[], seed=0)


def test_a_run_closes_the_memories_and_the_proposer(tmp_path: Path, openai_server) -> None:
    openai_server.reply = lambda body: "[]"  # no proposals: the base tasks are played
    llm = openai_server.litellm_config()
    config = ExperimentConfig(
        name="closing",
        tasks=(ALARM, WORLD),
        horizon=4,
        phones=PhonesConfig(count=2, seed=3),
        sft=SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0),
        cache_dir=str(tmp_path / "cache"),
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        learner=LearnerConfig(
            critic={"warmup_updates": 0}, speed={"micro_batch_size": 4}, ppo_epochs=1, mini_batch_size=8
        ),
        rollout_steps=8,
        updates=1,
        curriculum=ComponentSpec(name="llm_proposer", kwargs={"llm": llm, "step_budget": 4}),
        memory=ComponentSpec(name="llm", kwargs={"llm": llm, "distill": False}),
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    result = asyncio.run(run_recipe(config, run_dir, resume=False))
    assert result.updates == 1
    assert (run_dir / "run.db").exists()  # the memories and the proposer kept their data there
    assert _proposer_threads() == []
    assert _open_databases(run_dir) == []
