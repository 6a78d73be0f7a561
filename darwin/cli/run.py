"""``darwin run``: train as an experiment file says, with live progress, ``--dry-run`` and ``--resume``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from darwin.run.config import SelfEvolutionConfig
    from darwin.run.recipe import RunProgress
from darwin.cli.common import credentials_fail_cleanly, task_names_line
from darwin.progress import LineSchedule

console = Console()


# ------------------------------------------------------------------------------------ run
@click.command("run")
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
    "e.g. --set learner.ppo.kl_coef=0.05 --set horizon=16",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="ADDR",
    help="run the phones as actors on this Ray cluster (HOST:PORT of the head, 'auto', ray://HOST:PORT): "
    "sets phones.provider = 'ray'; the experiment's phones.ray groups place them, else its SimPhones spread over "
    "the nodes (docs/scale.md)",
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
    from darwin.run.build import build_guard, guard_notice
    from darwin.run.config import ExperimentConfig, default_run_dir
    from darwin.run.load import apply_overrides, load_experiment, use_ray_cluster
    from darwin.run.recipe import RunProgress, RunResult, run_experiment

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
    if config.self_evolution is not None and resume:
        raise click.ClickException(
            "--resume continues one RL run; a self-evolution run starts its rounds afresh: drop --resume"
        )
    console.print(guard_notice(config, build_guard(config)), highlight=False, soft_wrap=True)

    def table(p: RunProgress) -> Table:
        timing = f" - {p.in_stage.timing()}" if p.in_stage.stage else ""
        t = Table(title=f"darwin run {config.name}: {p.stage}{f' ({p.detail})' if p.detail else ''}{timing}")
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

    def run(config: ExperimentConfig, path: Path, on_progress: Callable[[RunProgress], None]) -> RunResult:
        if config.self_evolution is not None:
            from darwin.run.self_evolution import run_self_evolution

            return run_self_evolution(config, path, on_progress)
        return run_experiment(config, path, resume=resume, on_progress=on_progress)

    with credentials_fail_cleanly():
        if console.is_terminal:
            with Live(table(RunProgress()), console=console, refresh_per_second=2, transient=False) as live:
                result = run(config, path, on_progress=lambda p: live.update(table(p)))
        else:  # logs and CI: one line whenever the stage or the update changes, not a redrawn table
            result = run(config, path, on_progress=_ProgressLines())
    console.print()
    console.print(
        f"{result.updates} updates, {result.env_steps} env steps; outputs in {result.run_dir} (success curve: {result.plot}, TensorBoard: {result.run_dir / 'tensorboard'})"
    )
    console.print(f"{result.cost.describe()} (summary.json)", highlight=False)
    before, after = result.evaluations.get("warm_start"), result.evaluations.get("final")
    if before is not None and after is not None:
        from darwin.run.report import closing_lines

        console.print(
            f"evaluation of {task_names_line(config.tasks)} on the evaluation phones (eval.json):", highlight=False
        )
        for line in closing_lines(before, after):
            console.print(f"  {line}", highlight=False)


class _ProgressLines:
    """Progress for a non-terminal stdout (a log file, CI): a timestamped line per stage or update
    change, and one every :data:`~darwin.progress.LINE_EVERY_S` seconds within a stage (the run
    refreshes its progress every few seconds, :class:`~darwin.progress.Heartbeat`), each with the
    stage's elapsed time and what is left: a log never looks hung."""

    def __init__(self, schedule: LineSchedule | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.started = clock()
        self.schedule = schedule or LineSchedule()
        self.finished: set[tuple[str, int | None]] = set()  # stages whose finished line was printed

    def __call__(self, p: RunProgress) -> None:
        # A line when a learner update starts and one when the rollout goes on after it, plus one
        # for each other stage (warm start, evaluations): a log shows what the run was doing last.
        # Within a stage, one every schedule interval (the log shows the run is not hung), and one
        # when the stage's counted work is all done (the log keeps what each stage took).
        key = ("update" if p.stage.startswith("update") else p.stage, p.update)
        stage = p.in_stage
        finished = (stage.stage, stage.total) if stage.total is not None and stage.done >= stage.total else None
        if finished is not None and finished not in self.finished:
            self.finished.add(finished)
            self.schedule.due(key)  # a new key is shown by this line: not again by the next report
        elif not self.schedule.due(key):
            return
        elapsed = f"[{self.clock() - self.started:6.0f}s]"
        timing = p.in_stage.timing() if p.in_stage.stage else ""
        if not p.stage.startswith(("rollout", "update")):  # warm start, setup, evaluations: no RL counters
            console.print(
                f"{elapsed} {p.stage}{f' ({p.detail})' if p.detail else ''}{f': {timing}' if timing else ''}",
                highlight=False,
                soft_wrap=True,
            )
            return
        rate = "-" if p.recent_success is None else f"{100 * p.recent_success:.0f}%"
        warm = " (critic warm-up)" if p.warmup else ""
        console.print(
            f"{elapsed} {p.stage}: update {p.update}/{p.updates}{warm}, "
            f"{p.env_steps} env steps ({p.steps_per_s:.1f}/s), {p.episodes} episodes, success (last 20) {rate}"
            f"{f'; {p.in_stage.line()}' if timing else ''}",
            highlight=False,
            soft_wrap=True,
        )


def _self_evolution_row(settings: SelfEvolutionConfig) -> str:
    explorer = (
        f"the policy at temperature {settings.explorer_temperature}"
        if settings.explorer is None
        else f"actors {settings.explorer.name!r}"
    )
    if settings.novelty_candidates > 1:
        explorer += f" inside the novelty explorer ({settings.novelty_candidates} proposals)"
    stage3 = settings.learned_verifier
    verifier = (
        "the experiment's verifier"
        if stage3 is None
        else f"a learned verifier retrained every round (reward {stage3.reward!r}, agreement with the held-out rules "
        + (
            f"on {stage3.agreement_episodes} episode(s) per task and agent)"
            if stage3.agreement_episodes
            else "not measured)"
        )
    )
    return (
        f"{settings.rounds} round(s) on {', '.join(settings.apps)}: {settings.explorations} x "
        f"{settings.exploration_steps} steps explored by {explorer}; {settings.synthesizer.name} tasks (at most "
        f"{settings.tasks_per_round}); {settings.sft_steps} fine-tuning steps"
        f"{f' (with {settings.replay_episodes} training-app demonstrations)' if settings.replay_episodes else ''}; "
        f"{settings.rl_updates} RL updates "
        f"rewarded by {verifier}"
    )


def _changed_learner_fields(learner) -> str:  # noqa: ANN001 - LearnerConfig, imported lazily
    """The learner fields an experiment sets away from LearnerConfig's defaults."""
    defaults = type(learner)()
    changed = [
        f"{k}={getattr(learner, k)}" for k in type(learner).model_fields if getattr(learner, k) != getattr(defaults, k)
    ]
    return ", ".join(changed) or "(defaults)"


def _print_dry_run(config, path: Path) -> None:  # noqa: ANN001 - ExperimentConfig, imported lazily
    from darwin.run.build import build_guard, guard_notice

    tasks = config.resolve_tasks()
    table = Table(title=f"dry run: {config.name} (valid)")
    table.add_column("setting", no_wrap=True)
    table.add_column("value")
    phones = config.phones
    if phones.in_process:
        where = f"{phones.count} SimPhones (seeds {phones.seed}..{phones.seed + phones.count - 1})"
    elif phones.on_ray:
        where = f"{phones.count} phones on the Ray cluster at {phones.ray.address} (reachable): " + "; ".join(
            f"{g.what} on {g.where} in {g.actors} host(s)" for g in phones.ray.groups
        )
    elif phones.provider.name == "adb":
        where = f"{phones.count} ADB devices via {phones.adb_server}: {', '.join(phones.devices) or 'none listed (set them before running)'}"
    else:
        where = f"{phones.count} phones from provider {phones.provider.name!r}"
    if phones.spares:
        where += f", {phones.spares} spare(s)"
    warm = config.checkpoint or f"built by SFT and cached in {config.cache_dir} (config {config.sft.config_hash()})"
    rows = [
        ("tasks", f"{len(tasks)}: {', '.join(t.id for t in tasks)}"),
        ("horizon", str(config.horizon)),
        ("phones", where),
        ("rollout", f"{config.mode}, {config.rollout_steps} completed steps per update"),
        (
            "branching",
            "off"
            if config.branching is None
            else f"{config.branching.continuations} continuation(s) from each of up to {config.branching.points} "
            f"state(s) of every training episode (SimPhones put back in that state; sibling baseline in 'gae')",
        ),
        ("warm start", warm),
        (
            "agent",
            "the warm start's own format"
            if config.agent.format is None or config.agent.observation_size is None
            else f"{config.agent.format.name} at {config.agent.observation_size[0]}x{config.agent.observation_size[1]}",
        ),
        (
            "policy",
            f"{config.policy.backend.name}, temperature {config.policy.temperature}, batch {config.policy.max_batch}"
            + (f", server {config.policy.server.base_url}" if config.policy.server else ""),
        ),
        ("store", f"${config.store.url_env}" if config.store.url_env else f"{path / 'run.db'}"),
        (
            "learner",
            f"{config.learner.backend.name} {config.learner.algorithm.name}, gamma {config.learner.gamma}, lambda {config.learner.lam}, critic warm-up {config.learner.critic.warmup_updates} updates (lambda {config.learner.critic.warmup_lam}), value-head bias {config.learner.critic.value_head_bias}",
        ),
        ("levers", _changed_learner_fields(config.learner)),
        (
            "components",
            f"curriculum {config.curriculum.name}, workflow {config.workflow.name}, verifier {config.verifier.name}, "
            f"memory {config.memory.name if config.memory else '(the warm start)'}, group size {config.group_size or '-'}",
        ),
        ("updates", f"{config.updates}" + (f", at most {config.time_budget_s:.0f}s" if config.time_budget_s else "")),
        *([("self-evolution", _self_evolution_row(config.self_evolution))] if config.self_evolution else []),
        ("run dir", str(path)),
        ("notes", config.notes),
    ]
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)
    console.print(guard_notice(config, build_guard(config)), highlight=False, soft_wrap=True)
