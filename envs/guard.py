"""A guard against irreversible actions: purchases, posts, messages and deletions are blocked
before they reach the phone (docs/phones.md, "The action guard").

A phone with persistent state (a real device, a cloud phone) cannot take back an order, a post
or a message; an exploring policy will press whatever it finds. The guard looks at each action
before the phone does and either lets it through or blocks it. It judges what the action will
do, not only the words under the point it names (:mod:`darwin.envs.guard_targets`): a long
press, a swipe that stays on a button or ends on one, and Enter in a field (typed or pressed on
the keyboard) press things too, and an icon is judged by its content description.

- **Where darwin knows the phone's state** (a SimPhone, in process or served over ADB with its
  state probe), the action is first played on a copy of the phone, as the phone will receive
  it, and so is a tap on everything it could press. The changes the task's ``allowed_changes``
  covers pass (but for a rule's ``changes``); any other change is judged by the rules: a
  ``changes`` rule on the paths, the text rules on what the action presses. An action that
  changes no app data passes: exploring (searching, a setting, the cart, opening an email,
  saving a draft) is never punished as a side effect.
- **Elsewhere** the rules decide: by app (package or name), by the labels of what the action
  presses (read from the screen's view hierarchy: ``uiautomator dump`` on an ADB phone) and by
  action type.

A blocked action raises :class:`ActionBlocked` from the phone's ``execute``: the workflow ends
the episode with termination ``blocked`` and the block's cause, and its last step's reward is
``-penalty`` (training; an evaluation records the episode as a failure with its cause).

    >>> import asyncio
    >>> from darwin.actions import Click
    >>> from darwin.envs.guard import RuleGuard
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.task_registry import get_task
    >>> guard = RuleGuard()
    >>> sorted({rule.name for rule in guard.rules})
    ['confirm', 'delete', 'payment', 'post', 'send', 'transfer']
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
from pydantic_core import ErrorDetails

from darwin.actions import Action, Click, Drag, LongPress, Scroll, Type
from darwin.algos.task_metrics import path_allowed, side_effects, state_diff
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.adb_gestures import GestureRefused, Swipe, swipe_for
from darwin.envs.adb_touch import UNKNOWN_DENSITY_DPI, touch_slop_px
from darwin.envs.base import PhoneEnv, PhoneWrapper
from darwin.envs.guard_targets import Target, action_targets, normalise_label
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


# ----------------------------------------------------------------------------- rules


def _one_or_many(value: object) -> object:
    """A YAML string where a list is expected is a list of that one string (``text: pay``)."""
    return (value,) if isinstance(value, str) else value


class GuardRule(BaseModel):
    """One rule: it matches an action when every condition it sets holds.

    - ``apps``: the app in front is one of these (package names, or SimPhone app ids).
    - ``text``: a regular expression (case-insensitive) found in the label of something the
      action presses (:mod:`darwin.envs.guard_targets`: a tap's element, a long press's, a
      swipe's that stays on it, a drag's drop target, Enter's submit button), normalised
      (:func:`~darwin.envs.guard_targets.normalise_label`); it is also tried on the label
      without spaces, so a label split by a space or a line break inside a word still matches.
    - ``actions``: the action's type is one of these (default: taps, long presses and typed
      text); a press by any other action (a scroll that stays on a button) counts as a ``click``.
    - ``changes``: on a phone whose state darwin reads, the action changes a path under one of
      these dotted patterns (``apps.x.data.posts``, ``*`` for one segment), whatever the task
      allows; with ``unless_allowed``, only a change the task's ``allowed_changes`` does not cover.
      Such a rule judges every action type unless it names ``actions``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="short name, recorded as the block's cause")
    why: str = Field("", description="what the rule protects against, printed at start")
    apps: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    actions: tuple[str, ...] = ("click", "long_press", "type")
    changes: tuple[str, ...] = ()
    unless_allowed: bool = False

    _lists = field_validator("apps", "text", "actions", "changes", mode="before")(_one_or_many)

    @field_validator("text")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression ({exc})") from None
            if compiled.search("") is not None:
                raise ValueError(f"{pattern!r} matches an empty label, so it would match every label")
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
            raise ValueError("it names no apps, text or changes: it would block every action")
        if self.unless_allowed and not self.changes:
            raise ValueError("unless_allowed applies to changes, and it names none")
        return self

    @cached_property
    def _regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in self.text)

    def matching_target(self, action: Action, targets: Sequence[Target], app_names: Sequence[str]) -> Target | None:
        """The first of ``targets`` whose label this rule's text matches (a rule without
        ``text``: the first target, or a bare :class:`Target` where the action presses nothing,
        when its app and action conditions hold); ``None``: no match. Rules with ``changes``
        only match through :meth:`matches_changes`."""
        if self.changes or not self._app_in_front(app_names):
            return None
        if not self.text:
            if action.type not in self.actions:
                return None
            return targets[0] if targets else Target(package="", text="")
        for target in targets:
            if action.type not in self.actions and not (target.how and "click" in self.actions):
                continue
            label = normalise_label(target.text)
            if any(r.search(label) or r.search(label.replace(" ", "")) for r in self._regexes):
                return target
        return None

    def matches_changes(
        self, action: Action, changed: Sequence[str], unasked: Sequence[str], app_names: Sequence[str]
    ) -> tuple[str, ...]:
        """The paths of ``changed`` (``unasked``, the ones the task does not allow, with
        ``unless_allowed``) under this rule's ``changes``; empty: no match."""
        if not self.changes or not self._app_in_front(app_names):
            return ()
        if "actions" in self.model_fields_set and action.type not in self.actions:
            return ()  # the state says what any action does: only actions the rule names narrow it
        return tuple(p for p in (unasked if self.unless_allowed else changed) if path_allowed(p, self.changes))

    def _app_in_front(self, app_names: Sequence[str]) -> bool:
        """Where the rule names apps, one of them is in front."""
        return not self.apps or bool({a.lower() for a in app_names} & {a.lower() for a in self.apps})

    def describe(self) -> str:
        conditions = [
            *(["apps " + ", ".join(self.apps)] if self.apps else []),
            *(["text /" + "/ or /".join(self.text) + "/"] if self.text else []),
            *(
                [f"changes under {', '.join(self.changes)}{' the task does not allow' if self.unless_allowed else ''}"]
                if self.changes
                else []
            ),
            "on " + (", ".join(self.actions) if self.text or "actions" in self.model_fields_set else "any action"),
        ]
        return f"{self.name}{f' ({self.why})' if self.why else ''}: " + "; ".join(conditions)


RULE_KEYS = tuple(GuardRule.model_fields)
"""The keys a rule may have, in the order the docs list them."""


def _yaml_kind(value: object) -> str:
    """``value`` as a YAML reader would name it."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _problem(error: ErrorDetails) -> str:
    """One validation error of a rule, in the terms of the YAML it came from."""
    loc = [str(p) for p in error["loc"]]
    key = loc[0] if loc else ""
    where = f"{key} item {int(loc[1]) + 1}" if len(loc) > 1 and loc[1].isdigit() else key
    kind, value = error["type"], error.get("input")
    if kind == "missing":
        return f"the key {key!r} is missing"
    if kind == "extra_forbidden":
        return f"unknown key {key!r} (a rule's keys: {', '.join(RULE_KEYS)})"
    if kind in ("tuple_type", "list_type"):
        return f"{where} should be a list of strings (or one string), not {_yaml_kind(value)}"
    if kind == "string_type":
        return f"{where} should be a string, not {_yaml_kind(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"{where} should be true or false, not {_yaml_kind(value)}"
    if kind == "string_too_short":
        return f"{where} is empty"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"should be a mapping of keys ({', '.join(RULE_KEYS)}), not {_yaml_kind(value)}"
    message = str(error["ctx"]["error"]) if kind == "value_error" and "ctx" in error else error["msg"]
    return f"{where}: {message}" if where else message


def load_guard_rules(path: str | Path) -> tuple[GuardRule, ...]:
    """The rules of a YAML rules file (docs/phones.md); a missing file, bad YAML or a bad rule
    raises :class:`GuardError` naming the file, the rule (its number and name) and the key."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GuardError(f"guard rules file {path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise GuardError(f"guard rules file {path} is not valid YAML: {exc}") from None
    hint = "(see docs/phones.md, 'Writing rules')"
    if not isinstance(data, dict) or set(data) != {"rules"}:
        found = f"keys {', '.join(map(str, data))}" if isinstance(data, dict) else _yaml_kind(data)
        raise GuardError(f"guard rules file {path} should be a mapping with one key, rules, not {found} {hint}")
    items = data["rules"]
    if not isinstance(items, list) or not items:
        got = "an empty list" if isinstance(items, list) else _yaml_kind(items)
        raise GuardError(f"guard rules file {path}: rules should be a list of at least one rule, not {got} {hint}")
    rules, problems = [], []
    for index, item in enumerate(items, 1):
        name = item.get("name") if isinstance(item, dict) else None
        which = f"rule {index}{f' ({name!r})' if isinstance(name, str) and name else ''}"
        try:
            rules.append(GuardRule.model_validate(item))
        except ValidationError as exc:
            problems += [f"{which}: {_problem(error)}" for error in exc.errors()]
    if problems:
        raise GuardError(f"guard rules file {path}: {'; '.join(problems)} {hint}")
    return tuple(rules)


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


_PRESSING = (Click, LongPress, Scroll, Drag, Type)
"""Actions that can press or submit something, whatever a rule's ``actions`` name."""


class RuleGuard(ActionGuard):
    """The built-in guard (``phones.guard=rules``): the state check where the phone's state is
    known, the rules of a YAML file elsewhere (module docstring).

    Args:
        rules: a rules file (docs/phones.md); ``None``: the built-in rules (:data:`DEFAULT_RULES`).
        penalty: see :class:`ActionGuard`.
    """

    def __init__(self, rules: str | None = None, penalty: float = 1.0) -> None:
        super().__init__(penalty)
        self.rules_file = DEFAULT_RULES if rules is None else Path(rules)
        self.rules = load_guard_rules(self.rules_file)
        self._watched = {a for rule in self.rules for a in rule.actions}
        self._on_changes = any(rule.changes for rule in self.rules)
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
        phone = _sim_phone(env)
        if phone is not None:  # in process: the fork costs milliseconds, so every action is played on it
            return self._check_state(env, task, action, phone, action)
        if not (action.type in self._watched or isinstance(action, _PRESSING) or self._on_changes):
            return None  # nothing this action does can match a rule
        state = await env.aprobe_state()
        if _is_sim_state(state):
            assert state is not None
            replica = _replica(state, env, task)
            if replica is not None:
                return self._check_state(env, task, action, replica, _served_action(env, action))
        return await self._check_screen(env, action)

    def _check_state(self, env: PhoneEnv, task: Task, action: Action, phone: Any, sent: Action | None) -> Block | None:
        """Play ``sent`` (what the phone will receive for ``action``; ``None``: nothing) and a tap
        on everything ``action`` could press on forks of ``phone`` (a SimPhone), and judge the
        changes they make."""
        swipe, slop = _swipe(env, action)
        targets = action_targets(phone.screen_elements(), action, swipe, slop)
        plays = [
            *([sent] if sent is not None else []),
            *(Click(x=t.point[0], y=t.point[1]) for t in targets if t.how and t.point),
        ]
        before = phone.snapshot()
        changed: set[str] = set()
        for play in plays:
            fork = phone.fork()
            try:
                fork.execute(play)
            except Exception:  # noqa: BLE001 - the phone itself will refuse it the same way: nothing to block
                continue
            changed.update(state_diff(before, fork.snapshot()))
        apps = _sim_app_names(phone)
        ordered = sorted(changed)
        unasked = ordered if task.allowed_changes is None else list(side_effects(ordered, task.allowed_changes))
        for rule in self.rules:  # a rule on changes blocks whatever the task allows
            hit = rule.matches_changes(action, ordered, unasked, apps) if not rule.unless_allowed else ()
            if hit:
                return Block(rule.name, f"{action.type} would change {', '.join(hit)}")
        if not unasked:
            return None  # no app data changes, or only what the task asks for
        block = self._match_screen(action, targets, apps)
        if block is not None:
            return block
        for rule in self.rules:  # what the data says happened, where no label did
            hit = rule.matches_changes(action, ordered, unasked, apps) if rule.unless_allowed else ()
            if hit:
                beyond = f", which {task.id} does not allow" if task.allowed_changes is not None else ""
                return Block(rule.name, f"{action.type} would change {', '.join(hit)}{beyond}")
        return None

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
            return self._match_screen(action, [], ())
        swipe, slop = _swipe(env, action)
        targets = action_targets(elements, action, swipe, slop)
        packages = tuple({e.package for e in elements if e.package})
        return self._match_screen(action, targets, packages)

    def _match_screen(self, action: Action, targets: Sequence[Target], apps: Sequence[str]) -> Block | None:
        names = (*apps, *(t.package for t in targets if t.package))
        for rule in self.rules:
            target = rule.matching_target(action, targets, names)
            if target is not None:
                how = f" ({target.how})" if target.how else ""
                return Block(rule.name, f"{action.type}{how}{f' on {target.text!r}' if target.text else ''}")
        return None


def _unwrapped(env: PhoneEnv) -> PhoneEnv:
    while isinstance(env, PhoneWrapper):
        env = env.env
    return env


def _sim_phone(env: PhoneEnv) -> Any:
    """The in-process SimPhone behind ``env``, or ``None``."""
    from darwin.envs.sim.env import SimPhoneEnv

    env = _unwrapped(env)
    return env.phone if isinstance(env, SimPhoneEnv) else None


def _swipe(env: PhoneEnv, action: Action) -> tuple[Swipe | None, int]:
    """The swipe a scroll or drag becomes on ``env`` (``None``: not a swipe, or not sent) and the
    phone's touch slop: an ADB phone's own; a SimPhone's (as served); elsewhere an ADB phone's
    defaults at the highest density (the largest slop, so the most swipes judged as presses)."""
    from darwin.envs.adb import AdbPhoneEnv
    from darwin.envs.sim.device import DENSITY_DPI
    from darwin.envs.sim.env import SimPhoneEnv

    env = _unwrapped(env)
    if isinstance(env, AdbPhoneEnv):
        density, config = env.density_dpi or UNKNOWN_DENSITY_DPI, env.config
    else:
        density, config = DENSITY_DPI if isinstance(env, SimPhoneEnv) else UNKNOWN_DENSITY_DPI, AdbEnvConfig()
    slop = touch_slop_px(density)
    if not isinstance(action, Scroll | Drag):
        return None, slop
    try:
        width, height = env.device_size
        return swipe_for(action, (width, height), density, config), slop
    except GestureRefused:
        return None, slop


def _served_action(env: PhoneEnv, action: Action) -> Action | None:
    """What a SimPhone served over ADB executes for ``action``: a long press, scroll or drag
    arrives as the swipe :class:`~darwin.envs.adb.AdbPhoneEnv` sends, read back by the device
    (``None``: nothing is sent)."""
    from darwin.envs.adb import AdbPhoneEnv
    from darwin.envs.sim.device import swipe_action

    adb = _unwrapped(env)
    if not isinstance(adb, AdbPhoneEnv) or not isinstance(action, LongPress | Scroll | Drag):
        return action
    try:
        swipe = adb.swipe(action)
    except GestureRefused:
        return None
    return swipe_action(swipe.x1, swipe.y1, swipe.x2, swipe.y2, swipe.duration_ms)


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
