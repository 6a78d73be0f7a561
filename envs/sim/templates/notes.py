"""Notes templates: write, delete, pin and rename notes; find the note that mentions something, read a value from one."""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import Field

from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

NOTES = ("apps.notes.data.notes",)
FACTS = (
    # title, body, a phrase only the body holds, the value an answer reads (as the note shows it), what it is
    ("Door code", "Front door code 4172", "front door", "4172", "front door code"),
    ("Parking", "Parked on level 3, spot 118", "level 3", "spot 118", "parking spot"),
    ("Locker", "Gym locker number 5207", "gym locker", "5207", "gym locker number"),
    ("Bike lock", "Bike lock combination 8305", "combination", "8305", "bike lock combination"),
    ("Meeting room", "Planning meeting in room 611", "planning meeting", "room 611", "meeting room number"),
    ("Allergies", "Sam is allergic to peanuts", "peanuts", "", ""),
    ("Library", "Return the books by the 28th", "return the books", "", ""),
    ("Vet", "Rex is due for his shots in May", "shots", "", ""),
)
"""Notes task instances add (titles and phrases disjoint from the seeded notes, envs/sim/apps/notes.py)."""
VALUES = [f for f in FACTS if f[3]]
NEW_BODIES = (
    "Buy stamps at the post office",
    "Renew the passport before June",
    "Book a table for Friday",
    "Pick up the dry cleaning",
    "Ask Sam about the trip",
    "Water the plants on Sunday",
)
NEW_TITLES = ("Errands", "Reminders", "Weekend", "To do", "Trip", "Calls")
QUICK = ("Call the plumber", "Buy stamps", "Renew passport", "Book a table", "Pick up dry cleaning", "Pay the rent")
RENAMES = ("Important", "Keep safe", "Reminder", "Personal", "Codes", "Misc")


class NewNote(TemplateParams):
    title: str = Field(min_length=1)
    body: str = Field(min_length=1)


class QuickNote(TemplateParams):
    text: str = Field(min_length=1)


class Rename(NewNote):
    new_title: str = Field(min_length=1)


class Mention(NewNote):
    phrase: str = Field(min_length=1, description="words only this note's body holds")


class Value(NewNote):
    value: str = Field(min_length=1, description="the value as the note shows it")
    what: str = Field(min_length=1)


def _fact(rng: random.Random, pool: Sequence[tuple[str, ...]] = FACTS) -> tuple[str, ...]:
    return rng.choice(list(pool))


def _add(title: str, body: str) -> StateSetup:
    return StateSetup(step="notes.add", params={"notes": [{"title": title, "body": body}]})


def _note(**params: str) -> VerifierSpec:
    return VerifierSpec(predicate="notes.note", params=params)


register(
    TaskTemplate(
        id="notes.create_note",
        app="Notes",
        params=NewNote,
        difficulty=2,
        step_budget=16,
        description="write a note with a title and a text",
        sample=lambda rng: NewNote(title=rng.choice(NEW_TITLES), body=rng.choice(NEW_BODIES)),
        phrasings={
            "ENG": (
                "Create a note titled '{title}' that says '{body}'.",
                "Write a new note, title '{title}', text '{body}'.",
                "Add a note called '{title}' with the text '{body}'.",
            ),
            "CHN": ("新建一条标题为“{title}”的笔记，内容是“{body}”。", "写一条笔记：标题“{title}”，正文“{body}”。"),
        },
        verifier=lambda p: _note(title=p.title, body=p.body),
        allowed_changes=lambda p: NOTES,
        subgoals=lambda p: (_note(title=p.title), _note(title=p.title, body=p.body)),
    )
)

register(
    TaskTemplate(
        id="notes.quick_note",
        app="Notes",
        params=QuickNote,
        difficulty=1,
        step_budget=12,
        description="jot something down (title or text)",
        sample=lambda rng: QuickNote(text=rng.choice(QUICK)),
        phrasings={
            "ENG": ("Write down '{text}' in Notes.", "Make a note: '{text}'.", "Add a note saying '{text}'."),
            "CHN": ("在笔记里记下“{text}”。", "新建笔记：“{text}”。"),
        },
        verifier=lambda p: VerifierSpec(predicate="notes.has_note", params={"text": p.text}),
        allowed_changes=lambda p: NOTES,
    )
)

register(
    TaskTemplate(
        id="notes.delete_note",
        app="Notes",
        params=NewNote,
        difficulty=1,
        step_budget=16,
        description="delete a note (the instance adds it)",
        sample=lambda rng: NewNote(title=(f := _fact(rng))[0], body=f[1]),
        phrasings={
            "ENG": ("Delete the note '{title}'.", "Remove my '{title}' note.", "Throw away the note called '{title}'."),
            "CHN": ("删除笔记“{title}”。", "把“{title}”这条笔记删掉。"),
        },
        setup=lambda p: (_add(p.title, p.body),),
        verifier=lambda p: VerifierSpec(predicate="notes.no_note", params={"text": p.title}),
        allowed_changes=lambda p: NOTES,
    )
)

register(
    TaskTemplate(
        id="notes.pin_note",
        app="Notes",
        params=NewNote,
        difficulty=1,
        step_budget=12,
        description="pin a note (the instance adds it, unpinned)",
        sample=lambda rng: NewNote(title=(f := _fact(rng))[0], body=f[1]),
        phrasings={
            "ENG": ("Pin the note '{title}'.", "Keep my '{title}' note at the top: pin it."),
            "CHN": ("置顶笔记“{title}”。", "把“{title}”这条笔记固定在顶部。"),
        },
        setup=lambda p: (_add(p.title, p.body),),
        verifier=lambda p: VerifierSpec(predicate="notes.pinned", params={"title": p.title}),
        allowed_changes=lambda p: ("apps.notes.data.notes.*.pinned",),
    )
)

register(
    TaskTemplate(
        id="notes.rename_note",
        app="Notes",
        params=Rename,
        difficulty=2,
        step_budget=16,
        description="change a note's title, keeping its text (the instance adds it)",
        sample=lambda rng: Rename(title=(f := _fact(rng))[0], body=f[1], new_title=rng.choice(RENAMES)),
        phrasings={
            "ENG": (
                "Rename the note '{title}' to '{new_title}'.",
                "Change the title of my '{title}' note to '{new_title}'.",
            ),
            "CHN": ("把笔记“{title}”重命名为“{new_title}”。", "将“{title}”笔记的标题改成“{new_title}”。"),
        },
        setup=lambda p: (_add(p.title, p.body),),
        verifier=lambda p: _note(title=p.new_title, body=p.body, replaces=p.title),
        allowed_changes=lambda p: ("apps.notes.data.notes.*.title",),
        subgoals=lambda p: (
            VerifierSpec(predicate="notes.no_note", params={"text": p.title}),
            _note(title=p.new_title, body=p.body, replaces=p.title),
        ),
    )
)

register(
    TaskTemplate(
        id="notes.find_note",
        app="Notes",
        params=Mention,
        difficulty=2,
        step_budget=12,
        description="answer: the title of the note that mentions a phrase",
        sample=lambda rng: Mention(title=(f := _fact(rng))[0], body=f[1], phrase=f[2]),
        phrasings={
            "ENG": (
                "Which note mentions '{phrase}'? Answer with its title.",
                "Find the note about '{phrase}' and tell me its title.",
            ),
            "CHN": ("哪条笔记提到了“{phrase}”？请回答标题。", "找到提到“{phrase}”的笔记，告诉我它的标题。"),
        },
        setup=lambda p: (_add(p.title, p.body),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches", params={"kind": "exact", "expected": p.title, "app": "notes", "via": ["home"]}
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="notes.read_value",
        app="Notes",
        params=Value,
        difficulty=1,
        step_budget=12,
        description="answer: a number kept in a note (number matcher)",
        sample=lambda rng: Value(title=(f := _fact(rng, VALUES))[0], body=f[1], value=f[3], what=f[4]),
        phrasings={
            "ENG": ("What is my {what}? It is in my '{title}' note.", "Check the '{title}' note: what is the {what}?"),
            "CHN": ("我的“{title}”笔记里记的{what}是多少？", "查看“{title}”笔记：{what}是多少？"),
        },
        setup=lambda p: (_add(p.title, p.body),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches", params={"kind": "number", "expected": p.value, "app": "notes", "via": ["home"]}
        ),
        allowed_changes=lambda p: (),
    )
)
