"""Contacts: people with search, details, a create/edit form, favourites, and delete with confirmation."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.contacts_zh import ZH
from darwin.envs.sim.apps.forms import focus_next, typing_cost
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, norm, predicate, top

SEED_PEOPLE = (
    ("Adam", "Brooks"),
    ("Bella", "Moreno"),
    ("Carlos", "Diaz"),
    ("Chloe", "Evans"),
    ("Daniel", "Wright"),
    ("Emma", "Johnson"),
    ("Felix", "Wagner"),
    ("Grace", "Liu"),
    ("Hugo", "Martin"),
    ("Isla", "Murphy"),
    ("Jack", "Taylor"),
    ("Julia", "Novak"),
    ("Leo", "Bianchi"),
    ("Maya", "Patel"),
    ("Nathan", "Cole"),
    ("Olivia", "Brown"),
    ("Paul", "Schmidt"),
    ("Rosa", "Alvarez"),
    ("Sam", "Turner"),
    ("Tara", "Singh"),
)
"""Names a phone's seeded contacts are drawn from (templates use :data:`TEMPLATE_PEOPLE`)."""
TEMPLATE_PEOPLE = (
    ("Ana", "Lopez"),
    ("Wei", "Chen"),
    ("Priya", "Nair"),
    ("Kofi", "Mensah"),
    ("Sofia", "Rossi"),
    ("Lars", "Berg"),
    ("Mei", "Tanaka"),
    ("Omar", "Haddad"),
    ("Elena", "Petrova"),
    ("Diego", "Ramos"),
    ("Hana", "Kim"),
    ("Noah", "Fischer"),
    ("Amara", "Okafor"),
    ("Yara", "Costa"),
    ("Ivan", "Horvat"),
    ("Zoe", "Walsh"),
    ("Ravi", "Shah"),
    ("Nina", "Larsen"),
    ("Tomas", "Silva"),
    ("Aiko", "Mori"),
)
"""People task instances add (disjoint from :data:`SEED_PEOPLE`, so an instance never meets a namesake)."""
EMAIL_DOMAINS = ("gmail.com", "outlook.com", "example.com", "proton.me", "yahoo.com")
FIELDS = ("first", "last", "phone", "email")
FIELD_KEYS = {f: f"contacts.edit.{f}" for f in FIELDS}
FIELD_LABELS = {"first": "First name", "last": "Last name", "phone": "Phone", "email": "Email"}


def display_name(contact: dict[str, Any]) -> str:
    return f"{contact['first']} {contact['last']}".strip() or contact["phone"] or "(no name)"


def digits(phone: str) -> str:
    return "".join(c for c in phone if c.isdigit())


def email_for(first: str, last: str, domain: str) -> str:
    return f"{first.lower()}.{last.lower()}@{domain}"


class ContactsApp(SimApp):
    """Contacts: an alphabetical list with a count, Favorites, search, details, a create/edit form."""

    id = "contacts"
    label = "Contacts"
    package = "com.google.android.contacts"
    activity = "com.android.contacts.activities.PeopleActivity"
    color = (0, 137, 123)
    glyph = "☺"
    aliases = ("people", "phonebook")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        people = rng.sample(SEED_PEOPLE, k=14)
        numbers = rng.sample(range(100, 200), k=len(people))  # +1 555-01xx, never a template's 555-02xx
        contacts = [
            {
                "id": i + 1,
                "first": first,
                "last": last,
                "phone": f"+1 555-0{n}",
                "email": email_for(first, last, rng.choice(EMAIL_DOMAINS)) if rng.random() < 0.7 else "",
                "starred": rng.random() < 0.2,
            }
            for i, ((first, last), n) in enumerate(zip(people, numbers, strict=True))
        ]
        return {"contacts": contacts}

    def popup(self) -> None:
        return None  # a system app: no "rate us" prompt

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        contacts = ctx.data["contacts"]
        if name in ("home", "favorites"):
            ui.bottom_nav(
                [
                    ("contacts.tab.all", "Contacts", lambda: ctx.reset_to("home")),
                    ("contacts.tab.favorites", "Favorites", lambda: ctx.reset_to("favorites")),
                ],
                f"contacts.tab.{'all' if name == 'home' else 'favorites'}",
            )
        if name == "home":
            ui.app_bar("Contacts")
            ui.field(
                "contacts.search_bar",
                value="",
                focused=False,
                placeholder="Search contacts",
                on_focus=self._open_search(ctx),
                on_submit=None,
                on_clear=None,
            )
            ui.label("contacts.count", f"{len(contacts)} contact{'s' if len(contacts) != 1 else ''}")
            ui.list(
                "contacts",
                ctx.scroll_offset("contacts"),
                self._rows(ctx, sorted(contacts, key=_sort_key)),
                reserve_bottom=240,
            )
            ui.fab("contacts.add", "+", ctx.pusher("edit", contact=None))
        elif name == "favorites":
            ui.app_bar("Favorites")
            starred = sorted((c for c in contacts if c["starred"]), key=_sort_key)
            ui.label(
                "contacts.favorites_count",
                f"{len(starred)} favorite{'s' if len(starred) != 1 else ''}" if starred else "No favorites yet",
            )
            ui.list("favorites", ctx.scroll_offset("favorites"), self._rows(ctx, starred))
        elif name == "search":
            ui.app_bar("Search", on_back=ctx.popper())
            ctx.text_field(ui, "contacts.query", "Search contacts", on_submit=focus_next(ctx, None))
            query = norm(ctx.field("contacts.query"))
            if query:
                hits = [
                    c
                    for c in contacts
                    if query in norm(display_name(c))
                    or (digits(query) and digits(query) in digits(c["phone"]))
                    or query in norm(c["email"])
                ]
                if not hits:
                    ui.label("contacts.no_results", f"No contacts match '{ctx.field('contacts.query')}'")
                ui.list(
                    "results",
                    ctx.scroll_offset("results"),
                    self._rows(ctx, ctx.shuffled(sorted(hits, key=_sort_key), "search")),
                )
        elif name == "detail":
            self._detail(ui, ctx)
        elif name == "edit":
            self._edit(ui, ctx)
        else:
            raise ValueError(f"contacts: unknown screen {name!r}")

    @staticmethod
    def _rows(ctx: AppContext, contacts: list[dict[str, Any]]) -> list[Row]:
        return [
            Row(
                f"contacts.person.{c['id']}",
                display_name(c),
                glyph=display_name(c)[:1].upper(),
                on_tap=ctx.pusher("detail", contact=c["id"]),
            )
            for c in contacts
        ]

    @staticmethod
    def _open_search(ctx: AppContext):
        def open_search() -> None:
            ctx.push("search")
            ctx.phone.state["focus"] = "contacts.query"

        return open_search

    def _detail(self, ui: UI, ctx: AppContext) -> None:
        contact = _find(ctx.data, ctx.screen["contact"])
        if contact is None:
            ui.app_bar("Contact", on_back=ctx.popper())
            ui.label("contacts.gone", "This contact was deleted")
            return
        ui.app_bar(
            "",
            on_back=ctx.popper(),
            actions=[
                ("contacts.star", "★" if contact["starred"] else "☆", _flip_star(contact)),
                (
                    "contacts.edit",
                    "✎",
                    ctx.pusher("edit", contact=contact["id"], fields={FIELD_KEYS[f]: contact[f] for f in FIELDS}),
                ),
            ],
        )
        ui.title(display_name(contact))
        ui.label("contacts.detail.favorite", "In Favorites" if contact["starred"] else "Not in Favorites")
        ui.row("contacts.detail.phone", contact["phone"] or "No phone number", "Mobile", glyph="☎")
        if contact["email"]:
            ui.row("contacts.detail.email", contact["email"], "Email", glyph="@")
        ui.button("contacts.delete", "Delete", lambda: ctx.screen.__setitem__("confirm", True), role="secondary")
        if ctx.screen.get("confirm"):
            ui.dialog(
                "contacts.delete_dialog",
                "Delete contact?",
                f"{display_name(contact)} will be removed from your contacts.",
                [
                    ("contacts.delete.cancel", "Cancel", lambda: ctx.screen.__setitem__("confirm", False)),
                    ("contacts.delete.confirm", "Delete", _deleter(ctx, contact["id"])),
                ],
            )

    def _edit(self, ui: UI, ctx: AppContext) -> None:
        creating = ctx.screen["contact"] is None
        ui.app_bar(
            "Create contact" if creating else "Edit contact",
            on_back=self._close_edit(ctx),
            actions=[("contacts.save", "✓", self._save(ctx), "Save")],
        )
        for i, f in enumerate(FIELDS):
            nxt = FIELD_KEYS[FIELDS[i + 1]] if i + 1 < len(FIELDS) else None
            ui.label(
                f"contacts.edit.{f}_label", FIELD_LABELS[f], h=64
            )  # the label stays visible once a field holds text
            ctx.text_field(ui, FIELD_KEYS[f], FIELD_LABELS[f], on_submit=focus_next(ctx, nxt))
        if ctx.screen.get("confirm"):
            ui.dialog(
                "contacts.discard_dialog",
                "Discard changes?",
                "Your changes to this contact will be lost.",
                [
                    ("contacts.discard.keep", "Keep editing", lambda: ctx.screen.__setitem__("confirm", False)),
                    ("contacts.discard.confirm", "Discard", ctx.popper()),
                ],
            )

    def handle_back(self, ctx: AppContext) -> bool:
        screen = ctx.screen
        if screen["name"] in ("detail", "edit") and screen.get("confirm"):
            screen["confirm"] = False
            return True
        if screen["name"] == "edit" and _edited(ctx):
            screen["confirm"] = True  # back with unsaved changes asks first
            return True
        return False

    def _close_edit(self, ctx: AppContext):
        def close() -> None:
            if not self.handle_back(ctx):
                ctx.pop()

        return close

    @staticmethod
    def _save(ctx: AppContext):
        def save() -> None:
            values = {f: ctx.field(FIELD_KEYS[f]).strip() for f in FIELDS}
            if not (values["first"] or values["last"] or values["phone"]):
                ctx.toast("Add a name or a phone number")
                return
            contacts = ctx.data["contacts"]
            contact = _find(ctx.data, ctx.screen["contact"])
            if contact is None:
                new_id = max((c["id"] for c in contacts), default=0) + 1
                contacts.append({"id": new_id, **values, "starred": False})
                ctx.replace("detail", contact=new_id)
            else:
                contact.update(values)
                ctx.pop()
            ctx.toast("Contact saved")

        return save


def _sort_key(contact: dict[str, Any]) -> tuple[str, int]:
    return norm(display_name(contact)), contact["id"]


def _find(d: dict[str, Any], contact_id: int | None) -> dict[str, Any] | None:
    return next((c for c in d["contacts"] if c["id"] == contact_id), None)


def _edited(ctx: AppContext) -> bool:
    contact = _find(ctx.data, ctx.screen["contact"])
    return any(ctx.field(FIELD_KEYS[f]) != (contact[f] if contact else "") for f in FIELDS)


def _flip_star(contact: dict[str, Any]):
    def flip() -> None:
        contact["starred"] = not contact["starred"]

    return flip


def _deleter(ctx: AppContext, contact_id: int):
    def delete() -> None:
        ctx.data["contacts"] = [c for c in ctx.data["contacts"] if c["id"] != contact_id]
        ctx.pop()
        ctx.toast("Contact deleted")

    return delete


# -- predicates -----------------------------------------------------------------------------
class ContactSpec(PredicateParams):
    """A contact by display name ('First Last'), optionally with its phone and email."""

    name: str = Field(min_length=1)
    phone: str | None = None
    email: str | None = None

    def texts(self) -> list[str]:
        first, _, last = self.name.partition(" ")
        return [t for t in (first, last, self.phone, self.email) if t]

    def targets(self) -> dict[str, str]:
        first, _, last = self.name.partition(" ")
        out = {"first": first, "last": last}
        if self.phone is not None:
            out["phone"] = self.phone
        if self.email is not None:
            out["email"] = self.email
        return out


def _matches(contact: dict[str, Any], p: ContactSpec) -> bool:
    return (
        norm(display_name(contact)) == norm(p.name)
        and (p.phone is None or digits(contact["phone"]) == digits(p.phone))
        and (p.email is None or norm(contact["email"]) == norm(p.email))
    )


def _on(state: dict[str, Any], screen: str) -> dict[str, Any] | None:
    """The Contacts top screen if it is ``screen`` (in front or not: opening the app resumes it; see _fg)."""
    s = top(state, "contacts")
    return s if s["name"] == screen else None


def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "contacts" and state["popup"] is None else 1


def _form_cost(state: dict[str, Any], screen: dict[str, Any], targets: dict[str, str]) -> int:
    """Fill the open edit form with ``targets`` and save (a discard dialog costs one more tap)."""
    fields = screen.get("fields", {})
    pairs = [(fields.get(FIELD_KEYS[f], ""), value) for f, value in targets.items()]
    return typing_cost(pairs, focused=state["focus"] is not None) + 1 + int(bool(screen.get("confirm")))


def _edit_cost(contact: dict[str, Any] | None, targets: dict[str, str]) -> int:
    """Typing cost of an edit form opened on ``contact`` (None: an empty create form), plus save."""
    pairs = [(contact[f] if contact else "", value) for f, value in targets.items()]
    return typing_cost(pairs, focused=False) + 1


def contact_cost(state: dict[str, Any], targets: dict[str, str]) -> int:
    """Lower bound on making some contact's fields equal ``targets`` (create one or edit one)."""
    form = _on(state, "edit")
    if form is not None:
        return _fg(state) + _form_cost(state, form, targets)
    s = top(state, "contacts")
    # Create: '+' on the list (from any other screen one more action first).
    best = (0 if s["name"] == "home" else 1) + 1 + _edit_cost(None, targets)
    for c in data(state, "contacts")["contacts"]:
        # Edit: the pencil on its details (from elsewhere, at least a tap on its row first).
        on_detail = s["name"] == "detail" and s.get("contact") == c["id"] and not s.get("confirm")
        best = min(best, (1 if on_detail else 2) + _edit_cost(c, targets))
    return _fg(state) + best


@predicate("contacts.contact", ContactSpec)
def contact(state: dict[str, Any], p: ContactSpec) -> Check:
    """A contact named ``name`` exists (with ``phone`` and ``email`` when given; phones compare by digits)."""
    if any(_matches(c, p) for c in data(state, "contacts")["contacts"]):
        return Check.of(0)
    return Check.of(contact_cost(state, p.targets()))


class ContactPhone(PredicateParams):
    name: str = Field(min_length=1)
    phone: str = Field(min_length=1)

    def texts(self) -> list[str]:
        first, _, last = self.name.partition(" ")
        return [self.phone, first, last]


@predicate("contacts.phone", ContactPhone)
def phone(state: dict[str, Any], p: ContactPhone) -> Check:
    """``name`` is in Contacts and every contact of that name has the phone number ``phone``."""
    named = [c for c in data(state, "contacts")["contacts"] if norm(display_name(c)) == norm(p.name)]
    wrong = [c for c in named if digits(c["phone"]) != digits(p.phone)]
    if named and not wrong:
        return Check.of(0)
    first, _, last = p.name.partition(" ")
    if not named:
        return Check.of(contact_cost(state, {"first": first, "last": last, "phone": p.phone}))
    # Each wrong contact is edited (pencil, clear, type, save) or, when a right one exists, deleted
    # (Delete, confirm); reaching the next one takes at least one more tap.
    extra = 3 * (len(wrong) - 1)
    form = _on(state, "edit")
    if form is not None and form.get("contact") in {c["id"] for c in wrong}:
        return Check.of(_fg(state) + min(_form_cost(state, form, {"phone": p.phone}), 3) + extra)
    s = top(state, "contacts")
    on_detail = s["name"] == "detail" and s.get("contact") in {c["id"] for c in wrong}
    cost = 4 if on_detail else 5
    if len(named) > len(wrong):
        cost = 2 if on_detail else 3
    return Check.of(_fg(state) + cost + extra)


class ContactName(PredicateParams):
    name: str = Field(min_length=1)


@predicate("contacts.no_contact", ContactName)
def no_contact(state: dict[str, Any], p: ContactName) -> Check:
    """No contact is named ``name``."""
    named = [c for c in data(state, "contacts")["contacts"] if norm(display_name(c)) == norm(p.name)]
    if not named:
        return Check.of(0)
    detail = _on(state, "detail")
    first = 3  # a tap on its row, Delete, confirm
    if detail is not None and detail.get("contact") in {c["id"] for c in named}:
        first = 1 if detail.get("confirm") else 2
    return Check.of(_fg(state) + first + 3 * (len(named) - 1))


class Starred(PredicateParams):
    name: str = Field(min_length=1)
    starred: bool = True


@predicate("contacts.starred", Starred)
def starred(state: dict[str, Any], p: Starred) -> Check:
    """``name`` is in Contacts and every contact of that name is a favourite (or none is, with ``starred=False``)."""
    named = [c for c in data(state, "contacts")["contacts"] if norm(display_name(c)) == norm(p.name)]
    wrong = [c for c in named if c["starred"] != p.starred]
    if named and not wrong:
        return Check.of(0)
    if not named:
        first, _, last = p.name.partition(" ")
        return Check.of(contact_cost(state, {"first": first, "last": last}) + 1)
    detail = _on(state, "detail")
    on_one = detail is not None and not detail.get("confirm") and detail.get("contact") in {c["id"] for c in wrong}
    return Check.of(_fg(state) + (1 if on_one else 2) + 3 * (len(wrong) - 1))


# -- setup steps ----------------------------------------------------------------------------
class NewContact(PredicateParams):
    first: str = Field(min_length=1)
    last: str = ""
    phone: str = Field(min_length=1)
    email: str = ""
    starred: bool = False


class AddContacts(PredicateParams):
    """Contacts to put on the phone; one of the same name is replaced (so a repeated setup adds nothing twice)."""

    contacts: list[NewContact] = Field(min_length=1)
    only_favorites: bool = Field(
        False, description="unstar every other contact, so the given ones are the only favourites"
    )


@setup_step("contacts.add", AddContacts)
def _add_contacts(state: dict[str, Any], p: AddContacts) -> None:
    """Add (or replace by name) the given contacts."""
    d = data(state, "contacts")
    for spec in p.contacts:
        record = spec.model_dump()
        name = norm(display_name(record))
        kept = [c for c in d["contacts"] if norm(display_name(c)) != name]
        old_ids = [c["id"] for c in d["contacts"] if norm(display_name(c)) == name]
        new_id = old_ids[0] if old_ids else max((c["id"] for c in d["contacts"]), default=0) + 1
        d["contacts"] = [*kept, {"id": new_id, **record}]
    if p.only_favorites:
        given = {norm(f"{s.first} {s.last}".strip()) for s in p.contacts if s.starred}
        for c in d["contacts"]:
            c["starred"] = norm(display_name(c)) in given
