"""A package's public names, imported on first use (issue 74's public API).

Each plug-in package (``darwin.verifiers``, ``darwin.workflows``, ...) exports its base class
and its built-ins, so a user writes ``from darwin.verifiers import RuleVerifier`` without
knowing the module that holds it. The names are looked up lazily, by a module-level
``__getattr__`` (PEP 562): importing ``darwin.verifiers.base`` runs ``darwin/verifiers/__init__``,
and an eager import there would load the LLM judge's litellm and the learned verifier's torch
with it, and put every built-in on the import path of every module of the package. The package
also imports each name under ``if TYPE_CHECKING:``, so type checkers and editors see the real
classes; ``tests/test_public_api.py`` checks that both lists and ``__all__`` agree.

    >>> import sys, types
    >>> package = types.ModuleType("probe")
    >>> sys.modules["probe"] = package
    >>> package.__getattr__, package.__dir__ = lazy_exports("probe", {"OrderedDict": "collections"})
    >>> from probe import OrderedDict
    >>> OrderedDict.__module__, "OrderedDict" in dir(package)
    ('collections', True)
    >>> from probe import Missing
    Traceback (most recent call last):
    ImportError: cannot import name 'Missing' from 'probe' (unknown location)
    >>> del sys.modules["probe"]

Inside the library every name is still imported from the module that holds it
(``tests/test_import_graph.py``): the public names are for users' code, examples and docs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` that serve ``exports`` (public name ->
    the module that holds it); each name is imported on its first lookup, then kept on the package."""
    table = dict(exports)

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        # kept on the package, so the next lookup is a plain attribute and never comes back here
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
