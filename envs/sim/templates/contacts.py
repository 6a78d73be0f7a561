"""Contacts templates: add, edit, delete and favourite people; read a phone number, an email, the favourites count."""

from __future__ import annotations

import random

from pydantic import Field

from darwin.envs.sim.apps.contacts import TEMPLATE_PEOPLE
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

CONTACTS = ("apps.contacts.data.contacts",)


def _name(rng: random.Random) -> str:
    first, last = rng.choice(TEMPLATE_PEOPLE)
    return f"{first} {last}"


def _phone(rng: random.Random) -> str:
    return f"+1 555-02{rng.randrange(10, 100)}"  # seeded contacts use 555-01xx


def _email(name: str, rng: random.Random) -> str:
    first, _, last = name.partition(" ")
    return f"{first.lower()}.{last.lower()}@{rng.choice(('mail.com', 'work.org', 'home.net'))}"


class Person(TemplateParams):
    name: str = Field(min_length=3, description="'First Last'")
    phone: str = Field(min_length=7)


class PersonEmail(Person):
    email: str = Field(min_length=5)


class PhoneChange(TemplateParams):
    name: str = Field(min_length=3)
    old_phone: str = Field(min_length=7)
    new_phone: str = Field(min_length=7)


class Favorites(TemplateParams):
    names: tuple[str, ...] = Field(
        min_length=1, max_length=6, description="the only favourites the instance's phone has"
    )


def _add(name: str, phone: str, email: str = "", starred: bool = False) -> StateSetup:
    first, _, last = name.partition(" ")
    return StateSetup(
        step="contacts.add",
        params={"contacts": [{"first": first, "last": last, "phone": phone, "email": email, "starred": starred}]},
    )


def _contact(**params: str) -> VerifierSpec:
    return VerifierSpec(predicate="contacts.contact", params=params)


def _sample_person(rng: random.Random) -> Person:
    return Person(name=_name(rng), phone=_phone(rng))


def _sample_person_email(rng: random.Random) -> PersonEmail:
    name = _name(rng)
    return PersonEmail(name=name, phone=_phone(rng), email=_email(name, rng))


register(
    TaskTemplate(
        id="contacts.add_contact",
        app="Contacts",
        params=Person,
        difficulty=2,
        step_budget=20,
        description="create a contact with a name and a phone number",
        sample=_sample_person,
        phrasings={
            "ENG": (
                "Add a contact named {name} with the phone number {phone}.",
                "Save {name}'s number, {phone}, in Contacts.",
                "Create a new contact: {name}, phone {phone}.",
            ),
            "CHN": ("新建联系人{name}，电话号码是{phone}。", "把{name}的电话{phone}存到通讯录里。"),
        },
        verifier=lambda p: _contact(name=p.name, phone=p.phone),
        allowed_changes=lambda p: CONTACTS,
        subgoals=lambda p: (_contact(name=p.name), _contact(name=p.name, phone=p.phone)),
    )
)

register(
    TaskTemplate(
        id="contacts.add_contact_email",
        app="Contacts",
        params=PersonEmail,
        difficulty=3,
        step_budget=24,
        description="create a contact with a name, a phone number and an email address",
        sample=_sample_person_email,
        phrasings={
            "ENG": (
                "Add {name} to my contacts with phone {phone} and email {email}.",
                "Create a contact for {name}: phone number {phone}, email address {email}.",
            ),
            "CHN": (
                "添加联系人{name}，电话{phone}，邮箱{email}。",
                "新建联系人：{name}，手机号{phone}，电子邮件{email}。",
            ),
        },
        verifier=lambda p: _contact(name=p.name, phone=p.phone, email=p.email),
        allowed_changes=lambda p: CONTACTS,
        subgoals=lambda p: (
            _contact(name=p.name),
            _contact(name=p.name, phone=p.phone),
            _contact(name=p.name, phone=p.phone, email=p.email),
        ),
    )
)

register(
    TaskTemplate(
        id="contacts.delete_contact",
        app="Contacts",
        params=Person,
        difficulty=1,
        step_budget=16,
        description="delete a contact (the instance adds it first)",
        sample=_sample_person,
        phrasings={
            "ENG": (
                "Delete the contact {name}.",
                "Remove {name} from my contacts.",
                "Get rid of {name}'s contact card.",
            ),
            "CHN": ("删除联系人{name}。", "把{name}从通讯录中删掉。"),
        },
        setup=lambda p: (_add(p.name, p.phone),),
        verifier=lambda p: VerifierSpec(predicate="contacts.no_contact", params={"name": p.name}),
        allowed_changes=lambda p: CONTACTS,
    )
)

register(
    TaskTemplate(
        id="contacts.edit_phone",
        app="Contacts",
        params=PhoneChange,
        difficulty=2,
        step_budget=20,
        description="change a contact's phone number (the instance adds the contact with the old one)",
        sample=lambda rng: PhoneChange(
            name=_name(rng),
            old_phone=(old := _phone(rng)),
            new_phone=rng.choice([f"+1 555-02{n}" for n in range(10, 100) if f"+1 555-02{n}" != old]),
        ),
        phrasings={
            "ENG": (
                "Change {name}'s phone number to {new_phone}.",
                "{name} has a new number, {new_phone}: update the contact.",
                "Update the phone number of {name} from {old_phone} to {new_phone}.",
            ),
            "CHN": ("把{name}的电话号码改成{new_phone}。", "{name}换了新号码{new_phone}，请更新联系人。"),
        },
        setup=lambda p: (_add(p.name, p.old_phone),),
        verifier=lambda p: VerifierSpec(predicate="contacts.phone", params={"name": p.name, "phone": p.new_phone}),
        allowed_changes=lambda p: ("apps.contacts.data.contacts.*.phone",),
    )
)

register(
    TaskTemplate(
        id="contacts.favorite",
        app="Contacts",
        params=Person,
        difficulty=1,
        step_budget=12,
        description="add a contact to Favorites (the instance adds the contact)",
        sample=_sample_person,
        phrasings={
            "ENG": (
                "Add {name} to my favorite contacts.",
                "Star the contact {name}.",
                "Mark {name} as a favorite in Contacts.",
            ),
            "CHN": ("把{name}加入收藏联系人。", "将联系人{name}设为星标。"),
        },
        setup=lambda p: (_add(p.name, p.phone),),
        verifier=lambda p: VerifierSpec(predicate="contacts.starred", params={"name": p.name}),
        allowed_changes=lambda p: ("apps.contacts.data.contacts.*.starred",),
    )
)

register(
    TaskTemplate(
        id="contacts.phone_of",
        app="Contacts",
        params=Person,
        difficulty=1,
        step_budget=12,
        description="answer: a contact's phone number",
        sample=_sample_person,
        phrasings={
            "ENG": ("What is {name}'s phone number?", "Look up {name} in Contacts: what is the number?"),
            "CHN": ("{name}的电话号码是多少？", "在通讯录里查一下{name}的手机号。"),
        },
        setup=lambda p: (_add(p.name, p.phone),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.phone, "app": "contacts", "via": ["detail"]},
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="contacts.email_of",
        app="Contacts",
        params=PersonEmail,
        difficulty=1,
        step_budget=12,
        description="answer: a contact's email address",
        sample=_sample_person_email,
        phrasings={
            "ENG": ("What is {name}'s email address?", "Find the email of {name} in Contacts."),
            "CHN": ("{name}的电子邮箱是什么？", "在通讯录中找到{name}的邮箱地址。"),
        },
        setup=lambda p: (_add(p.name, p.phone, p.email),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.email, "app": "contacts", "via": ["detail"]},
        ),
        allowed_changes=lambda p: (),
    )
)


def _favorites_setup(p: Favorites) -> tuple[StateSetup, ...]:
    contacts = []
    for i, name in enumerate(p.names):
        first, _, last = name.partition(" ")
        contacts.append({"first": first, "last": last, "phone": f"+1 555-03{10 + i}", "starred": True})
    return (StateSetup(step="contacts.add", params={"contacts": contacts, "only_favorites": True}),)


register(
    TaskTemplate(
        id="contacts.favorites_count",
        app="Contacts",
        params=Favorites,
        difficulty=2,
        step_budget=12,
        description="answer: how many contacts are in Favorites (the instance sets the favourites)",
        sample=lambda rng: Favorites(
            names=tuple(f"{first} {last}" for first, last in rng.sample(TEMPLATE_PEOPLE, rng.randint(1, 4)))
        ),
        phrasings={
            "ENG": ("How many contacts are in my Favorites?", "Count my favorite contacts."),
            "CHN": ("收藏联系人里有几个人？", "我有多少个星标联系人？"),
        },
        wording=lambda p: {"count": str(len(p.names))},
        setup=_favorites_setup,
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": f"{len(p.names)} favorite{'s' if len(p.names) != 1 else ''}",
                "app": "contacts",
                "via": ["favorites"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)
