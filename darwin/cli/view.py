"""``darwin view``: look at runs in a browser, label episodes, export a static site or the labels.

darwin view runs/spa_bench                      # http://127.0.0.1:8765/
darwin view runs/a runs/b/run.db --port 0       # several runs, any free port
darwin view runs/spa_bench --export site/       # a static site (open site/index.html)
darwin view runs/spa_bench --export-labels labelled/   # for darwin judge calibrate / verifier
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["view_cmd"]


@click.command("view")
@click.argument("runs", nargs=-1, required=True)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0: any free port")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--expose", is_flag=True, help="allow an address other machines can reach (needs --token)")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="also answer requests that name the viewer so (another name of this machine with --expose, "
    "or localhost:9000 behind an SSH tunnel on another port); any other Host header is refused",
)
@click.option(
    "--token",
    envvar="DARWIN_VIEW_TOKEN",
    default=None,
    help="secret every request must carry (open /?token=SECRET once)  [env: DARWIN_VIEW_TOKEN]",
)
@click.option(
    "--export",
    "export_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="write a static site of the runs here instead of serving",
)
@click.option(
    "--export-labels",
    "labels_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="write the runs' human labels here (labels.csv + trajectories/, examples.jsonl + images/) instead of serving",
)
def view_cmd(
    runs: tuple[str, ...],
    port: int,
    host: str,
    expose: bool,
    allow_hosts: tuple[str, ...],
    token: str | None,
    export_dir: str | None,
    labels_dir: str | None,
) -> None:
    """Look at RUNS (run directories, run.db files or SQLAlchemy URLs) in a browser: curves,
    episodes with their actions drawn on the screens, verdicts; label episodes by hand."""
    from darwin.database import StoreError
    from darwin.view.app import BindRefused, check_bind, create_app, served_hosts
    from darwin.view.export import export_labels, export_site
    from darwin.view.server import ViewServer
    from darwin.view.source import SourceError, open_sources

    try:
        sources = open_sources(runs)
    except (SourceError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    if export_dir is not None:
        pages = export_site(sources, Path(export_dir))
        click.echo(f"wrote {pages} pages to {export_dir}; open {Path(export_dir) / 'index.html'}")
        return
    if labels_dir is not None:
        for k, source in enumerate(sources):
            out = Path(labels_dir) if len(sources) == 1 else Path(labels_dir) / f"run-{k}"
            done = export_labels(source, out)
            click.echo(
                f"{source.name}: {done.trajectories} labelled trajectories to {out / 'labels.csv'}, "
                f"{done.verifier_examples} verifier examples to {out / 'examples.jsonl'}"
                + (f"; {done.left_out()}" if done.left_out() else "")
            )
        return
    try:
        check_bind(host, token=token, expose=expose, allow_hosts=allow_hosts)
    except BindRefused as exc:
        raise click.ClickException(str(exc)) from None
    try:
        server = ViewServer(
            create_app(sources, token=token, hosts=served_hosts(host, allow_hosts)), host=host, port=port
        )
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port} ({exc.strerror}). Fix: pick another --port, or --port 0 for any free one"
        ) from None
    click.echo(f"darwin view: {server.url}{'?token=<your token>' if token else ''}  (Ctrl-C stops)")
    server.serve_forever()
