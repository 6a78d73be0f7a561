"""Experiments: one typed config of phones, agent, policy, workflow, curriculum, learner and
store (a schema: :mod:`darwin.run.build` makes the components from it), and the loop that
trains (``darwin run examples/spa_bench.py``).

The loop is the paper's: phone workers stream transitions into the replay buffer without
waiting for each other; whenever completed trajectories cover ``rollout_steps`` steps the
learner takes them, updates (critic only during warm-up) and pushes new weights to the
policy; a checkpoint follows every update so ``--resume`` continues after a crash.

An experiment file is a Python module with ``build(preset: str) -> ExperimentConfig``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.components import (
    BUILTINS,
    ComponentError,
    ComponentKind,
    ComponentSpec,
    check_backend,
    check_component,
    resolve_component,
)
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.faults import FaultSpec, FaultSpecError
from darwin.envs.fleet import ResetSchedule
from darwin.envs.providers import PhoneProvider, SimPhones
from darwin.envs.ray_phones import RayPhones, RayPhonesConfig
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.learner.config import LearnerConfig
from darwin.policies.server_client_config import ServerPolicyConfig
from darwin.problems import ExperimentError
from darwin.run.verification_watch import VerificationWatchConfig
from darwin.sft.config import SFTConfig
from darwin.task_registry import resolve_tasks as resolve_task_names
from darwin.templates import SplitConfig
from darwin.types import Task, TaskDefinitionError

if TYPE_CHECKING:
    from darwin.evaluate import EvalProtocol

logger = logging.getLogger(__name__)


class PhonesConfig(BaseModel):
    """Where episodes run, chosen by one setting (``provider``): in-process SimPhones (default),
    ADB devices, SimPhones served over adb, phones on a Ray cluster, or a provider of your own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="sim"),
        description="where the phones come from (docs/phones.md): a provider by name or an import path "
        "'module:Class' (a PhoneProvider). 'sim': in-process SimPhones seeded seed + i; 'adb': `devices` through "
        "`adb_server`; 'sim_farm': SimPhones served over adb through the real adb server, state probe on; 'ray': "
        "phone groups on a Ray cluster's nodes (`ray`). It hands out `count` phones and holds `spares`, "
        "hard-resets them, and gets them back at the end",
    )
    count: int = Field(
        8,
        ge=1,
        le=4096,
        description="phones in service (sim: SimPhones; adb: how many of `devices`; ray: all groups' phones)",
    )
    seed: int = Field(0, ge=0, description="SimPhone i gets seed + i")
    perturbation: PerturbationConfig = Field(default_factory=PerturbationConfig)
    locale: Literal["auto", "en", "zh"] = Field(
        "auto",
        description="sim: the SimPhones' UI language. 'auto': each episode's task decides (Chinese task "
        "instances, '.zh.' ids, play on a Chinese UI, the others on an English one); 'en' / 'zh': always that one",
    )
    reset_between_episodes: bool = Field(
        True,
        description="sim: every episode starts from the phone's initial state. With persistent state a goal "
        "reached once holds in every later episode of that task on that phone (base tasks have no teardown), "
        "so training would dry up; real phones keep their state (use lifecycle tasks with teardown there)",
    )
    initial_states: Literal["fixed", "fresh", "auto"] = Field(
        "fixed",
        description="sim, with reset_between_episodes: 'fixed': every episode of phone i starts from seed + i's "
        "initial state; 'fresh': each episode starts from a new one (a factory reset to a new seed: other app data, "
        "list and icon order, accent, pop-ups), so RL cannot fit a handful of starts; 'auto': 'fresh' where the "
        "phones can (in-process SimPhones that reset between episodes), else 'fixed' (phones served over adb, "
        "real phones, phones that keep their state), so an experiment moves to other phones unchanged. Evaluation "
        "phones are unaffected: their seeds never train",
    )
    faults: str = Field(
        "none",
        description="sim: infrastructure faults injected into the training SimPhones in process (the spec of "
        "`darwin phones serve --faults`, docs/phones.md: e.g. 'crash=0.01:0.5'); an episode a fault cuts ends as an "
        "infrastructure truncation. Evaluation phones never fault. Phones served over adb: the 'sim_farm' "
        "provider's `faults` argument",
    )
    devices: tuple[str, ...] = Field((), description="adb: serials or host:port of the phones")
    adb_server: str = Field("127.0.0.1:5037", description="adb: host:port of the adb server")
    ray: RayPhonesConfig | None = Field(
        None,
        description="provider 'ray': the cluster address and which phones run on which nodes (docs/scale.md); "
        "`darwin run --ray-address ADDR` sets it (and the provider) for a sim experiment",
    )
    spares: int = Field(
        0,
        ge=0,
        le=4096,
        description="phones beyond `count` the provider holds back, to replace quarantined phones "
        "that do not heal within replace_after_s (not with 'ray')",
    )
    replace_after_s: float = Field(
        60.0,
        ge=0.0,
        le=3600.0,
        description="a quarantined phone that is not healthy this "
        "long after its first hard reset is released and a spare takes its place (or it retires)",
    )
    hard_reset_every: int | None = Field(
        None,
        ge=1,
        description="hard-reset each phone after every N episodes it plays, through the provider "
        "(SimPhones: a factory reset; not with 'ray')",
    )
    hard_reset_after_infra: int | None = Field(
        None, ge=1, description="hard-reset a phone after N infrastructure truncations in a row"
    )
    hard_reset_unhealthy: bool = Field(
        True,
        description="hard-reset a quarantined phone (its health check failed) through the provider "
        "before giving up on it",
    )
    sim_state_probe: bool = Field(
        False,
        description="provider 'adb': the devices are SimPhones served by "
        "`darwin phones serve`: use their state probe (rule verification), answers and task setup",
    )
    call_deadline_s: float = Field(
        10.0,
        gt=0.0,
        le=600.0,
        description="adb phones: deadline of one action or state probe; "
        "a phone past it ends the episode as an infrastructure truncation",
    )
    screenshot_deadline_s: float = Field(15.0, gt=0.0, le=600.0, description="adb phones: deadline of one screenshot")
    reconnect_deadline_s: float = Field(
        60.0,
        gt=0.0,
        le=3600.0,
        description="adb phones: how long a lost connection may take to come back (all tries) before the call fails",
    )
    guard: ComponentSpec | Literal["off"] | None = Field(
        None,
        description="the guard against irreversible actions (docs/phones.md, 'The action guard'): a guard by "
        "name ('rules': the built-in rules, or {'name': 'rules', 'kwargs': {'rules': FILE, 'penalty': 1.0}}) or "
        "an import path 'module:Class' (an ActionGuard), on every phone; 'off': no guard. None: 'rules' on phones "
        "that are not SimPhones (real devices, a custom provider's), none on SimPhones",
    )

    def provider_class(self) -> type[PhoneProvider]:
        """The :class:`~darwin.envs.providers.PhoneProvider` class ``provider`` names."""
        cls = resolve_component("provider", self.provider.name)
        if not (isinstance(cls, type) and issubclass(cls, PhoneProvider)):
            raise ValueError(
                f"phones.provider {self.provider.name!r} is not a PhoneProvider; name a built-in "
                f"({', '.join(sorted(BUILTINS['provider']))}) or a subclass of darwin.envs.providers.PhoneProvider"
            )
        return cls

    @property
    def in_process(self) -> bool:
        """The phones are in-process SimPhones (provider 'sim'): they fork, take ``faults``, and
        evaluations get fresh ones."""
        return issubclass(self.provider_class(), SimPhones)

    @property
    def on_ray(self) -> bool:
        """The phones run on a Ray cluster's nodes (provider 'ray', the groups in ``ray``)."""
        return issubclass(self.provider_class(), RayPhones)

    def reset_schedule(self) -> ResetSchedule | None:
        """The hard-reset schedule, or None when the fleet has nothing to do between episodes: no
        reset scheduled, on phones that are never left quarantined (in-process SimPhones, Ray
        phones: :attr:`PhoneProvider.over_adb <darwin.envs.providers.PhoneProvider.over_adb>` is False)."""
        scheduled = self.hard_reset_every is not None or self.hard_reset_after_infra is not None
        if not scheduled and not self.provider_class().over_adb:
            return None
        return ResetSchedule(
            every_episodes=self.hard_reset_every,
            after_infra_failures=self.hard_reset_after_infra,
            on_failed_health=self.hard_reset_unhealthy,
        )

    @property
    def simulated(self) -> bool:
        """True when every phone is a SimPhone: in process, in Ray groups whose provider is 'sim', or
        served over ADB by ``darwin phones serve`` (provider 'sim_farm', or ``sim_state_probe``)."""
        if self.on_ray:
            return self.sim_state_probe or (self.ray is not None and all(g.in_process for g in self.ray.groups))
        return self.in_process or self.provider.name == "sim_farm" or self.sim_state_probe

    def guard_spec(self) -> ComponentSpec | None:
        """The guard the phones get (``guard``): as set, none for ``'off'``, and by default the
        built-in rules guard unless every phone is a SimPhone (:attr:`simulated`)."""
        if self.guard == "off":
            return None
        if self.guard is None:
            return None if self.simulated else ComponentSpec(name="rules")
        return self.guard

    def adb_config(self, for_sim: bool = False) -> AdbEnvConfig:
        """Settings of the adb phones: the adb server, the deadlines, and for served SimPhones
        (``for_sim`` or ``sim_state_probe``) the state probe, answers and setup commands."""
        host, _, port = self.adb_server.partition(":")
        values = {
            "adb_host": host,
            "adb_port": int(port or 5037),
            "command_timeout_s": self.call_deadline_s,
            "screenshot_timeout_s": self.screenshot_deadline_s,
            "reconnect_timeout_s": self.reconnect_deadline_s,
        }
        return AdbEnvConfig.for_sim(**values) if for_sim or self.sim_state_probe else AdbEnvConfig(**values)

    @model_validator(mode="after")
    def _check_provider(self) -> PhonesConfig:
        if isinstance(self.guard, ComponentSpec):
            resolve_component("guard", self.guard.name)
        self.provider_class()  # a typo fails at load, with "did you mean"
        name = self.provider.name
        problems = []
        if self.on_ray:
            if self.ray is None:
                problems.append(
                    f"phones.provider = {name!r} needs phones.ray (address and groups), or pass --ray-address to run "
                    "the SimPhones on a cluster"
                )
            elif self.ray.total_phones != self.count:
                problems.append(
                    f"phones.count = {self.count} but phones.ray's groups hold {self.ray.total_phones} phones; set count "
                    f"to {self.ray.total_phones}"
                )
            if self.spares:
                problems.append(
                    f"phones.spares = {self.spares}: Ray phones come back with their node and have no spares; set spares = 0"
                )
            if self.hard_reset_every is not None or self.hard_reset_after_infra is not None:
                problems.append(
                    "phones.hard_reset_every / phones.hard_reset_after_infra: a Ray phone host cannot hard-reset its "
                    "phones; unset them"
                )
        elif self.ray is not None:
            problems.append(
                f"phones.ray is set but phones.provider = {name!r}; set phones.provider = 'ray' to run the phones on "
                "the cluster (or drop phones.ray)"
            )
        if self.fault_spec().enabled and not self.in_process:
            problems.append(
                f"phones.faults = {self.faults!r} injects faults into in-process SimPhones (phones.provider = 'sim'); "
                "for SimPhones served over adb give the provider the spec "
                "(phones.provider = {name = 'sim_farm', kwargs = {faults = '...'}}); real phones fault on their own"
            )
        if self.initial_states == "fresh" and not self._can_renew_initial_states:
            problems.append(
                "phones.initial_states = 'fresh' factory-resets in-process SimPhones to a new seed before each "
                "episode: it needs phones.provider = 'sim' and phones.reset_between_episodes = true "
                f"(got provider {name!r}, reset_between_episodes = {str(self.reset_between_episodes).lower()}); "
                "'auto' renews them only where the phones can"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def _can_renew_initial_states(self) -> bool:
        return self.in_process and self.reset_between_episodes

    @property
    def fresh_initial_states(self) -> bool:
        """Whether each training episode starts from a new initial state: ``initial_states`` is
        ``'fresh'``, or ``'auto'`` on phones that can (in-process SimPhones that reset between episodes)."""
        return self.initial_states == "fresh" or (self.initial_states == "auto" and self._can_renew_initial_states)

    def fault_spec(self) -> FaultSpec:
        """The parsed ``faults`` (no faults for ``'none'``).

        >>> PhonesConfig(faults="crash=0.02:0.5").fault_spec().crash_down_s
        0.5
        """
        try:
            return FaultSpec.parse(self.faults)
        except FaultSpecError as exc:
            raise ValueError(f"phones.faults: {exc}") from None


class PolicyConfig(BaseModel):
    """How actions are sampled and batched."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(
        1.0, gt=0.0, le=2.0, description="sampling temperature (PPO: 1.0, the full masked distribution)"
    )
    max_batch: int = Field(8, ge=1, le=1024, description="largest inference batch")
    max_wait: float = Field(0.05, ge=0.0, le=10.0, description="seconds the oldest request may wait for a fuller batch")
    seed: int = Field(0, ge=0, description="seeds the policy's sampling generator")
    backend: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="hf"),
        description="what samples the actions (a darwin.policies.base.Policy), a built-in name or an import path "
        "'module:Class' (built as Class(vlm=..., config=<the sampling settings>, **kwargs)): 'hf': in process "
        "(transformers); 'server': an OpenAI-compatible inference server (vLLM / SGLang) that returns token ids and "
        "log-probs, receiving the learner's weights after each update (docs/scale.md)",
    )
    server: ServerPolicyConfig | None = Field(
        None,
        description="backend 'server': where the server is and how weights reach it; temperature, seed and "
        "max_tokens come from this setup and the warm start",
    )

    @model_validator(mode="after")
    def _check_backend(self) -> PolicyConfig:
        if self.backend.name == "server" and self.server is None:
            raise ValueError(
                "policy.backend = 'server' needs policy.server (ServerPolicyConfig: base_url, model, weight_sync, weights_dir)"
            )
        if self.backend.name != "server" and self.server is not None:
            raise ValueError(
                f"policy.server is set but policy.backend = {self.backend.name!r}; set backend='server' to use it "
                "(or drop server)"
            )
        check_backend("policy", self.backend, vlm=None, config=None)  # a typo fails at load, with "did you mean"
        return self


class AgentConfig(BaseModel):
    """Which agent reads the screens: the warm start's own format, or a named format over a
    Qwen2-VL-family ``checkpoint`` (e.g. a UI-TARS directory)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: ComponentSpec | None = Field(
        None,
        description="None: the format the warm start was trained with (darwin sft); else an agent format "
        "(darwin.agents.formats: uitars-1.5, uitars-1.0, qwen2.5, qwen3, tiny, or the import path of a VLMAgent class) "
        "for `checkpoint`, a Qwen2-VL-family model directory",
    )
    observation_size: tuple[int, int] | None = Field(
        None, description="named formats: the screenshot size (width, height) the model is given"
    )
    max_new_tokens: int | None = Field(
        None, ge=1, le=8192, description="response cap; None: the warm start's, or 256 for a named format"
    )

    @model_validator(mode="after")
    def _check_format(self) -> AgentConfig:
        if self.format is not None:
            check_component("agent_format", self.format, memory=None)  # raises naming the close match
            if self.observation_size is None:
                raise ValueError(f"agent.format = {self.format.name!r} needs agent.observation_size, e.g. (252, 560)")
        return self


class StoreConfig(BaseModel):
    """Where the run database (episodes, steps, verdicts) and its screenshots go."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="name of an environment variable holding a SQLAlchemy URL (e.g. postgresql+psycopg://user:pw@host/db; "
        "read from the environment so a password never reaches experiment.json); None: SQLite <run dir>/run.db",
    )
    screenshot_dir: str | None = Field(None, description="None: <run dir>/screenshots")


class EvaluationConfig(BaseModel):
    """A paired evaluation before RL (the warm start) and after the last update, on phones
    that never train, so a run reports its gain on equal terms: on each evaluation phone (one
    initial state per task) a greedy episode and ``samples`` sampled ones per task, each with
    its own sampling seed (:class:`darwin.evaluate.EvalProtocol`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: int = Field(
        0,
        ge=0,
        le=1024,
        description="sampled episodes of every task on each evaluation phone (pass@k up to k = samples); "
        "0 = no evaluation",
    )
    greedy: bool = Field(True, description="also one greedy episode of every task on each evaluation phone")
    sampling_seed: int = Field(
        0, ge=0, description="the sampled episodes' seeds derive from it (the same in every run, so runs pair)"
    )
    phones: int = Field(
        8,
        ge=1,
        le=4096,
        description="sim: evaluation SimPhones, one initial state of each task each (adb: the training devices are "
        "used, before and after rollout)",
    )
    phone_seed: int = Field(
        10_000, ge=0, description="sim: evaluation phone i gets this seed + i (apart from training phones)"
    )
    verifier: ComponentSpec | None = Field(
        None,
        description="what scores the evaluations: None = the experiment's verifier (the reward); 'rule' measures a "
        "run trained on a learned or judged reward against the ground truth",
    )
    task_sets: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="held-out task sets evaluated besides the training tasks, by name (e.g. {'unseen_apps': "
        "('gen.unseen_apps',)}); each evaluation reports their success rates under `per_set`",
    )
    perturbation: PerturbationConfig | None = Field(
        None,
        description="sim: the evaluation phones' perturbations; None = the training phones' (phones.perturbation). "
        "Set it to train on another mix (e.g. more pop-ups) while measuring on the usual one",
    )

    @property
    def enabled(self) -> bool:
        return self.samples > 0

    @property
    def protocol(self) -> EvalProtocol:
        """The episodes each evaluation plays (:class:`darwin.evaluate.EvalProtocol`)."""
        from darwin.evaluate import EvalProtocol

        return EvalProtocol(samples=self.samples, greedy=self.greedy, seed=self.sampling_seed)


class BranchingConfig(BaseModel):
    """Branching rollouts (:class:`darwin.rollout.Branching`, docs/learner.md "Branching
    rollouts"): after each training episode, ``continuations`` more from each of up to
    ``points`` of its states, on a SimPhone put back in that exact state; the learner's
    ``gae`` estimator then gives those steps the advantage of their return over their
    siblings' mean return."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    continuations: int = Field(2, ge=1, le=16, description="episodes played on from each chosen state")
    points: int = Field(1, ge=1, le=32, description="states of each episode branched from, chosen at random")


class RoundVerifierConfig(BaseModel):
    """Stage-3 verification in the flywheel (:mod:`darwin.run.round_verifier`, docs/self-evolution.md):
    before every round's RL a learned verifier (the current policy's backbone with a success head,
    :mod:`darwin.verifiers.learned`) is trained again on the run's own verdicts so far (each kept
    task's replayed demonstration, every screen labelled by its synthesised goal; every earlier
    round's RL episodes, labelled by the verdict that rewarded them), rewards that round as
    ``reward`` says, and is measured against the held-out apps' human-written rules, which never
    train it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reward: Literal["fallback", "learned"] = Field(
        "fallback",
        description="'fallback': the experiment's verifier decides where it can and the learned verifier where it "
        "leaves a phase unverified (a task with no rule, e.g. a model-described goal); 'learned': the learned "
        "verifier decides every reward of the round's RL and the experiment's verifier audits it (disagreements "
        "counted, as `darwin verifier audit` reads them)",
    )
    epochs: int = Field(4, ge=1, le=100)
    batch_size: int = Field(16, ge=1, le=512)
    lr: float = Field(2e-4, gt=0.0, le=1.0, description="backbone learning rate")
    head_lr: float = Field(1e-3, gt=0.0, le=1.0, description="head learning rate")
    swapped_goals: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="share of positives shown again under another synthesised goal as negatives, so the verifier "
        "reads the goal (VerifierTrainConfig.swapped_goals)",
    )
    every_step: bool | None = Field(
        None,
        description="the learned verifier checks after every step (True) or once when the phase ends (False); None: "
        "every step with reward='fallback' (the rule keeps its every-step check), once with reward='learned' (a false "
        "positive is met once per phase, not at every step)",
    )
    agreement_episodes: int = Field(
        2,
        ge=0,
        le=1000,
        description="episodes per held-out human-written task of the explored apps and scripted agent (oracle, "
        "stopped early, wandering, random) whose screens, labelled by the human rules, measure the verifier's "
        "agreement every round; 0: not measured",
    )


class SelfEvolutionConfig(BaseModel):
    """Self-evolution on apps never shown (issue 45, :mod:`darwin.run.self_evolution`, docs/self-evolution.md):
    after the warm start, ``rounds`` of: explore ``apps`` with the current policy, synthesise tasks
    from what the explorations reached, fine-tune on the explorer's own demonstrations of them,
    then RL on them. No human-written task, demonstration or reward of a held-out app enters
    training: ``split`` says what is held out, and a guard refuses it in every round's data."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    apps: tuple[str, ...] = Field(min_length=1, description="the apps explored (launcher labels), the held-out ones")
    split: SplitConfig = Field(description="the template split whose held-out templates and apps never train")
    rounds: int = Field(2, ge=1, le=100, description="explore -> synthesise -> fine-tune -> RL, this many times")
    explorations: int = Field(
        4, ge=1, le=1024, description="explorations of each app per round (phone seeds from phones.seed)"
    )
    exploration_steps: int = Field(60, ge=1, le=10_000, description="actions per exploration")
    explorer: ComponentSpec | None = Field(
        None,
        description="who explores: None = the current policy at explorer_temperature; else an `actors` component "
        "('random', or 'module:factory')",
    )
    explorer_temperature: float = Field(
        1.5, gt=0, le=5.0, description="the policy's sampling temperature when it explores"
    )
    novelty_candidates: int = Field(
        1,
        ge=1,
        le=64,
        description="1: the explorer plays as it is; K > 1: the novelty explorer asks it for K proposals per step "
        "and plays the one expected to lead to the least-seen screen (darwin.hindsight.novelty)",
    )
    synthesizer: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="hindsight"),
        description="the task_synthesizer: 'hindsight' (SimPhone state paths -> state.equals rules) or 'module:Class'",
    )
    max_demonstration_steps: int = Field(
        16,
        ge=1,
        le=10_000,
        description="keep a task whose demonstration, its loops cut, takes at most this many actions (below horizon)",
    )
    tasks_per_round: int = Field(
        16, ge=1, le=10_000, description="synthesised tasks kept per round (shortest demonstrations first)"
    )
    sft_steps: int = Field(
        60, ge=0, le=100_000, description="fine-tuning steps on the explorer's demonstrations each round (0: none)"
    )
    sft_batch_size: int = Field(8, ge=1, le=4096, description="demonstration steps per fine-tuning step")
    sft_lr: float = Field(5e-4, gt=0, le=1.0, description="peak learning rate of the fine-tuning")
    replay_episodes: int = Field(
        64,
        ge=0,
        le=100_000,
        description="SimPhone oracle demonstrations of the warm start's tasks (`sft.tasks`, the training apps) mixed "
        "into each round's fine-tuning, so that it does not forget them (0: the explorer's demonstrations alone)",
    )
    rl_updates: int = Field(4, ge=1, le=100_000, description="learner updates per round on the synthesised tasks")
    keep_training_tasks: bool = Field(
        True, description="RL each round on the synthesised tasks and the experiment's `tasks` (against forgetting)"
    )
    learned_verifier: RoundVerifierConfig | None = Field(
        None,
        description="stage-3 verification: a learned verifier retrained before every round's RL on the run's own "
        "verdicts, rewarding as its `reward` says (None: the experiment's verifier alone)",
    )


class ExperimentConfig(BaseModel):
    """Everything a training run needs; validated when built (every problem at once)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    tasks: tuple[str, ...] = Field(("base8",), min_length=1, description="task ids, set names or task files")
    horizon: int = Field(32, ge=1, le=1024, description="step budget of the execution phase (paper: 32)")
    phones: PhonesConfig = Field(default_factory=PhonesConfig)
    checkpoint: str | None = Field(
        None, description="warm-start checkpoint directory; None: build it with `sft` (cached)"
    )
    sft: SFTConfig = Field(
        default_factory=SFTConfig, description="how the warm start is trained when `checkpoint` is None"
    )
    cache_dir: str = Field(".darwin-cache", description="where warm starts are cached")
    agent: AgentConfig = Field(default_factory=AgentConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    curriculum: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="round_robin"),
        description="which task a free phone runs next: 'round_robin', 'uniform', 'learnability', 'failure_filter', "
        "'staged', 'success_band', 'llm_proposer' "
        "or 'module:Class' (a darwin.curricula.base.Curriculum), built as cls(tasks=..., seed=phones.seed, **kwargs)",
    )
    workflow: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="step"),
        description="the interaction pattern: 'step' (the execution phase), 'lifecycle' (also the setup and "
        "teardown phases of lifecycle tasks) or 'module:Class' (a darwin.workflows.base.Workflow, given "
        "verifier= and config= when it takes them)",
    )
    verifier: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="rule"),
        description="the reward: 'rule' or 'module:Class' (a darwin.verifiers.base.Verifier) or 'module:function' (request -> Verdict)",
    )
    memory: ComponentSpec | None = Field(
        None,
        description="the agent's memory: None = the warm start's own (what it was trained with), 'sliding_window', "
        "'llm' (knowledge distilled by a model, kept in the run database; docs/memory.md) or 'module:Class' "
        "(a darwin.memory.base.Memory)",
    )
    group_size: int | None = Field(
        None,
        ge=2,
        le=64,
        description="group mode: every sampled task runs this many times in a row on one phone from the "
        "same start state, and the learner groups by it (GRPO, GiGPO, shortest-path adjustment, negative "
        "pruning); None = one episode per sampled task, groups by task id",
    )
    group_lost: Literal["train", "drop"] = Field(
        "train",
        description="group mode, a member lost to an infrastructure failure or a lost phone: 'train' trains the "
        "group on the members it has (the lost one as learner.infra_truncation says), 'drop' leaves the group out; "
        "nothing waits for a member that will never run",
    )
    rollout_steps: int = Field(256, ge=1, description="completed steps per update (paper: 256)")
    max_backlog_steps: int | None = Field(
        None,
        ge=1,
        description="backpressure: phones start new episodes only while the buffer holds fewer untrained "
        "steps (completed + running episodes); None = rollout_steps (policy-version lag of about one update). A large value "
        "keeps phones busy at the price of staler data",
    )
    updates: int = Field(
        12, ge=1, description="learner updates, critic warm-up included (self_evolution: rl_updates per round instead)"
    )
    time_budget_s: float | None = Field(
        None, gt=0, description="stop after this many seconds of RL even if updates remain"
    )
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig, description="sampled evaluation before and after RL"
    )
    mode: Literal["async", "sync"] = Field("async", description="rollout mode")
    branching: BranchingConfig | None = Field(
        None,
        description="branching rollouts: continuations from states of each training episode, on SimPhones that fork, "
        "with an exact state-level baseline in the 'gae' estimator; None = off",
    )
    run_dir: str | None = Field(None, description="default runs/<name>-<UTC time>")
    store: StoreConfig = Field(default_factory=StoreConfig, description="the run database")
    verification_watch: VerificationWatchConfig = Field(
        default_factory=VerificationWatchConfig,
        description="no silent runs: warn when few recent episodes are verified, stop after updates without a verified "
        "one (an update without a verdict never moves the actor: learner.infra_only_updates)",
    )
    self_evolution: SelfEvolutionConfig | None = Field(
        None,
        description="self-evolution rounds on apps never shown (docs/self-evolution.md); None = one RL run on `tasks`",
    )
    notes: str = Field("", description="free text shown by --dry-run (e.g. how the paper's schedule was scaled)")

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        problems = []
        server = self.policy.server
        if self.policy.backend.name == "server" and server is not None:
            lora = self.learner.finetunes.lora
            if server.weight_sync == "none":
                problems.append(
                    "policy.server.weight_sync = 'none' cannot receive the learner's updates; use 'lora' (vLLM) or 'disk' (SGLang)"
                )
            elif server.weight_sync == "lora" and (
                lora is None
                or lora.rank != server.lora_rank
                or set(lora.target_modules) != set(server.lora_target_modules)
            ):
                problems.append(
                    "policy.server.weight_sync = 'lora' sends the learner's adapters: set learner.finetunes.lora (LoraConfig) with "
                    f"rank = policy.server.lora_rank ({server.lora_rank}) and target_modules = policy.server.lora_target_modules "
                    f"({list(server.lora_target_modules)}), or use weight_sync='disk'"
                )
        if self.mode == "sync" and self.phones.reset_schedule() is not None:
            why = (
                "hard resets are scheduled"
                if self.phones.hard_reset_every is not None or self.phones.hard_reset_after_infra is not None
                else f"phones.provider = {self.phones.provider.name!r} hands out phones over adb, which it heals or "
                "replaces when they are quarantined"
            )
            problems.append(
                f"mode = 'sync' plays the phones in lockstep, but the phone fleet acts between episodes ({why}): "
                "use mode = 'async'"
            )
        if self.max_backlog_steps is not None and self.max_backlog_steps < self.rollout_steps:
            problems.append(
                f"max_backlog_steps = {self.max_backlog_steps} is below rollout_steps = {self.rollout_steps}: the learner would never get a batch; raise it or leave it None"
            )
        if self.agent.format is not None and self.checkpoint is None:
            problems.append(
                f"agent.format = {self.agent.format.name!r} runs a model directory: set checkpoint (e.g. a UI-TARS "
                "checkpoint), or leave agent.format unset for the SFT warm start"
            )
        if self.branching is not None:
            if not self.phones.in_process:
                problems.append(
                    f"branching rollouts put a phone back in an earlier state, which {self.phones.provider.name} phones "
                    "cannot; use phones.provider='sim' (in-process SimPhones) or set branching=null"
                )
            if self.group_size is not None or self.mode != "async":
                problems.append(
                    "branching rollouts need mode='async' and group_size=null: an episode and its continuations are "
                    "their own group, on one phone"
                )
            if self.learner.algorithm.name != "gae":
                problems.append(
                    f"branching rollouts' sibling baseline is part of the 'gae' estimator; learner.algorithm = "
                    f"{self.learner.algorithm.name!r} would train continuations as unrelated episodes: use 'gae' or set "
                    "branching=null"
                )
        if self.self_evolution is not None:
            if not self.phones.in_process:
                problems.append(
                    f"self_evolution explores on phones with a JSON state and puts demonstrations back on a fresh "
                    f"phone, which {self.phones.provider.name} phones cannot here; use phones.provider='sim'"
                )
            if self.self_evolution.max_demonstration_steps >= self.horizon:
                problems.append(
                    f"self_evolution.max_demonstration_steps = {self.self_evolution.max_demonstration_steps} leaves no "
                    f"step for 'finished' within horizon = {self.horizon}; lower it below the horizon"
                )
            if self.learner.critic.warmup_updates >= self.self_evolution.rl_updates:
                problems.append(
                    f"learner.critic.warmup_updates = {self.learner.critic.warmup_updates} leaves no actor update "
                    f"within self_evolution.rl_updates = {self.self_evolution.rl_updates}; raise rl_updates"
                )
        if self.self_evolution is None and self.learner.critic.warmup_updates >= self.updates:
            problems.append(
                f"learner.critic.warmup_updates = {self.learner.critic.warmup_updates} leaves no actor update within updates = {self.updates}; raise updates"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def check_components(self) -> None:
        """Check every named component (tasks, curriculum, verifiers, workflow, memory) without
        building one: a bad name, import path or argument fails here with the fix, not mid-run,
        and no model is loaded and no database opened (:func:`~darwin.components.check_component`)."""
        try:
            tasks = self.resolve_tasks()
        except (KeyError, TaskDefinitionError) as exc:
            raise ExperimentError(f"tasks: {exc}") from None
        for name, names in self.evaluation.task_sets.items():
            try:
                resolve_task_names(names)
            except (KeyError, TaskDefinitionError) as exc:
                raise ExperimentError(f"evaluation.task_sets[{name!r}]: {exc}") from None
        checks: list[tuple[ComponentKind, str, ComponentSpec | None, dict[str, object]]] = [
            ("curriculum", "curriculum", self.curriculum, {"tasks": tasks, "seed": self.phones.seed}),
            ("verifier", "verifier", self.verifier, {}),
            ("verifier", "evaluation verifier", self.evaluation.verifier, {}),
            # The workflow's context values are not looked at: only that its __init__ takes them.
            ("workflow", "workflow", self.workflow, {"verifier": None, "config": None}),
            ("memory", "memory", self.memory, {}),
            ("guard", "phones.guard", self.phones.guard_spec(), {}),
        ]
        for kind, label, spec, context in checks:
            if spec is None:
                continue
            try:
                check_component(kind, spec, named_context=None, **context)
            except ComponentError as exc:
                raise ExperimentError(str(exc)) from None
            except ValueError as exc:  # the component's own argument checks
                raise ExperimentError(f"{label} {spec.name!r} with kwargs {dict(spec.kwargs)}: {exc}") from None

    def resolve_tasks(self) -> list[Task]:
        from darwin.task_registry import resolve_tasks

        return [t.model_copy(update={"step_budget": self.horizon}) for t in resolve_tasks(self.tasks)]

    def resolve_eval_sets(self) -> dict[str, list[Task]]:
        """``evaluation.task_sets`` resolved, with the same horizon as training."""
        from darwin.task_registry import resolve_tasks

        return {
            name: [t.model_copy(update={"step_budget": self.horizon}) for t in resolve_tasks(names)]
            for name, names in self.evaluation.task_sets.items()
        }


def default_run_dir(config: ExperimentConfig) -> Path:
    if config.run_dir:
        return Path(config.run_dir)
    return Path("runs") / f"{config.name}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"
