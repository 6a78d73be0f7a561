"""The ``darwin`` command line (:func:`darwin.cli.main.main`): one module per command group.

Each command module parses its flags, loads an experiment through :mod:`darwin.run.load`,
builds through :mod:`darwin.run.build` (or runs :mod:`darwin.run.recipe`), and prints.
"""
