"""Google Play templates: searches, installing and uninstalling, the theme, ratings and developers."""

from __future__ import annotations

import random

from pydantic import Field, field_validator

from darwin.envs.sim.apps.play import APP_INFO, CATALOG, THEMES
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

QUERIES = (
    "Spotify",
    "Netflix",
    "Duolingo",
    "Telegram",
    "Zoom",
    "Uber",
    "chess",
    "weather",
    "photo editor",
    "VPN",
    "fitness tracker",
    "podcasts",
)
INSTALLED = ("apps.play.data.installed",)
ZH_THEMES = {"Light": "浅色", "Dark": "深色", "System default": "跟随系统"}


class SearchParams(TemplateParams):
    query: str = Field(min_length=1)


register(
    TaskTemplate(
        id="play.search",
        app="Google Play",
        params=SearchParams,
        difficulty=1,
        step_budget=12,
        description="search the Play Store",
        sample=lambda rng: SearchParams(query=rng.choice(QUERIES)),
        phrasings={
            "ENG": (
                "Get the search results for {query} on Google Play.",
                "Search the Play Store for '{query}'.",
                "Look for {query} apps in Google Play.",
            ),
            "CHN": ("在Google Play中搜索“{query}”。", "在应用商店里查找{query}。"),
        },
        verifier=lambda p: VerifierSpec(predicate="play.search_results", params={"query": p.query}),
        allowed_changes=lambda p: (),
    )
)


class AppParams(TemplateParams):
    app: str

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        if v not in CATALOG:
            raise ValueError(f"{v!r} is not in the catalogue; Google Play has {', '.join(CATALOG)}")
        return v


register(
    TaskTemplate(
        id="play.install",
        app="Google Play",
        params=AppParams,
        difficulty=2,
        step_budget=16,
        description="install an app (the instance uninstalls it first)",
        sample=lambda rng: AppParams(app=rng.choice(CATALOG)),
        phrasings={
            "ENG": (
                "Install {app} from Google Play.",
                "Get the {app} app on this phone from the Play Store.",
                "Find {app} on Google Play and install it.",
            ),
            "CHN": ("从Google Play安装{app}。", "在应用商店找到{app}并安装。"),
        },
        setup=lambda p: (StateSetup(step="play.apps", params={"uninstall": [p.app]}),),
        verifier=lambda p: VerifierSpec(predicate="play.installed", params={"app": p.app}),
        allowed_changes=lambda p: INSTALLED,
    )
)

register(
    TaskTemplate(
        id="play.uninstall",
        app="Google Play",
        params=AppParams,
        difficulty=2,
        step_budget=16,
        description="uninstall an app from its Play Store page (the instance installs it first)",
        sample=lambda rng: AppParams(app=rng.choice(CATALOG)),
        phrasings={
            "ENG": ("Uninstall {app} using Google Play.", "Remove the {app} app through its Play Store page."),
            "CHN": ("通过Google Play卸载{app}。", "在应用商店的{app}页面卸载它。"),
        },
        setup=lambda p: (StateSetup(step="play.apps", params={"install": [p.app]}),),
        verifier=lambda p: VerifierSpec(predicate="play.not_installed", params={"app": p.app}),
        allowed_changes=lambda p: INSTALLED,
    )
)


class ThemeParams(TemplateParams):
    theme: str
    start: str = Field(description="the theme the instance starts with")

    @field_validator("theme", "start")
    @classmethod
    def _theme(cls, v: str) -> str:
        if v not in THEMES:
            raise ValueError(f"unknown theme {v!r}; use one of {', '.join(THEMES)}")
        return v


def _theme(rng: random.Random) -> ThemeParams:
    theme, start = rng.sample(THEMES, k=2)
    return ThemeParams(theme=theme, start=start)


register(
    TaskTemplate(
        id="play.theme",
        app="Google Play",
        params=ThemeParams,
        difficulty=3,
        step_budget=24,
        description="set the Play Store's theme (Settings > General > Theme)",
        sample=_theme,
        phrasings={
            "ENG": (
                "Set Google Play's theme to {theme}.",
                "In the Play Store settings, change the theme to {theme}.",
                "Make Google Play use the {theme} theme.",
            ),
            "CHN": ("把Google Play的主题设置为{zh}。", "在应用商店设置里把主题改成{zh}。"),
        },
        wording=lambda p: {"theme": p.theme, "zh": ZH_THEMES[p.theme]},
        setup=lambda p: (StateSetup(step="play.theme", params={"theme": p.start}),),
        verifier=lambda p: VerifierSpec(predicate="play.theme", params={"theme": p.theme}),
        allowed_changes=lambda p: ("apps.play.data.theme",),
    )
)

register(
    TaskTemplate(
        id="play.rating",
        app="Google Play",
        params=AppParams,
        difficulty=1,
        step_budget=12,
        description="answer: an app's star rating",
        sample=lambda rng: AppParams(app=rng.choice(CATALOG)),
        phrasings={
            "ENG": ("What rating does {app} have on Google Play?", "How many stars is {app} rated in the Play Store?"),
            "CHN": ("{app}在Google Play上的评分是多少？", "应用商店里{app}有几颗星？"),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": APP_INFO[p.app][0],
                "tolerance": 0.05,
                "app": "play",
                "via": ["app_page"],
                "inputs": [p.app],
            },
        ),
        allowed_changes=lambda p: (),
    )
)

DEVELOPER_APPS = tuple(a for a in CATALOG if APP_INFO[a][2] not in a)
"""Apps whose developer's name is not part of the app's title (the answer must come from the page)."""


class DeveloperParams(AppParams):
    @field_validator("app")
    @classmethod
    def _named_apart(cls, v: str) -> str:
        if v not in DEVELOPER_APPS:
            raise ValueError(f"{v!r}'s developer is named in its title; use one of {', '.join(DEVELOPER_APPS)}")
        return v


register(
    TaskTemplate(
        id="play.developer",
        app="Google Play",
        params=DeveloperParams,
        difficulty=2,
        step_budget=12,
        description="answer: who develops an app",
        sample=lambda rng: DeveloperParams(app=rng.choice(DEVELOPER_APPS)),
        phrasings={
            "ENG": (
                "Who is the developer of {app} on Google Play?",
                "Which company makes {app}? Check its Play Store page.",
            ),
            "CHN": ("Google Play上{app}的开发者是谁？", "查看应用商店页面：{app}是哪家公司开发的？"),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "exact",
                "expected": APP_INFO[p.app][2],
                "app": "play",
                "via": ["app_page"],
                "inputs": [p.app],
            },
        ),
        allowed_changes=lambda p: (),
    )
)
