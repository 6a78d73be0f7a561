import numpy as np
import pytest
from pydantic import ValidationError

from darwin.actions import Wait
from darwin.types import (
    Decision,
    Observation,
    ParseError,
    Task,
    Termination,
    TerminationReason,
    VerifierSpec,
)


def test_infra_truncation_requires_a_cause():
    with pytest.raises(ValueError, match="needs a cause"):
        Termination(TerminationReason.INFRA_TRUNCATED)
    t = Termination(TerminationReason.INFRA_TRUNCATED, "disconnect")
    assert t.truncated
    assert not Termination(TerminationReason.SUCCESS).truncated


def test_decision_holds_exactly_one_of_action_or_parse_error():
    Decision(action=Wait())
    Decision(action=None, parse_error=ParseError(reason="no action"))
    with pytest.raises(ValueError):
        Decision(action=None)
    with pytest.raises(ValueError):
        Decision(action=Wait(), parse_error=ParseError(reason="x"))


def test_parse_error_truncates_text():
    assert len(ParseError(reason="r", text="x" * 10_000).text) == 500


def test_observation_validates_screenshot():
    Observation(screenshot=np.zeros((4, 2, 3), np.uint8), goal="g", device_size=(1080, 2400))
    with pytest.raises(ValueError, match="uint8"):
        Observation(screenshot=np.zeros((4, 2, 3), np.float32), goal="g", device_size=(1080, 2400))


def test_task_fields_are_validated():
    spec = VerifierSpec(predicate="settings.dark_theme")
    with pytest.raises(ValidationError, match="instruction"):
        Task(id="t", instruction="", app="Settings", verifier=spec)
    with pytest.raises(ValidationError, match="id"):
        Task(id="has space", instruction="x", app="Settings", verifier=spec)
    with pytest.raises(ValidationError, match="step_budget"):
        Task(id="t", instruction="x", app="Settings", verifier=spec, step_budget=0)
    task = Task(id="t", instruction="  x ", app="Settings", verifier=spec)
    assert task.instruction == "x"
    assert Task.model_validate_json(task.model_dump_json()) == task
