"""Builders: every component of a run made from an :class:`~darwin.run.config.ExperimentConfig`.

The config classes of :mod:`darwin.run.config` are schemas (fields, validation, derived
settings); this module makes things from them, and every command assembles a run through it
(``darwin run``'s recipe, ``darwin eval --experiment``, the tests), so all of them build
phones, actor pools, workflows, curricula, learners and stores the same way::

    >>> from darwin.run.config import ExperimentConfig
    >>> from darwin.run.build import build_workflow, sim_phones
    >>> config = ExperimentConfig(name="demo")
    >>> [env.name for env in sim_phones(config, 0, 2, "sim")]
    ['sim-0', 'sim-1']
    >>> type(build_workflow(config, (252, 560)).verifier).__name__
    'RuleVerifier'
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from darwin.agents.actors import Actors, AgentChoiceError
from darwin.components import BUILTINS, ComponentError, ComponentSpec, build_component, resolve_component
from darwin.envs.providers import ProviderError
from darwin.problems import ExperimentError
from darwin.run.report import WARM_START_FILE

if TYPE_CHECKING:
    # darwin.run.config only for annotations: it runs the recipe, which builds through this module
    from darwin.agents.pool import ActorPool
    from darwin.curricula.base import Curriculum
    from darwin.envs.base import PhoneEnv
    from darwin.envs.fleet import PhoneEvent, PhoneFleet
    from darwin.envs.guard import ActionGuard
    from darwin.envs.providers import PhoneProvider
    from darwin.learner.base import Learner, LearnerClass
    from darwin.learner.networks import TrainablePolicy
    from darwin.memory.base import Memory
    from darwin.models.factory import VLM
    from darwin.policies.base import Policy
    from darwin.policies.hf import HFPolicyConfig
    from darwin.run.config import ExperimentConfig, PolicyConfig, StoreConfig
    from darwin.sft.training import StepStats
    from darwin.store import RunStore
    from darwin.types import Task
    from darwin.workflows.base import Workflow

logger = logging.getLogger(__name__)

__all__ = [
    "AGENT_ARGUMENTS",
    "AGENT_KINDS",
    "agent_spec",
    "build_actors",
    "experiment_actors",
    "build_curriculum",
    "build_eval_phones",
    "build_fleet",
    "build_guard",
    "guard_notice",
    "build_learner",
    "build_policy_pool",
    "build_store",
    "build_workflow",
    "learner_class",
    "load_run_policy",
    "memory_factory",
    "policy_factory",
    "sim_eval_phones",
    "sim_phones",
    "tiny_actors",
    "warm_start_checkpoint",
]


def policy_factory(policy: PolicyConfig) -> Callable[[VLM, HFPolicyConfig], Policy] | None:
    """What builds the run's policy (``policy.backend``) on the warm start's model: None for the
    in-process HFPolicy the actor pool makes itself, else the backend's class on the VLM with the
    sampling settings (a :class:`~darwin.policies.server_client.ServerPolicy` sampling as the
    HFPolicy would, with ``policy.server``'s address and weight sync)."""
    spec = policy.backend
    if spec.name == "hf" and not spec.kwargs:
        return None
    server = policy.server

    def make(vlm: VLM, sampling: HFPolicyConfig) -> Policy:
        from darwin.policies.base import Policy

        config: object = sampling
        if spec.name == "server":
            from darwin.policies.server_client_config import ServerPolicyConfig

            assert server is not None  # validated
            update = {"temperature": sampling.temperature, "seed": sampling.seed, "max_tokens": sampling.max_new_tokens}
            config = ServerPolicyConfig(**{**server.model_dump(), **update})
        built = build_component("policy", spec, vlm=vlm, config=config)
        assert isinstance(built, Policy)  # checked by build_component
        return built

    return make


def build_store(store: StoreConfig, run_dir: Path) -> RunStore:
    """The run's store (``RunStore``)."""
    import os

    from darwin.store import RunStore

    if store.url_env is None:
        if store.screenshot_dir is None:
            return RunStore.for_run_dir(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        return RunStore(run_dir / "run.db", screenshot_dir=store.screenshot_dir)
    url = os.environ.get(store.url_env)
    if not url:
        raise ExperimentError(
            f"store.url_env = {store.url_env!r} but ${store.url_env} is not set; export it with the database URL"
        )
    return RunStore(url, screenshot_dir=store.screenshot_dir or run_dir / "screenshots")


def warm_start_checkpoint(
    config: ExperimentConfig,
    *,
    on_phase: Callable[[str], None] | None = None,
    on_step: Callable[[StepStats], None] | None = None,
    on_advance: Callable[[int, int, str], None] | None = None,
) -> Path:
    """The warm-start checkpoint: ``checkpoint``, or the SFT warm start for ``sft``
    (trained once, cached under ``cache_dir``; ``on_phase`` / ``on_step`` / ``on_advance``
    follow the training as :func:`~darwin.sft.training.train_sft` reports it)."""
    from darwin.sft.cache import ensure_warm_start

    if config.checkpoint:
        return Path(config.checkpoint)
    return ensure_warm_start(config.cache_dir, config.sft, on_phase=on_phase, on_step=on_step, on_advance=on_advance)


def build_policy_pool(
    config: ExperimentConfig,
    warm_start: Path,
    run_dir: str | Path | None = None,
    *,
    seed: int | None = None,
    temperature: float | None = None,
) -> ActorPool:
    """The run's policy (``policy.backend``) on the warm start, handing each phone an
    actor with the experiment's memory; ``seed`` / ``temperature`` override ``policy``'s."""
    from darwin.agents.pool import ActorPool

    named = config.agent.format is not None
    return ActorPool(
        warm_start,
        temperature=config.policy.temperature if temperature is None else temperature,
        seed=config.policy.seed if seed is None else seed,
        max_batch=config.policy.max_batch,
        make_policy=policy_factory(config.policy),
        max_wait=config.policy.max_wait,
        make_memory=memory_factory(config, run_dir),
        max_new_tokens=config.agent.max_new_tokens,
        agent_format=config.agent.format if named else None,
        observation_size=config.agent.observation_size if named else None,
    )


def memory_factory(config: ExperimentConfig, run_dir: str | Path | None = None) -> Callable[[], Memory] | None:
    """Builds a fresh memory per agent, or None for the warm start's own. ``run_dir`` goes
    to memories whose ``__init__`` names it (the LLM memory keeps its knowledge in the run's
    database there)."""
    if config.memory is None:
        return None
    spec = config.memory
    named = {} if run_dir is None else {"run_dir": Path(run_dir)}
    return lambda: build_component("memory", spec, named_context=named)  # type: ignore[return-value]  # build_component returns object; the "memory" kind checks it is a Memory


def build_curriculum(config: ExperimentConfig, tasks: list[Task], run_dir: str | Path | None = None) -> Curriculum:
    """The curriculum; ``run_dir`` goes to curricula whose ``__init__`` names it (the LLM
    proposer reads the agent's results from the run database and stores its proposals there)."""
    named = {} if run_dir is None else {"run_dir": Path(run_dir)}
    return build_component("curriculum", config.curriculum, named_context=named, tasks=tasks, seed=config.phones.seed)  # type: ignore[return-value]  # build_component returns object; the "curriculum" kind checks it is a Curriculum


def build_workflow(
    config: ExperimentConfig, observation_size: tuple[int, int], *, evaluation: bool = False
) -> Workflow:
    """The workflow with the reward verifier, or with ``evaluation.verifier`` (when set) for
    ``evaluation=True``."""
    from darwin.workflows.step import StepConfig

    spec = config.evaluation.verifier if evaluation and config.evaluation.verifier is not None else config.verifier
    verifier = build_component("verifier", spec)
    step_config = StepConfig(
        observation_size=observation_size,
        # Training episodes only: a bootstrapped truncation reads V(s') at the next screen.
        record_next_prompt=not evaluation and config.learner.truncation == "bootstrap",
    )
    return build_component("workflow", config.workflow, verifier=verifier, config=step_config)  # type: ignore[return-value]  # build_component returns object; the "workflow" kind checks it is a Workflow


def build_guard(config: ExperimentConfig) -> ActionGuard | None:
    """The phones' action guard (:meth:`~darwin.run.config.PhonesConfig.guard_spec`), or None."""
    from darwin.envs.guard import ActionGuard, GuardError

    spec = config.phones.guard_spec()
    if spec is None:
        return None
    try:
        guard = build_component("guard", spec)
    except GuardError as exc:
        raise ExperimentError(f"phones.guard: {exc}") from None
    if not isinstance(guard, ActionGuard):  # build_component checked the class; this tells the type checker
        raise ExperimentError(f"phones.guard {spec.name!r} did not build an ActionGuard")
    return guard


def guard_notice(config: ExperimentConfig, guard: ActionGuard | None) -> str:
    """What a run or an evaluation prints at its start about the guard: its rules, or why there
    is none (loudly where the phones are not SimPhones)."""
    if guard is not None:
        return guard.describe()
    if config.phones.simulated:
        return "action guard: none (SimPhones; phones.guard=rules turns it on)"
    return (
        "WARNING: action guard OFF (phones.guard='off') on phones that are not SimPhones: purchases, posts, "
        "messages and deletions reach the phones"
    )


def learner_class(config: ExperimentConfig) -> LearnerClass:
    """The class ``learner.backend`` names: LocalLearner (``local``), VerlLearner (``verl``: it
    checks for Ray and GPUs when built and names what is missing, docs/scale.md) or a user's
    class by import path; the recipe sees only the contract (darwin.learner.base)."""
    try:
        cls = resolve_component("learner", config.learner.backend.name)
    except ComponentError as exc:
        raise ExperimentError(str(exc)) from None
    return cast("LearnerClass", cls)  # validated at load: a class with load, update, save and close


def build_learner(config: ExperimentConfig, policy: TrainablePolicy) -> Learner:
    """A new learner for ``policy`` (resuming: ``learner_class(config).load``)."""
    return learner_class(config)(policy, config.learner)


def build_fleet(config: ExperimentConfig, on_event: Callable[[PhoneEvent], None] | None = None) -> PhoneFleet:
    """The training phones as a :class:`~darwin.envs.fleet.PhoneFleet`: ``count`` phones from
    ``phones.provider`` (in-process SimPhones seeded ``phones.seed + i`` by default; ``spares``
    held back), with the hard-reset schedule. Its :meth:`~darwin.envs.fleet.PhoneFleet.close`
    gives everything back (the phones, the provider it started, a private adb server)."""
    from darwin.envs.fleet import PhoneFleet

    phones = config.phones
    closers: list[Callable[[], None]] = []
    try:
        provider = _start_provider(config, closers)
        try:
            envs = provider.acquire_many(phones.count)
        except ProviderError as exc:
            raise ExperimentError(
                f"phones.provider {phones.provider.name!r} could not hand out {phones.count} phones: {exc}"
            ) from None
    except BaseException:
        for close in reversed(closers):
            close()
        raise
    return PhoneFleet(
        envs,
        provider=provider,
        schedule=phones.reset_schedule(),
        replace_after_s=phones.replace_after_s,
        on_event=on_event,
        closers=closers,
    )


def _start_provider(config: ExperimentConfig, closers: list[Callable[[], None]]) -> PhoneProvider:
    """Build and start ``phones.provider``; what must be stopped at the end goes to ``closers``.

    The provider is built with what the experiment says of its phones (the ones its ``__init__``
    takes; the spec's own kwargs win): ``count`` (with the spares), ``seed``, ``config`` (the adb
    settings), ``perturbation``, ``locale``, ``reset_between_episodes``, ``fresh_initial_states``
    (``phones.initial_states``), ``faults`` and
    ``call_deadline_s``, and where set, ``devices`` and ``ray``."""
    from darwin.envs.adb_server import PrivateAdbServer
    from darwin.envs.providers import PhoneProvider, SimFarm

    phones = config.phones
    cls = phones.provider_class()
    adb = phones.adb_config(for_sim=issubclass(cls, SimFarm))
    if cls.over_adb and adb.adb_host in ("127.0.0.1", "localhost") and not _port_open(adb.adb_host, adb.adb_port):
        # No adb server where the phones are looked for: run one for this run, on that port.
        server = PrivateAdbServer(port=adb.adb_port).start()
        closers.append(server.stop)
        logger.info("started an adb server on port %d for the run's phones", server.port)
    context: dict[str, object] = {
        "count": phones.count + phones.spares,
        "seed": phones.seed,
        "config": adb,
        "perturbation": phones.perturbation,
        "locale": phones.locale,
        "reset_between_episodes": phones.reset_between_episodes,
        "fresh_initial_states": phones.fresh_initial_states,
        "faults": phones.fault_spec(),
        "call_deadline_s": phones.call_deadline_s,
    }
    if phones.devices:
        context["devices"] = list(phones.devices)
    if phones.ray is not None:
        context["ray"] = phones.ray
    try:
        provider = build_component("provider", phones.provider, named_context=None, **context)
    except ComponentError as exc:
        raise ExperimentError(str(exc)) from None
    assert isinstance(provider, PhoneProvider)
    try:
        provider.start()
    except ProviderError as exc:  # the Ray cluster unreachable, a placement no node matches...
        raise ExperimentError(str(exc)) from None
    closers.append(provider.stop)
    return provider


def build_eval_phones(config: ExperimentConfig, training: Sequence[PhoneEnv] = ()) -> list[PhoneEnv]:
    """Fresh phones for one evaluation: :func:`~darwin.evaluate.evaluation_phones` seeded
    from ``evaluation.phone_seed`` with ``evaluation.perturbation`` (else the training phones')
    and this experiment's locale (reset to their initial state before every episode, the rule of
    every evaluation), so the warm start and the final policy meet identical states. Real phones:
    the ``training`` ones (evaluated before rollout starts and after it stops)."""
    if not config.phones.in_process:
        return list(training)
    return sim_eval_phones(config, config.evaluation.phones)


def sim_eval_phones(config: ExperimentConfig, count: int) -> list[PhoneEnv]:
    """``count`` evaluation SimPhones from ``evaluation.phone_seed`` with ``evaluation.perturbation``
    (else the training phones') (:func:`~darwin.evaluate.evaluation_phones`)."""
    from darwin.evaluate import evaluation_phones

    perturbation = config.evaluation.perturbation or config.phones.perturbation
    return evaluation_phones(
        config.evaluation.phone_seed, count, perturbation=perturbation, locale=config.phones.locale
    )


def sim_phones(config: ExperimentConfig, first_seed: int, count: int, prefix: str) -> list[PhoneEnv]:
    """``count`` SimPhones seeded ``first_seed + i`` with this experiment's perturbation and
    reset setting, named ``<prefix>-<seed>``."""
    from darwin.envs.sim.env import SimPhoneEnv

    return [
        SimPhoneEnv(
            seed=first_seed + i,
            perturbation=config.phones.perturbation,
            name=f"{prefix}-{first_seed + i}",
            reset_between_episodes=config.phones.reset_between_episodes,
            locale=config.phones.locale,
        )
        for i in range(count)
    ]


def load_run_policy(
    run_dir: str | Path,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    max_batch: int = 8,
    max_new_tokens: int | None = None,
) -> ActorPool:
    """A :class:`~darwin.agents.pool.ActorPool` with the actor weights of a run's last
    checkpoint (``darwin eval --agent tiny:<run dir>``): the run's warm start, then its trained weights."""
    from darwin.agents.pool import ActorPool
    from darwin.learner.local import LocalLearner

    run_dir = Path(run_dir)
    record = run_dir / WARM_START_FILE
    if not record.is_file():
        raise FileNotFoundError(
            f"{run_dir} has no {WARM_START_FILE}: pass a `darwin run` directory (or a `darwin sft` output)"
        )
    warm = Path(json.loads(record.read_text())["path"])
    if not warm.is_dir():
        raise FileNotFoundError(
            f"the warm start {warm} of {run_dir} is gone; rebuild it (same SFT config) or restore it there"
        )
    pool = ActorPool(warm, temperature=temperature, seed=seed, max_batch=max_batch, max_new_tokens=max_new_tokens)
    learner = LocalLearner.load(run_dir / "checkpoint", pool.policy)  # pushes the trained actor weights and version
    logger.info("%s: policy version %d after %d updates", run_dir, learner.policy_version, learner.updates)
    return pool


def _port_open(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


AGENT_ARGUMENTS: dict[str, str] = {"tiny": "checkpoint", "litellm": "model"}
"""The keyword argument that the text after ``NAME:`` in ``--agent NAME:ARG`` fills, per built-in."""

AGENT_KINDS: tuple[str, ...] = tuple(
    f"{name}:<{AGENT_ARGUMENTS[name]}>" if name in AGENT_ARGUMENTS else name for name in BUILTINS["actors"]
)
"""The built-in actors as ``darwin eval --agent`` names them (:func:`agent_spec`):
``oracle``, ``random``, ``tiny:<checkpoint>``, ``litellm:<model>``."""


def agent_spec(text: str) -> ComponentSpec:
    """``--agent``'s text as a spec of kind ``actors``: a built-in's name with its argument as
    that built-in's keyword (:data:`AGENT_ARGUMENTS`), anything else (an import path, a misspelt
    name) as the name itself, for :func:`~darwin.components.build_component` to resolve or refuse.

        >>> agent_spec("tiny:runs/sft")
        ComponentSpec(name='tiny', kwargs={'checkpoint': 'runs/sft'})
        >>> agent_spec("my_lab.agents:make_actors").name
        'my_lab.agents:make_actors'
    """
    name, colon, argument = text.partition(":")
    if name not in BUILTINS["actors"]:
        return ComponentSpec(name=text)
    keyword = AGENT_ARGUMENTS.get(name)
    if keyword is None:
        if colon:
            raise AgentChoiceError(f"{name} takes no argument (got {text!r}); pass --agent {name}", "--agent")
        return ComponentSpec(name=name)
    # 'tiny' and 'tiny:' alike leave it unset: the built-in names what it needs
    return ComponentSpec(name=name, kwargs={keyword: argument} if argument else {})


def experiment_actors(config: ExperimentConfig, seed: int | None, temperature: float | None) -> Actors:
    """The experiment's warm start (built and cached as `darwin run` does) with its memory,
    sampling as its run does (``policy``), unless ``--seed`` / ``--temperature`` say otherwise."""
    pool = build_policy_pool(config, warm_start_checkpoint(config), seed=seed, temperature=temperature)
    return Actors(pool, pool.aclose, pool.observation_size)


def build_actors(
    spec: str | ComponentSpec,
    seed: int,
    *,
    phones: int = 1,
    temperature: float | None = None,
    agent_format: str = "uitars-1.5",
    api_base: str | None = None,
    api_key_env: str | None = None,
    max_new_tokens: int | None = None,
) -> Actors:
    """The actors an agent spec names (``--agent``'s text, :func:`agent_spec`, or a spec of kind
    ``actors``): the simulator's oracle, a random agent, a ``darwin sft``/``darwin run``
    checkpoint, a model behind LiteLLM, or a user's factory by import path, which gets the
    settings below that its signature names."""
    chosen = agent_spec(spec) if isinstance(spec, str) else spec
    try:
        resolve_component("actors", chosen.name)
    except ComponentError as exc:  # a misspelt name or a bad import path: the command line's forms help
        raise AgentChoiceError(
            f"{exc}{_misspelt_with_argument(chosen.name)} (--agent forms available: {', '.join(AGENT_KINDS)}, "
            "module:function)",
            "--agent",
        ) from None
    try:
        built = build_component(
            "actors",
            chosen,
            seed=seed,
            phones=phones,
            temperature=temperature,
            agent_format=agent_format,
            api_base=api_base,
            api_key_env=api_key_env,
            max_new_tokens=max_new_tokens,
        )
    except ComponentError as exc:  # kwargs the factory does not take, or not an Actors built
        raise AgentChoiceError(str(exc), "--agent") from None
    assert isinstance(built, Actors)  # checked by build_component
    return built


def _misspelt_with_argument(name: str) -> str:
    """A "did you mean" for a misspelt built-in given an argument (``titny:runs/sft``), which
    reads as an import path of module ``titny``; empty for anything else."""
    head, colon, _ = name.partition(":")
    if not colon or "." in head:
        return ""
    close = difflib.get_close_matches(head, list(AGENT_ARGUMENTS), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def tiny_actors(
    checkpoint: str | None = None,
    *,
    seed: int,
    phones: int = 1,
    temperature: float | None = None,
    max_new_tokens: int | None = None,
) -> Actors:
    """``--agent tiny:<checkpoint>``: one policy pool for every phone, on a ``darwin sft --out``
    directory or on the last trained weights of a ``darwin run`` directory (sampled at
    ``temperature``, 1.0 unset: as RL samples)."""
    from darwin.agents.pool import ActorPool
    from darwin.agents.warm_start import AGENT_FILE

    if not checkpoint:
        raise AgentChoiceError("tiny:<checkpoint> needs a checkpoint directory, e.g. tiny:runs/sft", "--agent")
    temp, batch = 1.0 if temperature is None else temperature, min(phones, 64)
    if (Path(checkpoint) / WARM_START_FILE).is_file():  # a `darwin run` directory: its last trained weights
        try:
            pool = load_run_policy(
                checkpoint, temperature=temp, seed=seed, max_batch=batch, max_new_tokens=max_new_tokens
            )
        except FileNotFoundError as exc:
            raise AgentChoiceError(str(exc), "--agent") from None
    elif (Path(checkpoint) / AGENT_FILE).is_file():
        pool = ActorPool(checkpoint, temperature=temp, seed=seed, max_batch=batch, max_new_tokens=max_new_tokens)
    else:
        raise AgentChoiceError(
            f"no checkpoint at {checkpoint}; pass a `darwin sft --out` or `darwin run` directory", "--agent"
        )
    return Actors(pool, pool.aclose, pool.observation_size)
