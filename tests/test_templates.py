"""The template framework: instances, explicit parameters, registration, and the generalisation splits."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

import darwin.templates as tm
from darwin.task_registry import get_task, resolve_tasks, task_set
from darwin.templates import (
    SplitConfig,
    few_shot_instances,
    get_template,
    instance_of,
    register,
    schema_line,
    split_templates,
)
from darwin.types import TaskDefinitionError


def test_instances_are_seeded_and_ids_rebuild_them() -> None:
    tpl = get_template("clock.set_alarm")
    a, b = tpl.instance(5), tpl.instance(5)
    assert a == b and a.id == "clock.set_alarm.s5" and a.template == "clock.set_alarm"
    zh = tpl.instance(5, "CHN")
    assert zh.id == "clock.set_alarm.zh.s5" and zh.language == "CHN" and zh.params == a.params
    assert get_task("clock.set_alarm.zh.s5") == zh and instance_of("clock.set_alarm.s5") == a
    assert instance_of("clock_1") is None and instance_of("nope.s3") is None
    assert len({repr(tpl.instance(s).params) for s in range(30)}) > 10


def test_a_template_is_not_a_task() -> None:
    with pytest.raises(KeyError, match=r"'clock.set_alarm' is a template.*clock.set_alarm.s0"):
        get_task("clock.set_alarm")
    with pytest.raises(KeyError, match="did you mean 'clock.set_alarm'"):
        get_template("clock.set_alarn")


def test_explicit_params_are_validated_against_the_schema() -> None:
    tpl = get_template("clock.set_alarm")
    task = tpl.task({"hour": 6, "minute": 15, "days": [5, 6]})
    assert task.id.startswith("clock.set_alarm.p") and task.instruction == "Set an alarm for 6:15 AM on weekends."
    assert task.verifier.params == {"hour": 6, "minute": 15, "days": [5, 6]}
    assert tpl.task({"hour": 6, "minute": 15, "days": [5, 6]}).id == task.id != tpl.task({"hour": 6, "minute": 30}).id
    with pytest.raises(
        TaskDefinitionError,
        match=r"template 'clock.set_alarm': invalid parameters: hour: .*less than or equal to 23.*Schema: hour: integer 0..23",
    ):
        tpl.task({"hour": 31})
    with pytest.raises(TaskDefinitionError, match="invalid parameters: colour: Extra inputs"):
        tpl.task({"hour": 6, "colour": "red"})
    with pytest.raises(TaskDefinitionError, match="phrasing 9 out of range"):
        tpl.task({"hour": 6}, phrasing=9)
    assert (
        schema_line(tpl)
        == "hour: integer 0..23, minute: integer 0..59, days: array of integer (0 = Monday ... 6 = Sunday; () = once)"
    )


def test_registration_rejects_duplicates_and_bad_ids() -> None:
    tpl = get_template("clock.delete_alarm")
    with pytest.raises(ValueError, match="registered twice"):
        register(tpl)
    with pytest.raises(ValueError, match="must be '<app>.<name>'"):
        register(dataclasses.replace(tpl, id="Clock Delete"))


def test_phrasing_placeholders_must_exist() -> None:
    tpl = dataclasses.replace(
        get_template("clock.add_world_clock"), phrasings={"ENG": ("Add {town}.",), "CHN": ("添加{city}",)}
    )
    with pytest.raises(TaskDefinitionError, match=r"names 'town' that wording\(\) does not give"):
        tpl.instance(0)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> dict[str, tm.TaskTemplate]:
    """Four apps with 4, 4, 2 and 1 templates, copied from the Clock's templates."""
    base = [
        get_template(t)
        for t in ("clock.set_alarm", "clock.delete_alarm", "clock.add_world_clock", "clock.home_time_zone")
    ]
    fake: dict[str, tm.TaskTemplate] = {}
    for app, count in (("a", 4), ("b", 4), ("c", 2), ("d", 1)):
        for i in range(count):
            tpl = dataclasses.replace(base[i], id=f"{app}.t{i}", app=app.upper())
            fake[tpl.id] = tpl
    monkeypatch.setattr(tm, "TEMPLATES", fake)
    return fake


def test_split_regimes_are_disjoint_and_reproducible(world: dict[str, tm.TaskTemplate]) -> None:
    config = SplitConfig(seed=3, unseen_apps=1, train_instances=5, eval_instances=2)
    split = split_templates(config)
    assert split == split_templates(config)
    train_apps = {world[t].app for t in split.train_templates}
    assert not train_apps & set(split.held_out_apps) and len(split.held_out_apps) == 1
    assert not set(split.train_templates) & set(split.held_out_templates)
    # Held-out templates come from training apps; every app with >= 2 templates keeps some for training.
    assert {world[t].app for t in split.held_out_templates} <= train_apps
    sets = split.sets
    assert len(sets["train"]) == 5 * len(split.train_templates)
    assert {t.template for t in sets["unseen_instances"]} == set(split.train_templates)
    train_params = {(t.template, orjson.dumps(t.params, option=orjson.OPT_SORT_KEYS)) for t in sets["train"]}
    assert (
        not {(t.template, orjson.dumps(t.params, option=orjson.OPT_SORT_KEYS)) for t in sets["unseen_instances"]}
        & train_params
    )
    assert {t.template for t in sets["unseen_templates"]} == set(split.held_out_templates)
    assert {t.app for t in sets["unseen_apps"]} == set(split.held_out_apps)
    assert (
        split_templates(SplitConfig(seed=4, unseen_apps=1)).held_out_apps != split.held_out_apps
        or split_templates(SplitConfig(seed=4, unseen_apps=1)).held_out_templates != split.held_out_templates
    )


def test_split_config_errors_name_the_fix(world: dict[str, tm.TaskTemplate]) -> None:
    with pytest.raises(ValueError, match=r"held_out_apps \['Z'\] have no templates; apps with templates: A, B, C, D"):
        SplitConfig(held_out_apps=("Z",))
    with pytest.raises(ValueError, match="leaves no training app"):
        split_templates(SplitConfig(unseen_apps=4))
    assert split_templates(SplitConfig(held_out_apps=("D",))).held_out_apps == ("D",)


def _params(task) -> tuple[str | None, bytes]:
    return task.template, orjson.dumps(task.params, option=orjson.OPT_SORT_KEYS)


def test_few_shot_instances_are_held_out_apps_tasks_never_evaluated(world: dict[str, tm.TaskTemplate]) -> None:
    split = split_templates(SplitConfig(seed=3, unseen_apps=2, eval_instances=2))
    shots = few_shot_instances(split, per_app=5)
    assert shots == few_shot_instances(split, per_app=5)  # deterministic
    per_app = {app: [t for t in shots if t.app == app] for app in split.held_out_apps}
    assert [len(tasks) for tasks in per_app.values()] == [5, 5]
    for app, tasks in per_app.items():
        app_templates = {t.template for t in split.sets["unseen_apps"] if t.app == app}
        # the app's templates take turns: each one is used before any is used twice
        assert {t.template for t in tasks[: len(app_templates)]} == app_templates
    evaluated = {_params(t) for t in split.sets["unseen_apps"]}
    assert not {_params(t) for t in shots} & evaluated and len({_params(t) for t in shots}) == len(shots)
    assert all(t.id.rsplit(".s", 1)[1].isdigit() and int(t.id.rsplit(".s", 1)[1]) < tm.EVAL_SEED_BASE for t in shots)


def test_few_shot_instances_refuse_what_they_cannot_give(monkeypatch: pytest.MonkeyPatch) -> None:
    # app D's one template has 21 time zones to choose from: 2 are evaluated, 19 are left
    zone, alarm = get_template("clock.home_time_zone"), get_template("clock.set_alarm")
    fake = {
        "a.t0": dataclasses.replace(alarm, id="a.t0", app="A"),
        "d.t0": dataclasses.replace(zone, id="d.t0", app="D"),
    }
    monkeypatch.setattr(tm, "TEMPLATES", fake)
    split = split_templates(SplitConfig(held_out_apps=("D",), eval_instances=2))
    assert len(few_shot_instances(split, per_app=19)) == 19
    with pytest.raises(
        ValueError, match=r"held-out app 'D': its templates \['d.t0'\] give only 19 .* lower per_app below 20"
    ):
        few_shot_instances(split, per_app=20)
    with pytest.raises(ValueError, match="per_app must be >= 1"):
        few_shot_instances(split, per_app=0)


def test_named_generalisation_sets() -> None:
    train = task_set("gen.train")
    assert train and all(t.template for t in train)
    held = {t.template for t in task_set("gen.unseen_templates") + task_set("gen.unseen_apps")}
    assert not held & {t.template for t in train}
    assert [t.id for t in resolve_tasks(["gen.unseen_apps", "base8"])][-8:] == [t.id for t in task_set("base8")]
