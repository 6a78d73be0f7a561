"""An experiment chooses every implementation one way: a ``ComponentSpec`` (issue 42).

The experiment's schemas are walked field by field, into every nested model. A field whose type
offers a fixed set of names (a ``Literal``) must be listed in :data:`SETTINGS` with the reason it
is a setting of one implementation and not a choice between implementations; a field whose name
says it picks something (``backend``, ``algorithm``, ``format``, ``provider``...) must be a
``ComponentSpec``. A new field that picks an implementation any other way fails here.
"""

from __future__ import annotations

import types
from typing import Literal, Union, get_args, get_origin

from pydantic import BaseModel

from darwin.components import ComponentSpec
from darwin.run.config import ExperimentConfig

SETTINGS: dict[str, str] = {
    "phones.locale": "the SimPhones' UI language",
    "phones.initial_states": "whether a SimPhone's episodes start from one initial state or each from a new one",
    "phones.guard": "'off' turns the guard component off; the guard itself is a ComponentSpec",
    "learner.levers.whiten_by": "the group GAE whitening normalises over",
    "learner.ppo.old_logprobs": "where PPO's anchor log-probs come from",
    "learner.levers.gigpo_step_norm": "a normalisation inside the gigpo estimator",
    "learner.truncation": "the value after a cut episode (Fig. 6b)",
    "learner.step_budget": "whether running out of steps is a failure or a cut",
    "learner.infra_truncation": "what happens to an episode infrastructure cut",
    "learner.infra_only_updates": "whether a batch of infrastructure cuts trains",
    "learner.levers.grpo_weighting": "a weighting inside the grpo estimator",
    "learner.critic.backbone": "whether the critic shares the actor's backbone",
    "learner.critic.value_head_init": "how the value head starts",
    "group_lost": "what happens to a group whose phone was lost",
    "mode": "whether rollout waits for the learner (sync) or not (async), with the same components",
    "phones.ray.screenshot_codec": "how screenshots cross the cluster",
    "policy.server.weight_sync": "how the learner's weights reach the server backend",
    "learner.verl.attn_implementation": "the attention kernel of verl's workers",
    "learner.verl.compute_dtype": "the precision of verl's workers",
    "learner.verl.model_dtype": "the precision of verl's master weights",
    "learner.verl.device": "where verl's workers run",
    "learner.verl.strategy": "verl's own FSDP version, a setting of the verl learner",
    "learner.verl.fused_kernels": "which of verl's own log-prob kernels its workers run, a setting of the verl learner",
    "self_evolution.learned_verifier.reward": "which member of the round's composite decides (fallback or audit order), "
    "a setting of the stage-3 verifier, not an implementation",
    "sft.agent.invalid_history": "how the tiny agent shows an unparsed reply",
    "sft.agent.off_screen": "what the tiny agent does with an off-screen point",
    "sft.model.attn_implementation": "the attention kernel of the tiny model",
    "sft.model.family": "the architecture the tiny warm start is built as",
    "sft.stop_metric": "what stops the warm start's training",
    "phones.ray.groups.adb.settle": "how an adb phone waits for the screen to settle",
    "self_evolution.split.languages": "which languages' templates the held-out split covers",
}
"""Fields with a fixed set of names that are settings, each with why it picks no implementation."""

CHOOSING_NAMES = {"kind", "backend", "algorithm", "format", "provider", "verifier", "curriculum", "workflow", "memory"}
"""Field names that say the field picks an implementation."""


def _members(annotation: object) -> list[object]:
    """The types an annotation allows: the arms of a union, the items of a container (a tuple of
    models holds models), the annotation itself otherwise."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return [m for arm in get_args(annotation) for m in _members(arm)]
    if origin in (tuple, list, dict, set, frozenset):
        return [m for arg in get_args(annotation) if arg is not Ellipsis for m in _members(arg)]
    return [annotation]


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, list[object]]]:
    """``(dotted path, allowed types)`` of every field of ``model`` and of the models inside it."""
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        members = _members(field.annotation)
        out.append((path, members))
        for member in members:
            if isinstance(member, type) and issubclass(member, BaseModel) and member is not ComponentSpec:
                out += _fields(member, path + ".")
    return out


FIELDS = _fields(ExperimentConfig)


def test_every_field_with_fixed_names_is_a_listed_setting() -> None:
    literal = {path for path, members in FIELDS if any(get_origin(m) is Literal for m in members)}
    unlisted = literal - set(SETTINGS)
    assert not unlisted, (
        f"{sorted(unlisted)} pick from fixed names: make each a ComponentSpec if it chooses an implementation "
        "(darwin/components.py), or list it in SETTINGS with why it is a setting"
    )
    assert not set(SETTINGS) - literal, f"SETTINGS lists fields that are no longer Literal: {set(SETTINGS) - literal}"


def test_every_field_named_for_a_choice_is_a_component_spec() -> None:
    choosing = {path: members for path, members in FIELDS if path.rpartition(".")[2] in CHOOSING_NAMES}
    assert {
        "learner.backend",
        "learner.algorithm",
        "policy.backend",
        "agent.format",
        "phones.provider",
        "phones.ray.groups.provider",
    } <= set(choosing)
    # A nested model under such a name holds the settings of one implementation (sft.memory: the
    # warm start's sliding window); a name or a string would be a choice.
    settings_sections = {
        p for p, members in choosing.items() if all(isinstance(m, type) and issubclass(m, BaseModel) for m in members)
    }
    wrong = sorted(p for p, members in choosing.items() if ComponentSpec not in members and p not in settings_sections)
    assert not wrong, f"{wrong} choose an implementation without a ComponentSpec"


def test_the_checker_catches_a_field_that_picks_by_literal() -> None:
    class Sneaky(BaseModel):
        backend: Literal["a", "b"] = "a"

    class Holder(BaseModel):
        inner: Sneaky = Sneaky()

    (path, members), (inner_path, inner_members) = _fields(Holder)
    assert (path, inner_path) == ("inner", "inner.backend")
    assert ComponentSpec not in inner_members and get_origin(inner_members[0]) is Literal
