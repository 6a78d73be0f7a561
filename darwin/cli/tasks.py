"""``darwin tasks``: list tasks and templates, map SPA-Bench, record demonstrations, split apps for generalization."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

console = Console()


# ---------------------------------------------------------------------------------- tasks
@click.group()
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
    from darwin.task_registry import TASK_SETS, registry, task_set
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
@click.option(
    "--prefer-typing/--prefer-tapping",
    default=False,
    show_default=True,
    help="type a task's words into a field rather than tap a list row showing them, where the app offers both",
)
def tasks_demos(
    out: Path,
    task_names: str,
    phones: int,
    phone_seed: int,
    observation_size: str,
    launch_by_name: bool,
    prefer_typing: bool,
) -> None:
    """Write the SimPhone oracle's demonstrations as a JSONL demonstration file (docs/sft.md):
    one episode per task on each phone, from its initial state, each tap with the target
    element's box. For `darwin sft --from-jsonl` and the step-level reward (DemoStepVerifier)."""
    from darwin.sft.demonstrations import export_oracle_demonstrations
    from darwin.task_registry import resolve_tasks

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
        prefer_typing=prefer_typing,
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
