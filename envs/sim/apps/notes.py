"""Notes: a list of notes (pinned first), search, an editor that saves on back, pin, delete with confirmation."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.forms import focus_next, same, typing_cost
from darwin.envs.sim.apps.notes_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, norm, predicate, top

SEED_NOTES = (
    ("Shopping list", ("Milk, eggs, bread", "Apples, rice, coffee", "Pasta, tomatoes, basil")),
    ("Books to read", ("Dune; The Hobbit", "Middlemarch; Beloved", "Emma; Persuasion")),
    ("Wi-Fi", ("Guest network: sunflower42", "Guest network: bluebird77", "Guest network: maple19")),
    ("Packing list", ("Passport, charger, socks", "Tent, torch, matches")),
    ("Gift ideas", ("Scarf for Dad", "Plant for Mom", "Puzzle for Sam")),
    ("Recipes", ("Pancakes: 2 eggs, 1 cup flour", "Soup: leeks and potatoes")),
    ("Workout", ("Run 5 km, stretch", "Swim 20 laps")),
    ("Garden", ("Water the roses on Friday", "Plant tulip bulbs")),
)
"""Notes a phone's seeded notes are drawn from (templates use :data:`TEMPLATE_NOTES`)."""
TEMPLATE_NOTES = (
    ("Door code", "Front door code 4172"),
    ("Parking spot", "Level 3, spot 118"),
    ("Locker", "Locker number 52"),
    ("Bike lock", "Combination 8305"),
    ("Flight", "Seat 14C on LX 318"),
    ("Meeting room", "Room 611, west wing"),
    ("Plumber", "Call Joe's Plumbing at 555-0277"),
    ("Vet", "Rex is due for shots in May"),
    ("Library", "Return books by the 28th"),
    ("Allergies", "Sam is allergic to peanuts"),
)
"""Notes task instances add (titles disjoint from :data:`SEED_NOTES`)."""
TITLE, BODY = "notes.title", "notes.body"


def preview(note: dict[str, Any]) -> str:
    return note["body"].split("\n", 1)[0]


class NotesApp(SimApp):
    """Notes (like Keep): a list with pinned notes on top, search, and an editor that saves when closed."""

    id = "notes"
    label = "Notes"
    package = "com.google.android.keep"
    activity = "com.google.android.keep.activities.BrowseActivity"
    color = (214, 150, 0)
    glyph = "✎"
    aliases = ("keep", "keep notes", "google keep")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        chosen = rng.sample(SEED_NOTES, k=6)
        notes = [
            {"id": i + 1, "title": title, "body": rng.choice(bodies), "pinned": rng.random() < 0.25}
            for i, (title, bodies) in enumerate(chosen)
        ]
        return {"notes": notes}

    def popup(self) -> None:
        return None

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        notes = ctx.data["notes"]
        if name == "home":
            ui.app_bar("Notes")
            ui.field(
                "notes.search_bar",
                value="",
                focused=False,
                placeholder="Search your notes",
                on_focus=self._open_search(ctx),
                on_submit=None,
                on_clear=None,
            )
            pinned = [n for n in notes if n["pinned"]]
            others = ctx.shuffled([n for n in notes if not n["pinned"]], "notes")
            rows = [self._row(ctx, n, pinned=True) for n in pinned] + [self._row(ctx, n) for n in others]
            if not rows:
                ui.label("notes.empty", "Notes you add appear here")
            ui.list("notes", ctx.scroll_offset("notes"), rows, reserve_bottom=240)
            ui.fab("notes.new", "+", self._new_note(ctx))
        elif name == "search":
            ui.app_bar("Search", on_back=ctx.popper())
            ctx.text_field(ui, "notes.query", "Search your notes", on_submit=focus_next(ctx, None))
            query = norm(ctx.field("notes.query"))
            if query:
                hits = [
                    self._row(ctx, n, pinned=n["pinned"])
                    for n in notes
                    if query in norm(n["title"]) or query in norm(n["body"])
                ]
                if not hits:
                    ui.label("notes.no_results", f"No matching notes for '{ctx.field('notes.query')}'")
                ui.list("results", ctx.scroll_offset("results"), ctx.shuffled(hits, "search"))
        elif name == "edit":
            self._edit(ui, ctx)
        else:
            raise ValueError(f"notes: unknown screen {name!r}")

    @staticmethod
    def _row(ctx: AppContext, note: dict[str, Any], pinned: bool = False) -> Row:
        return Row(
            f"notes.note.{note['id']}",
            note["title"] or preview(note) or "(empty note)",
            ("Pinned · " if pinned else "") + preview(note),
            glyph="★" if pinned else "",
            on_tap=ctx.pusher("edit", note=note["id"], fields={TITLE: note["title"], BODY: note["body"]}),
        )

    @staticmethod
    def _open_search(ctx: AppContext):
        def open_search() -> None:
            ctx.push("search")
            ctx.phone.state["focus"] = "notes.query"

        return open_search

    @staticmethod
    def _new_note(ctx: AppContext):
        def new_note() -> None:
            ctx.push("edit", note=None)
            ctx.phone.state["focus"] = TITLE  # a new note opens with the keyboard on its title

        return new_note

    def _edit(self, ui: UI, ctx: AppContext) -> None:
        s = ctx.screen
        note = _find(ctx.data, s["note"])
        if s["note"] is not None and note is None:
            ui.app_bar("Note", on_back=ctx.popper())
            ui.label("notes.gone", "This note was deleted")
            return
        actions = []
        if note is not None:
            actions = [
                ("notes.pin", "★" if note["pinned"] else "☆", _flip_pin(note)),
                ("notes.delete", "menu", lambda: s.__setitem__("confirm", True)),
            ]
        ui.app_bar("Edit note" if note is not None else "New note", on_back=self._close(ctx), actions=actions)
        ctx.text_field(ui, TITLE, "Title", on_submit=focus_next(ctx, BODY))
        ctx.text_field(ui, BODY, "Note", multiline=True, h=400)
        if note is not None:
            ui.label("notes.state", "Pinned" if note["pinned"] else "Not pinned")
        if note is not None and s.get("confirm"):
            ui.dialog(
                "notes.delete_dialog",
                "Delete note?",
                f"'{note['title'] or preview(note)}' will be deleted.",
                [
                    ("notes.delete.cancel", "Cancel", lambda: s.__setitem__("confirm", False)),
                    ("notes.delete.confirm", "Delete", _deleter(ctx, note["id"])),
                ],
            )

    def handle_back(self, ctx: AppContext) -> bool:
        s = ctx.screen
        if s["name"] != "edit":
            return False
        if s.get("confirm"):
            s["confirm"] = False
            return True
        _save(ctx)  # closing the editor saves it, as in Keep; the stack then pops
        return False

    def _close(self, ctx: AppContext):
        def close() -> None:
            if not self.handle_back(ctx):
                ctx.pop()

        return close


def _find(d: dict[str, Any], note_id: int | None) -> dict[str, Any] | None:
    return next((n for n in d["notes"] if n["id"] == note_id), None)


def _save(ctx: AppContext) -> None:
    title, body = ctx.field(TITLE).strip(), ctx.field(BODY).strip()
    note = _find(ctx.data, ctx.screen["note"])
    if note is not None:
        note["title"], note["body"] = title, body
    elif title or body:
        new_id = max((n["id"] for n in ctx.data["notes"]), default=0) + 1
        ctx.data["notes"].append({"id": new_id, "title": title, "body": body, "pinned": False})
    elif ctx.screen["note"] is None:
        ctx.toast("Empty note discarded")


def _flip_pin(note: dict[str, Any]):
    def flip() -> None:
        note["pinned"] = not note["pinned"]

    return flip


def _deleter(ctx: AppContext, note_id: int):
    def delete() -> None:
        ctx.data["notes"] = [n for n in ctx.data["notes"] if n["id"] != note_id]
        ctx.pop()
        ctx.toast("Note deleted")

    return delete


# -- predicates -----------------------------------------------------------------------------
def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "notes" and state["popup"] is None else 1


def _note_cost(state: dict[str, Any], title: str | None, body: str | None) -> int:
    """Lower bound on making some note read ``title`` / ``body`` (None: any) and saving it by closing the editor."""

    def pairs(cur_title: str, cur_body: str) -> list[tuple[str, str]]:
        out = []
        if title is not None:
            out.append((cur_title, title))
        if body is not None:
            out.append((cur_body, body))
        return out

    s = top(state, "notes")
    if s["name"] == "edit" and not (s["note"] is not None and _find(data(state, "notes"), s["note"]) is None):
        fields = s.get("fields", {})
        dialog = int(bool(s.get("confirm")))
        return (
            _fg(state)
            + dialog
            + typing_cost(pairs(fields.get(TITLE, ""), fields.get(BODY, "")), state["focus"] is not None)
            + 1
        )
    # A new note opens with its title focused; a note's row opens it with nothing focused.
    best = (1 if s["name"] == "home" else 2) + typing_cost(pairs("", ""), True) + 1
    for n in data(state, "notes")["notes"]:
        best = min(best, 1 + typing_cost(pairs(n["title"], n["body"]), False) + 1)
    return _fg(state) + best


class NoteSpec(PredicateParams):
    title: str = Field(min_length=1)
    body: str | None = None
    replaces: str | None = Field(None, description="a title no note may have any more (a rename, not a copy)")

    def texts(self) -> list[str]:
        return [t for t in (self.title, self.body) if t]


@predicate("notes.note", NoteSpec)
def note(state: dict[str, Any], p: NoteSpec) -> Check:
    """A note titled ``title`` (with exactly ``body`` when given) is saved, and none is titled ``replaces``."""
    notes = data(state, "notes")["notes"]
    found = any(same(n["title"], p.title) and (p.body is None or same(n["body"], p.body)) for n in notes)
    stale = sum(1 for n in notes if p.replaces is not None and same(n["title"], p.replaces))
    if found and not stale:
        return Check.of(0)
    if found:
        return Check.of(_fg(state) + 2 * stale)  # each old one: retitled or deleted, two actions at least
    return Check.of(_note_cost(state, p.title, p.body) + 2 * max(0, stale - 1))


class NoteText(PredicateParams):
    text: str = Field(min_length=1)

    def texts(self) -> list[str]:
        return [self.text]


@predicate("notes.has_note", NoteText)
def has_note(state: dict[str, Any], p: NoteText) -> Check:
    """A note whose title or text is exactly ``text`` (case and spacing aside) is saved."""
    if any(same(n["title"], p.text) or same(n["body"], p.text) for n in data(state, "notes")["notes"]):
        return Check.of(0)
    return Check.of(min(_note_cost(state, p.text, None), _note_cost(state, None, p.text)))


@predicate("notes.no_note", NoteText)
def no_note(state: dict[str, Any], p: NoteText) -> Check:
    """No note's title or text is ``text``."""
    hits = [n for n in data(state, "notes")["notes"] if same(n["title"], p.text) or same(n["body"], p.text)]
    if not hits:
        return Check.of(0)
    s = top(state, "notes")
    first = 3  # its row, delete, confirm
    if s["name"] == "edit" and s.get("note") in {n["id"] for n in hits}:
        first = 1 if s.get("confirm") else 2
    return Check.of(_fg(state) + first + 3 * (len(hits) - 1))


class Pinned(PredicateParams):
    title: str = Field(min_length=1)
    pinned: bool = True


@predicate("notes.pinned", Pinned)
def pinned(state: dict[str, Any], p: Pinned) -> Check:
    """A note titled ``title`` exists and every note of that title is pinned (or unpinned)."""
    named = [n for n in data(state, "notes")["notes"] if same(n["title"], p.title)]
    wrong = [n for n in named if n["pinned"] != p.pinned]
    if named and not wrong:
        return Check.of(0)
    if not named:
        return Check.of(_note_cost(state, p.title, None) + 2)  # then reopen it and pin
    s = top(state, "notes")
    on_one = s["name"] == "edit" and s.get("note") in {n["id"] for n in wrong} and not s.get("confirm")
    return Check.of(_fg(state) + (1 if on_one else 2) + 3 * (len(wrong) - 1))


# -- setup steps ----------------------------------------------------------------------------
class NewNote(PredicateParams):
    title: str = ""
    body: str = ""
    pinned: bool = False


class AddNotes(PredicateParams):
    """Notes to put on the phone; one with the same title is replaced (a repeated setup adds nothing twice)."""

    notes: list[NewNote] = Field(min_length=1)


@setup_step("notes.add", AddNotes)
def _add_notes(state: dict[str, Any], p: AddNotes) -> None:
    """Add (or replace by title) the given notes."""
    d = data(state, "notes")
    for spec in p.notes:
        same_title = [n["id"] for n in d["notes"] if spec.title and same(n["title"], spec.title)]
        new_id = same_title[0] if same_title else max((n["id"] for n in d["notes"]), default=0) + 1
        d["notes"] = [n for n in d["notes"] if not (spec.title and same(n["title"], spec.title))]
        d["notes"].append({"id": new_id, **spec.model_dump()})
