"""X templates: following and unfollowing, posts, drafts, follower counts and who posted what."""

from __future__ import annotations

import random

from pydantic import Field, ValidationInfo, field_validator

from darwin.envs.sim.apps.x import ACCOUNTS, FOLLOWERS, TIMELINE
from darwin.templates import DistinctPair, TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

HANDLES = tuple(h for h, _ in ACCOUNTS)
POSTS = (
    "Good morning from the simulator",
    "Learning to use my phone",
    "Trying out the new update",
    "Coffee first, then code",
    "Weekend plans: hiking",
    "Reading a great book today",
    "Hello world",
    "Who else is watching the game tonight",
)
"""Texts to post or draft (ASCII: they are typed through the keyboard)."""
FOLLOWING = ("apps.x.data.following",)
DRAFTS = ("apps.x.data.drafts",)


class HandleParams(TemplateParams):
    handle: str

    @field_validator("handle")
    @classmethod
    def _handle(cls, v: str) -> str:
        if v not in HANDLES:
            raise ValueError(f"unknown account {v!r}; X has {', '.join(HANDLES)}")
        return v


register(
    TaskTemplate(
        id="x.follow",
        app="X",
        params=HandleParams,
        difficulty=2,
        step_budget=16,
        description="search an account and follow it (the instance unfollows it first)",
        sample=lambda rng: HandleParams(handle=rng.choice(HANDLES)),
        phrasings={
            "ENG": (
                "Search for the account @{handle} on X and follow it.",
                "Follow @{handle} on X.",
                "Start following {handle} on X.",
            ),
            "CHN": ("在X上搜索账号@{handle}并关注。", "关注X上的@{handle}。"),
        },
        setup=lambda p: (StateSetup(step="x.follows", params={"unfollow": [p.handle]}),),
        verifier=lambda p: VerifierSpec(predicate="x.following", params={"handle": p.handle}),
        allowed_changes=lambda p: FOLLOWING,
    )
)

register(
    TaskTemplate(
        id="x.unfollow",
        app="X",
        params=HandleParams,
        difficulty=2,
        step_budget=16,
        description="unfollow an account (the instance follows it first)",
        sample=lambda rng: HandleParams(handle=rng.choice(HANDLES)),
        phrasings={
            "ENG": ("Unfollow @{handle} on X.", "Stop following the account {handle} on X."),
            "CHN": ("在X上取消关注@{handle}。", "不再关注X上的{handle}。"),
        },
        setup=lambda p: (StateSetup(step="x.follows", params={"follow": [p.handle]}),),
        verifier=lambda p: VerifierSpec(predicate="x.not_following", params={"handle": p.handle}),
        allowed_changes=lambda p: FOLLOWING,
    )
)


class TwoHandles(DistinctPair):
    choices = HANDLES
    what = "X account"


register(
    TaskTemplate(
        id="x.follow_two",
        app="X",
        params=TwoHandles,
        difficulty=3,
        step_budget=32,
        description="follow two accounts (the instance unfollows both first)",
        sample=TwoHandles.draw,
        phrasings={
            "ENG": (
                "Follow both @{first} and @{second} on X.",
                "On X, search for {first} and {second} and follow each of them.",
            ),
            "CHN": ("在X上同时关注@{first}和@{second}。", "在X搜索{first}和{second}，并分别关注。"),
        },
        setup=lambda p: (StateSetup(step="x.follows", params={"unfollow": [p.first, p.second]}),),
        verifier=lambda p: VerifierSpec(predicate="x.following_all", params={"handles": [p.first, p.second]}),
        allowed_changes=lambda p: FOLLOWING,
        subgoals=lambda p: (
            VerifierSpec(predicate="x.following", params={"handle": p.first}),
            VerifierSpec(predicate="x.following", params={"handle": p.second}),
        ),
    )
)


class TextParams(TemplateParams):
    text: str = Field(min_length=1)


register(
    TaskTemplate(
        id="x.post",
        app="X",
        params=TextParams,
        difficulty=2,
        step_budget=16,
        description="write and send a post",
        sample=lambda rng: TextParams(text=rng.choice(POSTS)),
        phrasings={
            "ENG": ("Post '{text}' on X.", "Publish a post on X that says '{text}'.", "Tweet: {text}"),
            "CHN": ("在X上发布一条内容为“{text}”的帖子。", "发帖：{text}"),
        },
        verifier=lambda p: VerifierSpec(predicate="x.posted", params={"content": p.text}),
        allowed_changes=lambda p: ("apps.x.data.posts",),
    )
)

register(
    TaskTemplate(
        id="x.draft",
        app="X",
        params=TextParams,
        difficulty=2,
        step_budget=16,
        description="write a post and save it as a draft",
        sample=lambda rng: TextParams(text=rng.choice(POSTS)),
        phrasings={
            "ENG": (
                "Draft a post with the content '{text}'.",
                "Write '{text}' on X but save it as a draft instead of posting.",
            ),
            "CHN": ("在X上起草一条内容为“{text}”的帖子并保存为草稿。", "写一条“{text}”，存为草稿，不要发布。"),
        },
        verifier=lambda p: VerifierSpec(predicate="x.draft", params={"content": p.text}),
        allowed_changes=lambda p: DRAFTS,
    )
)


class DraftsParams(TemplateParams):
    drafts: tuple[str, ...] = Field(min_length=2, max_length=4)
    remove: str

    @field_validator("remove")
    @classmethod
    def _remove(cls, v: str, info: ValidationInfo) -> str:
        if v not in info.data.get("drafts", ()):
            raise ValueError(f"remove={v!r} must be one of the drafts")
        return v


def _drafts(rng: random.Random) -> DraftsParams:
    texts = tuple(rng.sample(POSTS, k=rng.randint(2, 4)))
    return DraftsParams(drafts=texts, remove=rng.choice(texts))


register(
    TaskTemplate(
        id="x.delete_draft",
        app="X",
        params=DraftsParams,
        difficulty=1,
        step_budget=12,
        description="delete one saved draft (the instance saves a few first)",
        sample=_drafts,
        phrasings={
            "ENG": ("Delete my X draft that says '{remove}'.", "Remove the draft '{remove}' from X."),
            "CHN": ("删除X上内容为“{remove}”的草稿。", "把草稿“{remove}”删掉。"),
        },
        wording=lambda p: {"remove": p.remove},
        setup=lambda p: (StateSetup(step="x.drafts", params={"drafts": list(p.drafts)}),),
        verifier=lambda p: VerifierSpec(predicate="x.no_draft", params={"content": p.remove}),
        allowed_changes=lambda p: DRAFTS,
    )
)

register(
    TaskTemplate(
        id="x.followers",
        app="X",
        params=HandleParams,
        difficulty=2,
        step_budget=16,
        description="answer: an account's follower count (from its profile)",
        sample=lambda rng: HandleParams(handle=rng.choice(HANDLES)),
        phrasings={
            "ENG": (
                "How many followers does @{handle} have on X?",
                "Open the X profile of {handle}: how many followers?",
            ),
            "CHN": ("X上@{handle}有多少粉丝？", "打开{handle}的X主页，关注者有多少？"),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": FOLLOWERS[p.handle],
                "tolerance": 0.05,
                "app": "x",
                "via": ["search", "profile"],
                "inputs": [p.handle],
            },
        ),
        allowed_changes=lambda p: (),
    )
)


class PostParams(TemplateParams):
    text: str

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        if v not in dict((t, a) for a, t in TIMELINE):
            raise ValueError(f"no timeline post says {v!r}")
        return v


register(
    TaskTemplate(
        id="x.post_author",
        app="X",
        params=PostParams,
        difficulty=1,
        step_budget=8,
        description="answer: which account posted a timeline post",
        sample=lambda rng: PostParams(text=rng.choice(TIMELINE)[1]),
        phrasings={
            "ENG": (
                "Who posted '{text}' on my X timeline? Answer with the handle.",
                "Which account wrote '{text}' in my X feed?",
            ),
            "CHN": ("我的X时间线上是谁发布了“{text}”？请回答账号名。", "X首页里“{text}”是哪个账号发的？"),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "exact",
                "expected": f"@{dict((t, a) for a, t in TIMELINE)[p.text]}",
                "app": "x",
                "via": ["home"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)
