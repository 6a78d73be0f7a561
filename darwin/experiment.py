"""Experiments: one typed config that builds phones, agent, policy, workflow, curriculum,
learner and store, and the loop that trains (``darwin run examples/spa_bench.py``).

The loop is the paper's: phone workers stream transitions into the replay buffer without
waiting for each other; whenever completed trajectories cover ``rollout_steps`` steps the
learner takes them, updates (critic only during warm-up) and pushes new weights to the
policy; a checkpoint follows every update so ``--resume`` continues after a crash.

An experiment file is a Python module with ``build(preset: str) -> ExperimentConfig``.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib.util
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from darwin.agents.base import Actor
from darwin.algos.task_metrics import TaskMetrics
from darwin.components import ComponentError, ComponentSpec, build_component
from darwin.envs.ray_phones import RayPhoneGroup, RayPhonesConfig
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.learner.config import LearnerConfig
from darwin.policies.server import ServerPolicyConfig
from darwin.sft import SFTConfig
from darwin.tasks import resolve_tasks as resolve_task_names
from darwin.types import Task, TaskDefinitionError, Trajectory
from darwin.workflows.base import Workflow

if TYPE_CHECKING:
    from darwin.curricula.base import Curriculum
    from darwin.memory.base import Memory
    from darwin.models.factory import VLM
    from darwin.policies.base import Policy
    from darwin.policies.hf import HFPolicyConfig
    from darwin.sft import TinyActorPool

logger = logging.getLogger(__name__)


WARM_START_FILE = "warm_start.json"
"""In a run directory: the absolute path of the warm start the run began from."""


class ExperimentError(ValueError):
    """An experiment file or config is invalid; the message lists every problem and its fix."""


class PhonesConfig(BaseModel):
    """Where episodes run: in-process SimPhones (default), ADB devices, or phones on a Ray cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["sim", "adb", "ray"] = Field("sim", description="'sim': in-process SimPhones; 'adb': devices reached through an adb server; 'ray': phone hosts on a Ray cluster's nodes (`ray`)")
    count: int = Field(8, ge=1, le=4096, description="phones (sim) or how many of `devices` to use (adb); ray: all groups' phones")
    seed: int = Field(0, ge=0, description="SimPhone i gets seed + i")
    perturbation: PerturbationConfig = Field(default_factory=PerturbationConfig)
    reset_between_episodes: bool = Field(
        True,
        description="sim: every episode starts from the phone's initial state. With persistent state a goal "
        "reached once holds in every later episode of that task on that phone (base tasks have no teardown), "
        "so training would dry up; real phones keep their state (use lifecycle tasks with teardown there)",
    )
    devices: tuple[str, ...] = Field((), description="adb: serials or host:port of the phones")
    adb_server: str = Field("127.0.0.1:5037", description="adb: host:port of the adb server")
    ray: RayPhonesConfig | None = Field(
        None, description="ray: the cluster address and which phones run on which nodes (docs/scale.md); "
        "`darwin run --ray-address ADDR` fills it in for a sim experiment",
    )


class PolicySetup(BaseModel):
    """How actions are sampled and batched."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(1.0, gt=0.0, le=2.0, description="sampling temperature (PPO: 1.0, the full masked distribution)")
    max_batch: int = Field(8, ge=1, le=1024, description="largest inference batch")
    max_wait: float = Field(0.05, ge=0.0, le=10.0, description="seconds the oldest request may wait for a fuller batch")
    seed: int = Field(0, ge=0, description="seeds the policy's sampling generator")
    backend: Literal["hf", "server"] = Field(
        "hf", description="'hf': sample in process (transformers); 'server': an OpenAI-compatible inference server "
        "(vLLM / SGLang) that returns token ids and log-probs, receiving the learner's weights after each update (docs/scale.md)",
    )
    server: ServerPolicyConfig | None = Field(
        None, description="backend 'server': where the server is and how weights reach it; temperature, seed and "
        "max_tokens come from this setup and the warm start",
    )

    @model_validator(mode="after")
    def _check_backend(self) -> PolicySetup:
        if self.backend == "server" and self.server is None:
            raise ValueError("policy.backend = 'server' needs policy.server (ServerPolicyConfig: base_url, model, weight_sync, weights_dir)")
        if self.backend == "hf" and self.server is not None:
            raise ValueError("policy.server is set but policy.backend = 'hf'; set backend='server' to use it (or drop server)")
        return self

    def policy_factory(self) -> Callable[[VLM, HFPolicyConfig], Policy] | None:
        """What builds the run's policy on the warm start's model: None for the in-process
        HFPolicy, else a :class:`~darwin.policies.server.ServerPolicy` sampling like it would."""
        if self.backend == "hf" or self.server is None:
            return None
        server = self.server

        def make(vlm: VLM, sampling: HFPolicyConfig) -> Policy:
            from darwin.policies.server import ServerPolicy

            update = {"temperature": sampling.temperature, "seed": sampling.seed, "max_tokens": sampling.max_new_tokens}
            return ServerPolicy(vlm, ServerPolicyConfig(**{**server.model_dump(), **update}))

        return make


class EvalSetup(BaseModel):
    """A sampled evaluation before RL (the warm start) and after the last update, on phones
    that never train, so a run reports its gain on equal terms."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes_per_task: int = Field(0, ge=0, le=10_000, description="episodes of every task in each evaluation; 0 = no evaluation")
    phones: int = Field(8, ge=1, le=4096, description="sim: evaluation SimPhones (adb: the training devices are used, before and after rollout)")
    phone_seed: int = Field(10_000, ge=0, description="sim: evaluation phone i gets this seed + i (apart from training phones)")
    verifier: ComponentSpec | None = Field(
        None, description="what scores the evaluations: None = the experiment's verifier (the reward); 'rule' measures a "
        "run trained on a learned or judged reward against the ground truth",
    )
    task_sets: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="held-out task sets evaluated besides the training tasks, by name (e.g. {'unseen_apps': "
        "('gen.unseen_apps',)}); each evaluation reports their success rates under `per_set`",
    )


class ExperimentConfig(BaseModel):
    """Everything a training run needs; validated when built (every problem at once)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    tasks: tuple[str, ...] = Field(("base8",), min_length=1, description="task ids, set names or task files")
    horizon: int = Field(32, ge=1, le=1024, description="step budget of the execution phase (paper: 32)")
    lifecycle: bool = Field(False, description="run setup/teardown phases of lifecycle tasks")
    phones: PhonesConfig = Field(default_factory=PhonesConfig)
    checkpoint: str | None = Field(None, description="warm-start checkpoint directory; None: build it with `sft` (cached)")
    sft: SFTConfig = Field(default_factory=SFTConfig, description="how the warm start is trained when `checkpoint` is None")
    cache_dir: str = Field(".darwin-cache", description="where warm starts are cached")
    policy: PolicySetup = Field(default_factory=PolicySetup)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    curriculum: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="round_robin"),
        description="which task a free phone runs next: 'round_robin', 'uniform', 'learnability', 'failure_filter', "
        "'staged', 'success_band', 'llm_proposer' "
        "or 'module:Class' (a darwin.curricula.Curriculum), built as cls(tasks=..., seed=phones.seed, **kwargs)",
    )
    workflow: ComponentSpec | None = Field(
        None, description="the interaction pattern: 'step', 'lifecycle' or 'module:Class' (a darwin.workflows.Workflow, "
        "given verifier= and config= when it takes them); None = 'lifecycle' if lifecycle else 'step'",
    )
    verifier: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="rule"),
        description="the reward: 'rule' or 'module:Class' (a darwin.verifiers.Verifier) or 'module:function' (request -> Verdict)",
    )
    memory: ComponentSpec | None = Field(
        None, description="the agent's memory: None = the warm start's own (what it was trained with), 'sliding_window', "
        "'llm' (knowledge distilled by a model, kept in the run database; docs/memory.md) or 'module:Class' "
        "(a darwin.memory.Memory)",
    )
    group_size: int | None = Field(
        None, ge=2, le=64,
        description="group mode: every sampled task runs this many times in a row on one phone from the "
        "same start state, and the learner groups by it (GRPO, GiGPO, shortest-path adjustment, negative "
        "pruning); None = one episode per sampled task, groups by task id",
    )
    rollout_steps: int = Field(256, ge=1, description="completed steps per update (paper: 256)")
    max_backlog_steps: int | None = Field(
        None, ge=1,
        description="backpressure: phones start new episodes only while the buffer holds fewer untrained "
        "steps (completed + running episodes); None = rollout_steps (policy-version lag of about one update). A large value "
        "keeps phones busy at the price of staler data",
    )
    updates: int = Field(12, ge=1, description="learner updates, critic warm-up included")
    time_budget_s: float | None = Field(None, gt=0, description="stop after this many seconds of RL even if updates remain")
    evaluation: EvalSetup = Field(default_factory=EvalSetup, description="sampled evaluation before and after RL")
    mode: Literal["async", "sync"] = Field("async", description="rollout mode")
    parse_error_penalty: float = Field(0.0, ge=0.0, description="reward subtracted for unparseable output")
    run_dir: str | None = Field(None, description="default runs/<name>-<UTC time>")
    notes: str = Field("", description="free text shown by --dry-run (e.g. how the paper's schedule was scaled)")

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        problems = []
        server = self.policy.server
        if self.policy.backend == "server" and server is not None:
            lora = self.learner.lora
            if server.weight_sync == "none":
                problems.append("policy.server.weight_sync = 'none' cannot receive the learner's updates; use 'lora' (vLLM) or 'disk' (SGLang)")
            elif server.weight_sync == "lora" and (lora is None or lora.rank != server.lora_rank or set(lora.target_modules) != set(server.lora_target_modules)):
                problems.append(
                    "policy.server.weight_sync = 'lora' sends the learner's adapters: set learner.lora (LoraSettings) with "
                    f"rank = policy.server.lora_rank ({server.lora_rank}) and target_modules = policy.server.lora_target_modules "
                    f"({list(server.lora_target_modules)}), or use weight_sync='disk'"
                )
        if self.phones.kind == "adb" and self.phones.devices and len(self.phones.devices) < self.phones.count:
            problems.append(f"phones.count = {self.phones.count} but only {len(self.phones.devices)} devices are listed; list more devices or lower count")
        if self.phones.kind == "ray" and self.phones.ray is None:
            problems.append("phones.kind = 'ray' needs phones.ray (address and groups), or pass --ray-address to run the SimPhones on a cluster")
        if self.phones.kind == "ray" and self.phones.ray is not None and self.phones.ray.total_phones != self.phones.count:
            problems.append(f"phones.count = {self.phones.count} but phones.ray's groups hold {self.phones.ray.total_phones} phones; set count to {self.phones.ray.total_phones}")
        if self.max_backlog_steps is not None and self.max_backlog_steps < self.rollout_steps:
            problems.append(f"max_backlog_steps = {self.max_backlog_steps} is below rollout_steps = {self.rollout_steps}: the learner would never get a batch; raise it or leave it None")
        if self.learner.format_penalty_advantage > 0 and self.parse_error_penalty > 0:
            problems.append(
                f"learner.format_penalty_advantage = {self.learner.format_penalty_advantage} charges slips locally and "
                f"parse_error_penalty = {self.parse_error_penalty} charges them again through the return; set parse_error_penalty=0"
            )
        if self.learner.critic_warmup_updates >= self.updates:
            problems.append(f"learner.critic_warmup_updates = {self.learner.critic_warmup_updates} leaves no actor update within updates = {self.updates}; raise updates")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def workflow_spec(self) -> ComponentSpec:
        """The workflow to build (``lifecycle`` picks the default)."""
        return self.workflow or ComponentSpec(name="lifecycle" if self.lifecycle else "step")

    def build_curriculum(self, tasks: list[Task], run_dir: str | Path | None = None) -> Curriculum:
        """The curriculum; ``run_dir`` goes to curricula whose ``__init__`` names it (the LLM
        proposer reads the agent's results from the run database and stores its proposals there)."""
        named = {} if run_dir is None else {"run_dir": Path(run_dir)}
        return build_component("curriculum", self.curriculum, named_context=named, tasks=tasks, seed=self.phones.seed)  # type: ignore[return-value]

    def build_workflow(self, observation_size: tuple[int, int], *, evaluation: bool = False) -> Workflow:
        """The workflow with the reward verifier, or with ``evaluation.verifier`` (when set) for
        ``evaluation=True``."""
        from darwin.workflows import StepConfig

        spec = self.evaluation.verifier if evaluation and self.evaluation.verifier is not None else self.verifier
        verifier = build_component("verifier", spec)
        step_config = StepConfig(observation_size=observation_size, parse_error_penalty=self.parse_error_penalty)
        return build_component("workflow", self.workflow_spec(), verifier=verifier, config=step_config)  # type: ignore[return-value]

    def memory_factory(self, run_dir: str | Path | None = None) -> Callable[[], Memory] | None:
        """Builds a fresh memory per agent, or None for the warm start's own. ``run_dir`` goes
        to memories whose ``__init__`` names it (the LLM memory keeps its knowledge in the run's
        database there)."""
        if self.memory is None:
            return None
        spec = self.memory
        named = {} if run_dir is None else {"run_dir": Path(run_dir)}
        return lambda: build_component("memory", spec, named_context=named)  # type: ignore[return-value]

    def check_components(self) -> None:
        """Build every named component once (tasks, curriculum, verifier, workflow, memory):
        a bad name, import path or argument fails here with the fix, not mid-run."""
        try:
            tasks = self.resolve_tasks()
        except (KeyError, TaskDefinitionError) as exc:
            raise ExperimentError(f"tasks: {exc}") from None
        for name, names in self.evaluation.task_sets.items():
            try:
                resolve_task_names(names)
            except (KeyError, TaskDefinitionError) as exc:
                raise ExperimentError(f"evaluation.task_sets[{name!r}]: {exc}") from None
        make_memory = self.memory_factory()
        checks: list[tuple[str, ComponentSpec | None, Callable[[], object] | None]] = [
            ("curriculum", self.curriculum, lambda: self.build_curriculum(tasks)),
            ("verifier", self.verifier, lambda: build_component("verifier", self.verifier)),
            ("workflow", self.workflow_spec(), lambda: self.build_workflow((252, 560))),
            ("evaluation verifier", self.evaluation.verifier, lambda: self.build_workflow((252, 560), evaluation=True)),
            ("memory", self.memory, make_memory),
        ]
        for kind, spec, build in checks:
            if spec is None or build is None:
                continue
            try:
                build()
            except ComponentError as exc:
                raise ExperimentError(str(exc)) from None
            except ValueError as exc:  # the component's own argument checks
                raise ExperimentError(f"{kind} {spec.name!r} with kwargs {dict(spec.kwargs)}: {exc}") from None

    def resolve_tasks(self) -> list[Task]:
        from darwin.tasks import resolve_tasks

        return [t.model_copy(update={"step_budget": self.horizon}) for t in resolve_tasks(self.tasks)]

    def resolve_eval_sets(self) -> dict[str, list[Task]]:
        """``evaluation.task_sets`` resolved, with the same horizon as training."""
        from darwin.tasks import resolve_tasks

        return {
            name: [t.model_copy(update={"step_budget": self.horizon}) for t in resolve_tasks(names)]
            for name, names in self.evaluation.task_sets.items()
        }


def load_experiment(path: str | Path, preset: str = "default") -> ExperimentConfig:
    """Import an experiment file and call its ``build(preset)``; errors name file and fix."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"{path}: no such experiment file; pass a Python file with build(preset) -> ExperimentConfig")
    module = _import_experiment_file(path)
    build = getattr(module, "build", None)
    if not callable(build):
        raise ExperimentError(f"{path}: defines no build(preset) function; add `def build(preset: str) -> ExperimentConfig`")
    try:
        config = build(preset)
    except ValidationError as exc:
        lines = _validation_lines(exc)
        raise ExperimentError(f"{path} (preset {preset!r}) has {len(lines)} problem(s):\n  " + "\n  ".join(lines)) from None
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


def _validation_lines(exc: ValidationError) -> list[str]:
    """One ``field.path: message`` line per problem pydantic found."""
    return [f"{'.'.join(map(str, e['loc'])) or '(config)'}: {e['msg']}" for e in exc.errors()]


def apply_overrides(config: ExperimentConfig, overrides: Sequence[str]) -> ExperimentConfig:
    """``config`` with ``KEY=VALUE`` overrides applied and validated again (``darwin run --set``).

    ``KEY`` is a dotted field path (``learner.kl_coef``, ``sft.steps``, ``horizon``); ``VALUE``
    is read as JSON when it parses (``0.05``, ``true``, ``null``, ``[168, 364]``) and as a
    string otherwise. Every problem is reported at once::

        >>> base = ExperimentConfig(name="demo")
        >>> cfg = apply_overrides(base, ["horizon=16", "learner.kl_coef=0.05", 'tasks=["clock_1"]'])
        >>> cfg.horizon, cfg.learner.kl_coef, cfg.tasks
        (16, 0.05, ('clock_1',))
        >>> apply_overrides(base, ["learner.kl_cof=0.05"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        darwin.experiment.ExperimentError: --set learner.kl_cof=0.05: learner has no field 'kl_cof' (did you mean 'kl_coef'?)...
    """
    data = config.model_dump()
    problems = [p for p in (_apply_override(data, item) for item in overrides) if p is not None]
    if problems:
        raise ExperimentError("\n".join(problems))
    try:
        updated = ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        lines = _validation_lines(exc)
        raise ExperimentError(f"--set {' '.join(overrides)} gives an invalid experiment:\n  " + "\n  ".join(lines)) from None
    updated.check_components()
    return updated


def _apply_override(data: dict, item: str) -> str | None:
    """Set one ``KEY=VALUE`` in ``data`` (an ``ExperimentConfig.model_dump()``), walking the
    path by the config classes' fields; the problem with its fix, or None when set."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        return f"--set {item}: expected KEY=VALUE, e.g. learner.kl_coef=0.05"
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
            close = difflib.get_close_matches(name, choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; fields: {', '.join(choices)}"
            return f"--set {item}: {where} has no field {name!r}{hint}"
        if depth == len(path) - 1:
            node[name] = _override_value(raw)
            return None
        if node[name] is None:
            section = ".".join(path[: depth + 1])
            return f"--set {item}: {section} is null; set it whole, e.g. --set '{section}={{\"{path[depth + 1]}\": ...}}'"
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


# ======================================================================================
# The training loop
# ======================================================================================
@dataclass
class RunProgress:
    """What the live display shows; updated by the loop."""

    phones: int = 0
    env_steps: int = 0
    steps_per_s: float = 0.0
    episodes: int = 0
    update: int = 0
    updates: int = 0
    warmup: bool = True
    recent_success: float | None = None
    buffer_steps: int = 0
    policy_version: int = 0
    stage: str = "starting"
    success_points: list[tuple[int, float]] = field(default_factory=list)
    task_points: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """The success points of each task (the plot's per-task panel)."""
    warmup_until: int = 0
    """Training step (x of the success curve) where the critic warm-up ended."""


@dataclass(frozen=True)
class EvalResult:
    """One sampled evaluation of the policy on the evaluation phones."""

    label: Literal["warm_start", "final"]
    policy_version: int
    updates: int
    """Learner updates done when it ran (0 for the warm start)."""
    successes: int
    episodes: int
    """Verified episodes (infrastructure truncations are not counted either way)."""
    per_task: dict[str, float]
    wall_s: float
    per_set: dict[str, float] = field(default_factory=dict)
    """Success rate of each evaluated set: ``train`` (the training tasks) and every
    ``evaluation.task_sets`` entry (verified episodes only)."""
    task_metrics: dict[str, TaskMetrics] = field(default_factory=dict)
    """Per task: SR, PR, side effects, false completions, over-time and the L1-L4 stratum
    (:class:`darwin.algos.task_metrics.TaskMetrics`, as ``darwin eval`` prints them)."""

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


@dataclass(frozen=True)
class RunResult:
    """Where a finished run left its outputs."""

    run_dir: Path
    updates: int
    env_steps: int
    success_points: list[tuple[int, float]]
    plot: Path
    evaluations: dict[str, EvalResult] = field(default_factory=dict)
    """``warm_start`` and ``final`` when ``config.evaluation`` asks for them (also in eval.json)."""


def use_ray_cluster(config: ExperimentConfig, address: str) -> ExperimentConfig:
    """``config`` with its phones on the Ray cluster at ``address`` (``darwin run --ray-address``).

    A sim experiment's SimPhones (same seeds) spread over the cluster's nodes, four per host
    process; an experiment that already places its phones (``phones.ray``) keeps its groups::

        >>> cfg = use_ray_cluster(ExperimentConfig(name="demo"), "10.0.0.2:6379")
        >>> cfg.phones.kind, cfg.phones.ray.address, cfg.phones.ray.groups[0].actors
        ('ray', '10.0.0.2:6379', 2)
    """
    phones = config.phones
    if phones.kind == "adb":
        raise ExperimentError(
            "--ray-address: phones.kind = 'adb' lists devices this machine reaches; to reach them from cluster nodes, "
            "set phones.kind = 'ray' with phones.ray groups of kind 'adb' placed on those nodes (docs/scale.md)"
        )
    ray = phones.ray or RayPhonesConfig(groups=(RayPhoneGroup(count=phones.count, seed=phones.seed, actors=-(-phones.count // 4)),))
    data = config.model_dump()
    data["phones"] = {**phones.model_dump(), "kind": "ray", "ray": {**ray.model_dump(), "address": address}}
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise ExperimentError("--ray-address gives an invalid experiment:\n  " + "\n  ".join(_validation_lines(exc))) from None


def _build_envs(config: ExperimentConfig) -> list:
    if config.phones.kind == "sim":
        return _sim_phones(config, config.phones.seed, config.phones.count, "sim")
    if config.phones.kind == "ray":
        from darwin.envs.ray_phones import RayPhonesError, build_ray_phones

        assert config.phones.ray is not None  # validated
        try:
            return build_ray_phones(config.phones.ray, perturbation=config.phones.perturbation,
                                    reset_between_episodes=config.phones.reset_between_episodes)
        except RayPhonesError as exc:
            raise ExperimentError(str(exc)) from None
    from darwin.envs.adb import AdbEnvConfig, AdbPhoneEnv

    if len(config.phones.devices) < config.phones.count:
        raise ExperimentError(f"phones.kind='adb' needs {config.phones.count} devices, {len(config.phones.devices)} listed; set phones.devices")
    host, _, port = config.phones.adb_server.partition(":")
    adb = AdbEnvConfig(adb_host=host, adb_port=int(port or 5037))
    return [AdbPhoneEnv(serial, adb) for serial in config.phones.devices[: config.phones.count]]


def _eval_envs(config: ExperimentConfig, training_envs: list) -> list:
    """Fresh phones for one evaluation: SimPhones are rebuilt from their seeds each time, so
    the warm start and the final policy meet identical initial states (state persists
    between episodes, so reusing the phones would hand the second evaluation other tasks)."""
    if config.phones.kind != "sim":
        return training_envs  # real devices: evaluated before rollout starts and after it stops
    return _sim_phones(config, config.evaluation.phone_seed, config.evaluation.phones, "eval")


def _sim_phones(config: ExperimentConfig, first_seed: int, count: int, prefix: str) -> list:
    from darwin.envs.sim.env import SimPhoneEnv

    return [
        SimPhoneEnv(seed=first_seed + i, perturbation=config.phones.perturbation, name=f"{prefix}-{first_seed + i}",
                    reset_between_episodes=config.phones.reset_between_episodes)
        for i in range(count)
    ]


async def _evaluate(
    config: ExperimentConfig, label: Literal["warm_start", "final"], tasks: list[Task], envs: list,
    make_actor: Callable[[int], Actor], workflow: Workflow, version: int, updates: int,
) -> EvalResult:
    from darwin.evaluate import evaluate

    started = time.perf_counter()
    groups = {"train": tasks, **config.resolve_eval_sets()}
    every = list({t.id: t for group in groups.values() for t in group}.values())
    report = await evaluate(every, envs, make_actor, config.evaluation.episodes_per_task, workflow)
    per_task_stats = report.per_task
    per_task = {tid: st.success_rate for tid, st in per_task_stats.items() if st.success_rate is not None}
    per_set = {}
    for name, group in groups.items():
        verified = sum(per_task_stats[t.id].verified for t in group if t.id in per_task_stats)
        if verified:
            per_set[name] = sum(per_task_stats[t.id].successes for t in group if t.id in per_task_stats) / verified
    # The headline success rate stays the training tasks' (what the run trains on).
    train_ids = {t.id for t in tasks}
    successes = sum(st.successes for tid, st in per_task_stats.items() if tid in train_ids)
    verified = sum(st.verified for tid, st in per_task_stats.items() if tid in train_ids)
    result = EvalResult(label, version, updates, successes, verified, per_task, round(time.perf_counter() - started, 2), per_set,
                        report.task_metrics)
    logger.info("evaluation %s: %d/%d successes (%.1f%%); %s", label, result.successes, result.episodes, 100 * result.success_rate,
                ", ".join(f"{k} {100 * v:.1f}%" for k, v in per_set.items()))
    return result


def _save_evaluations(run_dir: Path, evaluations: dict[str, EvalResult]) -> None:
    data = {k: {**asdict(v), "success_rate": v.success_rate, "task_metrics": {t: m.to_json() for t, m in v.task_metrics.items()}}
            for k, v in evaluations.items()}
    (run_dir / "eval.json").write_text(json.dumps(data, indent=2) + "\n")


def _load_evaluations(run_dir: Path) -> dict[str, EvalResult]:
    path = run_dir / "eval.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    for v in data.values():  # eval.json keeps the metrics with their derived rates; the result keeps the counts
        v["task_metrics"] = {t: TaskMetrics.from_json(m) for t, m in v.get("task_metrics", {}).items()}
    return {k: EvalResult(**{f: v[f] for f in EvalResult.__dataclass_fields__ if f in v}) for k, v in data.items()}


def _learner_class(learner: LearnerConfig) -> type:
    """LocalLearner, or VerlLearner for ``learner.backend == "verl"`` (same run contract; it
    checks for Ray and GPUs when built and names what is missing: docs/scale.md)."""
    if learner.backend == "verl":
        from darwin.learner.verl_learner import VerlLearner

        return VerlLearner
    from darwin.learner import LocalLearner

    return LocalLearner


async def _train(config: ExperimentConfig, run_dir: Path, resume: bool, on_progress: Callable[[RunProgress], None]) -> RunResult:
    from darwin.buffer import ReplayBuffer
    from darwin.learner import restore_pending
    from darwin.report import EvalPoint, MetricsLogger, plot_success
    from darwin.rollout import RolloutEngine
    from darwin.sft import TinyActorPool, ensure_warm_start
    from darwin.store import RunStore

    progress = RunProgress(phones=config.phones.count, updates=config.updates)
    ckpt_dir = run_dir / "checkpoint"
    progress.stage = "warm start"
    on_progress(progress)
    clock = time.perf_counter()
    warm = Path(config.checkpoint) if config.checkpoint else await asyncio.to_thread(ensure_warm_start, config.cache_dir, config.sft)
    timings = {"warm_start_s": time.perf_counter() - clock}
    (run_dir / WARM_START_FILE).write_text(json.dumps({"path": str(warm.resolve())}) + "\n")
    pool = TinyActorPool(warm, temperature=config.policy.temperature, seed=config.policy.seed, max_batch=config.policy.max_batch,
                         make_policy=config.policy.policy_factory(),
                         max_wait=config.policy.max_wait, make_memory=config.memory_factory(run_dir))
    tasks = config.resolve_tasks()
    curriculum = config.build_curriculum(tasks, run_dir=run_dir)
    buffer = ReplayBuffer(rollout_steps=config.rollout_steps, group_size=config.group_size)
    store = RunStore.for_run_dir(run_dir)
    env_offset = 0
    if resume and ckpt_dir.exists():
        learner = _learner_class(config.learner).load(ckpt_dir, pool.policy, config=config.learner)
        state = learner.resume_state
        restore_pending(buffer, state.pending)
        extra = state.extra_state
        curriculum.load_state_dict(extra["curriculum"])  # type: ignore[arg-type]
        run_id = str(extra["run_id"])
        env_offset = int(extra["env_steps"])  # type: ignore[arg-type]
        progress.success_points = [(int(s), float(v)) for s, v in extra["success_points"]]  # type: ignore[union-attr, misc]
        progress.task_points = {k: [(int(x), float(v)) for x, v in pts] for k, pts in extra.get("task_points", {}).items()}  # type: ignore[union-attr, misc]
        progress.warmup_until = int(extra.get("warmup_until", 0))  # type: ignore[arg-type]
        logger.info("resumed %s at update %d (policy v%d, %d pending trajectories)", ckpt_dir, learner.updates, learner.policy_version, len(state.pending))
    else:
        if resume:
            logger.warning("no checkpoint in %s; starting from the warm start", ckpt_dir)
        learner = _learner_class(config.learner)(pool.policy, config.learner)
        run_id = store.start_run(config.name, config=config)
    envs = _build_envs(config)
    workflow = config.build_workflow(pool.observation_size)
    # A second workflow (and verifier: a learned one is a model) only when the evaluation is scored differently.
    eval_workflow = workflow if config.evaluation.verifier is None else config.build_workflow(pool.observation_size, evaluation=True)
    evaluations = _load_evaluations(run_dir) if resume else {}
    evaluate_runs = config.evaluation.episodes_per_task > 0
    metrics_log = MetricsLogger(run_dir)

    async def evaluate_now(label: Literal["warm_start", "final"]) -> None:
        progress.stage = f"evaluation ({label.replace('_', ' ')})"
        on_progress(progress)
        clock = time.perf_counter()
        evaluations[label] = await _evaluate(
            config, label, tasks, _eval_envs(config, envs), pool, eval_workflow, learner.policy_version, learner.updates
        )
        _save_evaluations(run_dir, evaluations)
        metrics_log.log(learner.updates, "eval", {"success": evaluations[label].success_rate})
        timings[f"eval_{label}_s"] = time.perf_counter() - clock

    if evaluate_runs and "warm_start" not in evaluations:
        await evaluate_now("warm_start")
    engine = RolloutEngine(
        envs, pool, curriculum, buffer, workflow=workflow, store=store, run_id=run_id, mode=config.mode,
        group_size=config.group_size, max_backlog_steps=config.max_backlog_steps or config.rollout_steps,
    )
    stop = asyncio.Event()
    rollout = asyncio.create_task(engine.run(until=stop.is_set))
    started = time.perf_counter()
    progress.stage = "rollout"

    def refresh() -> None:
        progress.env_steps = env_offset + engine.stats.env_steps
        progress.steps_per_s = engine.stats.steps_per_second
        progress.episodes = engine.stats.episodes
        progress.buffer_steps = buffer.completed_steps
        progress.update = learner.updates
        progress.warmup = learner.in_warmup
        progress.policy_version = learner.policy_version
        on_progress(progress)

    try:
        while learner.updates < config.updates:
            if config.time_budget_s is not None and time.perf_counter() - started > config.time_budget_s:
                logger.warning("time budget of %.0fs reached after %d updates", config.time_budget_s, learner.updates)
                break
            batch = buffer.take_completed()
            if batch is None:
                if rollout.done():
                    rollout.result()  # surfaces a crashed rollout
                refresh()
                await asyncio.sleep(0.2)
                continue
            _record_success(progress, batch)
            if learner.in_warmup and progress.success_points:
                progress.warmup_until = progress.success_points[-1][0]
            progress.stage = "update (critic warm-up)" if learner.in_warmup else "update"
            refresh()
            lag = [learner.policy_version - t.decision.generation.policy_version for tr in batch for t in tr.transitions if t.decision.generation is not None]
            update = await asyncio.to_thread(learner.update, batch)
            with (run_dir / "updates.jsonl").open("a", encoding="utf-8") as fh:  # provenance: what each update trained on
                fh.write(json.dumps({"update": update.update, "episode_ids": [t.episode_id for t in batch]}) + "\n")
            metrics_log.log(update.update, "update", update.as_dict())
            metrics_log.log(update.update, "rollout", {
                "success": sum(bool(t.success) for t in batch) / len(batch), "episodes": len(batch),
                "success_by_task": _success_by_task(batch),
                "env_steps": env_offset + engine.stats.env_steps, "steps_per_s": engine.stats.steps_per_second,
                "backpressure_phone_s": engine.stats.backpressure_s,
                "policy_version_lag_mean": sum(lag) / max(1, len(lag)), "policy_version_lag_max": max(lag, default=0),
                **{f"truncations/{k}": v for k, v in engine.stats.truncation_causes.items()},
            })
            weights = getattr(curriculum, "weights", None)
            if callable(weights):  # adaptive curricula: how they now share the phones among tasks
                metrics_log.log(update.update, "curriculum", weights())
            progress.stage = "rollout"
            await asyncio.to_thread(
                learner.save, ckpt_dir, pending=buffer.completed_trajectories(),
                extra_state={"curriculum": curriculum.state_dict(), "run_id": run_id, "env_steps": env_offset + engine.stats.env_steps,
                             "success_points": [list(p) for p in progress.success_points],
                             "task_points": {k: [list(p) for p in pts] for k, pts in progress.task_points.items()},
                             "warmup_until": progress.warmup_until},
            )
            refresh()
        stop.set()
        await rollout  # a crash in the last moments still surfaces
        timings["rl_s"] = time.perf_counter() - started
        if evaluate_runs:
            refresh()
            await evaluate_now("final")
    finally:
        stop.set()
        await asyncio.gather(rollout, return_exceptions=True)  # already surfaced above, or an error is on its way
        await pool.aclose()
        for env in envs:  # phone threads; phone host actors on a Ray cluster
            env.close()
        metrics_log.close()
        store.close()
    last_x = progress.success_points[-1][0] if progress.success_points else 0
    plot = plot_success(
        progress.success_points, run_dir / "success.png", title=f"{config.name}: success on {', '.join(config.tasks)}",
        warmup_until=progress.warmup_until, per_task=progress.task_points if len(progress.task_points) > 1 else None,
        evaluations=[EvalPoint(f"evaluation ({label.replace('_', ' ')})", 0 if label == "warm_start" else last_x, e.successes, e.episodes)
                     for label, e in sorted(evaluations.items(), key=lambda kv: kv[0] != "warm_start")],
    )
    (run_dir / "success_points.json").write_text(json.dumps(progress.success_points))
    summary = {"updates": learner.updates, "env_steps": progress.env_steps, "episodes": len(progress.success_points),
               "resumed": resume, **{k: round(v, 2) for k, v in timings.items()}}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return RunResult(run_dir, learner.updates, progress.env_steps, progress.success_points, plot, evaluations)


def _success_by_task(batch: list[Trajectory]) -> dict[str, float]:
    """Success rate of each task's scored episodes in one training batch (TensorBoard
    ``rollout/success_by_task/<task>``): which tasks the policy is improving on."""
    scored: dict[str, list[bool]] = {}
    for t in batch:
        if t.success is not None:
            scored.setdefault(t.task.id, []).append(bool(t.success))
    return {task: sum(outcomes) / len(outcomes) for task, outcomes in sorted(scored.items())}


def _record_success(progress: RunProgress, batch: list[Trajectory]) -> None:
    """One point per scored episode at the number of steps trained on once it is included
    (x grows with every trajectory, so a batch's episodes spread along the axis)."""
    trained = progress.success_points[-1][0] if progress.success_points else 0
    for t in batch:
        trained += len(t)
        if t.success is not None:
            progress.success_points.append((trained, float(t.success)))
            progress.task_points.setdefault(t.task.id, []).append((trained, float(t.success)))
    recent = [v for _, v in progress.success_points[-20:]]
    progress.recent_success = sum(recent) / len(recent) if recent else None


def load_run_policy(
    run_dir: str | Path, *, temperature: float = 1.0, seed: int = 0, max_batch: int = 8, max_new_tokens: int | None = None,
) -> TinyActorPool:
    """A :class:`~darwin.sft.TinyActorPool` with the actor weights of a run's last checkpoint
    (``darwin eval --agent tiny:<run dir>``): the run's warm start, then its trained weights."""
    from darwin.learner import LocalLearner
    from darwin.sft import TinyActorPool

    run_dir = Path(run_dir)
    record = run_dir / WARM_START_FILE
    if not record.is_file():
        raise FileNotFoundError(f"{run_dir} has no {WARM_START_FILE}: pass a `darwin run` directory (or a `darwin sft` output)")
    warm = Path(json.loads(record.read_text())["path"])
    if not warm.is_dir():
        raise FileNotFoundError(f"the warm start {warm} of {run_dir} is gone; rebuild it (same SFT config) or restore it there")
    pool = TinyActorPool(warm, temperature=temperature, seed=seed, max_batch=max_batch, max_new_tokens=max_new_tokens)
    learner = LocalLearner.load(run_dir / "checkpoint", pool.policy)  # pushes the trained actor weights and version
    logger.info("%s: policy version %d after %d updates", run_dir, learner.policy_version, learner.updates)
    return pool


def default_run_dir(config: ExperimentConfig) -> Path:
    if config.run_dir:
        return Path(config.run_dir)
    return Path("runs") / f"{config.name}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"


def run_experiment(config: ExperimentConfig, run_dir: Path, resume: bool = False, on_progress: Callable[[RunProgress], None] | None = None) -> RunResult:
    """Train as ``config`` says, writing everything under ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "experiment.json").write_text(config.model_dump_json(indent=2))
    return asyncio.run(_train(config, run_dir, resume, on_progress or (lambda p: None)))
