"""Messages templates: reply, text a number or a contact, delete a conversation, mark all read; count unread, read the last message."""

from __future__ import annotations

import random

from pydantic import Field

from darwin.envs.sim.apps.contacts import TEMPLATE_PEOPLE
from darwin.envs.sim.apps.messages import TEMPLATE_LINES
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

THREADS = ("apps.messages.data.threads",)
READ_MARKS = ("apps.messages.data.threads.*.unread",)
"""Opening a conversation marks it read: reading is what an answer task asks for."""
REPLIES = (
    "On my way",
    "Sounds good",
    "See you soon",
    "Thanks, got it",
    "I will call you later",
    "Yes, 7 pm works",
    "Be there in ten minutes",
    "Let's do Saturday",
)


def _name(rng: random.Random) -> str:
    first, last = rng.choice(TEMPLATE_PEOPLE)
    return f"{first} {last}"


class Reply(TemplateParams):
    name: str = Field(min_length=1, description="who wrote")
    incoming: str = Field(min_length=1, description="their message (the instance adds the conversation)")
    reply: str = Field(min_length=1)


class ToNumber(TemplateParams):
    number: str = Field(min_length=7)
    text: str = Field(min_length=1)


class ToContact(TemplateParams):
    name: str = Field(min_length=3)
    phone: str = Field(min_length=7)
    text: str = Field(min_length=1)


class Conversation(TemplateParams):
    name: str = Field(min_length=1)
    lines: tuple[str, ...] = Field(min_length=1, max_length=3, description="their messages, oldest first")


class Unread(TemplateParams):
    names: tuple[str, ...] = Field(min_length=1, max_length=5, description="conversations with an unread message")
    lines: tuple[str, ...] = Field(min_length=1, max_length=5, description="each one's message")


def _thread(name: str, lines: tuple[str, ...] | list[str], unread: bool = True) -> dict[str, object]:
    return {"name": name, "messages": [{"text": t} for t in lines], "unread": unread}


def _unread_setup(p: Unread, mark_others_read: bool) -> tuple[StateSetup, ...]:
    threads = [_thread(n, [p.lines[i % len(p.lines)]]) for i, n in enumerate(p.names)]
    return (StateSetup(step="messages.threads", params={"threads": threads, "mark_others_read": mark_others_read}),)


def _sample_unread(rng: random.Random) -> Unread:
    people = rng.sample(TEMPLATE_PEOPLE, rng.randint(1, 4))
    return Unread(
        names=tuple(f"{first} {last}" for first, last in people), lines=tuple(rng.sample(TEMPLATE_LINES, len(people)))
    )


def _sent(to: str, text: str) -> VerifierSpec:
    return VerifierSpec(predicate="messages.sent", params={"to": to, "text": text})


register(
    TaskTemplate(
        id="messages.reply",
        app="Messages",
        params=Reply,
        difficulty=2,
        step_budget=16,
        description="reply to a conversation (the instance adds it, unread)",
        sample=lambda rng: Reply(name=_name(rng), incoming=rng.choice(TEMPLATE_LINES), reply=rng.choice(REPLIES)),
        phrasings={
            "ENG": (
                "Reply '{reply}' to {name}.",
                "{name} texted me. Answer with '{reply}'.",
                "Send '{reply}' in my conversation with {name}.",
            ),
            "CHN": ("回复{name}：“{reply}”。", "{name}给我发了短信，请回复“{reply}”。"),
        },
        setup=lambda p: (StateSetup(step="messages.threads", params={"threads": [_thread(p.name, [p.incoming])]}),),
        verifier=lambda p: _sent(p.name, p.reply),
        allowed_changes=lambda p: THREADS,
    )
)

register(
    TaskTemplate(
        id="messages.text_number",
        app="Messages",
        params=ToNumber,
        difficulty=2,
        step_budget=16,
        description="start a conversation with a phone number and send a text",
        sample=lambda rng: ToNumber(number=f"+1 555-02{rng.randrange(10, 100)}", text=rng.choice(REPLIES)),
        phrasings={
            "ENG": (
                "Text {number}: '{text}'.",
                "Send the message '{text}' to the number {number}.",
                "Start a chat with {number} and say '{text}'.",
            ),
            "CHN": ("给{number}发短信：“{text}”。", "向号码{number}发送消息“{text}”。"),
        },
        verifier=lambda p: _sent(p.number, p.text),
        allowed_changes=lambda p: THREADS,
    )
)

register(
    TaskTemplate(
        id="messages.text_contact",
        app="Messages",
        params=ToContact,
        difficulty=3,
        step_budget=20,
        description="text a contact there is no conversation with yet (the instance adds the contact)",
        sample=lambda rng: ToContact(
            name=_name(rng), phone=f"+1 555-02{rng.randrange(10, 100)}", text=rng.choice(REPLIES)
        ),
        phrasings={
            "ENG": ("Send '{text}' to {name}.", "Message my contact {name}: '{text}'.", "Text {name} saying '{text}'."),
            "CHN": ("给联系人{name}发消息：“{text}”。", "发短信给{name}，内容是“{text}”。"),
        },
        setup=lambda p: (
            StateSetup(
                step="contacts.add",
                params={
                    "contacts": [
                        {"first": p.name.partition(" ")[0], "last": p.name.partition(" ")[2], "phone": p.phone}
                    ]
                },
            ),
        ),
        verifier=lambda p: _sent(p.name, p.text),
        allowed_changes=lambda p: THREADS,
    )
)

register(
    TaskTemplate(
        id="messages.delete_thread",
        app="Messages",
        params=Conversation,
        difficulty=2,
        step_budget=16,
        description="delete a conversation (the instance adds it)",
        sample=lambda rng: Conversation(name=_name(rng), lines=tuple(rng.sample(TEMPLATE_LINES, rng.randint(1, 2)))),
        phrasings={
            "ENG": ("Delete my conversation with {name}.", "Remove the chat with {name} from Messages."),
            "CHN": ("删除与{name}的对话。", "把和{name}的聊天记录删掉。"),
        },
        setup=lambda p: (
            StateSetup(step="messages.threads", params={"threads": [_thread(p.name, p.lines, unread=False)]}),
        ),
        verifier=lambda p: VerifierSpec(predicate="messages.no_thread", params={"name": p.name}),
        allowed_changes=lambda p: THREADS,
    )
)

register(
    TaskTemplate(
        id="messages.mark_all_read",
        app="Messages",
        params=Unread,
        difficulty=1,
        step_budget=12,
        description="mark every conversation as read (the instance adds unread ones)",
        sample=_sample_unread,
        phrasings={
            "ENG": ("Mark all my conversations as read.", "Clear the unread marks in Messages."),
            "CHN": ("把所有对话标记为已读。", "清除短信里的未读标记。"),
        },
        wording=lambda p: {},
        setup=lambda p: _unread_setup(p, mark_others_read=False),
        verifier=lambda p: VerifierSpec(predicate="messages.all_read"),
        allowed_changes=lambda p: READ_MARKS,
    )
)

register(
    TaskTemplate(
        id="messages.unread_count",
        app="Messages",
        params=Unread,
        difficulty=1,
        step_budget=12,
        description="answer: how many conversations are unread (the instance sets them)",
        sample=_sample_unread,
        phrasings={
            "ENG": ("How many unread conversations do I have?", "How many chats in Messages are unread?"),
            "CHN": ("我有几条未读对话？", "短信里有多少个未读会话？"),
        },
        wording=lambda p: {},
        setup=lambda p: _unread_setup(p, mark_others_read=True),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "number", "expected": f"{len(p.names)} unread", "app": "messages", "via": ["home"]},
        ),
        allowed_changes=lambda p: READ_MARKS,
    )
)

register(
    TaskTemplate(
        id="messages.last_message",
        app="Messages",
        params=Conversation,
        difficulty=1,
        step_budget=12,
        description="answer: the last message someone sent",
        sample=lambda rng: Conversation(name=_name(rng), lines=tuple(rng.sample(TEMPLATE_LINES, rng.randint(1, 3)))),
        phrasings={
            "ENG": ("What did {name} say in their last message?", "Read me {name}'s latest text."),
            "CHN": ("{name}最后一条消息说了什么？", "{name}最近发来的短信内容是什么？"),
        },
        setup=lambda p: (StateSetup(step="messages.threads", params={"threads": [_thread(p.name, p.lines)]}),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.lines[-1], "app": "messages", "via": ["home"]},
        ),
        allowed_changes=lambda p: READ_MARKS,
    )
)
