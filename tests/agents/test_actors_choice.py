"""``darwin eval --agent`` chooses its actors as every other choice is made: a component of kind
``actors`` (issue 42). The built-ins are names (``tiny:DIR`` and ``litellm:MODEL`` carry their
argument as a keyword), a user's factory or ``Actors`` subclass is an import path, and a
misspelt name gets the components' "did you mean"."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.agents.actors import Actors, AgentChoiceError
from darwin.agents.scripted import OracleActor, RandomActor
from darwin.cli.main import main
from darwin.components import ComponentError, ComponentSpec, check_component
from darwin.run.build import AGENT_KINDS, agent_spec, build_actors


def make_actors() -> Actors:
    """A user's factory that needs none of the evaluation's settings."""
    return Actors(lambda i: RandomActor(seed=i))


def seeded_actors(seed: int, phones: int) -> Actors:
    """A user's factory that takes two of the settings, by name."""
    return Actors(lambda i: RandomActor(seed=seed * phones + i))


class RecordingActors(Actors):
    """Actors that keep the settings they were given, for the tests to read."""

    def __init__(self, settings: dict[str, object]) -> None:
        super().__init__(lambda i: OracleActor())
        self.settings = settings


def every_setting(**settings: object) -> Actors:
    """A factory with a ``**`` catch-all: it gets every setting."""
    return RecordingActors(settings)


class OffsetActors(Actors):
    """A user's ``Actors`` subclass: ``temperature`` from the evaluation, ``offset`` from its spec."""

    def __init__(self, temperature: float | None, offset: int = 0) -> None:
        super().__init__(lambda i: RandomActor(seed=offset + i), observation_size=(56, 112))
        self.temperature = temperature


def not_actors() -> list[int]:
    return [1, 2]


def first_draw(actors: Actors, phone: int) -> float:
    actor = actors.make(phone)
    assert isinstance(actor, RandomActor)
    return actor.rng.random()


def test_the_command_line_text_is_a_spec_of_kind_actors() -> None:
    assert agent_spec("oracle") == ComponentSpec(name="oracle")
    assert agent_spec("random") == ComponentSpec(name="random")
    assert agent_spec("tiny:runs/sft") == ComponentSpec(name="tiny", kwargs={"checkpoint": "runs/sft"})
    assert agent_spec("litellm:openai/ui-tars-1.5-7b") == ComponentSpec(
        name="litellm", kwargs={"model": "openai/ui-tars-1.5-7b"}
    )
    assert agent_spec("tiny:") == agent_spec("tiny") == ComponentSpec(name="tiny")  # the built-in says what is missing
    assert agent_spec("my_lab.agents:make_actors") == ComponentSpec(name="my_lab.agents:make_actors")
    assert AGENT_KINDS == ("oracle", "random", "tiny:<checkpoint>", "litellm:<model>")
    with pytest.raises(AgentChoiceError, match="oracle takes no argument") as caught:
        agent_spec("oracle:fast")
    assert caught.value.option == "--agent"


def test_the_built_ins_build_as_before() -> None:
    assert isinstance(build_actors("oracle", 0).make(0), OracleActor)
    random = build_actors("random", 3, phones=2)
    assert first_draw(random, 1) == RandomActor(seed=3 * 1000 + 1).rng.random()
    assert random.aclose is None and random.observation_size is None


def test_a_users_factory_by_import_path_builds_the_actors() -> None:
    actors = build_actors(f"{__name__}:make_actors", 5, phones=2, temperature=0.5)
    assert [first_draw(actors, i) for i in (0, 1)] == [RandomActor(seed=i).rng.random() for i in (0, 1)]
    # only the settings the signature names: seed and phones
    seeded = build_actors(f"{__name__}:seeded_actors", 5, phones=3, temperature=0.5, api_base="http://x")
    assert first_draw(seeded, 2) == RandomActor(seed=5 * 3 + 2).rng.random()


def test_a_factory_with_a_catch_all_gets_every_setting() -> None:
    actors = build_actors(f"{__name__}:every_setting", 9, phones=4, agent_format="qwen3", max_new_tokens=64)
    assert isinstance(actors, RecordingActors)
    assert actors.settings == {
        "seed": 9,
        "phones": 4,
        "temperature": None,
        "agent_format": "qwen3",
        "api_base": None,
        "api_key_env": None,
        "max_new_tokens": 64,
    }


def test_an_actors_subclass_with_kwargs_of_its_spec() -> None:
    spec = ComponentSpec(name=f"{__name__}:OffsetActors", kwargs={"offset": 10})
    actors = build_actors(spec, 0, temperature=0.0)
    assert isinstance(actors, OffsetActors) and actors.temperature == 0.0
    assert actors.observation_size == (56, 112)
    assert first_draw(actors, 1) == RandomActor(seed=11).rng.random()


def test_a_misspelt_built_in_says_did_you_mean() -> None:
    with pytest.raises(AgentChoiceError) as caught:
        build_actors("orcale", 0)
    assert caught.value.option == "--agent"
    assert "actors 'orcale' is not built in (did you mean 'oracle'?)" in str(caught.value)
    assert "available: oracle, random, tiny:<checkpoint>, litellm:<model>" in str(caught.value)
    with pytest.raises(AgentChoiceError, match="did you mean 'tiny'"):
        build_actors("titny:runs/sft", 0)  # reads as an import path of module 'titny'


def test_what_is_not_actors_is_refused() -> None:
    with pytest.raises(AgentChoiceError, match="returned a list, not a darwin.agents.actors.Actors"):
        build_actors(f"{__name__}:not_actors", 0)
    with pytest.raises(AgentChoiceError, match="is not a subclass of darwin.agents.actors.Actors"):
        build_actors("darwin.agents.scripted:RandomActor", 0)
    with pytest.raises(AgentChoiceError, match="unexpected keyword argument 'colour'"):
        build_actors(ComponentSpec(name=f"{__name__}:make_actors", kwargs={"colour": 1}), 0)


def test_checking_binds_a_factory_without_calling_it() -> None:
    check_component("actors", ComponentSpec(name=f"{__name__}:not_actors"))  # its result is only seen when built
    with pytest.raises(ComponentError, match="unexpected keyword argument 'colour'"):
        check_component("actors", ComponentSpec(name=f"{__name__}:make_actors", kwargs={"colour": 1}), seed=0)


def test_eval_plays_a_users_factory(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            f"{__name__}:seeded_actors",
            "--phones",
            "1",
            "--tasks",
            "clock_1",
            "--samples",
            "1",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "overall" in result.output
    result = CliRunner().invoke(main, ["eval", "--agent", "orcale", "--run-dir", str(tmp_path / "r2")])
    assert result.exit_code == 2 and "did you mean 'oracle'" in result.output and "--agent" in result.output
