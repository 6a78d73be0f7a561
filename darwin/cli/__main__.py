"""``python -m darwin.cli``: the ``darwin`` command."""

from darwin.cli.main import main

main()
