"""Mail templates: send, reply, forward, draft; star, archive, delete, label; who sent a message, a code in one."""

from __future__ import annotations

import random

from pydantic import Field

from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

EMAILS = ("apps.mail.data.emails", "apps.mail.data.next_id")
PEOPLE = (
    ("Wei Chen", "wei.chen@gmail.com"),
    ("Sara Kim", "sara.kim@outlook.com"),
    ("Omar Haddad", "omar.haddad@work.com"),
    ("Lena Fischer", "lena.fischer@gmail.com"),
    ("Jonas Berg", "jonas.berg@mail.com"),
    ("Maya Patel", "maya.patel@gmail.com"),
)
"""Senders and recipients task instances use (disjoint from the seeded inbox, envs/sim/apps/mail.py)."""
SUBJECTS = (
    ("Team dinner", "Shall we book the Italian place for Friday?"),
    ("Invoice 4471", "Please find the invoice for October attached."),
    ("Garden party", "We are having a garden party on Sunday at 3 PM."),
    ("Project kickoff", "The kickoff meeting is on Monday in room 204."),
    ("Apartment viewing", "The viewing is confirmed for Thursday at 6 PM."),
    ("Book club", "This month we read The Remains of the Day."),
)
"""Subjects and bodies of the messages task instances add."""
NEW_SUBJECTS = ("Hello", "Quick question", "Meeting notes", "Weekend", "Thanks", "Tickets")
BODIES = (
    "See you soon",
    "Thanks for your help",
    "Can we talk tomorrow?",
    "Sounds good to me",
    "I will be there at noon",
)
LABELS = ("Work", "Travel", "Receipts", "Family")
ZH_LABELS = {"Work": "工作", "Travel": "旅行", "Receipts": "收据", "Family": "家庭"}
CODES = ("483920", "715304", "260581", "938147", "604219")
SERVICES = (
    ("ShopMart", "no-reply@shopmart.com"),
    ("PayFast", "security@payfast.com"),
    ("CloudBox", "verify@cloudbox.io"),
)


class Message(TemplateParams):
    sender: str = Field(min_length=1)
    address: str = Field(min_length=1)
    subject: str = Field(min_length=1)
    body: str = Field(min_length=1)


class Outgoing(TemplateParams):
    to: str = Field(min_length=1, description="the recipient's address")
    subject: str = Field(min_length=1)
    body: str = Field(min_length=1)


class Reply(Message):
    text: str = Field(min_length=1, description="what the reply says")


class Forward(Message):
    to: str = Field(min_length=1, description="the address to forward it to")


class Labelled(Message):
    label: str = Field(min_length=1)


class Code(TemplateParams):
    sender: str = Field(min_length=1)
    address: str = Field(min_length=1)
    code: str = Field(min_length=4)


def _message(rng: random.Random) -> dict:
    (sender, address), (subject, body) = rng.choice(PEOPLE), rng.choice(SUBJECTS)
    return {"sender": sender, "address": address, "subject": subject, "body": body}


def _add(p: Message, **extra: object) -> StateSetup:
    return StateSetup(
        step="mail.add",
        params={"emails": [{"sender": p.sender, "address": p.address, "subject": p.subject, "body": p.body, **extra}]},
    )


def _box(p: Message, box: str) -> VerifierSpec:
    return VerifierSpec(predicate="mail.in_box", params={"subject": p.subject, "box": box})


register(
    TaskTemplate(
        id="mail.send_email",
        app="Mail",
        params=Outgoing,
        difficulty=2,
        step_budget=16,
        description="write and send an email (recipient, subject, text)",
        sample=lambda rng: Outgoing(
            to=rng.choice(PEOPLE)[1], subject=rng.choice(NEW_SUBJECTS), body=rng.choice(BODIES)
        ),
        phrasings={
            "ENG": (
                "Send an email to {to} with the subject '{subject}' saying '{body}'.",
                "Email {to}: subject '{subject}', text '{body}'.",
            ),
            "CHN": (
                "给 {to} 发一封邮件，主题为“{subject}”，内容是“{body}”。",
                "发送邮件给 {to}：主题“{subject}”，正文“{body}”。",
            ),
        },
        verifier=lambda p: VerifierSpec(
            predicate="mail.sent", params={"to": p.to, "subject": p.subject, "body": p.body}
        ),
        allowed_changes=lambda p: EMAILS,
        subgoals=lambda p: (
            VerifierSpec(predicate="mail.sent", params={"to": p.to}),
            VerifierSpec(predicate="mail.sent", params={"to": p.to, "subject": p.subject, "body": p.body}),
        ),
    )
)

register(
    TaskTemplate(
        id="mail.reply",
        app="Mail",
        params=Reply,
        difficulty=2,
        step_budget=16,
        description="reply to a message (the instance adds it to the inbox)",
        sample=lambda rng: Reply(**_message(rng), text=rng.choice(BODIES)),
        phrasings={
            "ENG": (
                "Reply to {sender}'s email '{subject}' with '{text}'.",
                "Answer the message from {sender} about '{subject}': write '{text}'.",
            ),
            "CHN": (
                "回复 {sender} 的邮件“{subject}”，内容写“{text}”。",
                "给 {sender} 关于“{subject}”的邮件回复：“{text}”。",
            ),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(
            predicate="mail.sent", params={"to": p.address, "subject": f"Re: {p.subject}", "body": p.text}
        ),
        allowed_changes=lambda p: EMAILS,
    )
)

register(
    TaskTemplate(
        id="mail.forward",
        app="Mail",
        params=Forward,
        difficulty=3,
        step_budget=20,
        description="forward a message to someone (the instance adds it)",
        sample=lambda rng: Forward(**(m := _message(rng)), to=rng.choice([a for _, a in PEOPLE if a != m["address"]])),
        phrasings={
            "ENG": (
                "Forward the email '{subject}' from {sender} to {to}.",
                "Send {sender}'s message about '{subject}' on to {to}.",
            ),
            "CHN": ("把 {sender} 发来的邮件“{subject}”转发给 {to}。", "将关于“{subject}”的邮件转发到 {to}。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="mail.sent", params={"to": p.to, "subject": f"Fwd: {p.subject}"}),
        allowed_changes=lambda p: EMAILS,
    )
)

register(
    TaskTemplate(
        id="mail.save_draft",
        app="Mail",
        params=Outgoing,
        difficulty=2,
        step_budget=16,
        description="write an email and keep it as a draft, unsent",
        sample=lambda rng: Outgoing(
            to=rng.choice(PEOPLE)[1], subject=rng.choice(NEW_SUBJECTS), body=rng.choice(BODIES)
        ),
        phrasings={
            "ENG": (
                "Write an email to {to} with the subject '{subject}' and the text '{body}', but don't send it: keep it as a draft.",
                "Draft (don't send) a message to {to}: subject '{subject}', text '{body}'.",
            ),
            "CHN": (
                "给 {to} 写一封主题为“{subject}”、内容为“{body}”的邮件，先不要发送，存为草稿。",
                "起草一封给 {to} 的邮件（不要发送）：主题“{subject}”，正文“{body}”。",
            ),
        },
        verifier=lambda p: VerifierSpec(
            predicate="mail.draft", params={"to": p.to, "subject": p.subject, "body": p.body}
        ),
        allowed_changes=lambda p: EMAILS,
    )
)

register(
    TaskTemplate(
        id="mail.star",
        app="Mail",
        params=Message,
        difficulty=1,
        step_budget=12,
        description="star a message (the instance adds it, unstarred)",
        sample=lambda rng: Message(**_message(rng)),
        phrasings={
            "ENG": (
                "Star the email '{subject}' from {sender}.",
                "Mark {sender}'s message about '{subject}' with a star.",
            ),
            "CHN": ("给 {sender} 的邮件“{subject}”加星标。", "把关于“{subject}”的邮件标上星标。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="mail.starred", params={"subject": p.subject}),
        allowed_changes=lambda p: ("apps.mail.data.emails.*.starred", "apps.mail.data.emails.*.unread"),
    )
)

register(
    TaskTemplate(
        id="mail.archive",
        app="Mail",
        params=Message,
        difficulty=1,
        step_budget=12,
        description="archive a message (the instance adds it to the inbox)",
        sample=lambda rng: Message(**_message(rng)),
        phrasings={
            "ENG": (
                "Archive the email '{subject}'.",
                "Move {sender}'s message '{subject}' out of the inbox into the archive.",
            ),
            "CHN": ("归档邮件“{subject}”。", "把 {sender} 的邮件“{subject}”从收件箱归档。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: _box(p, "archive"),
        allowed_changes=lambda p: ("apps.mail.data.emails.*.box", "apps.mail.data.emails.*.unread"),
    )
)

register(
    TaskTemplate(
        id="mail.delete",
        app="Mail",
        params=Message,
        difficulty=1,
        step_budget=12,
        description="delete a message (to the trash; the instance adds it)",
        sample=lambda rng: Message(**_message(rng)),
        phrasings={
            "ENG": ("Delete the email '{subject}' from {sender}.", "Throw away the message about '{subject}'."),
            "CHN": ("删除 {sender} 发来的邮件“{subject}”。", "把关于“{subject}”的邮件删掉。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: _box(p, "trash"),
        allowed_changes=lambda p: ("apps.mail.data.emails.*.box", "apps.mail.data.emails.*.unread"),
    )
)

register(
    TaskTemplate(
        id="mail.label",
        app="Mail",
        params=Labelled,
        difficulty=2,
        step_budget=14,
        description="put a label on a message (the instance adds it, unlabelled)",
        sample=lambda rng: Labelled(**_message(rng), label=rng.choice(LABELS)),
        phrasings={
            "ENG": (
                "Label the email '{subject}' as {label}.",
                "Add the label '{label}' to {sender}'s message about '{subject}'.",
            ),
            "CHN": (
                "给邮件“{subject}”加上“{zh_label}”标签。",
                "为 {sender} 关于“{subject}”的邮件添加标签“{zh_label}”。",
            ),
        },
        wording=lambda p: {**{k: str(v) for k, v in p.model_dump().items()}, "zh_label": ZH_LABELS[p.label]},
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="mail.labelled", params={"subject": p.subject, "label": p.label}),
        allowed_changes=lambda p: ("apps.mail.data.emails.*.labels", "apps.mail.data.emails.*.unread"),
    )
)

register(
    TaskTemplate(
        id="mail.sender_of",
        app="Mail",
        params=Message,
        difficulty=1,
        step_budget=10,
        description="answer: who sent the message with a subject",
        sample=lambda rng: Message(**_message(rng)),
        phrasings={
            "ENG": (
                "Who sent me the email '{subject}'? Answer with the sender's name.",
                "Check my inbox: who wrote the message about '{subject}'?",
            ),
            "CHN": ("邮件“{subject}”是谁发给我的？请回答发件人姓名。", "查看收件箱：关于“{subject}”的邮件是谁写的？"),
        },
        wording=lambda p: {"subject": p.subject},
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches", params={"kind": "exact", "expected": p.sender, "app": "mail", "via": ["inbox"]}
        ),
        allowed_changes=lambda p: ("apps.mail.data.emails.*.unread",),
    )
)

register(
    TaskTemplate(
        id="mail.read_code",
        app="Mail",
        params=Code,
        difficulty=2,
        step_budget=12,
        description="answer: the verification code in a message (open it to read it)",
        sample=lambda rng: Code(sender=(s := rng.choice(SERVICES))[0], address=s[1], code=rng.choice(CODES)),
        phrasings={
            "ENG": (
                "What is the verification code in the email from {sender}?",
                "{sender} emailed me a code. What is it?",
            ),
            "CHN": ("{sender} 发来的邮件里的验证码是多少？", "{sender} 给我发了一个验证码邮件，验证码是什么？"),
        },
        wording=lambda p: {"sender": p.sender},
        setup=lambda p: (
            StateSetup(
                step="mail.add",
                params={
                    "emails": [
                        {
                            "sender": p.sender,
                            "address": p.address,
                            "subject": "Your verification code",
                            "body": f"Use {p.code} to sign in. It expires in 10 minutes.",
                        }
                    ]
                },
            ),
        ),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "number", "expected": p.code, "app": "mail", "via": ["inbox", "email"]},
        ),
        allowed_changes=lambda p: ("apps.mail.data.emails.*.unread",),
    )
)
