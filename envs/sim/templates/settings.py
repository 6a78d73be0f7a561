"""Settings templates: section toggles, dark theme, screen timeout, per-app notifications, several switches at once."""

from __future__ import annotations

import random

from pydantic import Field, field_validator, model_validator

from darwin.envs.sim.apps.settings import (
    APPS_WITH_NOTIFICATIONS,
    MAIN_ENTRIES,
    TIMEOUTS,
    TOGGLE_KEYS,
)
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

SECTION_TITLES = {key: title for key, title, _, _ in MAIN_ENTRIES}
ZH_TOGGLES = {
    "Wi-Fi": "WLAN",
    "Mobile data": "移动数据",
    "Airplane mode": "飞行模式",
    "Bluetooth": "蓝牙",
    "NFC": "NFC",
    "Battery Saver": "省电模式",
    "Adaptive Battery": "自适应电池",
    "Vibrate for calls": "来电振动",
    "Touch sounds": "触摸提示音",
    "Use location": "使用位置信息",
    "Color inversion": "颜色反转",
    "Extra dim": "极暗模式",
    "Show passwords": "显示密码",
    "Themed icons": "主题图标",
    "Automatic updates": "自动更新",
    "Show system apps": "显示系统应用",
    "Storage manager": "存储管理器",
}
ZH_TIMEOUTS = {
    "15 seconds": "15秒",
    "30 seconds": "30秒",
    "1 minute": "1分钟",
    "2 minutes": "2分钟",
    "5 minutes": "5分钟",
    "10 minutes": "10分钟",
    "30 minutes": "30分钟",
}


def _on_off(enabled: bool) -> dict[str, str]:
    return {
        "state": "on" if enabled else "off",
        "zh_do": "打开" if enabled else "关闭",
        "verb": "Turn on" if enabled else "Turn off",
        "enable": "Enable" if enabled else "Disable",
    }


class ToggleParams(TemplateParams):
    key: str = Field(description="'<section>:<toggle>', e.g. 'devices:Bluetooth'")
    enabled: bool

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v not in TOGGLE_KEYS:
            raise ValueError(f"unknown toggle {v!r}; use one of {', '.join(TOGGLE_KEYS)}")
        return v


def _toggle_words(p: ToggleParams) -> dict[str, str]:
    section, name = p.key.split(":", 1)
    return {"toggle": name, "section": SECTION_TITLES[section], "zh_toggle": ZH_TOGGLES[name], **_on_off(p.enabled)}


register(
    TaskTemplate(
        id="settings.toggle",
        app="Settings",
        params=ToggleParams,
        difficulty=1,
        step_budget=12,
        description="switch a toggle of a Settings section on or off (the instance sets the opposite first)",
        sample=lambda rng: ToggleParams(key=rng.choice(TOGGLE_KEYS), enabled=rng.random() < 0.5),
        phrasings={
            "ENG": (
                "{verb} {toggle} in Settings.",
                "Go to {section} settings and turn {toggle} {state}.",
                "{enable} {toggle} on this phone.",
            ),
            "CHN": ("在设置中{zh_do}{zh_toggle}。", "进入设置的{section}，{zh_do}{zh_toggle}。"),
        },
        wording=_toggle_words,
        setup=lambda p: (StateSetup(step="settings.values", params={"toggles": {p.key: not p.enabled}}),),
        verifier=lambda p: VerifierSpec(predicate="settings.toggle", params={"key": p.key, "enabled": p.enabled}),
        allowed_changes=lambda p: (f"apps.settings.data.toggles.{p.key}",),
    )
)


class DarkParams(TemplateParams):
    enabled: bool


register(
    TaskTemplate(
        id="settings.dark_theme",
        app="Settings",
        params=DarkParams,
        difficulty=1,
        step_budget=12,
        description="switch dark theme on or off (the instance sets the opposite first)",
        sample=lambda rng: DarkParams(enabled=rng.random() < 0.5),
        phrasings={
            "ENG": (
                "{verb} Dark theme.",
                "Go to display settings and turn Dark theme {state}.",
                "Switch the phone's dark theme {state}.",
            ),
            "CHN": ("{zh_do}深色主题。", "进入显示设置，{zh_do}深色主题。"),
        },
        wording=lambda p: _on_off(p.enabled),
        setup=lambda p: (StateSetup(step="settings.values", params={"dark_theme": not p.enabled}),),
        verifier=lambda p: VerifierSpec(predicate="settings.dark_theme", params={"enabled": p.enabled}),
        allowed_changes=lambda p: ("apps.settings.data.dark_theme",),
    )
)


class TimeoutParams(TemplateParams):
    value: str

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        if v not in TIMEOUTS:
            raise ValueError(f"unknown screen timeout {v!r}; use one of {', '.join(TIMEOUTS)}")
        return v


register(
    TaskTemplate(
        id="settings.screen_timeout",
        app="Settings",
        params=TimeoutParams,
        difficulty=2,
        step_budget=16,
        description="set the screen timeout (the instance starts from 30 seconds)",
        sample=lambda rng: TimeoutParams(value=rng.choice([t for t in TIMEOUTS if t != "30 seconds"])),
        phrasings={
            "ENG": (
                "Set the screen timeout to {value}.",
                "Make the screen turn off after {value} of inactivity.",
                "Change Screen timeout to {value} in display settings.",
            ),
            "CHN": ("把屏幕超时设置为{zh}。", "在显示设置中将屏幕自动关闭时间改为{zh}。"),
        },
        wording=lambda p: {"value": p.value, "zh": ZH_TIMEOUTS[p.value]},
        setup=lambda p: (StateSetup(step="settings.values", params={"screen_timeout": "30 seconds"}),),
        verifier=lambda p: VerifierSpec(predicate="settings.screen_timeout", params={"value": p.value}),
        allowed_changes=lambda p: ("apps.settings.data.screen_timeout",),
    )
)

register(
    TaskTemplate(
        id="settings.timeout_value",
        app="Settings",
        params=TimeoutParams,
        difficulty=1,
        step_budget=12,
        description="answer: the screen timeout (the instance sets it)",
        sample=lambda rng: TimeoutParams(value=rng.choice(TIMEOUTS)),
        phrasings={
            "ENG": (
                "What is the screen timeout set to?",
                "After how long does the screen turn off? Check the display settings.",
            ),
            "CHN": ("屏幕超时时间设置的是多少？", "查看显示设置：屏幕多久后自动关闭？"),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="settings.values", params={"screen_timeout": p.value}),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.value, "app": "settings", "via": ["display"]},
        ),
        allowed_changes=lambda p: (),
    )
)


class AppNotificationParams(TemplateParams):
    app: str
    enabled: bool

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        if v not in APPS_WITH_NOTIFICATIONS:
            raise ValueError(f"no notification switch for {v!r}; apps: {', '.join(APPS_WITH_NOTIFICATIONS)}")
        return v


register(
    TaskTemplate(
        id="settings.app_notifications",
        app="Settings",
        params=AppNotificationParams,
        difficulty=2,
        step_budget=16,
        description="switch one app's notifications on or off (the instance sets the opposite first)",
        sample=lambda rng: AppNotificationParams(app=rng.choice(APPS_WITH_NOTIFICATIONS), enabled=rng.random() < 0.4),
        phrasings={
            "ENG": (
                "{verb} notifications from {app}.",
                "In Settings, turn {state} {app} notifications.",
                "{enable} notifications for the {app} app.",
            ),
            "CHN": ("{zh_do}{app}的通知。", "在设置的应用通知中{zh_do}{app}。"),
        },
        wording=lambda p: {"app": p.app, **_on_off(p.enabled)},
        setup=lambda p: (StateSetup(step="settings.values", params={"app_notifications": {p.app: not p.enabled}}),),
        verifier=lambda p: VerifierSpec(
            predicate="settings.app_notifications", params={"app": p.app, "enabled": p.enabled}
        ),
        allowed_changes=lambda p: (f"apps.settings.data.app_notifications.{p.app}",),
    )
)

SWITCH_NAMES = {
    "dark_theme": ("Dark theme", "深色主题"),
    "notification_history": ("notification history", "通知历史记录"),
    "hide_silent": ("hiding silent notifications in the status bar", "在状态栏隐藏无声通知"),
    "notification_dots": ("notification dots on app icons", "应用图标上的通知圆点"),
    "adaptive_brightness": ("adaptive brightness", "自适应亮度"),
}


class SwitchesParams(TemplateParams):
    """Switches to set, in the order the instruction names them."""

    switches: tuple[tuple[str, bool], ...] = Field(min_length=2, max_length=3)

    @model_validator(mode="after")
    def _known(self) -> SwitchesParams:
        names = [name for name, _ in self.switches]
        unknown = [n for n in names if n not in SWITCH_NAMES]
        if unknown or len(set(names)) != len(names):
            raise ValueError(f"switches must be distinct names of {', '.join(SWITCH_NAMES)}; got {names}")
        return self


def _switches(rng: random.Random) -> SwitchesParams:
    names = rng.sample(sorted(SWITCH_NAMES), k=rng.randint(2, 3))
    return SwitchesParams(switches=tuple((n, rng.random() < 0.5) for n in names))


def _switch_words(p: SwitchesParams) -> dict[str, str]:
    eng = [f"turn {'on' if on else 'off'} {SWITCH_NAMES[n][0]}" for n, on in p.switches]
    zh = [f"{'打开' if on else '关闭'}{SWITCH_NAMES[n][1]}" for n, on in p.switches]
    return {"steps": ", ".join(eng[:-1]) + " and " + eng[-1], "zh_steps": "，".join(zh)}


register(
    TaskTemplate(
        id="settings.switches",
        app="Settings",
        params=SwitchesParams,
        difficulty=3,
        step_budget=24,
        description="set two or three display and notification switches (the instance sets the opposites first)",
        sample=_switches,
        phrasings={
            "ENG": ("In Settings, {steps}.", "Please {steps} on this phone."),
            "CHN": ("在设置中{zh_steps}。", "请{zh_steps}。"),
        },
        wording=_switch_words,
        setup=lambda p: (StateSetup(step="settings.values", params={n: not on for n, on in p.switches}),),
        verifier=lambda p: VerifierSpec(predicate="settings.switches", params=dict(p.switches)),
        allowed_changes=lambda p: tuple(f"apps.settings.data.{n}" for n, _ in p.switches),
        subgoals=lambda p: tuple(VerifierSpec(predicate="settings.switches", params={n: on}) for n, on in p.switches),
    )
)
