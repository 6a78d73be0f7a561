"""Composite verifiers: rule where the phone has a state, a judge elsewhere; audits; consensus."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from darwin.agents.scripted import OracleActor
from darwin.components import ComponentSpec, build_component
from darwin.envs.sim.env import SimPhoneEnv
from darwin.evaluate import evaluate
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import Phase, Verdict, VerdictUsage
from darwin.verifiers.base import VerificationRequest, Verifier, as_verifier
from darwin.verifiers.composite import CompositeVerifier
from darwin.verifiers.judge.llm_judge import LLMJudge
from darwin.verifiers.rule import RuleVerifier
from darwin.workflows.step import LifecycleWorkflow, StepConfig

TASK = get_task("amazon_0")


def request(state: dict | None, screen: np.ndarray | None = None) -> VerificationRequest:
    return VerificationRequest(
        task=TASK,
        phase=Phase.EXECUTION,
        instruction=TASK.instruction,
        spec=TASK.verifier,
        transitions=[],
        final_state=state,
        final_screenshot=screen if screen is not None else np.zeros((40, 20, 3), np.uint8),
    )


def fixed(success: bool | None, kind: str, cost: float | None = None) -> Verifier:
    usage = None if cost is None else VerdictUsage(prompt_tokens=10, completion_tokens=5, cost_usd=cost, requests=1)
    return as_verifier(lambda r: Verdict(success=success, reason=f"{kind} says so", usage=usage), kind=kind)


def judge_spec(server, **kwargs) -> dict:
    return {"name": "llm_judge", "kwargs": {"preset": "final_state", "llm": server.litellm_config(), **kwargs}}


def test_fallback_uses_the_rule_where_the_phone_has_a_state_and_the_judge_elsewhere(openai_server):
    openai_server.reply = lambda body: '{"reason": "looks done", "answer": "yes"}'
    both = build_component(
        "verifier", ComponentSpec(name="composite", kwargs={"verifiers": ["rule", judge_spec(openai_server)]})
    )
    assert isinstance(both, CompositeVerifier) and isinstance(both.verifiers[1], LLMJudge)
    assert not both.cheap and both.reads_screen
    state = SimPhoneEnv(seed=0).probe_state()
    on_sim = asyncio.run(both.verify(request(state)))
    assert on_sim.success is False and on_sim.reason.startswith("[rule]") and openai_server.requests == []
    on_real_phone = asyncio.run(both.verify(request(None)))
    assert on_real_phone.success is True and on_real_phone.reason == "[llm_judge] looks done"
    assert len(openai_server.requests) == 1 and on_real_phone.usage.requests == 1
    assert both.stats.decided_by == {"rule": 1, "llm_judge": 1}


def test_fallback_is_unverified_only_when_every_verifier_is():
    both = CompositeVerifier([fixed(None, "a"), fixed(None, "b")])
    verdict = asyncio.run(both.verify(request(None)))
    assert verdict.success is None and "[a] a says so; [b] b says so" in verdict.reason
    assert both.stats.unverified == 1


def test_audit_keeps_the_first_verdict_and_logs_and_counts_disagreements(caplog):
    caplog.set_level(logging.WARNING)
    audit = CompositeVerifier([fixed(True, "rule"), fixed(False, "judge", cost=0.002)], mode="audit")
    verdict = asyncio.run(audit.verify(request(None)))
    assert verdict.success is True and verdict.reward == 1.0
    assert "disagreement" in verdict.reason and "judge: no (judge says so)" in verdict.reason
    assert verdict.usage.cost_usd == pytest.approx(0.002)
    assert "verifiers disagree: rule=yes; judge=no" in caplog.text
    asyncio.run(audit.verify(request(None)))
    agree = CompositeVerifier([fixed(True, "rule"), fixed(True, "judge")], mode="audit")
    asyncio.run(agree.verify(request(None)))
    assert (audit.stats.compared, audit.stats.disagreements, audit.stats.agreement) == (2, 2, 0.0)
    assert (agree.stats.compared, agree.stats.disagreements, agree.stats.agreement) == (1, 0, 1.0)


def test_consensus_is_unverified_unless_every_verifier_agrees():
    agree = asyncio.run(
        CompositeVerifier([fixed(False, "a"), fixed(False, "b")], mode="consensus").verify(request(None))
    )
    assert agree.success is False and agree.reason.startswith("all agree")
    split = CompositeVerifier([fixed(True, "a"), fixed(False, "b")], mode="consensus")
    verdict = asyncio.run(split.verify(request(None)))
    assert verdict.success is None and verdict.reward is None and "disagree" in verdict.reason
    undecided = asyncio.run(
        CompositeVerifier([fixed(True, "a"), fixed(None, "b")], mode="consensus").verify(request(None))
    )
    assert undecided.success is None and "not every verifier" in undecided.reason
    assert (split.stats.disagreements, split.stats.unverified) == (1, 1)


class SmallScreen(Verifier):
    """Reads the screen at its own size, like a learned verifier."""

    kind = "small"
    seen: tuple[int, ...] = ()

    @property
    def cheap(self) -> bool:
        return True

    @property
    def reads_screen(self) -> bool:
        return True

    @property
    def screen_size(self) -> tuple[int, int]:
        return (10, 20)

    async def verify(self, request: VerificationRequest) -> Verdict:
        self.seen = request.final_screenshot.shape
        return Verdict(success=True)


def test_each_member_gets_the_screen_at_its_own_size():
    small = SmallScreen()
    both = CompositeVerifier([small, fixed(True, "judge")], mode="audit")
    assert both.screen_size is None  # they differ: the full screen is taken
    asyncio.run(both.verify(request(None, np.zeros((2400, 1080, 3), np.uint8))))
    assert small.seen == (20, 10, 3)
    rules = CompositeVerifier([RuleVerifier(), RuleVerifier()], mode="consensus")
    assert rules.cheap and not rules.reads_screen


def test_bad_compositions_are_refused():
    with pytest.raises(ValueError, match="at least two"):
        CompositeVerifier(["rule"])
    with pytest.raises(ValueError, match="mode"):
        CompositeVerifier(["rule", "rule"], mode="vote")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not built in"):
        CompositeVerifier(["rule", "rulee"])


def test_a_composite_as_a_runs_reward(openai_server, tmp_path):
    """Rule and judge audited side by side during a run: the store keeps the rule's verdict,
    the judge's opinion in the reason, and the judge's tokens."""
    openai_server.reply = lambda body: '{"reason": "not sure it is done", "answer": "no"}'
    audit = CompositeVerifier(
        [RuleVerifier(), LLMJudge(preset="marked", llm=openai_server.litellm_config())], mode="audit"
    )
    store = RunStore.for_run_dir(tmp_path)
    run_id = store.start_run("audit")
    workflow = LifecycleWorkflow(verifier=audit, config=StepConfig(observation_size=(126, 280)))
    report = asyncio.run(evaluate([TASK], [SimPhoneEnv(seed=0)], lambda i: OracleActor(), 1, workflow, store, run_id))
    assert report.trajectories[0].success is True
    (episode,) = store.episodes(run_id)
    (verdict,) = store.verdicts(episode.episode_id)
    assert verdict.verifier_kind == "composite" and verdict.success is True
    assert "disagreement" in verdict.reason and verdict.prompt_tokens == 10
    assert audit.stats.disagreements == 1
    store.close()


def test_requests_pass_through_untouched_when_no_member_needs_another_size():
    seen = []
    both = CompositeVerifier(
        [as_verifier(lambda r: seen.append(r) or Verdict(success=True)), fixed(True, "b")], mode="audit"
    )
    req = request(None)
    asyncio.run(both.verify(req))
    assert seen[0] is req


def test_only_the_first_disagreements_are_warnings(caplog):
    from darwin.verifiers.composite import LOUD_DISAGREEMENTS

    caplog.set_level(logging.INFO)
    audit = CompositeVerifier([fixed(True, "rule"), fixed(False, "judge")], mode="audit")
    for _ in range(LOUD_DISAGREEMENTS + 5):
        asyncio.run(audit.verify(request(None)))
    warned = [
        r for r in caplog.records if r.levelno == logging.WARNING and r.getMessage().startswith("verifiers disagree")
    ]
    quiet = [r for r in caplog.records if r.levelno == logging.INFO and r.getMessage().startswith("verifiers disagree")]
    assert (len(warned), len(quiet)) == (LOUD_DISAGREEMENTS, 5)
    assert "further disagreements are logged at info level" in caplog.text
    assert audit.stats.disagreements == LOUD_DISAGREEMENTS + 5
