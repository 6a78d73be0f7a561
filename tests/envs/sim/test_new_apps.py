"""Contacts, Calendar, Messages and Notes: predicates on hand-built states (no phone), setup steps,
screens, the oracle on every instance of their templates, and what adding them changed elsewhere."""

from __future__ import annotations

import copy

import pytest

from darwin.actions import Click, OpenApp, PressBack, Type
from darwin.agents.scripted import RandomActor
from darwin.envs.sim.apps import default_apps
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.envs.sim.ui import HEIGHT, WIDTH
from darwin.predicates import evaluate
from darwin.sft.config import SFTConfig
from darwin.templates import templates
from darwin.types import StateSetup, VerifierSpec

NEW_APPS = ("Contacts", "Calendar", "Messages", "Notes")
NEW_TEMPLATES = sorted(t.id for t in templates().values() if t.app in NEW_APPS)
CANONICAL = PerturbationConfig(enabled=False)


# -- helpers -------------------------------------------------------------------------------
def blank(**app_data: dict) -> dict:
    """A fresh phone's state (on the launcher) with the given apps' data replaced by hand-written data."""
    state = SimPhone(seed=0, perturbation=CANONICAL).snapshot()
    for app, d in app_data.items():
        state["apps"][app]["data"] = copy.deepcopy(d)
    return state


def at(state: dict, app: str, *stack: dict, focus: str | None = None) -> dict:
    """``state`` with ``app`` in front showing ``stack`` (root first)."""
    out = copy.deepcopy(state)
    out["foreground"] = app
    out["apps"][app]["stack"] = [copy.deepcopy(s) for s in stack]
    out["focus"] = focus
    return out


def check(state: dict, predicate: str, **params) -> tuple[bool, int]:
    c = evaluate(VerifierSpec(predicate=predicate, params=params), state)
    return c.success, c.unmet


def tap(phone: SimPhone, widget_id: str) -> None:
    widget = phone.layout().find(widget_id)
    assert widget is not None, f"{widget_id} not on screen: {[w.id for w in phone.layout().widgets]}"
    phone.execute(Click(x=widget.center[0], y=widget.center[1]))


def screen(phone: SimPhone, app: str) -> str:
    return phone.top_screen(app)["name"]


ANA = {"id": 1, "first": "Ana", "last": "Lopez", "phone": "+1 555-0211", "email": "ana@mail.com", "starred": False}
BEN = {"id": 2, "first": "Ben", "last": "Ode", "phone": "+1 555-0101", "email": "", "starred": True}
CONTACTS = {"contacts": [ANA, BEN]}


# -- Contacts predicates -------------------------------------------------------------------
def test_contacts_contact_predicate():
    state = blank(contacts=CONTACTS)
    assert check(state, "contacts.contact", name="ana  LOPEZ") == (True, 0)
    assert check(state, "contacts.contact", name="Ana Lopez", phone="15550211") == (True, 0)  # digits compare
    assert check(state, "contacts.contact", name="Ana Lopez", phone="+1 555-0211", email="ana@mail.com")[0]
    # A new person from the launcher: open, '+', focus, type first, last, phone, save.
    assert check(state, "contacts.contact", name="Wei Chen", phone="+1 555-0222") == (False, 7)
    # Ana with another number: open, her row, pencil, clear, type, save.
    assert check(state, "contacts.contact", name="Ana Lopez", phone="+1 555-0299") == (False, 6)
    # On a create form with the names typed and the phone field focused: type the number, save.
    form = at(
        state,
        "contacts",
        {"name": "home"},
        {"name": "edit", "contact": None, "fields": {"contacts.edit.first": "Wei", "contacts.edit.last": "Chen"}},
        focus="contacts.edit.phone",
    )
    assert check(form, "contacts.contact", name="Wei Chen", phone="+1 555-0222") == (False, 2)


def test_contacts_phone_no_contact_and_starred_predicates():
    state = blank(contacts=CONTACTS)
    assert check(state, "contacts.phone", name="Ana Lopez", phone="+1 555 0211") == (True, 0)
    assert check(state, "contacts.phone", name="Ana Lopez", phone="+1 555-0299") == (False, 6)
    on_ana = at(state, "contacts", {"name": "home"}, {"name": "detail", "contact": 1})
    assert check(on_ana, "contacts.phone", name="Ana Lopez", phone="+1 555-0299") == (False, 4)
    twins = blank(contacts={"contacts": [ANA, {**ANA, "id": 3, "phone": "+1 555-0298"}]})
    assert not check(twins, "contacts.phone", name="Ana Lopez", phone="+1 555-0211")[0]  # every namesake counts

    assert check(state, "contacts.no_contact", name="Wei Chen") == (True, 0)
    assert check(state, "contacts.no_contact", name="Ana Lopez") == (False, 4)  # open, row, Delete, confirm
    confirming = at(state, "contacts", {"name": "home"}, {"name": "detail", "contact": 1, "confirm": True})
    assert check(confirming, "contacts.no_contact", name="Ana Lopez") == (False, 1)

    assert check(state, "contacts.starred", name="Ben Ode") == (True, 0)
    assert check(state, "contacts.starred", name="Ana Lopez") == (False, 3)  # open, row, star
    assert check(on_ana, "contacts.starred", name="Ana Lopez") == (False, 1)
    assert check(state, "contacts.starred", name="Ben Ode", starred=False) == (False, 3)
    assert not check(state, "contacts.starred", name="Wei Chen")[0]  # not a contact at all


# -- Calendar predicates -------------------------------------------------------------------
DENTIST = {"id": 1, "title": "Dentist", "day": 3, "start": 14 * 60 + 15, "end": 15 * 60 + 15, "location": "Main St"}
GYM = {"id": 2, "title": "Gym", "day": 1, "start": 18 * 60, "end": 19 * 60, "location": ""}
EVENTS = {"events": [DENTIST, GYM]}


def test_calendar_event_predicate():
    state = blank(calendar=EVENTS)
    assert check(state, "calendar.event", title="dentist") == (True, 0)
    assert check(state, "calendar.event", title="Dentist", day=3, hour=14, minute=15, location="main st") == (True, 0)
    assert not check(state, "calendar.event", title="Dentist", day=4)[0]
    # Move the dentist to Friday: open, its row, pencil, Friday's chip, save.
    assert check(state, "calendar.event", title="Dentist", day=4, hour=14, minute=15) == (False, 5)
    # A new event today (Wednesday) at 10:15 AM: open, '+', focus, type, the start row, ':15', OK, save.
    assert check(state, "calendar.event", title="Vet", day=2, hour=10, minute=15) == (False, 8)
    # exclusive: a second 'Gym' on another day must go.
    two = blank(calendar={"events": [GYM, {**GYM, "id": 3, "day": 5}]})
    assert check(two, "calendar.event", title="Gym", day=1) == (True, 0)
    assert check(two, "calendar.event", title="Gym", day=1, exclusive=True) == (False, 2)
    # On the time picker over a filled form: pick 2 PM (hour, PM), OK, save.
    picker = at(
        state,
        "calendar",
        {"name": "home"},
        {"name": "edit", "event": None, "day": 2, "start": 600, "duration": 60, "fields": {"calendar.title": "Vet"}},
        {"name": "time", "hour": 10, "minute": 0, "pm": False},
    )
    assert check(picker, "calendar.event", title="Vet", day=2, hour=14, minute=0) == (False, 4)
    with pytest.raises(ValueError, match="minute"):
        check(state, "calendar.event", title="Vet", hour=9, minute=10)  # the picker has no :10


def test_calendar_no_event_predicate():
    state = blank(calendar=EVENTS)
    assert check(state, "calendar.no_event", title="Dentist", day=1) == (True, 0)  # not on Tuesday
    assert check(state, "calendar.no_event", title="Dentist", day=3) == (False, 4)  # open, row, Delete, confirm
    assert check(state, "calendar.no_event", title="Dentist") == (False, 4)
    detail = at(state, "calendar", {"name": "home"}, {"name": "event", "event": 1})
    assert check(detail, "calendar.no_event", title="Dentist") == (False, 2)


# -- Messages predicates -------------------------------------------------------------------
def _thread(tid: int, name: str, *texts: str, from_me: bool = False, unread: bool = False) -> dict:
    return {
        "id": tid,
        "name": name,
        "messages": [{"from_me": from_me, "text": t, "time": "8:00 AM"} for t in texts],
        "unread": unread,
        "updated": tid,
    }


THREADS = {
    "threads": [_thread(1, "Ana Lopez", "Dinner?", unread=True), _thread(2, "+1 555-0250", "On my way", from_me=True)]
}


def test_messages_sent_predicate():
    state = blank(messages=THREADS)
    assert check(state, "messages.sent", to="+15550250", text="on my  way") == (True, 0)  # numbers by digits
    assert not check(state, "messages.sent", to="Ana Lopez", text="On my way")[0]  # sent to someone else
    assert not check(state, "messages.sent", to="Ana Lopez", text="Dinner?")[0]  # hers, not mine
    # open, her row, the composer, type with a newline
    assert check(state, "messages.sent", to="Ana Lopez", text="Yes") == (False, 4)
    thread = at(
        state, "messages", {"name": "home"}, {"name": "thread", "thread": 1, "fields": {"messages.compose": "Yes"}}
    )
    assert check(thread, "messages.sent", to="Ana Lopez", text="Yes") == (False, 1)  # only Send
    new = at(state, "messages", {"name": "home"}, {"name": "new"}, focus="messages.to")
    assert check(new, "messages.sent", to="Wei Chen", text="Hi") == (False, 2)


def test_messages_no_thread_and_all_read_predicates():
    state = blank(messages=THREADS)
    assert check(state, "messages.no_thread", name="Wei Chen") == (True, 0)
    assert check(state, "messages.no_thread", name="Ana Lopez") == (False, 5)  # open, row, menu, Delete, confirm
    menu = at(state, "messages", {"name": "home"}, {"name": "thread", "thread": 1, "menu": True})
    assert check(menu, "messages.no_thread", name="Ana Lopez") == (False, 2)
    assert check(state, "messages.all_read") == (False, 2)  # open, Ana's row (one unread)
    read = blank(messages={"threads": [_thread(1, "A", "x"), _thread(2, "B", "y")]})
    assert check(read, "messages.all_read") == (True, 0)
    many = blank(messages={"threads": [_thread(i, f"P{i}", "x", unread=True) for i in range(1, 4)]})
    assert check(many, "messages.all_read") == (False, 3)  # open, menu, Mark all read


# -- Notes predicates ----------------------------------------------------------------------
NOTES = {
    "notes": [
        {"id": 1, "title": "Door code", "body": "Front door 4172", "pinned": False},
        {"id": 2, "title": "Groceries", "body": "Milk", "pinned": True},
    ]
}


def test_notes_predicates():
    state = blank(notes=NOTES)
    assert check(state, "notes.note", title="door CODE") == (True, 0)
    assert check(state, "notes.note", title="Door code", body="Front door 4172") == (True, 0)
    assert check(state, "notes.note", title="Door code", body="Back door") == (
        False,
        5,
    )  # open, row, clear, type, close
    assert check(state, "notes.note", title="Trip", body="Pack") == (
        False,
        5,
    )  # open, '+', type title, type text, close
    assert check(state, "notes.note", title="Codes", body="Front door 4172", replaces="Door code") == (False, 5)
    assert check(state, "notes.note", title="Groceries", replaces="Door code") == (
        False,
        3,
    )  # found; the old title must go
    assert check(state, "notes.has_note", text="milk") == (True, 0)  # a note's text counts
    assert check(state, "notes.has_note", text="Buy stamps") == (False, 4)  # open, '+', type, close
    assert check(state, "notes.no_note", text="Call Joe") == (True, 0)
    assert check(state, "notes.no_note", text="Milk") == (False, 4)  # open, row, delete, confirm
    assert check(state, "notes.pinned", title="Groceries") == (True, 0)
    assert check(state, "notes.pinned", title="Door code") == (False, 3)
    editing = at(
        state,
        "notes",
        {"name": "home"},
        {"name": "edit", "note": 1, "fields": {"notes.title": "Door code", "notes.body": "x"}},
    )
    assert check(editing, "notes.pinned", title="Door code") == (False, 1)
    assert check(editing, "notes.note", title="Door code", body="Back door") == (False, 3)  # clear, type, close


# -- setup steps ---------------------------------------------------------------------------
def _setup(state: dict, step: str, **params) -> dict:
    return apply_setup(copy.deepcopy(state), [StateSetup(step=step, params=params)])


def test_contacts_setup_replaces_by_name_and_sets_favorites():
    state = blank(contacts=CONTACTS)
    once = _setup(state, "contacts.add", contacts=[{"first": "Ana", "last": "Lopez", "phone": "+1 555-0233"}])
    assert (
        _setup(once, "contacts.add", contacts=[{"first": "Ana", "last": "Lopez", "phone": "+1 555-0233"}]) == once
    )  # idempotent
    people = once["apps"]["contacts"]["data"]["contacts"]
    assert [(c["id"], c["phone"]) for c in people if c["first"] == "Ana"] == [(1, "+1 555-0233")]
    fav = _setup(
        state,
        "contacts.add",
        contacts=[{"first": "Wei", "last": "Chen", "phone": "+1 555-0310", "starred": True}],
        only_favorites=True,
    )
    assert {c["first"] for c in fav["apps"]["contacts"]["data"]["contacts"] if c["starred"]} == {"Wei"}
    assert fav["foreground"] is None and fav["apps"]["contacts"]["stack"] == [{"name": "home"}]  # data only


def test_calendar_setup_clears_days_and_replaces_by_title():
    state = blank(calendar=EVENTS)
    out = _setup(state, "calendar.events", events=[{"title": "Vet", "day": 1, "hour": 9, "minute": 15}], clear_days=[1])
    assert (
        _setup(out, "calendar.events", events=[{"title": "Vet", "day": 1, "hour": 9, "minute": 15}], clear_days=[1])
        == out
    )
    events = out["apps"]["calendar"]["data"]["events"]
    assert sorted(e["title"] for e in events) == ["Dentist", "Vet"]  # Tuesday's gym went
    vet = next(e for e in events if e["title"] == "Vet")
    assert (vet["start"], vet["end"], vet["location"]) == (555, 615, "")


def test_messages_setup_adds_newest_threads_and_marks_others_read():
    state = blank(messages=THREADS)
    out = _setup(
        state, "messages.threads", threads=[{"name": "Wei Chen", "messages": [{"text": "Hi"}]}], mark_others_read=True
    )
    assert (
        _setup(
            out, "messages.threads", threads=[{"name": "Wei Chen", "messages": [{"text": "Hi"}]}], mark_others_read=True
        )
        == out
    )
    threads = out["apps"]["messages"]["data"]["threads"]
    assert [t["name"] for t in threads if t["unread"]] == ["Wei Chen"]
    assert max(threads, key=lambda t: t["updated"])["name"] == "Wei Chen"  # top of the list


def test_notes_setup_replaces_by_title():
    state = blank(notes=NOTES)
    out = _setup(state, "notes.add", notes=[{"title": "Door code", "body": "0000"}, {"title": "Trip", "body": "Pack"}])
    assert (
        _setup(out, "notes.add", notes=[{"title": "Door code", "body": "0000"}, {"title": "Trip", "body": "Pack"}])
        == out
    )
    notes = {n["title"]: n for n in out["apps"]["notes"]["data"]["notes"]}
    assert (
        notes["Door code"]["body"] == "0000"
        and notes["Door code"]["id"] == 1
        and set(notes) == {"Door code", "Groceries", "Trip"}
    )


def test_setup_steps_reject_bad_params():
    from darwin.types import TaskDefinitionError

    with pytest.raises(TaskDefinitionError, match="contacts.add.*phone"):
        _setup(blank(), "contacts.add", contacts=[{"first": "Ana"}])
    with pytest.raises(TaskDefinitionError, match="calendar.events.*day"):
        _setup(blank(), "calendar.events", events=[{"title": "X", "day": 9, "hour": 9}])


# -- screens -------------------------------------------------------------------------------
def test_contacts_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.execute(OpenApp(app="Contacts"))
    assert phone.layout().find("contacts.count").text == "14 contacts"
    tap(phone, "contacts.add")
    tap(phone, "contacts.edit.first")
    phone.execute(Type(content="Ana\nLopez\n+1 555-0211\n"))  # the keyboard's action moves to the next field
    tap(phone, "contacts.save")
    assert screen(phone, "contacts") == "detail" and phone.layout().find("contacts.detail.phone").text == "+1 555-0211"
    tap(phone, "contacts.star")
    tap(phone, "contacts.edit")
    tap(phone, "contacts.edit.phone.clear")
    phone.execute(Type(content="+1 555-0299"))
    phone.execute(PressBack())  # hides the keyboard
    phone.execute(PressBack())  # unsaved changes: asks first
    assert phone.layout().find("contacts.discard_dialog") is not None
    tap(phone, "contacts.discard.keep")
    tap(phone, "contacts.save")
    tap(phone, "contacts.delete")
    tap(phone, "contacts.delete.cancel")
    ana = [c for c in phone.app_data("contacts")["contacts"] if c["first"] == "Ana"]
    assert [(c["phone"], c["starred"]) for c in ana] == [("+1 555-0299", True)]
    tap(phone, "contacts.delete")
    tap(phone, "contacts.delete.confirm")
    assert not [c for c in phone.app_data("contacts")["contacts"] if c["first"] == "Ana"]
    tap(phone, "contacts.tab.favorites")
    assert screen(phone, "contacts") == "favorites"
    tap(phone, "contacts.tab.all")
    tap(phone, "contacts.search_bar")
    phone.execute(Type(content="555-01"))
    assert len([w for w in phone.layout().widgets if w.id.startswith("contacts.person.")]) >= 1
    phone.screenshot((252, 560))


def test_calendar_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.execute(OpenApp(app="Calendar"))
    tap(phone, "calendar.day.4")
    assert phone.layout().find("appbar").text == "Friday, November 23"
    tap(phone, "calendar.add")
    tap(phone, "calendar.title")
    phone.execute(Type(content="Vet visit\nClinic\n"))
    tap(phone, "calendar.edit.start")
    tap(phone, "calendar.hour.4")
    tap(phone, "calendar.minute.45")
    tap(phone, "calendar.pm")
    tap(phone, "calendar.picker.ok")
    assert phone.layout().find("calendar.edit.start").text == "Starts 4:45 PM"
    tap(phone, "calendar.edit.duration.30")
    tap(phone, "calendar.save")
    vet = next(e for e in phone.app_data("calendar")["events"] if e["title"] == "Vet visit")
    assert (vet["day"], vet["start"], vet["end"], vet["location"]) == (4, 16 * 60 + 45, 17 * 60 + 15, "Clinic")
    assert screen(phone, "calendar") == "day"
    tap(phone, f"calendar.event.{vet['id']}")
    assert phone.layout().find("calendar.detail.date").text == "Friday, November 23, 2029"
    assert phone.layout().find("calendar.detail.time").text == "4:45 PM – 5:15 PM"
    tap(phone, "calendar.delete")
    tap(phone, "calendar.delete.confirm")
    assert all(e["title"] != "Vet visit" for e in phone.app_data("calendar")["events"])
    phone.screenshot((252, 560))


def test_messages_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.restore(
        _setup(phone.snapshot(), "contacts.add", contacts=[{"first": "Wei", "last": "Chen", "phone": "+1 555-0222"}])
    )
    phone.execute(OpenApp(app="Messages"))
    tap(phone, "messages.new")
    phone.execute(Type(content="wei"))
    suggestion = next(w for w in phone.layout().widgets if w.id.startswith("messages.contact."))
    assert suggestion.text == "Wei Chen"
    phone.execute(Type(content="\n"))  # the only match
    assert screen(phone, "messages") == "thread" and phone.layout().find("appbar").text == "Wei Chen"
    phone.execute(Type(content="Hello there\n"))
    wei = next(t for t in phone.app_data("messages")["threads"] if t["name"] == "Wei Chen")
    assert wei["messages"][-1]["text"] == "Hello there" and wei["messages"][-1]["from_me"]
    tap(phone, "messages.thread_menu")
    tap(phone, "messages.thread_menu.delete")
    tap(phone, "messages.delete.confirm")
    assert screen(phone, "messages") == "home" and all(
        t["name"] != "Wei Chen" for t in phone.app_data("messages")["threads"]
    )
    unread = [t for t in phone.app_data("messages")["threads"] if t["unread"]]
    label = phone.layout().find("messages.unread_count").text
    assert label == (f"{len(unread)} unread" if unread else "No unread messages")
    tap(phone, "messages.menu")
    tap(phone, "messages.menu.read_all")
    assert not any(t["unread"] for t in phone.app_data("messages")["threads"])
    tap(phone, "messages.search_bar")
    phone.execute(Type(content="zzz"))
    assert phone.layout().find("messages.no_results") is not None
    phone.screenshot((252, 560))


def test_notes_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.execute(OpenApp(app="Notes"))
    tap(phone, "notes.new")  # opens with the title focused
    phone.execute(Type(content="Trip\n"))
    phone.execute(Type(content="Pack the tent"))
    tap(phone, "nav_up")  # closing saves
    trip = next(n for n in phone.app_data("notes")["notes"] if n["title"] == "Trip")
    assert trip["body"] == "Pack the tent" and not trip["pinned"]
    tap(phone, f"notes.note.{trip['id']}")
    tap(phone, "notes.pin")
    phone.execute(PressBack())
    assert phone.layout().find(f"notes.note.{trip['id']}").subtitle.startswith("Pinned")
    tap(phone, f"notes.note.{trip['id']}")
    tap(phone, "notes.delete")
    phone.execute(PressBack())  # closes the dialog only
    assert screen(phone, "notes") == "edit"
    tap(phone, "notes.delete")
    tap(phone, "notes.delete.confirm")
    assert all(n["title"] != "Trip" for n in phone.app_data("notes")["notes"])
    tap(phone, "notes.new")
    phone.execute(PressBack())
    phone.execute(PressBack())  # an empty new note is discarded
    assert len(phone.app_data("notes")["notes"]) == 6
    phone.screenshot((252, 560))


# -- templates and the oracle --------------------------------------------------------------
def test_each_new_app_has_its_templates():
    for app in NEW_APPS:
        mine = [t for t in templates().values() if t.app == app]
        assert len(mine) >= 6, app
        assert sum(t.kind == "answer" for t in mine) >= 2, app
        assert {t.difficulty for t in mine} >= {1, 2}, app
    assert {t.difficulty for t in templates().values() if t.app in NEW_APPS} == {1, 2, 3}


@pytest.mark.parametrize("template_id", [t for t in NEW_TEMPLATES if templates()[t].kind == "action"])
def test_bounds_are_admissible_along_the_oracle_plan(template_id, template_checks):
    """``unmet`` never exceeds the actions the oracle still takes (so its plans are shortest).

    Answer tasks are left out: their bound is ``answer.matches``' route (``via``), which may
    be longer than a route that happens to show the answer too.
    """
    template_checks.bounds_are_admissible(template_id)


@pytest.mark.parametrize("template_id", NEW_TEMPLATES)
def test_oracle_succeeds_on_every_instance(template_id, template_checks):
    """20 seeds, English and Chinese, each on its own perturbed phone (episodes start from its initial state)."""
    template_checks.oracle_solves_every_instance(template_id, seeds=20)


def test_random_agent_rarely_succeeds_on_the_new_apps(template_checks):
    solved = template_checks.random_successes(NEW_TEMPLATES)
    assert len(solved) <= 2, solved


# -- what adding four apps changed ---------------------------------------------------------
def test_existing_apps_keep_their_seeded_data(monkeypatch):
    new = SimPhone(seed=11)
    import darwin.envs.sim.phone as phone_module

    monkeypatch.setattr(phone_module, "default_apps", lambda: default_apps()[:8])
    old = SimPhone(seed=11)
    assert list(old.apps) == ["amazon", "booking", "chrome", "clock", "settings", "dictionary", "play", "x"]
    assert {k: old.state["apps"][k] for k in old.apps} == {k: new.state["apps"][k] for k in old.apps}


def test_launcher_shows_all_twelve_apps_legibly():
    phone = SimPhone(seed=4)
    icons = [w for w in phone.layout().widgets if w.kind == "app_icon"]
    # The first launcher page holds the first twelve apps (later ones are on the next page).
    assert sorted(w.text for w in icons) == sorted(a.label for a in default_apps()[:12]) and len(icons) == 12
    for i, a in enumerate(icons):
        x0, y0, x1, y1 = a.box
        assert 0 <= x0 < x1 <= WIDTH and 0 <= y0 < y1 <= HEIGHT - 120  # above the navigation bar
        assert all(
            a.box[2] <= b.box[0] or b.box[2] <= a.box[0] or a.box[3] <= b.box[1] or b.box[3] <= a.box[1]
            for b in icons[i + 1 :]
        )
    # At 252x560 a cell is ~63x70 px: the new labels fit their cell uncut (the renderer cuts at 12 characters).
    assert all(len(label) <= 12 for label in NEW_APPS)
    shot = phone.screenshot((252, 560))
    assert shot.shape == (560, 252, 3)
    for app in NEW_APPS:
        phone.execute(OpenApp(app=app))
        assert phone.foreground == app.lower()


def test_random_actor_knows_every_app():
    assert set(RandomActor.APPS) == {a.label for a in default_apps()}


def test_warm_start_cache_key_follows_simphone_appearance(monkeypatch):
    import darwin.envs.sim.phone as phone_module

    now = SFTConfig().config_hash()
    monkeypatch.setattr(phone_module, "default_apps", lambda: default_apps()[:8])
    assert SFTConfig().config_hash() != now  # a cache built on the eight-app launcher is not reused
    monkeypatch.setattr(phone_module, "LAYOUT_VERSION", phone_module.LAYOUT_VERSION + 1)
    monkeypatch.setattr(phone_module, "default_apps", default_apps)
    assert SFTConfig().config_hash() != now
