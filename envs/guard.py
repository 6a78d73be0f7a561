"""A guard against irreversible actions: purchases, posts, messages and deletions are blocked
before they reach the phone (docs/phones.md, "The action guard").

A phone with persistent state (a real device, a cloud phone) cannot take back an order, a post
or a message; an exploring policy will press whatever it finds. The guard looks at each action
before the phone does and either lets it through or blocks it:

- **Where darwin knows the phone's state** (a SimPhone, in process or served over ADB with its
  state probe), the action is first played on a copy of the phone. It is blocked when the app
  data it changes lies outside the task's ``allowed_changes``, or when it changes a path a
  rule's ``changes`` names. Exact: the state says what the action would do. For a task that
  declares no ``allowed_changes``, an action that changes app data is checked against the
  screen-text rules.
- **Elsewhere** the rules decide: by app (package or name), by the text of the element the action
  targets (the tap's element and the text inside it, read from the screen's view hierarchy:
  ``uiautomator dump`` on an ADB phone) and by action type.

A blocked action raises :class:`ActionBlocked` from the phone's ``execute``: the workflow ends
the episode with termination ``blocked`` and the block's cause, and its last step's reward is
``-penalty`` (training; an evaluation records the episode as a failure with its cause).

    >>> import asyncio
    >>> from darwin.actions import Click
    >>> from darwin.envs.guard import RuleGuard
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.task_registry import get_task
    >>> guard = RuleGuard()
    >>> [rule.name for rule in guard.rules]
    ['payment', 'send', 'post', 'delete', 'transfer']
    >>> env = SimPhoneEnv(seed=0)
    >>> asyncio.run(guard.check(env, get_task("clock_1"), Click(x=540, y=1200))) is None  # a tap on the launcher
    True
"""

from __future__ import annotations

import asyncio
import logging
import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from darwin.actions import Action, Click, LongPress, Type
from darwin.algos.task_metrics import path_allowed, side_effects, state_diff
from darwin.envs.base import PhoneEnv, PhoneWrapper
from darwin.envs.screen_elements import ScreenElement
from darwin.types import Task

logger = logging.getLogger(__name__)

DEFAULT_RULES = Path(__file__).with_name("guard_rules.yaml")
"""The rules the built-in guard uses unless given a file: payments, messages, posts, deletions, transfers."""

ACTION_TYPES: tuple[str, ...] = tuple(
    typing.get_args(cls.model_fields["type"].annotation)[0] for cls in typing.get_args(typing.get_args(Action)[0])
)
"""Every action's ``type`` (``click``, ``long_press``, ``type`` ...), what a rule's ``actions`` names."""


class GuardError(ValueError):
    """A rules file or guard setting that cannot be used; the message names the file and the fix."""


# ----------------------------------------------------------------------------- the target


@dataclass(frozen=True)
class Target:
    """What an action acts on: the app in front and the text of the element it targets."""

    package: str
    text: str


def action_target(elements: Sequence[ScreenElement], action: Action) -> Target | None:
    """The element ``action`` acts on, with the text inside it: for a tap or long press the
    top-most clickable element under the point (else the smallest element there), for a typed
    text the focused field. ``None`` for other actions or where nothing is there.

    >>> button = ScreenElement("", "", "com.x", (0, 0, 100, 50), clickable=True)
    >>> label = ScreenElement("Send", "", "com.x", (10, 10, 90, 40))
    >>> action_target([button, label], Click(x=5, y=5))
    Target(package='com.x', text='Send')
    """
    if isinstance(action, Click | LongPress):
        under = [e for e in elements if e.contains(action.x, action.y)]
        clickable = [e for e in under if e.clickable]
        if clickable:
            target = clickable[-1]
        elif under:
            target = min(under, key=lambda e: (e.bounds[2] - e.bounds[0]) * (e.bounds[3] - e.bounds[1]))
        else:
            return None
    elif isinstance(action, Type):
        focused = [e for e in elements if e.focused]
        if not focused:
            return None
        target = focused[-1]
    else:
        return None
    texts = [t for e in elements if e is target or e.inside(target) for t in (e.text, e.description) if t.strip()]
    return Target(package=target.package, text=" ".join(dict.fromkeys(texts)))


# ----------------------------------------------------------------------------- rules


class GuardRule(BaseModel):
    """One rule: it matches an action when every condition it sets holds.

    - ``apps``: the app in front is one of these (package names, or SimPhone app ids).
    - ``text``: a regular expression (case-insensitive) found in the target element's text.
    - ``actions``: the action's type is one of these (default: taps, long presses and typed text).
    - ``changes``: on a phone whose state darwin reads, the action changes a path under one of
      these dotted patterns (``apps.x.data.posts``, ``*`` for one segment), whatever the task allows.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="short name, recorded as the block's cause")
    why: str = Field("", description="what the rule protects against, printed at start")
    apps: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    actions: tuple[str, ...] = ("click", "long_press", "type")
    changes: tuple[str, ...] = ()

    @field_validator("text")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"text pattern {pattern!r} is not a regular expression ({exc})") from None
        return patterns

    @field_validator("actions")
    @classmethod
    def _known_actions(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(actions) - set(ACTION_TYPES))
        if unknown:
            raise ValueError(f"unknown action types {unknown}; use some of {list(ACTION_TYPES)}")
        return actions

    @field_validator("changes")
    @classmethod
    def _dotted_paths(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        side_effects((), patterns)  # raises on a malformed pattern
        return patterns

    @model_validator(mode="after")
    def _says_something(self) -> GuardRule:
        if not (self.apps or self.text or self.changes):
            raise ValueError(f"rule {self.name!r} names no apps, text or changes: it would block every action")
        return self

    @cached_property
    def _regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in self.text)

    def matches_screen(self, action: Action, target: Target | None, app_names: Sequence[str]) -> bool:
        """Whether this rule's app, text and action conditions hold (a rule with ``changes``
        only matches through :meth:`matches_changes`)."""
        if self.changes or not self._applies(action, app_names):
            return False
        if self.text:
            return target is not None and any(r.search(target.text) for r in self._regexes)
        return True

    def matches_changes(self, action: Action, changed: Sequence[str], app_names: Sequence[str]) -> tuple[str, ...]:
        """The changed paths under this rule's ``changes`` (empty: no match)."""
        if not self.changes or not self._applies(action, app_names):
            return ()
        return tuple(p for p in changed if path_allowed(p, self.changes))

    def _applies(self, action: Action, app_names: Sequence[str]) -> bool:
        """The action's type is one this rule names, and (where it names apps) so is the app in front."""
        if action.type not in self.actions:
            return False
        return not self.apps or bool({a.lower() for a in app_names} & {a.lower() for a in self.apps})

    def describe(self) -> str:
        conditions = [
            *(["apps " + ", ".join(self.apps)] if self.apps else []),
            *(["text /" + "/ or /".join(self.text) + "/"] if self.text else []),
            *(["changes under " + ", ".join(self.changes)] if self.changes else []),
            "on " + ", ".join(self.actions),
        ]
        return f"{self.name}{f' ({self.why})' if self.why else ''}: " + "; ".join(conditions)


class GuardRules(BaseModel):
    """A rules file: ``rules:``, a list of :class:`GuardRule`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: tuple[GuardRule, ...] = Field(min_length=1)


def load_guard_rules(path: str | Path) -> tuple[GuardRule, ...]:
    """The rules of a YAML rules file (docs/phones.md); a missing file, bad YAML or a bad rule
    raises :class:`GuardError` naming the file and what is wrong."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GuardError(f"guard rules file {path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise GuardError(f"guard rules file {path} is not valid YAML: {exc}") from None
    try:
        return GuardRules.model_validate(data).rules
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'the file'}: {error['msg']}" for error in exc.errors()
        )
        raise GuardError(f"guard rules file {path}: {problems} (see docs/phones.md, 'Writing rules')") from None


# ----------------------------------------------------------------------------- guards


@dataclass(frozen=True)
class Block:
    """Why an action was blocked: the rule (or ``side_effect``) and what it saw."""

    rule: str
    detail: str

    @property
    def cause(self) -> str:
        """The episode's termination cause: ``"<rule>: <detail>"``."""
        return f"{self.rule}: {self.detail}"


class ActionBlocked(Exception):  # noqa: N818 - reads as what happened
    """Raised by a guarded phone's ``execute`` instead of acting: ``block`` says why, ``reward``
    is the blocked step's reward (``-penalty``)."""

    def __init__(self, block: Block, reward: float) -> None:
        super().__init__(f"action blocked by the guard: {block.cause}")
        self.block = block
        self.reward = reward


class ActionGuard(ABC):
    """Decides, before the phone acts, whether an action may reach it.

    Subclass it for a vendor's own checks; a run names it as ``phones.guard`` (a built-in name
    or ``module:Class``)::

        >>> import asyncio
        >>> from darwin.actions import OpenApp
        >>> from darwin.envs.guard import ActionGuard, Block
        >>> class NoBanking(ActionGuard):
        ...     async def check(self, env, task, action):
        ...         if action.type == "open_app" and action.app.lower() == "bank":
        ...             return Block("no_banking", "opening the bank app")
        ...         return None
        >>> asyncio.run(NoBanking().check(None, None, OpenApp(app="Bank"))).cause
        'no_banking: opening the bank app'

    Args:
        penalty: a blocked episode's last step gets reward ``-penalty`` (0: a plain failure).
    """

    def __init__(self, penalty: float = 1.0) -> None:
        if penalty < 0:
            raise GuardError(f"guard penalty must be >= 0 (the blocked step's reward is -penalty), got {penalty}")
        self.penalty = float(penalty)

    @abstractmethod
    async def check(self, env: PhoneEnv, task: Task, action: Action) -> Block | None:
        """``None`` to let ``action`` reach ``env`` during an episode of ``task``, else why not.
        Must not change the phone."""

    def describe(self) -> str:
        """What the guard blocks, for the start of a run (one line per rule)."""
        return f"{type(self).__name__} (blocked step reward {-self.penalty:g})"


class RuleGuard(ActionGuard):
    """The built-in guard (``phones.guard=rules``): the exact state check where the phone's
    state is known, the rules of a YAML file elsewhere (module docstring).

    Args:
        rules: a rules file (docs/phones.md); ``None``: the built-in rules (:data:`DEFAULT_RULES`).
        penalty: see :class:`ActionGuard`.
    """

    def __init__(self, rules: str | None = None, penalty: float = 1.0) -> None:
        super().__init__(penalty)
        self.rules_file = DEFAULT_RULES if rules is None else Path(rules)
        self.rules = load_guard_rules(self.rules_file)
        self._watched = {a for rule in self.rules for a in rule.actions}
        self._blind: set[str] = set()  # phones already reported as unable to show their screen's elements

    @classmethod
    def check_arguments(cls, rules: str | None = None, penalty: float = 1.0) -> None:
        """Checked at ``--dry-run``: the rules file loads and the penalty is not negative."""
        cls(rules, penalty)

    def describe(self) -> str:
        lines = [f"action guard: rules from {self.rules_file} (a blocked step's reward is {-self.penalty:g})"]
        lines += [f"  - {rule.describe()}" for rule in self.rules]
        return "\n".join(lines)

    async def check(self, env: PhoneEnv, task: Task, action: Action) -> Block | None:
        watched = action.type in self._watched
        phone = _sim_phone(env)
        if phone is not None:  # in process: the fork costs milliseconds, so every action is played on it
            return self._check_state(task, action, phone)
        if not watched and task.allowed_changes is None:
            return None  # no rule looks at this kind of action and the task declares nothing to keep
        state = await env.aprobe_state()
        if _is_sim_state(state):
            assert state is not None
            replica = _replica(state, env, task)
            if replica is not None:
                return self._check_state(task, action, replica)
        return await self._check_screen(env, action) if watched else None

    def _check_state(self, task: Task, action: Action, phone: Any) -> Block | None:
        """Play ``action`` on a fork of ``phone`` (a SimPhone) and judge the change it makes."""
        before = phone.snapshot()
        fork = phone.fork()
        try:
            fork.execute(action)
        except Exception:  # noqa: BLE001 - the phone itself will refuse it the same way: nothing to block
            return None
        changed = state_diff(before, fork.snapshot())
        apps = _sim_app_names(phone)
        for rule in self.rules:
            hit = rule.matches_changes(action, changed, apps)
            if hit:
                return Block(rule.name, f"{action.type} would change {', '.join(hit)}")
        if not changed:
            return None
        if task.allowed_changes is not None:
            outside = side_effects(changed, task.allowed_changes)
            if outside:
                return Block(
                    "side_effect", f"{action.type} would change {', '.join(outside)}, outside what {task.id} allows"
                )
            return None
        # The task does not say what it may change: the screen rules judge an action that changes app data.
        target = action_target(phone.screen_elements(), action)
        return self._match_screen(action, target, apps)

    async def _check_screen(self, env: PhoneEnv, action: Action) -> Block | None:
        elements = await asyncio.to_thread(env.screen_elements)
        if elements is None:
            if env.name not in self._blind:
                self._blind.add(env.name)
                logger.warning(
                    "action guard: phone %s (%s) cannot list its screen's elements; rules by text cannot apply "
                    "to it, only rules by app and action",
                    env.name,
                    type(env).__name__,
                )
            return self._match_screen(action, None, ())
        target = action_target(elements, action)
        packages = tuple({e.package for e in elements if e.package})
        return self._match_screen(action, target, packages)

    def _match_screen(self, action: Action, target: Target | None, apps: Sequence[str]) -> Block | None:
        names = (*apps, *([target.package] if target is not None and target.package else []))
        for rule in self.rules:
            if rule.matches_screen(action, target, names):
                seen = f" on {target.text!r}" if target is not None and target.text else ""
                return Block(rule.name, f"{action.type}{seen}")
        return None


def _sim_phone(env: PhoneEnv) -> Any:
    """The in-process SimPhone behind ``env``, or ``None``."""
    from darwin.envs.sim.env import SimPhoneEnv

    return env.phone if isinstance(env, SimPhoneEnv) else None


def _is_sim_state(state: object) -> bool:
    from darwin.envs.sim.phone import STATE_VERSION

    return isinstance(state, dict) and state.get("version") == STATE_VERSION and isinstance(state.get("apps"), dict)


def _replica(state: dict[str, Any], env: PhoneEnv, task: Task) -> Any:
    """A local SimPhone in ``state`` (a SimPhone served over ADB), or ``None`` where its screen
    differs from the phone's (then the rules decide)."""
    from darwin.envs.sim.i18n import locale_for_task
    from darwin.envs.sim.phone import SimPhone

    replica = SimPhone(locale=locale_for_task(task.language))
    if (replica.width, replica.height) != tuple(env.device_size) or set(replica.apps) != set(state["apps"]):
        return None
    replica.restore(state)
    return replica


def _sim_app_names(phone: Any) -> tuple[str, ...]:
    app_id = phone.foreground
    if app_id is None:
        return ()
    app = phone.apps[app_id]
    return (app.id, app.package, app.label)


class GuardedPhone(PhoneWrapper):
    """``env`` during one episode of ``task``, with every action checked by ``guard`` first.
    A blocked action raises :class:`ActionBlocked` and never reaches ``env``; everything else
    is ``env``'s own."""

    def __init__(self, env: PhoneEnv, guard: ActionGuard, task: Task) -> None:
        super().__init__(env)
        self.guard = guard
        self.task = task

    async def _checked(self, action: Action) -> None:
        block = await self.guard.check(self.env, self.task, action)
        if block is not None:
            logger.info("phone %s, task %s: %s", self.env.name, self.task.id, block.cause)
            raise ActionBlocked(block, -self.guard.penalty)

    def execute(self, action: Action) -> None:
        asyncio.run(self._checked(action))
        self.env.execute(action)

    async def aexecute(self, action: Action) -> None:
        await self._checked(action)
        await self.env.aexecute(action)
