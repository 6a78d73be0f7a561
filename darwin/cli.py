"""The ``darwin`` command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from darwin.cli_args import parse_size
from darwin.run.figures import FIGURE_METRICS

if TYPE_CHECKING:
    from darwin.evaluate import EvalReport
    from darwin.run.figures import FigureMetric
    from darwin.run.recipe import RunProgress

console = Console()


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(message)s", handlers=[RichHandler(console=console, show_path=False)]
    )


experiment_overrides = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="with --experiment: override a config field, as in darwin run",
)
"""The ``--set`` of the commands that read an experiment file with ``--experiment`` (eval, sft)."""


@click.group()
@click.option(
    "--log-level", default="warning", type=click.Choice(["debug", "info", "warning", "error"]), show_default=True
)
def main(log_level: str) -> None:
    """Darwin: train mobile GUI agents with online multi-turn RL."""
    # transformers' and huggingface_hub's own progress bars ("Loading weights") would cut through
    # darwin's progress lines; they read this when first imported (a user's own setting wins).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    _setup_logging(log_level)


# ---------------------------------------------------------------------------------- tasks
@main.group()
def tasks() -> None:
    """The task registry."""


@tasks.command("list")
@click.option(
    "--set",
    "set_name",
    default=None,
    help="only tasks of this set (base8, paper16, cycle8, gen.train, gen.unseen_instances, ...)",
)
@click.option("--app", default=None, help="only tasks or templates of this app")
@click.option(
    "--templates", "show_templates", is_flag=True, help="list the task templates (with their role in the default split)"
)
def tasks_list(set_name: str | None, app: str | None, show_templates: bool) -> None:
    """Show the registered tasks, or the templates, legibly at any terminal width.

    Each entry is a heading line (id and facts) and its instruction below, wrapped to the
    terminal, so an 80-column terminal never folds an instruction one word per line.
    """
    from darwin.tasks import TASK_SETS, registry, task_set
    from darwin.templates import default_split, schema_line, templates

    if show_templates:
        split = default_split()
        role = {t: "train" for t in split.train_templates} | {t: "held-out template" for t in split.held_out_templates}
        chosen = [t for t in templates().values() if app is None or t.app == app]
        for tpl in sorted(chosen, key=lambda t: (t.app, t.id)):
            where = role.get(tpl.id) or ("held-out app" if tpl.app in split.held_out_apps and not tpl.cross_app else "")
            console.print(
                f"[bold]{tpl.id}[/]  [dim]{' + '.join(tpl.needs)} · {tpl.kind} · difficulty {tpl.difficulty} · {where}[/]"
            )
            _indented(f"{tpl.description}; e.g. {tpl.instance(0).instruction!r}")
            _indented(f"params: {schema_line(tpl)}", style="dim")
        apps = sorted({t.app for t in templates().values()})
        console.print(
            f"\n{len(chosen)} of {len(templates())} templates; {len(apps)} apps; default split (seed 0): "
            f"{len(split.train_templates)} training templates, {len(split.held_out_templates)} held-out templates, "
            f"held-out apps {', '.join(split.held_out_apps)}. `darwin tasks split --help` makes others.",
            highlight=False,
        )
        return
    chosen_tasks = task_set(set_name) if set_name else list(registry().values())
    chosen_tasks = [t for t in chosen_tasks if app is None or t.app == app]
    for t in chosen_tasks:
        phases = "+".join(p.value for p, *_ in t.phases())
        sets = ",".join(name for name, ids in TASK_SETS.items() if t.id in ids)
        facts = [
            t.app,
            f"{t.golden_steps} steps" if t.golden_steps else "",
            phases if phases != "execution" else "",
            sets,
        ]
        console.print(f"[bold]{t.id}[/]  [dim]{' · '.join(f for f in facts if f)}[/]", highlight=False)
        _indented(t.instruction)
    console.print(
        f"\n{len(chosen_tasks)} tasks ({set_name or 'fixed tasks; template instances: --set gen.train or --templates'})",
        highlight=False,
    )


def _indented(text: str, style: str = "") -> None:
    """``text`` wrapped to the terminal with a hanging indent of four columns."""
    from rich.padding import Padding
    from rich.text import Text

    console.print(Padding(Text(text, style=style), (0, 0, 0, 4), expand=False))


@tasks.command("spa")
@click.option(
    "--unmapped", "show_unmapped", is_flag=True, help="also list every row without a SimPhone task, with its reason"
)
def tasks_spa(show_unmapped: bool) -> None:
    """How many of SPA-Bench's 340 rows run on SimPhone (task sets spa.en, spa.zh, spa.cross), by CSV file."""
    from darwin.envs.sim.spa import coverage, unmapped

    table = Table("file", "rows", "mapped", "adapted", "app not modelled", "feature not modelled")
    cov = coverage()
    for c in cov:
        table.add_row(
            c.file, str(c.rows), str(c.mapped), str(c.adapted), str(c.app_not_modelled), str(c.feature_not_modelled)
        )
    table.add_row(
        "all",
        *(
            str(sum(getattr(c, f) for c in cov))
            for f in ("rows", "mapped", "adapted", "app_not_modelled", "feature_not_modelled")
        ),
    )
    console.print(table)
    if show_unmapped:
        for key, (reason, detail) in unmapped().items():
            console.print(f"{key}  [dim]{reason}: {detail}[/]", highlight=False)


@tasks.command("demos")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="the JSONL file to write (screenshots go to <stem>-screens/)",
)
@click.option("--tasks", "task_names", default="base8", show_default=True, help="comma-separated task ids or set names")
@click.option(
    "--phones", default=8, show_default=True, type=click.IntRange(min=1), help="phones: one episode per task on each"
)
@click.option(
    "--phone-seed",
    default=100,
    show_default=True,
    type=int,
    help="phone i gets this seed + i (the default's training phones: 100)",
)
@click.option("--observation-size", default="252x560", show_default=True, help="WxH of the stored screenshots")
@click.option(
    "--launch-by-name/--launch-by-tap", default=True, show_default=True, help="launcher taps written as open_app"
)
def tasks_demos(
    out: Path, task_names: str, phones: int, phone_seed: int, observation_size: str, launch_by_name: bool
) -> None:
    """Write the SimPhone oracle's demonstrations as a JSONL demonstration file (docs/sft.md):
    one episode per task on each phone, from its initial state, each tap with the target
    element's box. For `darwin sft --from-jsonl` and the step-level reward (DemoStepVerifier)."""
    from darwin.sft.demonstrations import export_oracle_demonstrations
    from darwin.tasks import resolve_tasks

    try:
        width, height = (int(v) for v in observation_size.lower().split("x"))
    except ValueError:
        raise click.BadParameter(
            f"{observation_size!r}: write WxH, e.g. 252x560", param_hint="--observation-size"
        ) from None
    try:
        tasks_to_play = resolve_tasks(tuple(t.strip() for t in task_names.split(",") if t.strip()))
    except (ValueError, KeyError) as exc:
        raise click.BadParameter(str(exc), param_hint="--tasks") from None
    stats = export_oracle_demonstrations(
        out,
        tasks_to_play,
        phone_seeds=range(phone_seed, phone_seed + phones),
        observation_size=(width, height),
        launch_by_name=launch_by_name,
    )
    console.print(
        f"{stats.successes} of {stats.episodes} oracle episodes ({stats.steps} steps) -> {out}", highlight=False
    )
    failed = stats.episodes - stats.successes - stats.skipped_done_episodes
    if stats.skipped_done_episodes:
        console.print(
            f"{stats.skipped_done_episodes} episodes not written: the goal held before the oracle acted",
            highlight=False,
        )
    if failed:
        raise click.ClickException(
            f"{failed} oracle episodes did not succeed (logged above); their tasks have fewer demonstrations"
        )


@tasks.command("split")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="directory for the task files",
)
@click.option("--seed", default=0, show_default=True, type=int, help="which apps and templates are held out")
@click.option(
    "--held-out-apps",
    default=None,
    help="comma-separated app labels to hold out (default: --unseen-apps chosen by seed)",
)
@click.option("--unseen-apps", default=2, show_default=True, type=int)
@click.option(
    "--train-instances", default=8, show_default=True, type=int, help="training instances per training template"
)
@click.option(
    "--eval-instances", default=3, show_default=True, type=int, help="instances per template in each held-out regime"
)
@click.option("--chinese/--no-chinese", default=False, show_default=True, help="also Chinese instances")
@click.option(
    "--all-apps/--recorded-apps",
    default=False,
    show_default=True,
    help="also split the templates of the apps added after the recorded results (Files, Mail, Calculator, Tasks)",
)
@click.option(
    "--cross-app/--no-cross-app",
    default=False,
    show_default=True,
    help="also split the cross-app templates (one that needs a held-out app goes to unseen_apps)",
)
def tasks_split(
    out_dir: Path,
    seed: int,
    held_out_apps: str | None,
    unseen_apps: int,
    train_instances: int,
    eval_instances: int,
    chinese: bool,
    all_apps: bool,
    cross_app: bool,
) -> None:
    """Split the templates into training tasks and AndroidWorld-Generalization's three held-out
    regimes (unseen instances, unseen templates, unseen apps); writes one task file per set.

    The files load with `--tasks DIR/train.yaml` in `darwin run`/`darwin eval`; the same
    options always give the same files.
    """
    import yaml
    from pydantic import ValidationError

    from darwin.templates import SplitConfig, split_templates

    try:
        config = SplitConfig(
            seed=seed,
            held_out_apps=tuple(a.strip() for a in held_out_apps.split(",")) if held_out_apps else None,
            unseen_apps=unseen_apps,
            train_instances=train_instances,
            eval_instances=eval_instances,
            languages=("ENG", "CHN") if chinese else ("ENG",),
            cross_app=cross_app,
            **({"exclude_apps": ()} if all_apps else {}),
        )
        split = split_templates(config)
    except (ValidationError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, tasks_of_set in split.sets.items():
        rows = [t.model_dump(mode="json", exclude_defaults=True) for t in tasks_of_set]
        (out_dir / f"{name}.yaml").write_text(
            yaml.safe_dump(rows, allow_unicode=True, sort_keys=False), encoding="utf-8"
        )
        console.print(f"{name:17s} {len(tasks_of_set):5d} tasks -> {out_dir / f'{name}.yaml'}", highlight=False)
    manifest = {
        "config": config.model_dump(mode="json"),
        "train_templates": split.train_templates,
        "held_out_templates": split.held_out_templates,
        "held_out_apps": split.held_out_apps,
    }
    (out_dir / "split.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    console.print(
        f"held-out apps: {', '.join(split.held_out_apps)}; held-out templates: {', '.join(split.held_out_templates)}",
        highlight=False,
    )


# ----------------------------------------------------------------------------------- eval
AGENT_KINDS = ("oracle", "random", "tiny:<checkpoint>", "litellm:<model>")


class _Actors:
    """The eval phones' actors, their clean-up, and the screenshot size they require (if any)."""

    def __init__(
        self,
        make: Callable[[int], object],
        aclose: Callable[[], Awaitable[None]] | None = None,
        observation_size: tuple[int, int] | None = None,
    ) -> None:
        self.make = make
        self.aclose = aclose
        self.observation_size = observation_size


def _load_for_eval(experiment_file: str, overrides: tuple[str, ...]):  # noqa: ANN202 - ExperimentConfig, imported lazily
    from darwin.problems import ExperimentError
    from darwin.run.load import apply_overrides, load_experiment

    try:
        config = load_experiment(experiment_file)
        return apply_overrides(config, overrides) if overrides else config
    except ExperimentError as exc:
        raise click.ClickException(str(exc)) from None


def _experiment_actors(config, seed: int | None, temperature: float | None) -> _Actors:  # noqa: ANN001
    """The experiment's warm start (built and cached as `darwin run` does) with its memory,
    sampling as its run does (``policy``), unless ``--seed`` / ``--temperature`` say otherwise."""
    from darwin.run.build import build_policy_pool, warm_start_checkpoint

    pool = build_policy_pool(config, warm_start_checkpoint(config), seed=seed, temperature=temperature)
    return _Actors(pool, pool.aclose, pool.observation_size)


def _actor_factory(
    spec: str,
    seed: int,
    *,
    phones: int = 1,
    temperature: float | None = None,
    agent_format: str = "uitars-1.5",
    api_base: str | None = None,
    api_key_env: str | None = None,
    max_new_tokens: int | None = None,
) -> _Actors:
    from darwin.agents.scripted import OracleActor, RandomActor

    kind, _, arg = spec.partition(":")
    if kind == "oracle":
        return _Actors(lambda i: OracleActor())
    if kind == "random":
        return _Actors(lambda i: RandomActor(seed=seed * 1000 + i))
    if kind == "tiny":
        from darwin.agents.pool import ActorPool
        from darwin.run.build import load_run_policy
        from darwin.run.report import WARM_START_FILE
        from darwin.sft import AGENT_FILE

        if not arg:
            raise click.BadParameter(
                "tiny:<checkpoint> needs a checkpoint directory, e.g. tiny:runs/sft", param_hint="--agent"
            )
        temp, batch = 1.0 if temperature is None else temperature, min(phones, 64)
        if (Path(arg) / WARM_START_FILE).is_file():  # a `darwin run` directory: its last trained weights
            try:
                pool = load_run_policy(arg, temperature=temp, seed=seed, max_batch=batch, max_new_tokens=max_new_tokens)
            except FileNotFoundError as exc:
                raise click.BadParameter(str(exc), param_hint="--agent") from None
        elif (Path(arg) / AGENT_FILE).is_file():
            pool = ActorPool(arg, temperature=temp, seed=seed, max_batch=batch, max_new_tokens=max_new_tokens)
        else:
            raise click.BadParameter(
                f"no checkpoint at {arg}; pass a `darwin sft --out` or `darwin run` directory", param_hint="--agent"
            )
        return _Actors(pool, pool.aclose, pool.observation_size)
    if kind == "litellm":
        from darwin.agents import ModelActor
        from darwin.agents.formats import make_agent
        from darwin.policies import LiteLLMPolicy, LiteLLMPolicyConfig

        if not arg:
            raise click.BadParameter(
                "litellm:<model> needs a LiteLLM model name, e.g. litellm:openai/ui-tars-1.5-7b", param_hint="--agent"
            )
        fields: dict[str, object] = {
            "model": arg,
            "api_base": api_base,
            "api_key_env": api_key_env,
            "temperature": temperature,
        }
        if max_new_tokens is not None:
            fields["max_tokens"] = max_new_tokens
        try:
            policy = LiteLLMPolicy(LiteLLMPolicyConfig(**fields))
        except ValueError as exc:  # pydantic's ValidationError: names the bad field, never echoes values
            raise click.BadParameter(str(exc), param_hint="--agent/--api-base/--api-key-env/--temperature") from None
        try:
            make_agent(agent_format)  # an unknown format is named before anything starts
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--agent-format") from None
        with _credentials_fail_cleanly():
            policy.check_credentials()  # a missing key stops here, before any phone starts

        def make(i: int) -> object:
            return ModelActor(make_agent(agent_format), policy)  # type: ignore[arg-type]

        return _Actors(make)
    raise click.BadParameter(f"unknown agent {spec!r}; available: {', '.join(AGENT_KINDS)}", param_hint="--agent")


@main.command("eval")
@click.option(
    "--agent",
    "agent_spec",
    default=None,
    help="oracle | random | tiny:<checkpoint> (a `darwin sft` output directory) | litellm:<model> (any LiteLLM model, e.g. litellm:openai/ui-tars-1.5-7b with --api-base); with --experiment and no --agent: the experiment's warm start",
)
@click.option(
    "--experiment",
    "experiment_file",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="an experiment file: its tasks, workflow, verifier, memory and (without --agent) warm start",
)
@experiment_overrides
@click.option(
    "--phones",
    default=None,
    type=click.IntRange(1, 512),
    help="SimPhones run concurrently  [default: the experiment's evaluation.phones, else 4]",
)
@click.option(
    "--tasks",
    "task_names",
    default=None,
    help="comma-separated task ids, set names or task files  [default: the experiment's, else base8]",
)
@click.option(
    "--samples",
    default=None,
    type=click.IntRange(0),
    help="sampled episodes of every task on each phone (one initial state each); pass@k up to k = samples  "
    "[default: the experiment's evaluation.samples, else 8]",
)
@click.option(
    "--greedy/--no-greedy",
    default=None,
    help="also one greedy episode of every task on each phone  [default: the experiment's evaluation.greedy, else yes]",
)
@click.option(
    "--seed",
    default=None,
    type=click.IntRange(0),
    help="phone seeds are seed, seed+1, ...; also seeds tiny sampling  [default: 0; with --experiment its evaluation phones (evaluation.phone_seed) and its policy.seed, so the episodes are the run's warm-start evaluation's]",
)
@click.option(
    "--run-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="where run.db and screenshots go (default runs/eval-<time>)",
)
@click.option("--db", default=None, help="SQLAlchemy URL instead of <run-dir>/run.db")
@click.option(
    "--observation-size",
    default=None,
    callback=lambda c, p, v: None if v is None else parse_size(v),
    help="screenshot size given to the agent  [default: the checkpoint's for tiny:, else 252x560]",
)
@click.option("--no-perturb", is_flag=True, help="canonical look: no theme, wallpaper, order or pop-up perturbations")
@click.option(
    "--temperature",
    default=None,
    type=click.FloatRange(0.0, 2.0),
    help="sampling temperature; tiny: default 1.0 (what RL samples, full masked distribution), 0 = greedy; litellm: the provider's default unless set",
)
@click.option(
    "--agent-format",
    default="uitars-1.5",
    show_default=True,
    help="litellm: the model's prompt/output format: uitars-1.5, uitars-1.0, qwen2.5, qwen3 or tiny (darwin.agents.formats)",
)
@click.option(
    "--api-base", default=None, help="litellm: base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"
)
@click.option(
    "--api-key-env",
    default=None,
    help="litellm: name of the environment variable holding the API key (default: the provider's standard one)",
)
@click.option(
    "--max-new-tokens",
    default=None,
    type=click.IntRange(1),
    help="response cap  [default: the checkpoint's for tiny:, 512 for litellm:]",
)
@click.option(
    "--end-on-success/--play-until-finished",
    default=True,
    show_default=True,
    help="end an episode as soon as the rule check confirms the goal, or only when the agent says finished (or the budget ends): the over-time metric needs the latter (without --experiment)",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="also write the per-task results and metrics to this JSON file",
)
def eval_cmd(
    agent_spec: str | None,
    experiment_file: str | None,
    overrides: tuple[str, ...],
    phones: int | None,
    task_names: str | None,
    samples: int | None,
    greedy: bool | None,
    seed: int | None,
    run_dir: str | None,
    db: str | None,
    observation_size: tuple[int, int] | None,
    no_perturb: bool,
    temperature: float | None,
    agent_format: str,
    api_base: str | None,
    api_key_env: str | None,
    max_new_tokens: int | None,
    end_on_success: bool,
    json_out: Path | None,
) -> None:
    """Evaluate an agent on SimPhones, paired: on each phone (one initial state per task) a
    greedy episode and --samples sampled ones of every task, each with its own sampling seed,
    so two agents evaluated alike meet the same episodes (`darwin compare A.json B.json`).
    Prints greedy success, sampled success and pass@k per task and overall, then the episode
    metrics per task (SR, PR, SE, FC, OT and the L1-L4 stratum; docs/evaluation.md)."""
    from darwin.envs.sim import PerturbationConfig
    from darwin.evaluate import EvalProtocol, evaluate_paired, evaluation_phones
    from darwin.run.build import build_eval_phones, build_workflow, sim_eval_phones
    from darwin.store import RunStore
    from darwin.tasks import resolve_tasks
    from darwin.types import TaskDefinitionError
    from darwin.workflows import LifecycleWorkflow, StepConfig

    experiment = _load_for_eval(experiment_file, overrides) if experiment_file else None
    if experiment is None and overrides:
        raise click.BadParameter("--set needs --experiment", param_hint="--set")
    if agent_spec is None and experiment is None:
        raise click.BadParameter(
            "pass --agent, or --experiment to evaluate that experiment's warm start", param_hint="--agent"
        )
    try:
        if task_names is None and experiment is not None:
            chosen = experiment.resolve_tasks()
        else:
            chosen = resolve_tasks([n.strip() for n in (task_names or "base8").split(",") if n.strip()])
    except (KeyError, TaskDefinitionError) as exc:
        raise click.BadParameter(str(exc).strip("'\""), param_hint="--tasks") from None
    sampling_seed = 0
    if experiment is not None:  # its evaluation's phones and episodes, as `darwin run` evaluates
        evaluation = experiment.evaluation
        phones = phones or evaluation.phones
        samples = evaluation.samples if samples is None else samples
        greedy = evaluation.greedy if greedy is None else greedy
        sampling_seed = evaluation.sampling_seed
        experiment = experiment.model_copy(
            update={
                "evaluation": evaluation.model_copy(
                    update={"phones": phones, "phone_seed": evaluation.phone_seed if seed is None else seed}
                )
            }
        )
    phones = phones or 4
    try:
        protocol = EvalProtocol(
            samples=8 if samples is None else samples, greedy=True if greedy is None else greedy, seed=sampling_seed
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--samples/--greedy") from None
    if agent_spec is None:
        assert experiment is not None
        actors = _experiment_actors(experiment, seed, temperature)
        agent_spec = f"warm start of {experiment.name}"
    else:
        seed = seed or 0
        actors = _actor_factory(
            agent_spec,
            seed,
            phones=phones,
            temperature=temperature,
            agent_format=agent_format,
            api_base=api_base,
            api_key_env=api_key_env,
            max_new_tokens=max_new_tokens,
        )
    required = actors.observation_size
    if required is not None and observation_size is not None and observation_size != required:
        raise click.BadParameter(
            f"{agent_spec} was trained on {required[0]}x{required[1]} screenshots; pass --observation-size {required[0]}x{required[1]} or omit it",
            param_hint="--observation-size",
        )
    observation_size = observation_size or required or (252, 560)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_path = Path(run_dir or f"runs/eval-{stamp}")
    store = RunStore(db, screenshot_dir=run_path / "screenshots") if db else RunStore.for_run_dir(run_path)
    if experiment is not None:  # the experiment's evaluation phones (perturbation, reset between episodes)
        if no_perturb:
            experiment = experiment.model_copy(
                update={
                    "phones": experiment.phones.model_copy(update={"perturbation": PerturbationConfig(enabled=False)})
                }
            )
        envs = build_eval_phones(experiment) if experiment.phones.kind == "sim" else sim_eval_phones(experiment, phones)
    else:  # Chinese task instances on a Chinese UI, as in an experiment's default
        envs = evaluation_phones(seed or 0, phones, perturbation=PerturbationConfig(enabled=not no_perturb))
    if experiment is not None:  # the experiment's own workflow, verifier and reward settings
        workflow = build_workflow(experiment, observation_size, evaluation=True)
    else:
        workflow = LifecycleWorkflow(
            config=StepConfig(observation_size=observation_size, end_on_success=end_on_success)
        )
    run_id = store.start_run(f"eval {agent_spec}", config=None)
    total = len(chosen) * phones * protocol.episodes_per_instance
    started = time.perf_counter()
    with Progress(
        TextColumn("[bold]eval[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task(f"{agent_spec} on {phones} phones", total=total)

        async def run() -> EvalReport:
            try:
                return await evaluate_paired(
                    chosen,
                    envs,
                    actors.make,  # type: ignore[arg-type]
                    protocol,
                    workflow,
                    store,
                    run_id,
                    on_episode=lambda t: progress.advance(bar),
                )
            finally:
                if actors.aclose is not None:
                    await actors.aclose()

        with _credentials_fail_cleanly():
            report = asyncio.run(run())
    elapsed = time.perf_counter() - started
    from rich import box

    ks = [k for k in (1, 2, 4, 8) if k <= protocol.samples]
    table = Table(
        title=f"{agent_spec}: success per task on {phones} phone(s), "
        f"{'1 greedy + ' if protocol.greedy else ''}{protocol.samples} sampled episode(s) each",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
        caption_justify="left",
        caption="pass@1 is the sampled success; n: sampled episodes; lost: not scored (goal held at the start, "
        "infrastructure truncations, unverified, errors); steps: mean per sampled episode",
    )
    table.add_column("task", overflow="fold")
    for col in ("greedy", *(f"pass@{k}" for k in ks), "n", "lost", "steps"):
        table.add_column(col, justify="right", no_wrap=True)

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f}%"

    for task_id, score in [*report.per_task.items(), ("overall", report.overall)]:
        summary = report.summary(None if task_id == "overall" else task_id)
        mean_steps = report.mean_steps(None if task_id == "overall" else task_id)
        table.add_row(
            task_id,
            pct(summary.greedy),
            *(pct(summary.pass_at.get(k)) for k in ks),
            str(score.episodes),
            str(score.already_done + score.infra_truncated + score.unverified + score.errors),
            f"{mean_steps:.1f}",
        )
    console.print(table)
    console.print(_metrics_table(report))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(
            json.dumps({"agent": agent_spec, "run_id": run_id, "phones": phones, **report.to_json()}, indent=2) + "\n"
        )
    steps = sum(len(t) for t in report.trajectories)
    console.print(
        f"{len(report.trajectories)} episodes, {steps} steps in {elapsed:.1f}s ({steps / max(elapsed, 1e-9):.1f} steps/s, "
        f"{report.phone_s:.0f} phone-s); run {run_id} stored in {store.url.render_as_string(hide_password=True)}"
    )
    store.close()


def _metrics_table(report: EvalReport) -> Table:
    """The episode metrics per task in at most 80 columns (docs/evaluation.md, "Episode metrics")."""
    from rich import box

    from darwin.algos.task_metrics import stratum_counts

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f}%"

    table = Table(
        title="episode metrics per task",
        box=box.SIMPLE_HEAD,
        caption_justify="left",
        caption="n: measured episodes; SR success, PR progress, SE side effects (% of episodes); FC false "
        "completions, OT over-time episodes (counts); L: MobileGym stratum. Strata: "
        + ", ".join(f"{s} {n}" for s, n in stratum_counts(report.strata).items()),
    )
    table.add_column("task", overflow="fold")
    for col in ("n", "SR", "PR", "SE", "FC", "OT", "L"):
        table.add_column(col, justify="right", no_wrap=True)
    for task_id, m in [*report.task_metrics.items(), ("overall", report.metrics_of(None))]:
        level = (m.stratum or "-") if task_id != "overall" else ""
        table.add_row(
            task_id,
            str(m.measured),
            pct(m.success_rate),
            pct(m.progress_rate),
            pct(m.side_effect_rate),
            str(m.false_completions),
            str(m.over_time),
            level,
        )
    return table


# ------------------------------------------------------------------------------------ sft
@main.command("sft")
@click.option(
    "--out",
    default=None,
    type=click.Path(file_okay=False),
    help="checkpoint directory (use it as `darwin eval --agent tiny:OUT`)  [default: runs/sft; with --experiment the experiment's warm-start cache entry, which `darwin run` then uses]",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="SFTConfig as a JSON or YAML file; the flags below override it",
)
@click.option(
    "--experiment",
    "experiment_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="an experiment file: train its warm start (its `sft` config; the flags below override it)",
)
@experiment_overrides
@click.option("--steps", default=None, type=click.IntRange(1), help="optimizer steps  [default: 225]")
@click.option("--episodes", default=None, type=click.IntRange(1), help="demonstration episodes in all  [default: 256]")
@click.option(
    "--phones",
    default=None,
    type=click.IntRange(1),
    help="demonstration phones (one seed and layout each)  [default: 32]",
)
@click.option(
    "--batch-size", default=None, type=click.IntRange(1), help="demonstration steps per optimizer step  [default: 32]"
)
@click.option(
    "--lr", default=None, type=click.FloatRange(0.0, 1.0, min_open=True), help="peak learning rate  [default: 2e-3]"
)
@click.option(
    "--seed",
    default=None,
    type=click.IntRange(0),
    help="seeds the model's initial weights, the task orders and the batch order  [default: 0]",
)
@click.option(
    "--tasks", "task_names", default=None, help="comma-separated task ids or set names to demonstrate  [default: base8]"
)
@click.option(
    "--observation-size",
    default=None,
    callback=lambda c, p, v: None if v is None else parse_size(v),
    help="screenshot size; RL and eval must use the same  [default: 168x364]",
)
@click.option("--preset", default=None, type=click.Choice(["A", "B"]), help="tiny model size preset  [default: A]")
@click.option(
    "--stop-threshold",
    default=None,
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="stop early once the held-out stop metric reaches this (needs --eval-every)",
)
@click.option(
    "--eval-every",
    default=None,
    type=click.IntRange(0),
    help="held-out metrics every N steps  [default: 0 = at the end]",
)
@click.option("--threads", default=None, type=click.IntRange(1), help="torch CPU threads  [default: 2]")
@click.option(
    "--eval-episodes",
    default=1,
    show_default=True,
    type=click.IntRange(0),
    help="the final evaluation on the demo tasks: sampled episodes of every task on each --eval-phones phone, "
    "besides one greedy (0 skips it)",
)
@click.option(
    "--eval-phones",
    default=8,
    show_default=True,
    type=click.IntRange(1, 512),
    help="phones of the final evaluation (seeds 0, 1, ...)",
)
@click.option("--force", is_flag=True, help="overwrite a checkpoint already in --out")
@click.option(
    "--model",
    "model_path",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="fine-tune this Qwen2-VL-family checkpoint (Hugging Face layout, e.g. UI-TARS-1.5 or a `darwin sft` output) under --agent-format instead of training the tiny warm start",
)
@click.option(
    "--agent-format",
    default=None,
    help="with --model: uitars-1.5, uitars-1.0, qwen2.5, qwen3 or tiny  [default: the checkpoint's darwin_agent.json, else uitars-1.5]",
)
@click.option(
    "--from-run",
    "from_runs",
    multiple=True,
    metavar="RUN_DIR_OR_DB",
    help="with --model: train on the verifier-accepted episodes of this run directory / run.db / SQLAlchemy URL (repeatable; an RL run = rejection-sampling fine-tune)",
)
@click.option(
    "--from-jsonl",
    "from_jsonl",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="with --model: train on this JSONL demonstration file (repeatable; format in docs/sft.md)",
)
@click.option(
    "--lora-rank",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="with --model: 0 = full fine-tune, else LoRA of this rank (merged into the saved weights)",
)
@click.option(
    "--heldout-fraction",
    default=0.25,
    show_default=True,
    type=click.FloatRange(0.0, 1.0, max_open=True),
    help="with --model: share of run/JSONL episodes held out for action match",
)
def sft_cmd(
    out: str | None,
    config_file: str | None,
    experiment_file: str | None,
    overrides: tuple[str, ...],
    steps: int | None,
    episodes: int | None,
    phones: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    task_names: str | None,
    observation_size: tuple[int, int] | None,
    preset: str | None,
    stop_threshold: float | None,
    eval_every: int | None,
    threads: int | None,
    eval_episodes: int,
    eval_phones: int,
    force: bool,
    model_path: str | None,
    agent_format: str | None,
    from_runs: tuple[str, ...],
    from_jsonl: tuple[str, ...],
    lora_rank: int,
    heldout_fraction: float,
) -> None:
    """Warm start: behaviour-clone the tiny model on SimPhone oracle demonstrations.

    Trains short of mastery on purpose (RL needs room to improve), saves a checkpoint in
    --out, then evaluates it on the demo tasks, sampled at temperature 1 (what RL sees) and
    greedily. With --model: fine-tune any Qwen2-VL-family checkpoint under --agent-format on
    the oracle, --from-run and/or --from-jsonl demonstrations. See docs/sft.md.
    """
    if model_path is not None or from_runs or from_jsonl:
        from darwin.sft.cli import finetune_command

        if model_path is None:
            raise click.BadParameter(
                "--from-run / --from-jsonl fine-tune a checkpoint: pass --model DIR (e.g. UI-TARS-1.5, or a `darwin sft` output with --agent-format tiny)",
                param_hint="--model",
            )
        if (
            experiment_file
            or config_file
            or overrides
            or preset
            or stop_threshold is not None
            or eval_every is not None
        ):
            raise click.BadParameter(
                "--experiment, --config, --set, --preset, --stop-threshold and --eval-every belong to the tiny warm start; with --model use the flags listed under --model",
                param_hint="--model",
            )
        finetune_command(
            console,
            out=out,
            model=model_path,
            agent_format=agent_format,
            runs=from_runs,
            jsonl=from_jsonl,
            tasks=task_names,
            episodes=episodes,
            phones=phones,
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            threads=threads,
            observation_size=observation_size,
            lora_rank=lora_rank,
            heldout_fraction=heldout_fraction,
            eval_episodes=eval_episodes,
            eval_phones=eval_phones,
            force=force,
        )
        return

    import yaml
    from pydantic import ValidationError
    from rich.progress import TimeRemainingColumn

    from darwin.models import TinyVLMConfig
    from darwin.sft import SFT_FILE, SFTConfig, train_sft
    from darwin.sft.cli import evaluate_and_record

    if experiment_file and config_file:
        raise click.BadParameter(
            "pass --experiment or --config, not both (the experiment holds its SFTConfig)", param_hint="--config"
        )
    if overrides and not experiment_file:
        raise click.BadParameter("--set needs --experiment", param_hint="--set")
    if out is not None and (Path(out) / SFT_FILE).exists() and not force:  # before anything slow or strict
        raise click.BadParameter(
            f"{out}: it already holds a checkpoint; pass --force to overwrite it or choose another --out",
            param_hint="--out",
        )
    experiment = _load_for_eval(experiment_file, overrides) if experiment_file else None
    data: dict[str, object] = {} if experiment is None else experiment.sft.model_dump()
    if config_file:
        try:
            loaded = yaml.safe_load(Path(config_file).read_text(encoding="utf-8"))  # JSON is YAML
        except yaml.YAMLError as exc:
            raise click.BadParameter(f"{config_file}: {exc}", param_hint="--config") from None
        if not isinstance(loaded, dict):
            raise click.BadParameter(f"{config_file}: expected a mapping of SFTConfig fields", param_hint="--config")
        data.update(loaded)
    flags = {
        "steps": steps,
        "episodes": episodes,
        "phones": phones,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "model_seed": seed,
        "observation_size": observation_size,
        "stop_threshold": stop_threshold,
        "eval_every": eval_every,
        "threads": threads,
    }
    data.update({k: v for k, v in flags.items() if v is not None})
    if task_names:
        data["tasks"] = tuple(n.strip() for n in task_names.split(",") if n.strip())
    if preset is not None:
        w, h = data.get("observation_size") or SFTConfig.model_fields["observation_size"].default  # type: ignore[misc]
        data["model"] = TinyVLMConfig.preset(preset, screen_width=w, screen_height=h)  # type: ignore[arg-type]
    try:
        config = SFTConfig.model_validate(data)
    except ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/flags") from None
    if out is None:  # the experiment's cache entry is what `darwin run` looks up (darwin.sft.cache)
        out = (
            "runs/sft" if experiment is None else str(Path(experiment.cache_dir) / f"warm-start-{config.config_hash()}")
        )
    out_path = Path(out)
    if (out_path / SFT_FILE).exists() and not force:
        what = (
            "the experiment's warm start is already built"
            if experiment is not None
            else "it already holds a checkpoint"
        )
        raise click.BadParameter(
            f"{out_path}: {what}; pass --force to overwrite it or choose another --out", param_hint="--out"
        )
    w, h = config.observation_size
    console.print(
        f"SFT config {config.config_hash()}: {config.episodes} episodes on {config.phones} phones ({', '.join(config.tasks)}), {w}x{h} screens, {config.steps} steps of batch {config.batch_size}, lr {config.lr:g}"
    )

    columns = (
        TextColumn("[bold]sft[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[tps]} tok/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("demonstrations", total=config.steps, loss="-", tps="-")

        def on_step(s: object) -> None:
            progress.update(
                bar, completed=s.step, description="training", loss=f"{s.loss:.4f}", tps=f"{s.tokens_per_s:,.0f}"
            )  # type: ignore[attr-defined]

        def on_heldout(m: object) -> None:
            progress.console.print(
                f"held-out at step {m.step}: loss {m.loss:.4f}, sequence prob {m.sequence_prob:.3f}"
                + (
                    ""
                    if m.greedy_match is None
                    else f", greedy exact {m.greedy_match:.3f}, greedy action {m.greedy_action_match:.3f}"
                )
            )  # type: ignore[attr-defined]

        result = train_sft(
            config,
            out_path,
            on_step=on_step,
            on_heldout=on_heldout,
            on_phase=lambda name: progress.update(bar, description=name),
        )
    meta = result.metadata
    data_stats, wall, training = meta["data"]["train"], meta["wall_time_s"], meta["training"]
    console.print(
        f"{data_stats['steps']} demonstration steps from {data_stats['episodes']} episodes ({data_stats['unique_screens']} distinct screens); {training['steps_run']} steps{' (stopped early)' if training['stopped_early'] else ''}; loss {training['first_loss']:.3f} -> {training['final_loss']:.4f}"
    )
    load = meta["machine"]["load_average_1m"]
    console.print(
        f"wall time {wall['total_s']:.0f}s (demonstrations {wall['demonstrations_s']:.0f}s, encoding {wall['encoding_s']:.0f}s, training {wall['training_s']:.0f}s) on {config.threads} thread(s), process CPU {wall['process_cpu_s']:.0f}s, 1-min load average {load[0]} -> {load[1]} on {meta['machine']['cpu_count']} cores; checkpoint in {out_path}"
    )
    if eval_episodes == 0:
        return
    evaluate_and_record(console, out_path, meta, config.tasks, eval_phones, eval_episodes)


# ------------------------------------------------------------------------------------ run
@main.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False))
@click.option("--preset", default="default", show_default=True, help="passed to the file's build(preset)")
@click.option("--dry-run", is_flag=True, help="build and validate the experiment without touching phones or training")
@click.option("--resume", is_flag=True, help="continue from the run directory's last checkpoint")
@click.option(
    "--run-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="default runs/<name>-<time>; with --resume, the latest runs/<name>-*",
)
@click.option("--seed", default=None, type=int, help="override the phone, policy and learner seeds")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="override a config field by dotted path, VALUE as JSON or a string (repeatable), "
    "e.g. --set learner.kl_coef=0.05 --set horizon=16",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="ADDR",
    help="run the phones as actors on this Ray cluster (HOST:PORT of the head, 'auto', ray://HOST:PORT); "
    "the experiment's phones.ray groups place them, else its SimPhones spread over the nodes (docs/scale.md)",
)
def run_cmd(
    experiment_file: str,
    preset: str,
    dry_run: bool,
    resume: bool,
    run_dir: str | None,
    seed: int | None,
    overrides: tuple[str, ...],
    ray_address: str | None,
) -> None:
    """Train an agent as an experiment file describes (e.g. examples/spa_bench.py)."""
    from rich.live import Live

    from darwin.problems import ExperimentError
    from darwin.run.config import default_run_dir
    from darwin.run.load import apply_overrides, load_experiment, use_ray_cluster
    from darwin.run.recipe import RunProgress, run_experiment

    try:
        config = load_experiment(experiment_file, preset)
        if overrides:
            config = apply_overrides(config, overrides)
        if ray_address is not None:
            config = use_ray_cluster(config, ray_address)
    except ExperimentError as exc:
        raise click.ClickException(str(exc)) from None
    from darwin.run.preflight import preflight

    # The distributed parts (policy server, Ray, devices, verl, judge key), before anything
    # slow and in --dry-run: every problem at once, each with its fix.
    problems = preflight(config)
    if problems:
        raise click.ClickException("the experiment cannot start:\n  " + "\n  ".join(map(str, problems)))
    if seed is not None:
        config = config.model_copy(
            update={
                "phones": config.phones.model_copy(update={"seed": seed}),
                "policy": config.policy.model_copy(update={"seed": seed}),
                "learner": config.learner.model_copy(update={"seed": seed}),
            }
        )
    path = Path(run_dir) if run_dir else None
    if resume and path is None:
        candidates = sorted(Path("runs").glob(f"{config.name}-*/checkpoint"))
        if not candidates:
            raise click.ClickException(f"--resume found no runs/{config.name}-*/checkpoint; pass --run-dir")
        path = candidates[-1].parent
    path = path or default_run_dir(config)
    if dry_run:
        _print_dry_run(config, path)
        return

    def table(p: RunProgress) -> Table:
        t = Table(title=f"darwin run {config.name}: {p.stage}{f' ({p.detail})' if p.detail else ''}")
        t.add_column("phones", justify="right")
        t.add_column("env steps", justify="right")
        t.add_column("steps/s", justify="right")
        t.add_column("episodes", justify="right")
        t.add_column("success (last 20)", justify="right")
        t.add_column("update", justify="right")
        t.add_column("buffer", justify="right")
        warm = " (critic warm-up)" if p.warmup else ""
        rate = "-" if p.recent_success is None else f"{100 * p.recent_success:.0f}%"
        t.add_row(
            str(p.phones),
            str(p.env_steps),
            f"{p.steps_per_s:.1f}",
            str(p.episodes),
            rate,
            f"{p.update}/{p.updates}{warm}",
            str(p.buffer_steps),
        )
        return t

    with _credentials_fail_cleanly():
        if console.is_terminal:
            with Live(table(RunProgress()), console=console, refresh_per_second=2, transient=False) as live:
                result = run_experiment(config, path, resume=resume, on_progress=lambda p: live.update(table(p)))
        else:  # logs and CI: one line whenever the stage or the update changes, not a redrawn table
            result = run_experiment(config, path, resume=resume, on_progress=_ProgressLines())
    console.print()
    console.print(
        f"{result.updates} updates, {result.env_steps} env steps; outputs in {result.run_dir} (success curve: {result.plot}, TensorBoard: {result.run_dir / 'tensorboard'})"
    )
    console.print(f"{result.cost.describe()} (summary.json)", highlight=False)
    before, after = result.evaluations.get("warm_start"), result.evaluations.get("final")
    if before is not None and after is not None:
        import numpy as np

        from darwin.evaluate import paired_comparison
        from darwin.run.report import evaluation_line

        console.print(
            f"evaluation of {_task_names(config.tasks)} on the evaluation phones (eval.json):", highlight=False
        )
        console.print(f"  warm start: {evaluation_line(before)}", highlight=False)
        console.print(f"  after {after.updates} updates: {evaluation_line(after)}", highlight=False)
        comparison = paired_comparison(after.records, before.records, np.random.default_rng(0), list(after.per_task))
        for name, d in comparison.differences.items():
            console.print(
                f"  {name}: {100 * d.difference.value:+.1f} points (paired 95% interval {100 * d.difference.low:+.1f} "
                f"to {100 * d.difference.high:+.1f}, {d.pairs} pairs{', separated from zero' if d.separated else ''})",
                highlight=False,
            )
        for name in after.per_set:
            if name != "train" and name in before.per_set:
                console.print(
                    f"  {name}: {100 * before.per_set[name]:.1f}% -> {100 * after.per_set[name]:.1f}% "
                    f"({100 * (after.per_set[name] - before.per_set[name]):+.1f} points)",
                    highlight=False,
                )


def _task_names(names: tuple[str, ...], shown: int = 8) -> str:
    """The training tasks for one line: all of a few, else the first ones and a count."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more tasks"


@contextlib.contextmanager
def _credentials_fail_cleanly() -> Iterator[None]:
    """A missing or rejected API key (a judge, a planner, a hosted agent) stops the command with
    one line naming the variable to set, not a traceback."""
    from darwin.types import RunAbort

    try:
        yield
    except RunAbort as exc:  # PolicyAuthError among them
        raise click.ClickException(str(exc)) from None


class _ProgressLines:
    """Progress for a non-terminal stdout: a timestamped line per stage or update change."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.last: tuple[str, int] | None = None

    def __call__(self, p: RunProgress) -> None:
        # A line when a learner update starts and one when the rollout goes on after it, plus one
        # for each other stage (warm start, evaluations): a log shows what the run was doing last.
        key = ("update" if p.stage.startswith("update") else p.stage, p.update)
        if key == self.last:
            return
        self.last = key
        elapsed = f"[{time.perf_counter() - self.started:6.0f}s]"
        if p.stage.startswith("warm start"):  # before RL: the warm start's own fields, no RL counters
            console.print(f"{elapsed} {p.stage}{f' ({p.detail})' if p.detail else ''}", highlight=False, soft_wrap=True)
            return
        rate = "-" if p.recent_success is None else f"{100 * p.recent_success:.0f}%"
        warm = " (critic warm-up)" if p.warmup else ""
        console.print(
            f"{elapsed} {p.stage}: update {p.update}/{p.updates}{warm}, "
            f"{p.env_steps} env steps ({p.steps_per_s:.1f}/s), {p.episodes} episodes, success (last 20) {rate}",
            highlight=False,
            soft_wrap=True,
        )


@main.command("compare")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--plot",
    "plot_path",
    default="compare.png",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="PNG of the figure (--metric) over every run",
)
@click.option(
    "--window",
    default=20,
    show_default=True,
    type=click.IntRange(1),
    help="episodes in the sliding mean and in the first/last comparison",
)
@click.option(
    "--metric",
    default="success",
    show_default=True,
    type=click.Choice(FIGURE_METRICS),
    help="the figure: success, steps of successful episodes, success per lifecycle phase, "
    "or training steps against wall time (docs/results.md has one of each)",
)
@click.option(
    "--pool-seeds",
    is_flag=True,
    help="one curve per variant: runs named <variant>-s<N> are pooled (their points sorted by training step)",
)
def compare_cmd(run_dirs: tuple[str, ...], plot_path: str, window: int, metric: str, pool_seeds: bool) -> None:
    """Compare finished `darwin run` directories (e.g. seeds): a Markdown table, the paired
    differences of their evaluations (final against warm start in each run, every run's final
    against the first's) and one figure. Given `darwin eval --json` files instead: each one's
    greedy, sampled and pass@k success, and every later file against the first, paired."""
    from darwin.run.figures import figure_table, plot_figure, read_runs
    from darwin.run.report import compare_eval_files, compare_runs

    files = [Path(p).is_file() for p in run_dirs]
    if any(files):
        if not all(files):
            raise click.BadParameter(
                "pass either run directories or `darwin eval --json` files, not both", param_hint="RUN_DIRS"
            )
        try:
            console.print(compare_eval_files(run_dirs), highlight=False, markup=False, soft_wrap=True)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise click.ClickException(f"{exc}") from None
        return

    own_figure = metric != "success" or pool_seeds
    try:
        _, table = compare_runs(run_dirs, None if own_figure else plot_path, window)
        if own_figure:
            figure = cast("FigureMetric", metric)
            runs = read_runs(run_dirs)  # once, for the figure and its table
            plot_figure(runs, plot_path, figure, window=window, pool_seeds=pool_seeds)
            table += f"\n{metric}:\n\n" + figure_table(runs, figure, window)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    console.print(table, highlight=False, markup=False, soft_wrap=True)
    console.print(f"plot: {plot_path}", highlight=False)


def _changed_learner_fields(learner) -> str:  # noqa: ANN001 - LearnerConfig, imported lazily
    """The learner fields an experiment sets away from LearnerConfig's defaults."""
    defaults = type(learner)()
    changed = [
        f"{k}={getattr(learner, k)}" for k in type(learner).model_fields if getattr(learner, k) != getattr(defaults, k)
    ]
    return ", ".join(changed) or "(defaults)"


def _print_dry_run(config, path: Path) -> None:  # noqa: ANN001 - ExperimentConfig, imported lazily
    tasks = config.resolve_tasks()
    table = Table(title=f"dry run: {config.name} (valid)")
    table.add_column("setting", no_wrap=True)
    table.add_column("value")
    phones = config.phones
    where = (
        f"{phones.count} SimPhones (seeds {phones.seed}..{phones.seed + phones.count - 1})"
        if phones.kind == "sim"
        else f"{phones.count} ADB devices via {phones.adb_server}: {', '.join(phones.devices) or 'none listed (set them before running)'}"
    )
    if phones.kind == "ray":
        where = f"{phones.count} phones on the Ray cluster at {phones.ray.address} (reachable): " + "; ".join(
            f"{g.phones} {'SimPhones' if g.kind == 'sim' else 'ADB devices'} on {g.where} in {g.actors} host(s)"
            for g in phones.ray.groups
        )
    warm = config.checkpoint or f"built by SFT and cached in {config.cache_dir} (config {config.sft.config_hash()})"
    rows = [
        ("tasks", f"{len(tasks)}: {', '.join(t.id for t in tasks)}"),
        ("horizon", str(config.horizon)),
        ("phones", where),
        ("rollout", f"{config.mode}, {config.rollout_steps} completed steps per update"),
        ("warm start", warm),
        (
            "agent",
            "the warm start's own format"
            if config.agent.format == "checkpoint"
            else f"{config.agent.format} at {config.agent.observation_size[0]}x{config.agent.observation_size[1]}",
        ),
        (
            "policy",
            f"{config.policy.backend}, temperature {config.policy.temperature}, batch {config.policy.max_batch}"
            + (f", server {config.policy.server.base_url}" if config.policy.server else ""),
        ),
        ("store", f"${config.store.url_env}" if config.store.url_env else f"{path / 'run.db'}"),
        (
            "learner",
            f"{config.learner.backend} {config.learner.algorithm}, gamma {config.learner.gamma}, lambda {config.learner.lam}, critic warm-up {config.learner.critic_warmup_updates} updates (lambda {config.learner.critic_warmup_lam}), value-head bias {config.learner.value_head_bias}",
        ),
        ("levers", _changed_learner_fields(config.learner)),
        (
            "components",
            f"curriculum {config.curriculum.name}, workflow {config.workflow_spec().name}, verifier {config.verifier.name}, "
            f"memory {config.memory.name if config.memory else '(the warm start)'}, group size {config.group_size or '-'}",
        ),
        ("updates", f"{config.updates}" + (f", at most {config.time_budget_s:.0f}s" if config.time_budget_s else "")),
        ("run dir", str(path)),
        ("notes", config.notes),
    ]
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


# ---------------------------------------------------------------------------------- bench
# `darwin bench ...` (docs/benchmarks.md) lives with the benchmarks: darwin.bench.cli.
from darwin.bench.cli import bench as _bench_group  # noqa: E402 - after main, to add to it

main.add_command(_bench_group)


# --------------------------------------------------------------------------------- phones
@main.group()
def phones() -> None:
    """Phones over ADB: serve SimPhones as ADB devices."""


@phones.command("serve")
@click.option("--count", default=1, show_default=True, type=click.IntRange(1, 1024), help="number of SimPhones")
@click.option(
    "--port-base",
    default=None,
    type=click.IntRange(1, 65535),
    help="phone i listens on PORT_BASE + i (default: free ports); avoid 5555-5585",
)
@click.option(
    "--faults",
    default="none",
    show_default=True,
    help="fault spec, e.g. 'drop=0.01,hang=0.005,slow=lognormal:0.05:0.5,stall=0.01:3,crash=0.002,reboot=0.001:keep' (docs/phones.md)",
)
@click.option("--seed", default=0, show_default=True, type=int, help="phone i is SimPhone(seed=SEED + i)")
@click.option("--no-perturb", is_flag=True, help="canonical look: no theme, wallpaper, order or pop-up perturbations")
@click.option(
    "--log-limit", default=100_000, show_default=True, type=click.IntRange(1), help="commands kept in memory per phone"
)
@click.option("--connect", is_flag=True, help="also `adb connect` every phone to the adb server on --adb-port")
@click.option(
    "--adb-port", default=5037, show_default=True, type=click.IntRange(1, 65535), help="adb server for --connect"
)
@click.option(
    "--ready-file",
    default=None,
    type=click.Path(dir_okay=False),
    help='write {"addresses": [...]} here once serving (for scripts)',
)
def phones_serve(
    count: int,
    port_base: int | None,
    faults: str,
    seed: int,
    no_perturb: bool,
    log_limit: int,
    connect: bool,
    adb_port: int,
    ready_file: str | None,
) -> None:
    """Serve SimPhones as ADB devices on 127.0.0.1 until interrupted (Ctrl-C / SIGTERM)."""
    import json
    import signal
    import threading

    from darwin.envs.adb import AdbServerClient
    from darwin.envs.base import InfraError
    from darwin.envs.faults import FaultSpec, FaultSpecError
    from darwin.envs.providers import SimFarm
    from darwin.envs.sim import PerturbationConfig

    try:
        spec = FaultSpec.parse(faults)
    except FaultSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from None
    if port_base is not None and port_base + count - 1 > 65535:
        raise click.BadParameter(f"ports {port_base}..{port_base + count - 1} exceed 65535", param_hint="--port-base")
    farm = SimFarm(
        count,
        seed=seed,
        faults=spec,
        port_base=port_base,
        perturbation=PerturbationConfig(enabled=not no_perturb),
        log_limit=log_limit,
        adb_port=adb_port,
    )
    try:
        farm.start()
    except OSError as exc:
        raise click.ClickException(f"{exc}; pick another --port-base or omit it for free ports") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if connect:
            client = AdbServerClient(port=adb_port)
            for address in farm.addresses:
                try:
                    client.connect_device(address, time.monotonic() + 10)
                except InfraError as exc:
                    raise click.ClickException(
                        f"adb connect {address} failed: {exc} (is an adb server running on port {adb_port}?)"
                    ) from None
        table = Table(title=f"{count} SimPhone(s) served over ADB" + (f" with faults {spec}" if spec.enabled else ""))
        for col in ("phone", "address", "seed"):
            table.add_column(col)
        for i, address in enumerate(farm.addresses):
            table.add_row(f"sim-{i}", address, str(seed + i))
        console.print(table)
        console.print(
            "connect with: " + ("(done) " if connect else "") + f"adb connect {farm.addresses[0]}  ...  Ctrl-C stops."
        )
        if ready_file:
            Path(ready_file).write_text(json.dumps({"addresses": farm.addresses}))
        stop.wait()
    finally:
        if connect:
            client = AdbServerClient(port=adb_port)
            for address in farm.addresses:
                try:
                    client.disconnect_device(address, time.monotonic() + 5)
                except InfraError as exc:
                    console.print(f"adb disconnect {address}: {exc}")
        farm.stop()


@main.command("serve-policy")
@click.option(
    "--checkpoint",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="a `darwin sft` warm start or any Qwen2-VL / Qwen2.5-VL checkpoint directory",
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--served-model-name", default="darwin-tiny", show_default=True)
@click.option(
    "--temperature",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.0, 100.0),
    help="the only temperature requests may ask for",
)
@click.option("--max-new-tokens", default=64, show_default=True, type=click.IntRange(1, 65536))
@click.option("--api-key-env", default=None, help="name of an environment variable holding the key clients must send")
def serve_policy(
    checkpoint: str,
    port: int,
    host: str,
    served_model_name: str,
    temperature: float,
    max_new_tokens: int,
    api_key_env: str | None,
) -> None:
    """Serve a checkpoint with vLLM's chat-completion protocol (token ids, log-probs, weight updates) on the CPU
    (docs/scale.md): a stand-in for vLLM when testing ServerPolicy without a GPU."""
    import os

    from darwin.models.factory import load_vlm
    from darwin.policies.local_server import LocalPolicyServer, serve_forever

    key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not key:
        raise click.ClickException(f"--api-key-env {api_key_env}: the variable is not set")
    server = LocalPolicyServer(
        load_vlm(checkpoint),
        served_model_name=served_model_name,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        api_key=key,
        host=host,
        port=port,
    )
    console.print(f"serving {checkpoint} as {served_model_name!r} on http://{host}:{port} (Ctrl-C stops)")
    with contextlib.suppress(KeyboardInterrupt):
        serve_forever(server)


@main.command("paper-path")
@click.argument("experiment_file", default="examples/spa_bench.py", type=click.Path(dir_okay=False))
@click.option(
    "--preset", default="paper-miniature", show_default=True, help="the file's preset that reads the stand-ins"
)
@click.option(
    "--work-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="stand-ins and the run (default runs/paper-path-<time>)",
)
@click.option("--phones", default=2, show_default=True, type=click.IntRange(1, 64), help="SimPhones served over ADB")
@click.option(
    "--judge-success-rate",
    default=0.3,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="the judge stand-in's share of 'yes'",
)
@click.option("--resume", is_flag=True, help="continue the run in --work-dir from its last checkpoint")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="passed to darwin run")
def paper_path(
    experiment_file: str,
    preset: str,
    work_dir: str | None,
    phones: int,
    judge_success_rate: float,
    resume: bool,
    overrides: tuple[str, ...],
) -> None:
    """The paper preset in miniature: start stand-ins for what a laptop lacks (a tiny UI-TARS-1.5-format
    checkpoint, `darwin serve-policy` as the vLLM server, SimPhones over the adbd protocol behind a real adb
    server, an OpenAI-compatible judge), then `darwin run FILE --preset paper-miniature` against them: verl's
    actor and critic on 2 CPU workers (docs/scale.md)."""
    import os
    import subprocess
    import sys

    from darwin.miniature import PaperPathStandIns, StandInError

    work = Path(work_dir) if work_dir else Path("runs") / time.strftime("paper-path-%Y%m%d-%H%M%S")
    if resume and not (work / "run" / "checkpoint").is_dir():
        raise click.ClickException(f"--resume: {work / 'run'} has no checkpoint; pass the --work-dir of an earlier run")
    try:
        with PaperPathStandIns(work / "stand-ins", phones=phones, judge_success_rate=judge_success_rate) as stand_ins:
            console.print(
                f"stand-ins up: policy server {stand_ins.policy_url}, phones {', '.join(stand_ins.devices)}, "
                f"judge {stand_ins.judge.base_url}"
            )
            argv = [
                sys.executable,
                "-m",
                "darwin.cli",
                "run",
                experiment_file,
                "--preset",
                preset,
                "--run-dir",
                str(work / "run"),
            ]
            argv += ["--resume"] if resume else []
            argv += [item for o in overrides for item in ("--set", o)]
            code = subprocess.run(argv, env={**os.environ, **stand_ins.env()}).returncode
            console.print(
                f"the policy server serves weight version {stand_ins.served_weight_version()}; "
                f"the judge answered {stand_ins.judge.requests} requests; run in {work / 'run'}"
            )
    except StandInError as exc:
        raise click.ClickException(str(exc)) from None
    if code:
        raise SystemExit(code)


# The learned verifier's commands (data, train, eval) live with their code.
from darwin.verifiers.learned.cli import verifier as _verifier_group  # noqa: E402 - after main, to add to it

main.add_command(_verifier_group)

# LLM judges: calibration against labels and review of a finished run.
from darwin.verifiers.judge.cli import judge as _judge_group  # noqa: E402 - after main, to add to it

main.add_command(_judge_group)


if __name__ == "__main__":
    main()
