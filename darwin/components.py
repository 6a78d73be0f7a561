"""Components an experiment names: built-ins by name, a user's class by import path.

An experiment file chooses its curriculum, workflow, verifier, memory, phone provider, action
guard, learner, advantage estimator (``algorithm``), policy backend, agent format, screen reader
(``reader``, :mod:`darwin.readers`) and task synthesiser (``task_synthesizer``,
:mod:`darwin.hindsight`) with a
:class:`ComponentSpec`, and ``darwin eval --agent`` names the actors it evaluates (``actors``) the
same way: ``name`` is a built-in (``"learnability"``) or an import path
(``"my_lab.curricula:Hardest"``), ``kwargs`` its keyword arguments. Everything is resolved
when the experiment is loaded (``darwin run --dry-run`` included), so a typo fails at once with
a "did you mean" and the fix, never in the middle of a run. Validation (:func:`check_component`)
builds nothing: it binds the arguments to the class's ``__init__`` and calls the class's own
``check_arguments(**kwargs)`` classmethod where it has one, so ``--dry-run`` loads no model and
opens no database. The run builds each component once (:func:`build_component`)::

    >>> from darwin.components import ComponentSpec, build_component
    >>> from darwin.task_registry import task_set
    >>> cur = build_component("curriculum", ComponentSpec(name="learnability"), tasks=task_set("base8"), seed=0)
    >>> type(cur).__name__
    'LearnabilityCurriculum'
    >>> build_component("curriculum", ComponentSpec(name="learnabilty"), tasks=[], seed=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    darwin.components.ComponentError: curriculum 'learnabilty' is not built in (did you mean 'learnability'?)...

Context arguments (``tasks`` and ``seed`` for curricula; ``verifier`` and ``config`` for
workflows; the evaluation's ``seed``, ``phones``, ``temperature``, ``agent_format``,
``api_base``, ``api_key_env`` and ``max_new_tokens`` for actors) are passed to a class only when
its ``__init__`` (a factory function: its signature) accepts them, so a user's class takes just
what it needs; a memory or a curriculum gets the run directory (``run_dir``)
only when its ``__init__`` names that argument. A verifier may also be a plain (async) function
``request -> Verdict`` named by import path, and actors a function returning
:class:`~darwin.agents.actors.Actors` (built-ins: ``oracle``, ``random``, ``tiny``, ``litellm``) as
well as a subclass of it.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

__all__ = [
    "BUILTINS",
    "ComponentError",
    "ComponentKind",
    "ComponentSpec",
    "build_component",
    "check_backend",
    "check_component",
    "resolve_component",
]

ComponentKind = Literal[
    "curriculum",
    "workflow",
    "verifier",
    "memory",
    "provider",
    "guard",
    "learner",
    "algorithm",
    "policy",
    "agent_format",
    "actors",
    "task_synthesizer",
    "reader",
]

BUILTINS: dict[str, dict[str, str]] = {
    "curriculum": {
        "round_robin": "darwin.curricula.static:StaticCurriculum",
        "uniform": "darwin.curricula.static:StaticCurriculum",
        "learnability": "darwin.curricula.learnability:LearnabilityCurriculum",
        "failure_filter": "darwin.curricula.failure_filter:FailureFilterCurriculum",
        "staged": "darwin.curricula.staged:DifficultyStagedCurriculum",
        "success_band": "darwin.curricula.success_band:SuccessBandCurriculum",
        "llm_proposer": "darwin.curricula.proposer:LLMTaskProposer",
        "reverse": "darwin.curricula.reverse:ReverseCurriculum",
    },
    "workflow": {
        "step": "darwin.workflows.step:StepWorkflow",
        "lifecycle": "darwin.workflows.step:LifecycleWorkflow",
        "planner": "darwin.workflows.planner:PlannerWorkflow",
        "self_verify": "darwin.workflows.self_verify:SelfVerifyWorkflow",
        "reflection": "darwin.workflows.reflection:ReflectionWorkflow",
    },
    "verifier": {
        "rule": "darwin.verifiers.rule:RuleVerifier",
        "llm_judge": "darwin.verifiers.judge.llm_judge:LLMJudge",
        "composite": "darwin.verifiers.composite:CompositeVerifier",
        "learned": "darwin.verifiers.learned.model:LearnedVerifier",
        "screen_text": "darwin.verifiers.screen_text:ScreenTextVerifier",
    },
    "memory": {
        "sliding_window": "darwin.memory.sliding_window:SlidingWindowMemory",
        "llm": "darwin.memory.llm:LLMMemoryManager",
    },
    "provider": {
        "sim": "darwin.envs.providers:SimPhones",
        "adb": "darwin.envs.providers:AdbDevices",
        "sim_farm": "darwin.envs.providers:SimFarm",
        "ray": "darwin.envs.ray_phones:RayPhones",
    },
    "guard": {
        "rules": "darwin.envs.guard:RuleGuard",
    },
    "learner": {
        "local": "darwin.learner.local:LocalLearner",
        "verl": "darwin.learner.verl_learner:VerlLearner",
    },
    "algorithm": {
        "gae": "darwin.algos.estimators:gae_estimator",
        "grpo": "darwin.algos.estimators:grpo_estimator",
        "gigpo": "darwin.algos.estimators:gigpo_estimator",
    },
    "policy": {
        "hf": "darwin.policies.hf:HFPolicy",
        "server": "darwin.policies.server_client:ServerPolicy",
    },
    "agent_format": {
        "uitars-1.5": "darwin.agents.uitars:UITarsAgent",
        "uitars-1.0": "darwin.agents.uitars:UITarsAgent",
        "qwen2.5": "darwin.agents.qwen:QwenVLAgent",
        "qwen3": "darwin.agents.qwen:QwenVLAgent",
        "tiny": "darwin.agents.tiny:TinyAgent",
    },
    "actors": {
        "oracle": "darwin.agents.scripted:oracle_actors",
        "random": "darwin.agents.scripted:random_actors",
        # a checkpoint directory or a `darwin run` directory: reading the latter is the run's business
        "tiny": "darwin.run.build:tiny_actors",
        "litellm": "darwin.agents.formats:litellm_actors",
    },
    "task_synthesizer": {
        "hindsight": "darwin.hindsight.synthesizer:HindsightSynthesizer",
        "model_hindsight": "darwin.hindsight.model_synthesizer:ModelHindsightSynthesizer",
        "screen_text": "darwin.hindsight.screen_text:ScreenTextSynthesizer",
    },
    "reader": {
        "none": "darwin.readers.base:NoReader",
        "ocr": "darwin.readers.ocr:OCRReader",
        "elements": "darwin.readers.elements:ElementsReader",
    },
}
"""Built-in names of each kind and the class (or function) each stands for."""

_BASES: dict[str, str] = {
    "curriculum": "darwin.curricula.base:Curriculum",
    "workflow": "darwin.workflows.base:Workflow",
    "verifier": "darwin.verifiers.base:Verifier",
    "memory": "darwin.memory.base:Memory",
    "provider": "darwin.envs.providers:PhoneProvider",
    "guard": "darwin.envs.guard:ActionGuard",
    "learner": "darwin.learner.base:LearnerClass",
    "algorithm": "darwin.algos.estimators:Estimator",
    "policy": "darwin.policies.base:Policy",
    "agent_format": "darwin.agents.vlm:VLMAgent",
    "actors": "darwin.agents.actors:Actors",
    "task_synthesizer": "darwin.hindsight.base:TaskSynthesizer",
    "reader": "darwin.readers.base:Reader",
}

# Kinds named without kwargs: a learner is rebuilt from its checkpoint by ``load(path, policy,
# config=...)`` and takes its settings from ``learner.*``; an estimator is a function of the batch.
NO_KWARGS_KINDS: frozenset[str] = frozenset({"learner", "algorithm"})

# Kinds whose component may also be a function returning an instance of the kind's class: the
# actors of an evaluation are made together (one policy pool for all phones, its clean-up), so a
# factory is their natural form; a subclass of the kind's class is built like any other class.
FACTORY_KINDS: frozenset[str] = frozenset({"actors"})

# What a learner's class must have (darwin.learner.base.LearnerClass, a protocol: no issubclass).
_LEARNER_METHODS = ("load", "update", "save", "close")

# Keyword arguments a built-in gets from its name (StaticCurriculum's two modes, the formats' versions).
_NAME_KWARGS: dict[tuple[str, str], dict[str, str]] = {
    ("curriculum", "round_robin"): {"mode": "round_robin"},
    ("curriculum", "uniform"): {"mode": "uniform"},
    ("agent_format", "uitars-1.5"): {"version": "1.5"},
    ("agent_format", "uitars-1.0"): {"version": "1.0"},
    ("agent_format", "qwen2.5"): {"version": "2.5"},
    ("agent_format", "qwen3"): {"version": "3"},
}


class ComponentError(ValueError):
    """A component spec that cannot be resolved or built; the message says how to fix it."""


class ComponentSpec(BaseModel):
    """A component by name or import path, with its keyword arguments. A bare string is a
    spec without arguments (``--set phones.provider=sim_farm``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="a built-in name, or an import path 'module:Class'")
    kwargs: dict[str, JsonValue] = Field(default_factory=dict, description="keyword arguments of the class")

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: object) -> object:
        return {"name": data} if isinstance(data, str) else data


def _import(path: str, kind: str, name: str) -> object:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ComponentError(
            f"{kind} {name!r}: cannot import module {module_name!r} ({exc}); is it on PYTHONPATH?"
        ) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ComponentError(f"{kind} {name!r}: module {module_name!r} has no {attr!r}") from None


def resolve_component(kind: ComponentKind, name: str) -> object:
    """The class that ``name`` stands for (or the function: a verifier's, an actors factory, an estimator)."""
    builtins = BUILTINS[kind]
    if name in builtins:
        return _import(builtins[name], kind, name)
    if ":" not in name:
        close = difflib.get_close_matches(name, list(builtins), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ComponentError(
            f"{kind} {name!r} is not built in{hint}; use one of {sorted(builtins)} or an import path 'module:Class'"
        )
    return _import(name, kind, name)


def _arguments(
    kind: ComponentKind,
    spec: ComponentSpec,
    context: Mapping[str, object],
    named_context: Mapping[str, object] | None,
) -> tuple[type | None, object, dict[str, object]]:
    """What :func:`build_component` calls: ``(class, target, kwargs)``; the class is None for a
    function verifier, an estimator or a factory of a :data:`FACTORY_KINDS` kind (``target`` is
    then the function)."""
    target = resolve_component(kind, spec.name)
    base = _import(_BASES[kind], kind, spec.name)
    kwargs = {**_NAME_KWARGS.get((kind, spec.name), {}), **spec.kwargs}
    if kind in NO_KWARGS_KINDS and spec.kwargs:
        raise ComponentError(
            f"{kind} {spec.name!r} takes no kwargs (got {sorted(spec.kwargs)}): "
            + ("its settings are the learner's own (learner.*)" if kind == "learner" else "an estimator is a function")
        )
    if kind == "algorithm":
        if not isinstance(target, base):  # type: ignore[arg-type]  # base is the kind's class, resolved from its import path
            raise ComponentError(
                f"algorithm {spec.name!r} is not an advantage estimator: decorate the function with "
                "@darwin.algos.estimators.advantage_estimator(needs_critic=...)"
            )
        return None, target, {}
    if kind == "learner":
        missing = [m for m in _LEARNER_METHODS if not hasattr(target, m)]
        if not isinstance(target, type) or missing:
            raise ComponentError(
                f"learner {spec.name!r} is not a learner class (darwin.learner.base.Learner: it needs "
                f"{', '.join(_LEARNER_METHODS)}; missing {', '.join(missing) or 'a class'})"
            )
        return target, target, _accepted(target, dict(context))
    if kind in FACTORY_KINDS and not isinstance(target, type):
        if not callable(target):
            raise ComponentError(
                f"{kind} {spec.name!r} is neither a function returning {_dotted(kind)} nor a subclass of it"
            )
        return None, target, _with_context(target, kwargs, context, named_context)
    if kind == "verifier" and not isinstance(target, type) and callable(target):
        if spec.kwargs:
            raise ComponentError(
                f"verifier {spec.name!r} is a function; it takes no kwargs (got {sorted(spec.kwargs)})"
            )
        return None, target, {}
    if not (isinstance(target, type) and issubclass(target, base)):  # type: ignore[arg-type]  # base is the kind's class, resolved from its import path
        raise ComponentError(f"{kind} {spec.name!r} is not a subclass of {_dotted(kind)}")
    return target, target, _with_context(target, kwargs, context, named_context)


def _with_context(
    target: Callable[..., object],
    kwargs: Mapping[str, object],
    context: Mapping[str, object],
    named_context: Mapping[str, object] | None,
) -> dict[str, object]:
    """``kwargs`` and the context arguments ``target`` takes; the spec's own kwargs win."""
    accepted = {k: v for k, v in _accepted(target, dict(context)).items() if k not in kwargs}
    if named_context:
        params = _parameters(target)
        accepted.update({k: v for k, v in named_context.items() if k in params and k not in kwargs})
    return {**accepted, **kwargs}


def _dotted(kind: ComponentKind) -> str:
    """The kind's class as a dotted name, for messages."""
    return _BASES[kind].replace(":", ".")


def build_component(
    kind: ComponentKind,
    spec: ComponentSpec,
    *,
    named_context: Mapping[str, object] | None = None,
    **context: object,
) -> object:
    """Build ``spec`` as a ``kind``: ``cls(**context it accepts, **spec.kwargs)``.

    ``named_context`` holds optional context (the run directory for memories and curricula) that goes only
    to a class whose ``__init__`` names the argument, never through a ``**kwargs`` catch-all
    (where it would read as a setting), and never over a kwarg the spec sets itself.
    """
    cls, target, arguments = _arguments(kind, spec, context, named_context)
    if kind == "algorithm":
        return target
    if cls is None and kind in FACTORY_KINDS:
        return _call_factory(kind, spec, target, arguments)
    if cls is None:
        from darwin.verifiers.base import as_verifier

        return as_verifier(target, kind=spec.name.rpartition(":")[2])  # type: ignore[arg-type]  # a verifier component may be a plain function; as_verifier wraps it
    try:
        return cls(**arguments)
    except TypeError as exc:
        raise ComponentError(f"{kind} {spec.name!r} with kwargs {spec.kwargs}: {exc}") from None


def check_component(
    kind: ComponentKind,
    spec: ComponentSpec,
    *,
    named_context: Mapping[str, object] | None = None,
    **context: object,
) -> None:
    """Check ``spec`` as :func:`build_component` would build it, without building it.

    The class is resolved, its ``__init__`` must accept the arguments (a misspelt keyword fails
    here), and a class with a ``check_arguments`` classmethod checks their values: the LLM
    memory and the task proposer their settings and database location, the learned verifier its
    checkpoint, the LLM judge its settings. Nothing is loaded or opened. A class without the
    hook has its values checked when the run builds it, before any phone starts.
    """
    cls, target, arguments = _arguments(kind, spec, context, named_context)
    if cls is None:
        if kind in FACTORY_KINDS and callable(target):  # a factory: binding its arguments is all there is to check
            _bind(kind, spec, target, arguments)
        return
    _bind(kind, spec, cls, arguments)
    check = getattr(cls, "check_arguments", None)
    if callable(check):
        check(**arguments)


def check_backend(kind: ComponentKind, spec: ComponentSpec, **context: object) -> None:
    """:func:`check_component` for a backend (the learner, the policy): a built-in named without
    kwargs is valid by its name, so loading an experiment imports neither verl nor transformers
    for it; any other spec is checked in full."""
    if spec.name in BUILTINS[kind] and not spec.kwargs:
        return
    check_component(kind, spec, named_context=None, **context)


def _call_factory(kind: ComponentKind, spec: ComponentSpec, factory: object, arguments: dict[str, object]) -> object:
    """What a factory function of a :data:`FACTORY_KINDS` kind returns, checked to be the kind's class."""
    assert callable(factory)  # checked by _arguments
    _bind(kind, spec, factory, arguments)  # a misspelt keyword is the spec's fault, named as such
    built = factory(**arguments)
    base = _import(_BASES[kind], kind, spec.name)
    if not isinstance(built, base):  # type: ignore[arg-type]  # base is the kind's class, resolved from its import path
        raise ComponentError(f"{kind} {spec.name!r} returned a {type(built).__name__}, not a {_dotted(kind)}")
    return built


def _bind(
    kind: ComponentKind, spec: ComponentSpec, target: Callable[..., object], arguments: dict[str, object]
) -> None:
    """Fail as :class:`ComponentError` where ``target`` (a class or a function) cannot take ``arguments``."""
    try:
        inspect.signature(target).bind(**arguments)
    except TypeError as exc:
        raise ComponentError(f"{kind} {spec.name!r} with kwargs {spec.kwargs}: {exc}") from None


def _parameters(target: Callable[..., object]) -> Mapping[str, inspect.Parameter]:
    """The parameters of a function, or of a class's own ``__init__`` (never an instance's)."""
    function = target.__init__ if isinstance(target, type) else target  # type: ignore[misc]  # the class's own __init__
    return inspect.signature(function).parameters


def _accepted(target: Callable[..., object], context: dict[str, object]) -> dict[str, object]:
    """The context arguments ``target`` (a function, or a class's ``__init__``) takes by name (all
    of them if it takes ``**kwargs``)."""
    params = _parameters(target)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(context)
    return {k: v for k, v in context.items() if k in params}
