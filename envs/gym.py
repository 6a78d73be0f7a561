"""A Gymnasium environment over any :class:`~darwin.envs.base.PhoneEnv` (SimPhone by default).

Observation: ``{"screenshot": (H, W, 3) uint8, "goal": str}``. Actions: a darwin
:class:`~darwin.actions.Action` or the equivalent dict from ``action_space`` (so
``action_space.sample()`` works). Reward is 1.0 when the rule verifier confirms the goal at
the end of the episode. Infrastructure failures end the episode as a truncation with
``info["truncation_cause"]`` and no reward.

``reset()`` keeps the phone's state (only returns home, as in the paper);
``reset(seed=s)`` factory-resets the phone with seed ``s`` for a reproducible start.

    >>> from darwin.envs.gym import PhoneGymEnv
    >>> from darwin.actions import OpenApp
    >>> env = PhoneGymEnv(tasks=["settings_dark_theme"])
    >>> obs, info = env.reset(seed=0)
    >>> obs["screenshot"].shape, info["task_id"]
    ((560, 252, 3), 'settings_dark_theme')
    >>> obs, reward, terminated, truncated, info = env.step(OpenApp(app="Settings"))
    >>> reward, terminated, truncated
    (0.0, False, False)
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import Callable, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from darwin.actions import (
    ACTION_TYPES,
    Action,
    Answer,
    Click,
    Direction,
    Drag,
    Finished,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
    Type,
    Wait,
    is_terminal,
)
from darwin.envs.base import InfraError, PhoneEnv
from darwin.envs.sim.env import SimPhoneEnv
from darwin.predicates import evaluate
from darwin.task_registry import get_task, goal_text
from darwin.types import Task

ACTION_NAMES = [cls.model_fields["type"].default for cls in ACTION_TYPES]
DIRECTIONS = list(Direction)
# Goals are English or Chinese text: printable ASCII plus the CJK ideographs and punctuation.
GOAL_CHARSET = (
    frozenset(string.printable)
    | frozenset(chr(c) for c in range(0x3000, 0x303F))
    | frozenset(chr(c) for c in range(0x4E00, 0x9FFF))
    | frozenset("’‘“”…—")
)
TEXT_CHARSET = frozenset(string.ascii_letters + string.digits + " ")


class PhoneGymEnv(gym.Env):
    """Gymnasium view of a phone running one task per episode (execution phase only).

    Args:
        env: the phone (default: a fresh in-process SimPhone).
        tasks: task ids or :class:`Task` objects to sample from (default: the 8 base tasks).
        observation_size: ``(W, H)`` of observed screenshots.
        end_on_success: end as soon as the goal holds (rule checks are cheap).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 2}
    observation_space: spaces.Dict

    def __init__(
        self,
        env: PhoneEnv | None = None,
        tasks: Sequence[str | Task] | None = None,
        observation_size: tuple[int, int] = (252, 560),
        end_on_success: bool = True,
        render_mode: str | None = None,
    ) -> None:
        from darwin.task_registry import task_set

        self.phone = env or SimPhoneEnv(seed=0)
        chosen = tasks if tasks is not None else task_set("base8")
        self.tasks: list[Task] = [get_task(t) if isinstance(t, str) else t for t in chosen]
        if not self.tasks:
            raise ValueError("PhoneGymEnv needs at least one task")
        self.observation_size = observation_size
        self.end_on_success = end_on_success
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        w, h = observation_size
        dw, dh = self.phone.device_size
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, shape=(h, w, 3), dtype=np.uint8),
                "goal": spaces.Text(max_length=1024, min_length=1, charset=GOAL_CHARSET),
            }
        )
        self.app_names = sorted({t.app for t in self.tasks})
        point = spaces.Box(low=np.array([0, 0]), high=np.array([dw - 1, dh - 1]), shape=(2,), dtype=np.int64)
        self.action_space = spaces.Dict(
            {
                "action_type": spaces.Discrete(len(ACTION_NAMES)),
                "point": point,
                "end_point": point,
                "direction": spaces.Discrete(len(DIRECTIONS)),
                "text": spaces.Text(max_length=32, charset=TEXT_CHARSET),
                "app": spaces.Discrete(len(self.app_names)),
            }
        )
        self.task: Task = self.tasks[0]
        self.steps = 0

    # -- conversions ----------------------------------------------------------------------
    def to_action(self, action: Action | dict[str, Any]) -> Action:
        """A darwin action from an ``action_space`` sample (actions pass through)."""
        if not isinstance(action, dict):
            return action
        name = ACTION_NAMES[int(action["action_type"])]
        x, y = (int(v) for v in action["point"])
        x2, y2 = (int(v) for v in action["end_point"])
        text = str(action["text"])
        makers: dict[str, Callable[[], Action]] = {
            "click": lambda: Click(x=x, y=y),
            "long_press": lambda: LongPress(x=x, y=y),
            "type": lambda: Type(content=text),
            "scroll": lambda: Scroll(x=x, y=y, direction=DIRECTIONS[int(action["direction"])]),
            "drag": lambda: Drag(x1=x, y1=y, x2=x2, y2=y2),
            "open_app": lambda: OpenApp(app=self.app_names[int(action["app"])]),
            "press_home": PressHome,
            "press_back": PressBack,
            "wait": Wait,
            "finished": lambda: Finished(content=text),
            "answer": lambda: Answer(content=text),
        }
        return makers[name]()

    def _observation(self) -> dict[str, Any]:
        return {"screenshot": self.phone.screenshot(self.observation_size), "goal": goal_text(self.task)}

    # -- gymnasium API --------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if seed is not None and isinstance(self.phone, SimPhoneEnv):
            self.phone.phone.reset(seed)  # a seeded reset is a reproducible factory reset
        if "task" in options:
            task = options["task"]
            self.task = get_task(task) if isinstance(task, str) else task
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.steps = 0
        try:
            self.phone.go_home()
            obs = self._observation()
        except InfraError as exc:
            raise RuntimeError(
                f"phone {self.phone.name} failed during reset ({exc.cause}); replace or restart it"
            ) from exc
        return obs, {"task_id": self.task.id, "phase": "execution"}

    def step(self, action: Action | dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        act = self.to_action(action)
        self.steps += 1
        info: dict[str, Any] = {"task_id": self.task.id, "action": act.model_dump(mode="json")}
        try:
            self.phone.execute(act)
            obs = self._observation()
            state = self.phone.probe_state()
        except InfraError as exc:
            info["truncation_cause"] = exc.cause
            screenshot_space = cast(spaces.Box, self.observation_space["screenshot"])  # a Box: see __init__
            blank = np.zeros(screenshot_space.shape, np.uint8)
            return {"screenshot": blank, "goal": goal_text(self.task)}, 0.0, False, True, info
        success = evaluate(self.task.verifier, state).success if state is not None else None
        terminated = is_terminal(act) or (self.end_on_success and bool(success))
        truncated = not terminated and self.steps >= self.task.step_budget
        reward = 1.0 if (terminated or truncated) and success else 0.0
        info["success"] = success
        return obs, reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            return self.phone.screenshot(self.observation_size)
        return None

    def close(self) -> None:
        self.phone.close()

    # -- async twins for the rollout engine ---------------------------------------------
    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return await asyncio.to_thread(self.reset, seed=seed, options=options)

    async def astep(self, action: Action | dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        return await asyncio.to_thread(self.step, action)


GYM_ID = "darwin/SimPhone-v0"
if GYM_ID not in gym.registry:
    gym.register(id=GYM_ID, entry_point=PhoneGymEnv)  # type: ignore[arg-type]  # gymnasium's EnvCreator admits only (**kwargs) callables
