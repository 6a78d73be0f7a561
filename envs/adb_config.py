"""The settings of an ADB phone (:class:`AdbEnvConfig`) and what it reports about its calls and
its health (:class:`CallRecord`, :class:`PhoneHealth`; part of :mod:`darwin.envs.adb`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ADB_KEYBOARD_IME = "com.android.adbkeyboard/.AdbIME"


class AdbEnvConfig(BaseModel):
    """Settings of :class:`AdbPhoneEnv`; every duration is in seconds.

    The defaults suit cloud phones; ``AdbEnvConfig.for_sim()`` suits served SimPhones
    (no animations: no settle delay, and the state probe enabled).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    adb_host: str = Field(default="127.0.0.1", description="host of the adb server")
    adb_port: int = Field(default=5037, ge=1, le=65535, description="port of the adb server")
    command_timeout_s: float = Field(default=10.0, gt=0, description="deadline of one shell command")
    screenshot_timeout_s: float = Field(default=15.0, gt=0, description="deadline of one screencap")
    connect_timeout_s: float = Field(
        default=10.0, gt=0, description="deadline of adb connect + waiting for state 'device'"
    )
    settle: Literal["poll", "fixed", "none"] = Field(
        default="poll", description="after an action: poll until two screens match, sleep fixed_wait_s, or nothing"
    )
    settle_initial_delay_s: float = Field(default=0.3, ge=0, description="sleep before the first settle screenshot")
    settle_interval_s: float = Field(default=0.2, ge=0, description="sleep between settle screenshots")
    settle_timeout_s: float = Field(
        default=5.0, ge=0, description="stop polling after this long (the screen may still move)"
    )
    settle_tolerance: float = Field(
        default=1.0,
        ge=0,
        description="mean absolute difference (0-255) of 1/8-size thumbnails below which two screens match",
    )
    fixed_wait_s: float = Field(default=2.0, ge=0, description="the paper's wait after each action (settle='fixed')")
    reuse_settled_frame: bool = Field(default=True, description="serve the settled screenshot as the next observation")
    frame_max_age_s: float = Field(default=1.0, ge=0, description="oldest settled frame that may be reused")
    long_press_ms: int = Field(
        default=1000, ge=500, description="hold time of a long press (a swipe that does not move)"
    )
    scroll_ms: int = Field(default=300, ge=1, lt=500, description="swipe duration of a scroll (a fling)")
    scroll_distance: float = Field(
        default=0.4,
        gt=0,
        le=1,
        description="scroll swipe length as a fraction of the screen height (width for left/right)",
    )
    drag_ms: int = Field(default=1000, ge=500, description="swipe duration of a drag")
    text_chunk_chars: int = Field(default=200, ge=2, description="longest argument of one 'input text'")
    ime_for_ascii: bool = Field(default=False, description="type ASCII through the IME as well")
    setup_ime: bool = Field(
        default=True, description="'ime enable' + 'ime set' ADBKeyboard at every connect (needed for non-ASCII text)"
    )
    ime_component: str = Field(default=ADB_KEYBOARD_IME)
    probe_command: tuple[str, ...] | None = Field(
        default=None, description="argv printing the phone state as JSON (SimPhones: ('darwin-state',))"
    )
    answer_command: tuple[str, ...] | None = Field(
        default=None, description="argv prefix that records an answer on the phone (SimPhones: ('darwin-answer',))"
    )
    setup_command: tuple[str, ...] | None = Field(
        default=None,
        description="argv prefix that applies a task's setup steps, given as one JSON argument (SimPhones: ('darwin-setup',)); None: tasks with setup cannot run",
    )
    reject_black_screens: bool = Field(
        default=True, description="an all-black screenshot is an infrastructure failure (screen off, capture broken)"
    )
    reconnect_attempts: int = Field(default=6, ge=1, description="reconnect tries before the call fails")
    reconnect_backoff_s: float = Field(default=0.2, ge=0, description="first wait between reconnect tries (doubles)")
    reconnect_backoff_max_s: float = Field(default=5.0, ge=0)
    reconnect_timeout_s: float = Field(
        default=60.0, gt=0, description="deadline of a whole reconnect (all tries and waits)"
    )
    adb_server_wait_s: float = Field(
        default=120.0,
        gt=0,
        description="how long a phone waits for an unreachable adb server (restarting, or not started yet) "
        "before it is quarantined with cause 'adb_server'",
    )
    adb_server_probe_s: float = Field(
        default=1.0, gt=0, description="deadline of the check, after a failed call, whether the adb server is at fault"
    )
    quarantine_after: int = Field(
        default=3, ge=1, description="consecutive failures (calls or reconnects) that quarantine the phone"
    )
    call_log_size: int = Field(default=10_000, ge=0, description="recent device calls kept in AdbPhoneEnv.calls")

    @model_validator(mode="after")
    def _check(self) -> AdbEnvConfig:
        problems = []
        if self.reconnect_backoff_max_s < self.reconnect_backoff_s:
            problems.append(
                f"reconnect_backoff_max_s={self.reconnect_backoff_max_s} < reconnect_backoff_s={self.reconnect_backoff_s}; raise the maximum"
            )
        if self.probe_command is not None and not self.probe_command:
            problems.append("probe_command=() is empty; use None for no probe")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def for_sim(cls, **overrides: Any) -> AdbEnvConfig:
        """Settings for SimPhones served by ``darwin phones serve``: state probe on, no
        animation delays (two immediate screenshots already match)."""
        from darwin.envs.sim.device import ANSWER_COMMAND, SETUP_COMMAND, STATE_COMMAND

        values: dict[str, Any] = {
            "probe_command": (STATE_COMMAND,),
            "answer_command": (ANSWER_COMMAND,),
            "setup_command": (SETUP_COMMAND,),
            "settle_initial_delay_s": 0.0,
            "settle_interval_s": 0.0,
        }
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class CallRecord:
    """One device call (or reconnect) as :class:`AdbPhoneEnv` made it."""

    op: str
    started: float
    duration: float
    timeout: float
    cause: str | None = None
    """``None`` on success, else the ``InfraError`` cause."""


@dataclass
class PhoneHealth:
    """What a phone's env knows about its health (:meth:`AdbPhoneEnv.health`)."""

    name: str
    serial: str
    state: Literal["ok", "recovering", "quarantined"]
    consecutive_failures: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    reconnects: int = 0
    calls: int = 0
    last_error: str | None = None
