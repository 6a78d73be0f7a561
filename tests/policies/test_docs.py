"""The runnable examples in darwin.policies' docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "darwin.policies",
    "darwin.policies.base",
    "darwin.policies.batcher",
    "darwin.policies.hf",
    "darwin.policies.litellm",
]


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
    assert result.attempted > 0, f"{name} has no docstring examples"
