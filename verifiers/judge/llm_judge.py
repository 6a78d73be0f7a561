"""An LLM judge (the paper's outcome verifier on SPA-Bench): any model through LiteLLM.

The judge reads the task's goal and screenshots of the episode and answers whether the task
was completed. It needs no phone state, so it gives a reward on real and cloud phones where
no rule predicate can be evaluated. Its inputs are the paper's configurations (Appendix B,
Table 3), as typed options of :class:`LLMJudgeConfig` (or a named :data:`PRESETS` entry):

- ``inputs="final_state"``: the goal and the screen at the end of the phase;
- ``inputs="trajectory"``: the screens before every step (up to ``max_images``) plus the
  final one, and the list of actions;
- ``marked_interactions``: taps, long presses, swipe/drag arrows and typed text drawn on
  the step screenshots (:mod:`darwin.verifiers.marks`);
- ``purpose_analysis``: the judge first states what the task asks for and which end state
  would prove it done;
- ``execution_summary``: the judge first summarises what the agent did, step by step;
- ``show_reasoning``: the agent's own words (its model output) beside each step; off by
  default (AndroidWorld-Generalization's choice: a judge that reads an agent's claims
  believes them).

Prompts are in English or Chinese, by ``Task.language``. The judge answers in JSON (a reason
and ``yes``/``no``), parsed robustly (:func:`parse_answer`: JSON, ``Answer: yes``, 是/否);
``samples > 1`` asks several times and takes the strict majority. A task whose verifier is
``judge.goal`` (:class:`~darwin.predicates.JudgedGoalParams`: a goal in words, such as a
model-described hindsight task) is judged on the spec's goal with the spec's ``samples``.

Failure behaviour (never a silent 0 or 1):

- transient errors (timeouts, connection errors, HTTP 429/5xx) are retried with backoff
  (``llm.max_attempts``, tenacity); once exhausted the verdict is **unverified**
  (``success=None``) with the cause, as is an answer that says neither yes nor no, or a
  split vote;
- a rejected key (HTTP 401/403) or a missing key raises
  :class:`~darwin.policies.litellm.PolicyAuthError` out of :meth:`LLMJudge.verify`, naming
  the variable to set: a run or a ``darwin judge`` command stops at once instead of scoring
  every episode as unverified.

Every verdict carries its cost (:class:`~darwin.types.VerdictUsage`: tokens, US
dollars from LiteLLM's bundled price map, ``None`` for unpriced models unless
``input_cost_per_mtok``/``output_cost_per_mtok`` are set) and the judge's settings; the
rollout engine stores both with the verdict. Answers are cached by the exact request (model
settings, text, image bytes, sample index), in memory and optionally in ``cache_file``.
Keys come only from the environment (``llm.api_key_env`` or the provider's standard
variable) and never reach configs, logs or the run database.

    >>> judge = LLMJudge(preset="marked", llm={"model": "openai/my-judge", "api_base": "http://127.0.0.1:8000/v1"})
    >>> judge.config.inputs, judge.config.marked_interactions, judge.cheap
    ('trajectory', True, False)
    >>> parse_answer('{"reason": "the alarm is set", "answer": "yes"}')
    (True, 'the alarm is set')
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from darwin.actions import (
    Action,
    Answer,
    Click,
    Drag,
    Finished,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
    Type,
    Wait,
)
from darwin.json_replies import json_values
from darwin.policies.litellm import (
    Completion,
    LiteLLMPolicy,
    LiteLLMPolicyConfig,
    PolicyAuthError,
    PolicyRequestError,
    _litellm,
)
from darwin.predicates import JUDGED_GOAL, JudgedGoalParams, resolve
from darwin.problems import validation_summary
from darwin.task_registry import goal_text
from darwin.types import ACTOR, ChatMessage, Prompt, Verdict, VerdictUsage
from darwin.verifiers.base import VerificationRequest, Verifier
from darwin.verifiers.marks import draw_action

logger = logging.getLogger(__name__)

__all__ = [
    "PAPER_TABLE3",
    "PRESETS",
    "JudgeCase",
    "JudgeConfigError",
    "JudgeStep",
    "LLMJudge",
    "LLMJudgeConfig",
    "build_prompt",
    "config_fingerprint",
    "parse_answer",
]

Language = Literal["ENG", "CHN"]

PRESETS: dict[str, dict[str, Any]] = {
    "final_state": {
        "inputs": "final_state",
        "marked_interactions": False,
        "purpose_analysis": False,
        "execution_summary": False,
    },
    "trajectory": {
        "inputs": "trajectory",
        "marked_interactions": False,
        "purpose_analysis": False,
        "execution_summary": False,
    },
    "marked": {
        "inputs": "trajectory",
        "marked_interactions": True,
        "purpose_analysis": False,
        "execution_summary": False,
    },
    "purpose": {
        "inputs": "trajectory",
        "marked_interactions": False,
        "purpose_analysis": True,
        "execution_summary": False,
    },
    "summary": {
        "inputs": "trajectory",
        "marked_interactions": False,
        "purpose_analysis": False,
        "execution_summary": True,
    },
    "marked_summary": {
        "inputs": "trajectory",
        "marked_interactions": True,
        "purpose_analysis": False,
        "execution_summary": True,
    },
    "all": {"inputs": "trajectory", "marked_interactions": True, "purpose_analysis": True, "execution_summary": True},
}
"""The paper's seven judge input configurations (Table 3), by name."""

PAPER_TABLE3: dict[str, tuple[float, float]] = {
    "final_state": (0.78, 0.70),
    "trajectory": (0.87, 0.82),
    "marked": (0.91, 0.83),
    "purpose": (0.88, 0.80),
    "summary": (0.90, 0.82),
    "marked_summary": (0.87, 0.85),
    "all": (0.89, 0.80),
}
"""F1 (English, Chinese) of each preset with gemini-2.5-flash on 296 human-labelled
SPA-Bench trajectories, as the paper reports them (Appendix B, Table 3)."""


class JudgeConfigError(ValueError):
    """A judge configuration that cannot work; the message names the setting and the fix."""


def _default_llm() -> LiteLLMPolicyConfig:
    return LiteLLMPolicyConfig(model="gemini/gemini-2.5-flash", max_tokens=1024)


class LLMJudgeConfig(BaseModel):
    """What the judge sees and how it asks (validated when built; frozen; holds no secrets).

    ``llm`` holds the model settings: the LiteLLM model name, ``api_base`` for a local
    vLLM/OpenAI-compatible server, ``api_key_env`` (the *name* of the key's variable),
    ``timeout_s`` and ``max_attempts`` (per request), backoff, and ``max_concurrency`` (the
    judge's requests in flight at once).

    >>> LLMJudgeConfig.preset("final_state").inputs
    'final_state'
    >>> LLMJudgeConfig(inputs="final_state")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: 1 validation error for LLMJudgeConfig
    ...marked_interactions needs inputs='trajectory'...
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    llm: LiteLLMPolicyConfig = Field(
        default_factory=_default_llm, description="the judge model (default: the paper's gemini-2.5-flash)"
    )
    inputs: Literal["final_state", "trajectory"] = Field(
        default="trajectory", description="the final screen only, or every step's screen and action"
    )
    marked_interactions: bool = Field(
        default=True, description="draw taps, swipes, drags and typed text on the step screenshots"
    )
    purpose_analysis: bool = Field(
        default=False, description="the judge first states what the task asks for and which end state proves it"
    )
    execution_summary: bool = Field(
        default=False, description="the judge first summarises what the agent did, step by step"
    )
    show_reasoning: bool = Field(
        default=False, description="show the agent's own words (its model output) beside each step"
    )
    samples: int = Field(default=1, ge=1, le=15, description="answers per verdict; the strict majority decides")
    max_images: int = Field(
        default=8,
        ge=1,
        le=64,
        description="screenshots per request, the final screen included (the latest steps are kept)",
    )
    max_side: int = Field(
        default=768, ge=64, le=4096, description="longest side of a screenshot sent, in pixels (never upscaled)"
    )
    reasoning_chars: int = Field(
        default=400, ge=16, le=20_000, description="longest agent output shown per step (with show_reasoning)"
    )
    cache: bool = Field(default=True, description="reuse the answer to an identical request")
    cache_file: str | None = Field(default=None, description="JSON-lines file that keeps cached answers between runs")
    check_model: bool = Field(
        default=True, description="without api_base: fail at once if LiteLLM does not know the model"
    )
    input_cost_per_mtok: float | None = Field(
        default=None, ge=0.0, description="USD per million prompt tokens, for models LiteLLM has no price for"
    )
    output_cost_per_mtok: float | None = Field(
        default=None, ge=0.0, description="USD per million completion tokens, for models LiteLLM has no price for"
    )

    @model_validator(mode="after")
    def _check(self) -> LLMJudgeConfig:
        if self.inputs == "final_state" and self.marked_interactions:
            raise ValueError(
                "marked_interactions needs inputs='trajectory' (the final screen shows no action); "
                "set marked_interactions=False or use the preset 'final_state'"
            )
        if self.inputs == "final_state" and self.execution_summary:
            raise ValueError(
                "execution_summary needs inputs='trajectory' (there is no execution to summarise in one screen)"
            )
        if (self.input_cost_per_mtok is None) != (self.output_cost_per_mtok is None):
            raise ValueError("set both input_cost_per_mtok and output_cost_per_mtok, or neither")
        return self

    @classmethod
    def preset(cls, name: str, **fields: Any) -> LLMJudgeConfig:
        """The named input configuration of :data:`PRESETS`, with ``fields`` on top."""
        if name not in PRESETS:
            close = difflib.get_close_matches(name, PRESETS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise JudgeConfigError(f"judge preset {name!r} is not one of {sorted(PRESETS)}{hint}")
        return cls.model_validate({**PRESETS[name], **fields})

    def preset_name(self) -> str | None:
        """The :data:`PRESETS` name whose input options this config has, if any."""
        mine = {k: getattr(self, k) for k in ("inputs", "marked_interactions", "purpose_analysis", "execution_summary")}
        return next((name for name, options in PRESETS.items() if options == mine), None)


_VOLATILE_LLM = {"api_key_env", "timeout_s", "max_attempts", "backoff_initial_s", "backoff_max_s", "max_concurrency"}
_VOLATILE = {"cache", "cache_file", "check_model"}


def config_fingerprint(config: LLMJudgeConfig) -> str:
    """A short hash of everything that changes the judge's answers (model, prompt options,
    image budget), not of timeouts, retries, concurrency or caching.

    >>> config_fingerprint(LLMJudgeConfig()) == config_fingerprint(LLMJudgeConfig(cache=False))
    True
    """
    data = config.model_dump(mode="json", exclude=_VOLATILE)
    data["llm"] = {k: v for k, v in data["llm"].items() if k not in _VOLATILE_LLM}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- what the judge reads


@dataclass(frozen=True)
class JudgeStep:
    """One step of the agent as the judge sees it: the screen before the action, the action
    (``None`` for unparseable output), the phone's size (action coordinates are device
    pixels) and the agent's own words (shown only with ``show_reasoning``)."""

    screenshot: np.ndarray | None
    action: Action | None
    device_size: tuple[int, int]
    reasoning: str | None = None


@dataclass(frozen=True)
class JudgeCase:
    """One phase to judge: the goal, its language, the steps and the final screen.

    Built from a :class:`~darwin.verifiers.base.VerificationRequest` during a run
    (:meth:`from_request`) or from a run database or a labelled folder
    (:mod:`darwin.verifiers.judge.calibration`). ``answer`` is the agent's answer to an information task.
    """

    goal: str
    language: Language
    steps: Sequence[JudgeStep]
    final_screenshot: np.ndarray | None
    answer: str | None = None

    @classmethod
    def from_request(cls, request: VerificationRequest) -> JudgeCase:
        """The actor's steps of the request's phase, its final screen, and its answer."""
        steps = [
            JudgeStep(
                screenshot=t.observation.screenshot,
                action=t.decision.action,
                device_size=t.observation.device_size,
                reasoning=None if t.decision.generation is None else t.decision.generation.text,
            )
            for t in request.transitions
            if t.agent == ACTOR and t.phase == request.phase
        ]
        return cls(
            goal=goal_text(request.task, request.instruction),
            language=request.task.language,
            steps=steps,
            final_screenshot=request.final_screenshot,
            answer=final_answer([s.action for s in steps]),
        )


def final_answer(actions: Sequence[Action | None]) -> str | None:
    """The content of the last ``answer`` action, if any."""
    for action in reversed(actions):
        if isinstance(action, Answer):
            return action.content
    return None


# --------------------------------------------------------------------------- prompts

_TEXT: dict[str, dict[str, str]] = {
    "ENG": {
        "system": (
            "You evaluate mobile phone agents. An agent was given a task on an Android phone and acted "
            "on its screen. Decide from the evidence whether the agent completed the task. The task is "
            "complete only if the phone's final state (or the agent's answer, for a question) fulfils "
            "every requirement of the task; partial progress is not completion. Judge what the screens "
            "show, not what the agent claims."
        ),
        "task": "Task: {goal}",
        "answer": "The agent's answer: {answer}",
        "final_only": "Image 1 is the phone's screen at the end of the episode.",
        "no_steps": "The agent took no action. Image 1 is the phone's screen at the end of the episode.",
        "trajectory": "The agent took {n} step(s). Images 1 to {k} are the screens before steps {first} to {n}, in order; image {final} is the screen at the end.",
        "omitted": "(Screens before steps 1 to {last} are left out; their actions are listed.)",
        "marks": (
            "Each step's screenshot shows the action taken on it: a red dot is a tap, a magenta dot "
            "with a ring a long press, a blue arrow a swipe (from its dot to its head), a green arrow "
            "a drag, and a black band at the bottom the text typed."
        ),
        "steps": "Steps:",
        "reasoning": "   the agent's words: {text}",
        "on_image": " (image {i})",
        "marked_on": ", marked on image {i}",
        "format": "Reply with one JSON object and nothing else, with these fields in this order:",
        "purpose": '"purpose": what the task asks for and which final state would prove it done',
        "summary": '"summary": what the agent did, step by step, and where it ended',
        "reason": '"reason": one or two sentences on why the task is or is not complete',
        "verdict": '"answer": "yes" if the task is complete, else "no"',
    },
    "CHN": {
        "system": (
            "你负责评估手机智能体。一个智能体在安卓手机上接到一个任务,并在屏幕上进行了操作。请根据证据判断它是否完成了任务。"
            "只有当手机的最终状态(若任务是提问,则是智能体的回答)满足任务的全部要求时,任务才算完成;部分进展不算完成。"
            "请依据截图所显示的内容判断,而不是智能体的说法。"
        ),
        "task": "任务:{goal}",
        "answer": "智能体的回答:{answer}",
        "final_only": "图 1 是本轮结束时手机的屏幕。",
        "no_steps": "智能体没有执行任何操作。图 1 是本轮结束时手机的屏幕。",
        "trajectory": "智能体共执行了 {n} 步。图 1 到图 {k} 依次是第 {first} 步到第 {n} 步操作之前的屏幕;图 {final} 是结束时的屏幕。",
        "omitted": "(第 1 步到第 {last} 步之前的屏幕已省略;其操作仍列在下面。)",
        "marks": (
            "每一步的截图上标出了该步的操作:红点表示点击,带圆环的品红色点表示长按,蓝色箭头表示滑动(从圆点到箭头),"
            "绿色箭头表示拖动,底部黑色横条中是输入的文字。"
        ),
        "steps": "操作步骤:",
        "reasoning": "   智能体的说明:{text}",
        "on_image": "(图 {i})",
        "marked_on": ",标在图 {i} 上",
        "format": "只回复一个 JSON 对象,不要其他内容,依次包含以下字段:",
        "purpose": '"purpose":任务要求什么,以及怎样的最终状态能证明任务已完成',
        "summary": '"summary":智能体逐步做了什么,最后停在哪里',
        "reason": '"reason":用一两句话说明任务为何完成或未完成',
        "verdict": '"answer":任务完成则为 "yes",否则为 "no"',
    },
}


def describe_action(action: Action | None, language: Language = "ENG") -> str:
    """One action in words for the judge (where it touched is drawn, never given as numbers).

    >>> from darwin.actions import Scroll, Type
    >>> describe_action(Type(content="milk"))
    'type "milk"'
    >>> describe_action(Scroll(x=1, y=2, direction="down"), "CHN")
    '向下滚动'
    """
    zh = language == "CHN"
    if action is None:
        return "输出无法解析(未执行操作)" if zh else "unparseable output (no action)"
    if isinstance(action, Click):
        return "点击" if zh else "tap"
    if isinstance(action, LongPress):
        return "长按" if zh else "long press"
    if isinstance(action, Scroll):
        names = {"up": "向上", "down": "向下", "left": "向左", "right": "向右"}
        return f"{names[action.direction.value]}滚动" if zh else f"scroll {action.direction.value}"
    if isinstance(action, Drag):
        return "拖动" if zh else "drag"
    if isinstance(action, Type):
        return f'输入 "{action.content}"' if zh else f'type "{action.content}"'
    if isinstance(action, OpenApp):
        return f"打开应用 {action.app}" if zh else f"open app {action.app}"
    if isinstance(action, PressHome):
        return "回到主屏幕" if zh else "press home"
    if isinstance(action, PressBack):
        return "返回" if zh else "press back"
    if isinstance(action, Wait):
        return "等待" if zh else "wait"
    if isinstance(action, Finished):
        return "宣布完成" if zh else "declare the task finished"
    if isinstance(action, Answer):
        return f'回答 "{action.content}"' if zh else f'answer "{action.content}"'
    return action.type


def fit_image(image: np.ndarray, max_side: int) -> np.ndarray:
    """``image`` scaled down (aspect kept) so its longest side is at most ``max_side``.

    >>> fit_image(np.zeros((2400, 1080, 3), np.uint8), 768).shape
    (768, 346, 3)
    """
    h, w = image.shape[:2]
    if max(h, w) <= max_side:
        return image
    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS), dtype=np.uint8)


def build_prompt(case: JudgeCase, config: LLMJudgeConfig) -> Prompt:
    """The judge's request for ``case``: a system message and one user message whose images
    (the chosen step screens, marked if asked, then the final screen) precede the text.

    Raises ``ValueError`` when the case has no final screen.
    """
    if case.final_screenshot is None:
        raise ValueError("no final screen to judge")
    t = _TEXT[case.language]
    lines = [t["task"].format(goal=case.goal)]
    if case.answer is not None:
        lines.append(t["answer"].format(answer=case.answer))
    images: list[np.ndarray] = []
    final = fit_image(case.final_screenshot, config.max_side)
    if config.inputs == "final_state" or not case.steps:
        lines.append(t["final_only"] if config.inputs == "final_state" else t["no_steps"])
    else:
        n = len(case.steps)
        with_shot = [i for i, s in enumerate(case.steps) if s.screenshot is not None]
        shown = with_shot[len(with_shot) - min(len(with_shot), config.max_images - 1) :]
        image_of: dict[int, int] = {}
        for i in shown:
            step = case.steps[i]
            assert step.screenshot is not None
            shot = fit_image(step.screenshot, config.max_side)
            if config.marked_interactions:
                shot = draw_action(shot, step.action, step.device_size)
            images.append(shot)
            image_of[i] = len(images)
        if shown:
            lines.append(t["trajectory"].format(n=n, k=len(shown), first=shown[0] + 1, final=len(shown) + 1))
            if shown[0] > 0:
                lines.append(t["omitted"].format(last=shown[0]))
        else:  # steps without stored screens: their actions only
            lines.append(t["final_only"])
        if config.marked_interactions and shown:
            lines.append(t["marks"])
        lines.append(t["steps"])
        for i, step in enumerate(case.steps):
            marked = config.marked_interactions and isinstance(step.action, (Click, LongPress, Scroll, Drag, Type))
            where = "" if i not in image_of else t["marked_on" if marked else "on_image"].format(i=image_of[i])
            lines.append(f"{i + 1}. {describe_action(step.action, case.language)}{where}")
            if config.show_reasoning and step.reasoning:
                words = " ".join(step.reasoning.split())[: config.reasoning_chars]
                lines.append(t["reasoning"].format(text=words))
    images.append(final)
    lines.append(t["format"])
    if config.purpose_analysis:
        lines.append(f"- {t['purpose']}")
    if config.execution_summary:
        lines.append(f"- {t['summary']}")
    lines += [f"- {t['reason']}", f"- {t['verdict']}"]
    return Prompt(
        messages=(
            ChatMessage(role="system", text=t["system"]),
            ChatMessage(role="user", text="\n".join(lines), images=tuple(images)),
        )
    )


# --------------------------------------------------------------------------- answers

_YES = {"yes", "y", "true", "1", "complete", "completed", "success", "successful", "是", "对", "完成", "已完成", "成功"}
_NO = {
    "no",
    "n",
    "false",
    "0",
    "incomplete",
    "not complete",
    "failure",
    "failed",
    "fail",
    "否",
    "不",
    "未完成",
    "没有完成",
    "失败",
}
_ANSWER_KEYS = ("answer", "verdict", "complete", "completed", "success", "result", "答案", "结论", "结果")
_REASON_KEYS = ("reason", "reasoning", "explanation", "理由", "原因")
_LABELLED = re.compile(
    r"(?:final\s+answer|answer|verdict|complete[d]?|答案|结论|结果)\s*\**\s*[:=:]\s*\**\s*[\"']?"
    r"(yes|no|true|false|是|否|完成|未完成)",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^\W*(?:(yes|no)\b|(是|否))", re.IGNORECASE)
_REASON_LINE = re.compile(r"(?:reason|理由|原因)\s*\**\s*[:=:]\s*(.+)", re.IGNORECASE)


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        v = value.strip(" \t\n\"'.。!!*").lower()  # noqa: B005 - a set of characters, meant
        if v in _YES:
            return True
        if v in _NO:
            return False
    return None


def parse_answer(text: str) -> tuple[bool | None, str]:
    """``(complete, reason)`` from a judge's reply; ``complete`` is ``None`` when the reply
    says neither yes nor no.

    Reads, in order: a JSON object with an ``answer`` (or ``verdict``, ``success``, ``答案``)
    field; a labelled line such as ``Answer: yes`` or ``答案:否`` (the last one wins); a
    reply that starts with yes/no/是/否.

    >>> parse_answer("```json\\n{\\"reason\\": \\"闹钟已设置\\", \\"answer\\": \\"是\\"}\\n```")
    (True, '闹钟已设置')
    >>> parse_answer("The list is empty.\\nAnswer: **No**")
    (False, 'The list is empty. Answer: **No**')
    >>> parse_answer("I cannot tell.")
    (None, 'I cannot tell.')
    """
    for obj in reversed([v for v in json_values(text) if isinstance(v, dict)]):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        verdict = next((_as_bool(lowered[k]) for k in _ANSWER_KEYS if k in lowered), None)
        if verdict is not None:
            reason = next((str(lowered[k]) for k in _REASON_KEYS if k in lowered and lowered[k]), "")
            return verdict, " ".join(reason.split()) or _squash(text)
    labelled = _LABELLED.findall(text)
    verdict = _as_bool(labelled[-1]) if labelled else None
    if verdict is None:
        leading = _LEADING.match(text.strip())
        verdict = _as_bool(leading.group(1) or leading.group(2)) if leading else None
    reason_line = _REASON_LINE.search(text)
    reason = reason_line.group(1) if reason_line else text
    return verdict, _squash(reason)


def _squash(text: str, limit: int = 1000) -> str:
    return " ".join(text.split())[:limit]


# --------------------------------------------------------------------------- the judge


class _AnswerCache:
    """Answers by request key, in memory and optionally appended to a JSON-lines file."""

    def __init__(self, path: str | None) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._answers: dict[str, Completion] = {}
        if self.path is not None and self.path.is_file():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                try:
                    row = json.loads(line)
                    self._answers[row["key"]] = Completion(
                        row["text"], row.get("prompt_tokens"), row.get("completion_tokens"), row.get("cost_usd")
                    )
                except (json.JSONDecodeError, KeyError, TypeError):
                    logger.warning("judge cache %s: line %d is not a cached answer; ignored", self.path, n)

    def get(self, key: str) -> Completion | None:
        with self._lock:
            return self._answers.get(key)

    def put(self, key: str, answer: Completion) -> None:
        with self._lock:
            self._answers[key] = answer
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                row = {
                    "key": key,
                    "text": answer.text,
                    "prompt_tokens": answer.prompt_tokens,
                    "completion_tokens": answer.completion_tokens,
                    "cost_usd": answer.cost_usd,
                }
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")


class LLMJudge(Verifier):
    """Judges a phase from its goal and screenshots with an LLM (see the module docs).

    Args:
        config: an :class:`LLMJudgeConfig` (or its fields as a dict); or leave it out and
            pass ``preset`` (a :data:`PRESETS` name) and/or the config's fields as keywords,
            as an experiment's ``ComponentSpec(name="llm_judge", kwargs={...})`` does.
        policy: the LiteLLM policy to ask (default: one built from ``config.llm``).

    Raises :class:`JudgeConfigError` for a bad configuration, or (without ``api_base`` and
    with ``check_model``) a model name LiteLLM does not know.
    """

    kind = "llm_judge"

    def __init__(
        self,
        config: LLMJudgeConfig | Mapping[str, Any] | None = None,
        *,
        preset: str | None = None,
        policy: LiteLLMPolicy | None = None,
        **fields: Any,
    ) -> None:
        self.config = self._checked_config(config, preset, fields)
        self.policy = policy or LiteLLMPolicy(self.config.llm)
        self._cache = _AnswerCache(self.config.cache_file) if self.config.cache else None
        self._fingerprint = config_fingerprint(self.config)

    @staticmethod
    def _checked_config(
        config: LLMJudgeConfig | Mapping[str, Any] | None, preset: str | None, fields: Mapping[str, Any]
    ) -> LLMJudgeConfig:
        if isinstance(config, LLMJudgeConfig):
            if preset is not None or fields:
                raise JudgeConfigError("pass either an LLMJudgeConfig or preset/fields, not both")
            checked = config
        else:
            data = {**(PRESETS.get(preset, {}) if preset else {}), **dict(config or {}), **fields}
            if preset is not None and preset not in PRESETS:
                LLMJudgeConfig.preset(preset)  # raises with a did-you-mean
            try:
                checked = LLMJudgeConfig.model_validate(data)
            except ValidationError as exc:
                problems = validation_summary(exc)
                raise JudgeConfigError(f"invalid llm_judge config: {problems}") from None
        if checked.check_model and checked.llm.api_base is None:
            check_model_name(checked.llm.model)
        return checked

    @classmethod
    def check_arguments(
        cls,
        config: LLMJudgeConfig | Mapping[str, Any] | None = None,
        *,
        preset: str | None = None,
        policy: LiteLLMPolicy | None = None,
        **fields: Any,
    ) -> None:
        """The judge's settings, with no model reached and no cache read (``darwin run --dry-run``)."""
        cls._checked_config(config, preset, fields)

    @property
    def cheap(self) -> bool:
        return False

    def describe(self) -> dict[str, Any]:
        """The judge's settings as JSON (stored with every verdict; key names only, no keys)."""
        return {
            "kind": self.kind,
            "preset": self.config.preset_name(),
            "fingerprint": self._fingerprint,
            **self.config.model_dump(mode="json"),
        }

    def preflight(self) -> None:
        """Fail now, naming the variable to set, if the judge's API key is missing.

        With ``llm.api_key_env`` that variable must be set; without it and without
        ``api_base``, LiteLLM's list of the provider's key variables is checked (a local
        server named by ``api_base`` may need no key). Raises
        :class:`~darwin.policies.litellm.PolicyAuthError`.
        """
        LiteLLMPolicy(self.config.llm).check_credentials()

    async def verify(self, request: VerificationRequest) -> Verdict:
        """The verdict on the request's phase (see the module docs for failures); a
        ``judge.goal`` spec's goal and ``samples`` replace the instruction and ``config.samples``."""
        case = JudgeCase.from_request(request)
        if request.spec.predicate != JUDGED_GOAL:
            return await self.judge(case)
        _, params = resolve(request.spec, request.task.id)
        assert isinstance(params, JudgedGoalParams)
        goal = goal_text(request.task, params.goal)
        return await self.judge(dataclasses.replace(case, goal=goal), samples=params.samples)

    async def judge(self, case: JudgeCase, samples: int | None = None) -> Verdict:
        """The verdict on ``case`` by the strict majority of ``samples`` answers (``None``:
        ``config.samples``); unverified (``success=None``) with the cause when the model cannot
        be reached after its retries or gives no clear answer."""
        n = self.config.samples if samples is None else samples
        if not 1 <= n <= 15:
            raise JudgeConfigError(f"samples must be 1 to 15, got {n}")
        usage = VerdictUsage(config={**self.describe(), "samples": n})
        if case.final_screenshot is None:
            return Verdict(success=None, reason="unverified: no final screen to judge", usage=usage)
        prompt = build_prompt(case, self.config)
        keys = [self._key(prompt, i) for i in range(n)]
        answers: list[Completion | None] = [self._cache.get(k) if self._cache else None for k in keys]
        usage = VerdictUsage(cached=sum(a is not None for a in answers), config=usage.config)
        missing = [i for i, a in enumerate(answers) if a is None]
        if missing:
            try:
                fresh = await self.policy.complete([prompt] * len(missing))
            except PolicyAuthError:
                raise
            except PolicyRequestError as exc:
                usage = VerdictUsage(requests=len(missing), cached=usage.cached, config=usage.config)
                logger.warning("judge request failed: %s", exc)
                return Verdict(success=None, reason=f"unverified: the judge could not be reached ({exc})", usage=usage)
            for i, answer in zip(missing, fresh, strict=True):
                answers[i] = answer
                if self._cache is not None:
                    self._cache.put(keys[i], answer)
            usage = self._usage([fresh_answer for fresh_answer in fresh], usage)
        return self._decide([a for a in answers if a is not None], usage, n)

    def _usage(self, fresh: Sequence[Completion], base: VerdictUsage) -> VerdictUsage:
        prompt_tokens = sum(a.prompt_tokens or 0 for a in fresh)
        completion_tokens = sum(a.completion_tokens or 0 for a in fresh)
        cfg = self.config
        if cfg.input_cost_per_mtok is not None and cfg.output_cost_per_mtok is not None:
            cost: float | None = (
                prompt_tokens * cfg.input_cost_per_mtok + completion_tokens * cfg.output_cost_per_mtok
            ) / 1e6
        else:
            priced = [a.cost_usd for a in fresh if a.cost_usd is not None]
            cost = sum(priced) if priced else None
        return VerdictUsage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            requests=len(fresh),
            cached=base.cached,
            config=base.config,
        )

    def _decide(self, answers: Sequence[Completion], usage: VerdictUsage, n: int) -> Verdict:
        parsed = [parse_answer(a.text) for a in answers]
        yes = [r for ok, r in parsed if ok is True]
        no = [r for ok, r in parsed if ok is False]
        if len(yes) * 2 > n:
            return Verdict(success=True, reason=_votes(yes[0], len(yes), n), usage=usage)
        if len(no) * 2 > n:
            return Verdict(success=False, reason=_votes(no[0], len(no), n), usage=usage)
        if n == 1:
            return Verdict(
                success=None,
                reason=f"unverified: the judge's answer says neither yes nor no: {_squash(answers[0].text, 300)!r}",
                usage=usage,
            )
        return Verdict(
            success=None,
            reason=f"unverified: no majority ({len(yes)} yes, {len(no)} no, {n - len(yes) - len(no)} unclear of {n})",
            usage=usage,
        )

    def _key(self, prompt: Prompt, sample: int) -> str:
        h = hashlib.sha256()
        h.update(self._fingerprint.encode())
        h.update(f"|sample={sample}".encode())
        for message in prompt.messages:
            h.update(f"|{message.role}|{len(message.text)}|".encode())
            h.update(message.text.encode())
            for image in message.images:
                h.update(f"|img{image.shape}|".encode())
                h.update(np.ascontiguousarray(image).tobytes())
        return h.hexdigest()


def _votes(reason: str, votes: int, n: int) -> str:
    return reason if n == 1 else f"{reason} ({votes} of {n} answers agree)"


def check_model_name(model: str, role: str = "judge") -> None:
    """Raise :class:`JudgeConfigError` (with the closest known names and the fix) if
    LiteLLM does not know ``model``: its provider cannot be told, or its price map does not
    list it. Checked only for hosted models (no ``api_base``); ``role`` names the model's job
    in the message (``"judge"``, ``"describer"``)."""
    litellm = _litellm()
    try:
        litellm.get_llm_provider(model)
        litellm.get_model_info(model)
        return
    except Exception:  # noqa: BLE001 - LiteLLM raises several kinds; all mean "unknown"
        pass
    close = difflib.get_close_matches(model, list(litellm.model_cost), n=3, cutoff=0.75)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise JudgeConfigError(
        f"{role} model {model!r} is not known to LiteLLM{hint}. Fix: use a LiteLLM model name such as "
        "'gemini/gemini-2.5-flash' or 'gpt-4o-mini' (https://docs.litellm.ai/docs/providers); for a "
        "self-hosted OpenAI-compatible server pass api_base and the model as 'openai/<served-name>'; "
        "for a hosted model LiteLLM's price map does not list yet set check_model=False"
    )
