"""Experiment files and ``--set``: :func:`load_experiment` imports a file and calls its
``build(preset)``; :func:`apply_overrides` applies ``KEY=VALUE`` overrides; :func:`use_ray_cluster`
moves a config's phones onto a Ray cluster. Each returns a validated
:class:`~darwin.run.config.ExperimentConfig`; nothing here builds a component.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel, ValidationError

from darwin.envs.ray_phones import RayPhoneGroup, RayPhonesConfig
from darwin.problems import ExperimentError, validation_lines
from darwin.run.config import ExperimentConfig


def load_experiment(path: str | Path, preset: str = "default") -> ExperimentConfig:
    """Import an experiment file and call its ``build(preset)``; errors name file and fix."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(
            f"{path}: no such experiment file; pass a Python file with build(preset) -> ExperimentConfig"
        )
    module = _import_experiment_file(path)
    build = getattr(module, "build", None)
    if not callable(build):
        raise ExperimentError(
            f"{path}: defines no build(preset) function; add `def build(preset: str) -> ExperimentConfig`"
        )
    try:
        config = build(preset)
    except ValidationError as exc:
        lines = validation_lines(exc)
        raise ExperimentError(
            f"{path} (preset {preset!r}) has {len(lines)} problem(s):\n  " + "\n  ".join(lines)
        ) from None
    except ValueError as exc:  # an experiment file refusing its preset or its own settings
        raise ExperimentError(f"{path} (preset {preset!r}): {exc}") from exc
    if not isinstance(config, ExperimentConfig):
        raise ExperimentError(f"{path}: build({preset!r}) returned {type(config).__name__}, not an ExperimentConfig")
    try:
        config.check_components()
    except ExperimentError as exc:
        raise ExperimentError(f"{path}: {exc}") from None
    return config


def experiment_module_name(path: str | Path) -> str:
    """The module name an experiment file is imported under: ``darwin_experiment_<file stem>``
    (characters that cannot appear in a Python name become ``_``)::

        >>> experiment_module_name("examples/custom_workflow.py")
        'darwin_experiment_custom_workflow'
        >>> experiment_module_name("lab/sweep-2.v1.py")
        'darwin_experiment_sweep_2_v1'
    """
    return "darwin_experiment_" + re.sub(r"\W", "_", Path(path).stem)


def _import_experiment_file(path: Path) -> ModuleType:
    """Execute an experiment file as the module :func:`experiment_module_name` names, registered
    in ``sys.modules`` before it runs, so that classes and functions it defines can be named by
    import path (``ComponentSpec(name=f"{__name__}:MyWorkflow")``) and are found whenever the
    components are built. Loading a file again executes it afresh and replaces the module (an
    edited file takes effect); if it raises, the module loaded before, if any, stays."""
    name = experiment_module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExperimentError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        raise
    return module


def apply_overrides(config: ExperimentConfig, overrides: Sequence[str]) -> ExperimentConfig:
    """``config`` with ``KEY=VALUE`` overrides applied and validated again (``darwin run --set``).

    ``KEY`` is a dotted field path (``learner.ppo.kl_coef``, ``sft.steps``, ``horizon``); ``VALUE``
    is read as JSON when it parses (``0.05``, ``true``, ``null``, ``[168, 364]``) and as a
    string otherwise. Every problem is reported at once::

        >>> base = ExperimentConfig(name="demo")
        >>> cfg = apply_overrides(base, ["horizon=16", "learner.ppo.kl_coef=0.05", 'tasks=["clock_1"]'])
        >>> cfg.horizon, cfg.learner.ppo.kl_coef, cfg.tasks
        (16, 0.05, ('clock_1',))
        >>> apply_overrides(base, ["learner.ppo.kl_cof=0.05"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        darwin.problems.ExperimentError: --set learner.ppo.kl_cof=0.05: learner.ppo has no field 'kl_cof' (did you mean 'kl_coef'?)...
        >>> apply_overrides(base, ["learner.kl_coef=0.05"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        darwin.problems.ExperimentError: --set learner.kl_coef=0.05: learner has no field 'kl_coef' (did you mean 'ppo.kl_coef'?)...
    """
    data = config.model_dump()
    problems = [p for p in (_apply_override(data, item) for item in overrides) if p is not None]
    if problems:
        raise ExperimentError("\n".join(problems))
    try:
        updated = ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        lines = validation_lines(exc)
        raise ExperimentError(
            f"--set {' '.join(overrides)} gives an invalid experiment:\n  " + "\n  ".join(lines)
        ) from None
    updated.check_components()
    return updated


def _apply_override(data: dict, item: str) -> str | None:
    """Set one ``KEY=VALUE`` in ``data`` (an ``ExperimentConfig.model_dump()``), walking the
    path by the config classes' fields; the problem with its fix, or None when set."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        return f"--set {item}: expected KEY=VALUE, e.g. learner.ppo.kl_coef=0.05"
    path = key.strip().split(".")
    node: dict = data
    model: type[BaseModel] | None = ExperimentConfig
    for depth, name in enumerate(path):
        where = ".".join(path[:depth]) or "the experiment"
        if model is None and isinstance(node, dict):
            # A free-form mapping (a component's kwargs): its keys are checked when the
            # component is built, so a new key may be set here.
            if depth == len(path) - 1:
                node[name] = _override_value(raw)
                return None
            if not isinstance(node.get(name), dict):
                section = ".".join(path[: depth + 1])
                return f"--set {item}: {section} is not a mapping; set it whole, e.g. --set '{section}={{\"{path[depth + 1]}\": ...}}'"
            node = node[name]
            continue
        if model is None:
            return f"--set {item}: {where} is a value, not a section with fields"
        if name not in model.model_fields:
            choices = sorted(model.model_fields)
            inside = [  # the name of a field one section down (learner.kl_coef -> ppo.kl_coef)
                f"{field}.{name}"
                for field, info in model.model_fields.items()
                if (inner := _model_class(info.annotation)) is not None and name in inner.model_fields
            ]
            close = inside or difflib.get_close_matches(name, choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; fields: {', '.join(choices)}"
            return f"--set {item}: {where} has no field {name!r}{hint}"
        if depth == len(path) - 1:
            node[name] = _override_value(raw)
            return None
        if node[name] is None:
            section = ".".join(path[: depth + 1])
            return (
                f"--set {item}: {section} is null; set it whole, e.g. --set '{section}={{\"{path[depth + 1]}\": ...}}'"
            )
        node, model = node[name], _model_class(model.model_fields[name].annotation)
    return None


def _override_value(raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw  # a bare string, e.g. mode=sync


def _model_class(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside a field annotation (``X``, ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def use_ray_cluster(config: ExperimentConfig, address: str) -> ExperimentConfig:
    """``config`` with its phones on the Ray cluster at ``address`` (``darwin run --ray-address``):
    ``phones.provider`` becomes ``'ray'``.

    A sim experiment's SimPhones (same seeds) spread over the cluster's nodes, four per host
    process; an experiment already on Ray (``phones.ray``) keeps its groups::

        >>> cfg = use_ray_cluster(ExperimentConfig(name="demo"), "10.0.0.2:6379")
        >>> cfg.phones.provider.name, cfg.phones.ray.address, cfg.phones.ray.groups[0].actors
        ('ray', '10.0.0.2:6379', 2)
    """
    phones = config.phones
    if not (phones.in_process or phones.on_ray):
        raise ExperimentError(
            f"--ray-address runs the phones on the cluster's nodes, but phones.provider = {phones.provider.name!r} lists "
            "devices this machine reaches; to reach them from cluster nodes, set phones.provider = 'ray' with "
            "phones.ray groups with provider 'adb' placed on those nodes (docs/scale.md)"
        )
    ray = phones.ray or RayPhonesConfig(
        groups=(RayPhoneGroup(count=phones.count, seed=phones.seed, actors=-(-phones.count // 4)),)
    )
    data = config.model_dump()
    data["phones"] = {
        **phones.model_dump(),
        "provider": {"name": "ray"},
        "ray": {**ray.model_dump(), "address": address},
    }
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise ExperimentError(
            "--ray-address gives an invalid experiment:\n  " + "\n  ".join(validation_lines(exc))
        ) from None
