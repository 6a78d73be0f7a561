"""``darwin eval``: a paired evaluation of any agent on SimPhones or an experiment's phones."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

if TYPE_CHECKING:
    from darwin.evaluate import EvalReport
    from darwin.types import Trajectory
from darwin.agents.actors import AgentChoiceError
from darwin.cli.common import (
    credentials_fail_cleanly,
    experiment_overrides,
    load_experiment_for_command,
    parse_size,
)
from darwin.cli.eval_output import episode_metrics_table, evaluate_with_progress, success_table
from darwin.cli.eval_setup import eval_guard, eval_phones_and_workflow
from darwin.run.build import build_actors, experiment_actors

console = Console()


@click.command("eval")
@click.option(
    "--agent",
    "agent_spec",
    default=None,
    help="oracle | random | tiny:<checkpoint> (a `darwin sft` output directory) | litellm:<model> (any LiteLLM model, e.g. litellm:openai/ui-tars-1.5-7b with --api-base) | module:function (your own factory of darwin.agents.actors.Actors, docs/extending.md); with --experiment and no --agent: the experiment's warm start",
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
    "--guard",
    "guard_name",
    default=None,
    help="the action guard (docs/phones.md): 'rules' (the built-in rules), a rules file (PATH.yaml: the built-in guard "
    'with its rules), a spec as JSON (\'{"name": "rules", "kwargs": {"rules": "my.yaml", "penalty": 0.5}}\'), '
    "an import path 'module:Class', or 'off'  "
    "[default: the experiment's phones.guard; none without --experiment (the evaluation phones are SimPhones)]",
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
    guard_name: str | None,
    json_out: Path | None,
) -> None:
    """Evaluate an agent on SimPhones, paired: on each phone (one initial state per task) a
    greedy episode and --samples sampled ones of every task, each with its own sampling seed,
    so two agents evaluated alike meet the same episodes (`darwin compare A.json B.json`).
    Prints greedy success, sampled success and pass@k per task and overall, then the episode
    metrics per task (SR, PR, SE, FC, OT and the L1-L4 stratum; docs/evaluation.md)."""
    from darwin.evaluate import EvalProtocol, evaluate_paired
    from darwin.store import RunStore
    from darwin.task_registry import resolve_tasks
    from darwin.types import TaskDefinitionError

    experiment = load_experiment_for_command(experiment_file, overrides) if experiment_file else None
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
        actors = experiment_actors(experiment, seed, temperature)
        agent_spec = f"warm start of {experiment.name}"
    else:
        seed = seed or 0
        try:
            with credentials_fail_cleanly():
                actors = build_actors(
                    agent_spec,
                    seed,
                    phones=phones,
                    temperature=temperature,
                    agent_format=agent_format,
                    api_base=api_base,
                    api_key_env=api_key_env,
                    max_new_tokens=max_new_tokens,
                )
        except AgentChoiceError as exc:
            raise click.BadParameter(str(exc), param_hint=exc.option) from None
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
    envs, workflow = eval_phones_and_workflow(
        experiment,
        phones,
        seed,
        no_perturb=no_perturb,
        observation_size=observation_size,
        end_on_success=end_on_success,
    )
    guard = eval_guard(experiment, guard_name)
    if guard is not None:
        console.print(guard.describe(), highlight=False, soft_wrap=True)
    run_id = store.start_run(f"eval {agent_spec}", config=None)
    started = time.perf_counter()

    async def run(on_episode: Callable[[Trajectory], None]) -> EvalReport:
        try:
            return await evaluate_paired(
                chosen, envs, actors.make, protocol, workflow, store, run_id, on_episode=on_episode, guard=guard
            )
        finally:
            if actors.aclose is not None:
                await actors.aclose()

    total = len(chosen) * phones * protocol.episodes_per_instance
    report = evaluate_with_progress(console, f"{agent_spec} on {phones} phones", total, run)
    elapsed = time.perf_counter() - started
    console.print(success_table(report, protocol, agent_spec, phones))
    blocked = report.blocked_per_task()
    if blocked:
        console.print(
            f"blocked by the action guard (counted as failures): {sum(blocked.values())} episode(s): "
            + ", ".join(f"{task} {n}" for task, n in sorted(blocked.items())),
            highlight=False,
        )
    console.print(episode_metrics_table(report))
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
