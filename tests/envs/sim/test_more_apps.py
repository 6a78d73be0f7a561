"""Files, Mail, Calculator and Tasks: predicates on hand-built states (no phone), setup steps, screens,
the oracle on every instance of their templates, and what adding them changed elsewhere (the launcher's
second page; nothing on the first)."""

from __future__ import annotations

import copy

import pytest

from darwin.actions import Click, Direction, Drag, OpenApp, PressBack, Scroll, Type
from darwin.agents.scripted import RandomActor
from darwin.envs.sim.apps import default_apps
from darwin.envs.sim.apps.calculator import CalcError, format_value, result_text
from darwin.envs.sim.apps.calculator import evaluate as calc
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.predicates import evaluate
from darwin.templates import split_templates, templates
from darwin.types import StateSetup, TaskDefinitionError, VerifierSpec

NEW_APPS = ("Files", "Mail", "Calculator", "Tasks")
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


def _setup(state: dict, step: str, **params) -> dict:
    return apply_setup(copy.deepcopy(state), [StateSetup(step=step, params=params)])


# -- Files ---------------------------------------------------------------------------------
FOLDERS = [{"id": 1, "name": "Download"}, {"id": 2, "name": "Documents"}]
REPORT = {"id": 1, "name": "report.pdf", "folder": 1, "kb": 2458, "day": 12}
MENU = {"id": 2, "name": "menu.pdf", "folder": 1, "kb": 300, "day": 3}
FILES = {"folders": FOLDERS, "files": [REPORT, MENU], "sort": "Name"}


def test_files_predicates():
    state = blank(files=FILES)
    assert check(state, "files.file", name="REPORT.pdf") == (True, 0)
    assert check(state, "files.file", name="report.pdf", folder="Download") == (True, 0)
    # Move it: open, the folder, the file, Move, Documents.
    assert check(state, "files.file", name="report.pdf", folder="Documents") == (False, 5)
    # Rename it: open, folder, file, Rename, clear, type with Enter.
    assert check(state, "files.file", name="q3.pdf", replaces="report.pdf") == (False, 6)
    # Into a new folder: open, '+', type its name; then a folder, the file, Move, the new folder.
    assert check(state, "files.file", name="report.pdf", folder="Taxes") == (False, 7)
    on_file = at(state, "files", {"name": "home"}, {"name": "folder", "folder": 1}, {"name": "file", "file": 1})
    assert check(on_file, "files.file", name="report.pdf", folder="Documents") == (False, 2)
    moving = at(state, "files", {"name": "home"}, {"name": "file", "file": 1}, {"name": "move", "file": 1})
    assert check(moving, "files.file", name="report.pdf", folder="Documents") == (False, 1)
    renaming = at(
        state,
        "files",
        {"name": "home"},
        {"name": "file", "file": 1},
        {"name": "rename", "file": 1, "fields": {"files.name": ""}},
        focus="files.name",
    )
    assert check(renaming, "files.file", name="q3.pdf", replaces="report.pdf") == (False, 1)
    assert check(state, "files.no_file", name="old.pdf") == (True, 0)
    assert check(state, "files.no_file", name="menu.pdf") == (False, 5)  # open, folder, file, Delete, confirm
    confirming = at(state, "files", {"name": "home"}, {"name": "file", "file": 2, "confirm": True})
    assert check(confirming, "files.no_file", name="menu.pdf") == (False, 1)
    assert check(state, "files.folder", name="documents") == (True, 0)
    assert check(state, "files.folder", name="Taxes") == (False, 3)  # open, '+', type with Enter
    assert check(state, "files.sort", by="Name") == (True, 0)
    assert check(state, "files.sort", by="Size") == (False, 3)  # open, a folder, the chip
    folder = at(state, "files", {"name": "home"}, {"name": "folder", "folder": 1})
    assert check(folder, "files.sort", by="Size") == (False, 1)


def test_files_setup_creates_folders_and_replaces_by_name():
    state = blank(files=FILES)
    params = {"files": [{"name": "report.pdf", "folder": "Taxes", "kb": 10}], "folders": ["Empty"]}
    once = _setup(state, "files.add", **params)
    assert _setup(once, "files.add", **params) == once  # idempotent
    d = once["apps"]["files"]["data"]
    assert [f["name"] for f in d["folders"]] == ["Download", "Documents", "Empty", "Taxes"]
    assert [(f["id"], f["folder"], f["kb"]) for f in d["files"] if f["name"] == "report.pdf"] == [(1, 4, 10)]
    assert once["foreground"] is None and once["apps"]["files"]["stack"] == [{"name": "home"}]  # data only
    with pytest.raises(TaskDefinitionError, match="files.add.*day"):
        _setup(state, "files.add", files=[{"name": "x", "folder": "y", "day": 40}])


def test_files_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.restore(
        _setup(
            phone.snapshot(),
            "files.add",
            files=[
                {"name": "a_small.pdf", "folder": "Download", "kb": 20, "day": 21},
                {"name": "zz_big.pdf", "folder": "Download", "kb": 9999, "day": 1},
            ],
        )
    )
    phone.execute(OpenApp(app="Files"))
    tap(phone, "files.folder.1")
    names = lambda: [w.text for w in phone.layout().widgets if w.id.startswith("files.file.")]  # noqa: E731
    assert names()[0] == "a_small.pdf" and names() == sorted(names(), key=str.lower)
    tap(phone, "files.sort.size")
    assert names()[0] == "zz_big.pdf"
    tap(phone, "files.sort.date")
    assert names()[0] == "a_small.pdf" and phone.app_data("files")["sort"] == "Date"
    big = next(f for f in phone.app_data("files")["files"] if f["name"] == "zz_big.pdf")
    tap(phone, f"files.file.{big['id']}")
    assert phone.layout().find("files.detail.size").text == "Size: 9.8 MB"
    assert phone.layout().find("files.detail.date").text == "Modified: Nov 1"
    tap(phone, "files.rename")
    tap(phone, "files.name.clear")
    phone.execute(Type(content="huge.pdf\n"))
    assert screen(phone, "files") == "file" and phone.layout().find("appbar").text == "huge.pdf"
    tap(phone, "files.move")
    tap(phone, "files.move.2")
    assert next(f for f in phone.app_data("files")["files"] if f["name"] == "huge.pdf")["folder"] == 2
    tap(phone, "files.delete")
    phone.execute(PressBack())  # closes the dialog only
    assert screen(phone, "files") == "file"
    tap(phone, "files.delete")
    tap(phone, "files.delete.confirm")
    assert all(f["name"] != "huge.pdf" for f in phone.app_data("files")["files"])
    phone.execute(PressBack())
    tap(phone, "files.new_folder")
    phone.execute(Type(content="Download\n"))  # taken
    assert phone.layout().find("files.new_folder.error") is not None
    tap(phone, "files.folder_name.clear")
    phone.execute(Type(content="Taxes\n"))
    assert screen(phone, "files") == "home" and phone.app_data("files")["folders"][-1]["name"] == "Taxes"
    tap(phone, "files.search_bar")
    phone.execute(Type(content="small"))
    hit = next(w for w in phone.layout().widgets if w.id.startswith("files.file."))
    assert hit.text == "a_small.pdf" and hit.subtitle == "20 KB · Nov 21 · Download"
    phone.screenshot((252, 560))


# -- Mail ----------------------------------------------------------------------------------
def _mail(mid: int, subject: str, box: str = "inbox", **extra) -> dict:
    return {
        "id": mid,
        "box": box,
        "from": "Ana Lopez",
        "address": "ana@mail.com",
        "to": "me@simphone.com",
        "subject": subject,
        "body": "Hi",
        "time": "9:00 AM",
        "order": mid,
        "starred": False,
        "unread": True,
        "labels": [],
        **extra,
    }


MAIL = {
    "emails": [_mail(1, "Lunch"), _mail(2, "Hello", box="sent", to="ben@mail.com", body="Hi Ben")],
    "labels": ["Work", "Travel"],
    "next_id": 3,
}


def test_mail_send_and_draft_predicates():
    state = blank(mail=MAIL)
    assert check(state, "mail.sent", to="BEN@mail.com", subject="hello") == (True, 0)
    assert not check(state, "mail.sent", to="ana@mail.com")[0]  # hers came in; nothing went to her
    # open, Compose (To focused), type To, subject, text, send
    assert check(state, "mail.sent", to="wei@mail.com", subject="Hi", body="See you") == (False, 6)
    # A reply: open, her message, Reply (To and subject filled), type the text, send.
    assert check(state, "mail.sent", to="ana@mail.com", subject="Re: Lunch", body="Yes") == (False, 5)
    composing = at(
        state,
        "mail",
        {"name": "inbox"},
        {"name": "compose", "draft": None, "fields": {"mail.to": "wei@mail.com", "mail.subject": "Hi"}},
        focus="mail.body",
    )
    assert check(composing, "mail.sent", to="wei@mail.com", subject="Hi", body="See you") == (False, 2)
    assert check(state, "mail.draft", to="wei@mail.com", subject="Hi") == (False, 5)
    drafted = blank(mail={**MAIL, "emails": [*MAIL["emails"], _mail(3, "Hi", box="drafts", to="wei@mail.com")]})
    assert check(drafted, "mail.draft", to="wei@mail.com", subject="Hi") == (True, 0)
    assert not check(state, "mail.draft", to="ben@mail.com", subject="Hello")[0]  # sent, not kept


def test_mail_message_predicates():
    state = blank(mail=MAIL)
    assert check(state, "mail.starred", subject="Lunch") == (False, 3)  # open, row, star
    reading = at(state, "mail", {"name": "inbox"}, {"name": "email", "email": 1})
    assert check(reading, "mail.starred", subject="Lunch") == (False, 1)
    assert check(state, "mail.starred", subject="Lunch", starred=False) == (True, 0)
    assert not check(state, "mail.starred", subject="Nothing")[0]
    assert check(state, "mail.in_box", subject="lunch", box="inbox") == (True, 0)
    assert check(state, "mail.in_box", subject="Lunch", box="archive") == (False, 3)
    assert check(reading, "mail.in_box", subject="Lunch", box="trash") == (False, 1)
    assert check(state, "mail.labelled", subject="Lunch", label="Work") == (False, 4)  # open, row, Label, Work
    picking = at(state, "mail", {"name": "inbox"}, {"name": "email", "email": 1}, {"name": "label_picker", "email": 1})
    assert check(picking, "mail.labelled", subject="Lunch", label="Work") == (False, 1)
    labelled = blank(mail={**MAIL, "emails": [_mail(1, "Lunch", labels=["Work"])]})
    assert check(labelled, "mail.labelled", subject="Lunch", label="work") == (True, 0)


def test_mail_setup_adds_newest_and_replaces_by_subject():
    state = blank(mail=MAIL)
    params = {"emails": [{"sender": "Wei Chen", "address": "wei@mail.com", "subject": "Lunch", "labels": ["Family"]}]}
    once = _setup(state, "mail.add", **params)
    assert _setup(once, "mail.add", **params) == once
    d = once["apps"]["mail"]["data"]
    lunch = [m for m in d["emails"] if m["subject"] == "Lunch"]
    assert len(lunch) == 1 and lunch[0]["id"] == 1 and lunch[0]["from"] == "Wei Chen"
    assert lunch[0]["order"] == max(m["order"] for m in d["emails"]) and "Family" in d["labels"]


def test_mail_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.restore(
        _setup(
            phone.snapshot(),
            "mail.add",
            emails=[{"sender": "Wei Chen", "address": "wei@mail.com", "subject": "Dinner", "body": "At 8?"}],
        )
    )
    phone.execute(OpenApp(app="Mail"))
    dinner = next(m for m in phone.app_data("mail")["emails"] if m["subject"] == "Dinner")
    rows = [w for w in phone.layout().widgets if w.id.startswith("mail.email.")]
    assert rows[0].id == f"mail.email.{dinner['id']}" and rows[0].text == "Wei Chen"  # newest first
    tap(phone, f"mail.email.{dinner['id']}")
    assert phone.layout().find("mail.detail.from").text == "From: Wei Chen <wei@mail.com>"
    tap(phone, "mail.star")
    tap(phone, "mail.label_as")
    tap(phone, "mail.pick.Travel")
    phone.execute(PressBack())
    assert phone.layout().find("mail.detail.labels").text == "Labels: Travel"
    tap(phone, "mail.reply")  # opens with the text focused
    phone.execute(PressBack())  # hides the keyboard
    phone.execute(PressBack())  # nothing typed: no draft
    assert not [m for m in phone.app_data("mail")["emails"] if m["box"] == "drafts"]
    tap(phone, "mail.reply")
    phone.execute(Type(content="Sure"))
    tap(phone, "mail.send")
    sent = [m for m in phone.app_data("mail")["emails"] if m["box"] == "sent"]
    assert [(m["to"], m["subject"], m["body"]) for m in sent] == [("wei@mail.com", "Re: Dinner", "Sure")]
    tap(phone, "mail.archive")
    assert screen(phone, "mail") == "inbox" and phone.layout().find(f"mail.email.{dinner['id']}") is None
    tap(phone, "mail.tab.starred")
    assert phone.layout().find(f"mail.email.{dinner['id']}") is not None  # archived, still starred
    tap(phone, "mail.compose")
    phone.execute(Type(content="sam@mail.com\nPlans\n"))
    tap(phone, "nav_up")  # closing keeps a draft
    tap(phone, "mail.tab.drafts")
    draft = next(m for m in phone.app_data("mail")["emails"] if m["box"] == "drafts")
    assert (draft["to"], draft["subject"]) == ("sam@mail.com", "Plans")
    tap(phone, f"mail.email.{draft['id']}")
    tap(phone, "mail.send")
    assert draft["id"] in {m["id"] for m in phone.app_data("mail")["emails"] if m["box"] == "sent"}
    tap(phone, "mail.compose")
    tap(phone, "mail.send")  # no recipient
    assert phone.layout().find("mail.compose.error") is not None
    phone.execute(PressBack())
    phone.execute(PressBack())
    tap(phone, "mail.labels")
    tap(phone, "mail.label.Travel")
    assert phone.layout().find(f"mail.email.{dinner['id']}") is not None
    phone.execute(PressBack())
    phone.execute(PressBack())
    tap(phone, "mail.search_bar")
    phone.execute(Type(content="zzz"))
    assert phone.layout().find("mail.no_results") is not None
    phone.screenshot((252, 560))


# -- Calculator ----------------------------------------------------------------------------
def test_calculator_arithmetic():
    assert result_text("12+7×3") == "33" and result_text("7÷8") == "0.875" and result_text("80×15%") == "12"
    assert result_text("−5×4") == "-20" and result_text("12*3-4/2") == "34" and result_text("2÷3") == "0.6666666667"
    assert result_text("1÷0") == "Can't divide by 0" and result_text("3+") == "Error" and result_text("abc") == "Error"
    assert format_value(calc("0.1+0.2")) == "0.3"  # exact: fractions, not floats
    with pytest.raises(CalcError):
        calc("")


def test_calculator_predicates():
    history = {"history": [{"expr": "2+2", "result": "4"}]}
    state = blank(calculator=history)
    assert check(state, "calculator.computed", expr="2+2") == (True, 0)
    assert check(state, "calculator.computed", expr="12*3") == (False, 3)  # open, tap the display, type with Enter
    typed = at(state, "calculator", {"name": "home", "fields": {"calculator.display": "12×3"}})
    assert check(typed, "calculator.computed", expr="12×3") == (False, 1)  # '='
    half = at(state, "calculator", {"name": "home", "fields": {"calculator.display": "12"}}, focus="calculator.display")
    assert check(half, "calculator.computed", expr="12×3") == (False, 1)  # type the rest with Enter
    wrong = at(
        state, "calculator", {"name": "home", "fields": {"calculator.display": "19"}}, focus="calculator.display"
    )
    assert check(wrong, "calculator.computed", expr="12×3") == (False, 2)
    assert check(state, "calculator.history_empty") == (False, 3)  # open, History, clear
    assert check(blank(calculator={"history": []}), "calculator.history_empty") == (True, 0)
    out = _setup(state, "calculator.history", exprs=["6*7"], clear=True)
    assert out["apps"]["calculator"]["data"]["history"] == [{"expr": "6×7", "result": "42"}]


def test_calculator_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.execute(OpenApp(app="Calculator"))
    for key in ("1", "2", "multiply", "3", "sign", "plus", "4", "percent"):
        tap(phone, f"calculator.key.{key}")
    assert phone.layout().find("calculator.display").text == "12×−3+4%"
    assert phone.layout().find("calculator.preview").text == "= -35.96"
    tap(phone, "calculator.key.equals")
    assert phone.layout().find("calculator.display").text == "-35.96"
    assert phone.app_data("calculator")["history"][-1] == {"expr": "12×−3+4%", "result": "-35.96"}
    tap(phone, "calculator.key.plus")  # an operator goes on from the result
    tap(phone, "calculator.key.1")
    assert phone.layout().find("calculator.display").text == "−35.96+1"
    tap(phone, "calculator.key.clear")
    tap(phone, "calculator.key.7")
    tap(phone, "calculator.key.divide")
    tap(phone, "calculator.key.0")
    tap(phone, "calculator.key.equals")
    assert phone.layout().find("calculator.preview").text == "Can't divide by 0"
    tap(phone, "calculator.key.backspace")
    tap(phone, "calculator.key.2")
    tap(phone, "calculator.display")  # the display takes typed input too
    phone.execute(Type(content="*4\n"))
    assert phone.app_data("calculator")["history"][-1] == {"expr": "7÷2×4", "result": "14"}
    tap(phone, "calculator.history")
    rows = [w for w in phone.layout().widgets if w.id.startswith("calculator.entry.")]
    assert (rows[0].text, rows[0].subtitle) == ("7÷2×4", "= 14")  # newest first
    tap(phone, rows[1].id)  # back to the keypad with that calculation
    assert screen(phone, "calculator") == "home" and phone.layout().find("calculator.display").text == "12×−3+4%"
    tap(phone, "calculator.history")
    tap(phone, "calculator.history.clear")
    assert phone.app_data("calculator")["history"] == [] and phone.layout().find("calculator.history.empty") is not None
    phone.screenshot((252, 560))


# -- Tasks ---------------------------------------------------------------------------------
def _task(tid: int, title: str, **extra) -> dict:
    return {"id": tid, "list": 1, "title": title, "due": None, "starred": False, "done": False, "parent": None, **extra}


TASKS = {
    "lists": [{"id": 1, "name": "My Tasks"}, {"id": 2, "name": "Work"}],
    "tasks": [_task(1, "Call Ana", due=4), _task(2, "Slides", list=2), _task(3, "Old", done=True)],
}


def test_tasks_predicates():
    state = blank(tasks=TASKS)
    assert check(state, "tasks.task", title="call ana") == (True, 0)
    assert check(state, "tasks.task", title="Call Ana", due=4, list_name="My Tasks") == (True, 0)
    assert check(state, "tasks.task", title="Old") == (False, 3)  # completed tasks do not count: open, '+', type
    assert check(state, "tasks.task", title="Milk") == (False, 3)
    assert check(state, "tasks.task", title="Milk", due=2) == (False, 4)  # and the due chip
    assert check(state, "tasks.task", title="Call Ana", due=2) == (False, 4)  # open, row, due row, the day
    assert check(state, "tasks.task", title="Milk", list_name="Work") == (False, 3)
    home = at(state, "tasks", {"name": "home"})
    assert check(home, "tasks.task", title="Milk", list_name="Work") == (False, 3)  # the Work tab, '+', type
    # A new list: open, its '+', type its name; '+', type the title.
    assert check(state, "tasks.task", title="Milk", list_name="Shop") == (False, 5)
    assert check(state, "tasks.task", title="Step", parent="Call Ana") == (False, 4)  # open, row, Add subtask, type
    assert not check(state, "tasks.task", title="Step", parent="Nobody")[0]
    form = at(
        state,
        "tasks",
        {"name": "home"},
        {"name": "new", "list": 1, "parent": None, "due": None, "fields": {"tasks.new_title": "Milk"}},
    )
    assert check(form, "tasks.task", title="Milk") == (False, 1)  # Save
    assert check(form, "tasks.task", title="Milk", due=3) == (False, 2)  # the chip, Save
    assert check(state, "tasks.done", title="Call Ana") == (False, 2)  # open, the row's Done pill
    assert check(state, "tasks.done", title="Old") == (True, 0)
    assert check(state, "tasks.starred", title="Slides") == (False, 3)  # open, row, star
    assert check(state, "tasks.no_task", title="Slides") == (False, 3)  # open, row, delete
    assert check(state, "tasks.list", name="work") == (True, 0)
    assert check(state, "tasks.list", name="Shop") == (False, 3)


def test_tasks_setup_adds_lists_subtasks_and_replaces_by_title():
    state = blank(tasks=TASKS)
    params = {"tasks": [{"title": "Call Ana", "list_name": "Home", "due": 1, "subtasks": ["Find number"]}]}
    once = _setup(state, "tasks.add", **params)
    assert _setup(once, "tasks.add", **params) == once
    d = once["apps"]["tasks"]["data"]
    ana = [t for t in d["tasks"] if t["title"] == "Call Ana"]
    assert len(ana) == 1 and ana[0]["id"] == 1 and ana[0]["due"] == 1 and ana[0]["list"] == 3
    assert [t["parent"] for t in d["tasks"] if t["title"] == "Find number"] == [1]
    with pytest.raises(TaskDefinitionError, match="tasks.add.*due"):
        _setup(state, "tasks.add", tasks=[{"title": "x", "due": 9}])


def test_tasks_screens():
    phone = SimPhone(seed=1, perturbation=CANONICAL)
    phone.execute(OpenApp(app="Tasks"))
    tap(phone, "tasks.add")  # opens with the title focused
    phone.execute(Type(content="Milk"))
    tap(phone, "tasks.new.due.4")
    tap(phone, "tasks.new.save")
    milk = next(t for t in phone.app_data("tasks")["tasks"] if t["title"] == "Milk")
    assert (milk["due"], milk["list"], milk["done"]) == (4, 1, False)
    assert phone.layout().find(f"tasks.task.{milk['id']}").subtitle == "Due Fri, Nov 23"
    tap(phone, f"tasks.task.{milk['id']}")
    tap(phone, "tasks.star")
    tap(phone, "tasks.detail.due")
    tap(phone, "tasks.due.6")
    tap(phone, "tasks.add_subtask")
    phone.execute(Type(content="Oat milk\n"))
    assert [w.text for w in phone.layout().widgets if w.id.startswith("tasks.sub.")] == ["Oat milk"]
    tap(phone, "tasks.title.clear")
    phone.execute(Type(content="Milk and eggs"))
    phone.execute(PressBack())  # hides the keyboard
    phone.execute(PressBack())  # closing the page saves the title
    milk = next(t for t in phone.app_data("tasks")["tasks"] if t["id"] == milk["id"])
    assert (milk["title"], milk["due"], milk["starred"]) == ("Milk and eggs", 6, True)
    assert phone.layout().find(f"tasks.task.{milk['id']}").subtitle == "Due Sun, Nov 25 · Starred · 1 subtask"
    tap(phone, f"tasks.task.{milk['id']}.action")  # Done
    assert next(t for t in phone.app_data("tasks")["tasks"] if t["id"] == milk["id"])["done"]
    tap(phone, "tasks.completed")
    tap(phone, f"tasks.task.{milk['id']}")
    tap(phone, "tasks.delete")
    assert all(t["title"] not in ("Milk and eggs", "Oat milk") for t in phone.app_data("tasks")["tasks"])
    tap(phone, "tasks.new_list")
    phone.execute(Type(content="Shop\n"))
    assert phone.layout().find("tasks.list.3").checked and phone.layout().find("tasks.empty") is not None
    tap(phone, "tasks.list.2")
    assert phone.layout().find("tasks.list.2").checked
    phone.screenshot((252, 560))


# -- templates and the oracle --------------------------------------------------------------
def test_each_new_app_has_ten_templates():
    for app in NEW_APPS:
        mine = [t for t in templates().values() if t.app == app]
        assert len(mine) == 10, app
        assert sum(t.kind == "answer" for t in mine) >= 2, app
        assert {t.difficulty for t in mine} >= {1, 2}, app
    assert {t.difficulty for t in templates().values() if t.app in NEW_APPS} == {1, 2, 3}
    assert len(templates()) >= 125


@pytest.mark.parametrize("template_id", [t for t in NEW_TEMPLATES if templates()[t].kind == "action"])
def test_bounds_are_admissible_along_the_oracle_plan(template_id, template_checks):
    """``unmet`` never exceeds the actions the oracle still takes (so its plans are shortest)."""
    template_checks.bounds_are_admissible(template_id)


@pytest.mark.parametrize("template_id", NEW_TEMPLATES)
def test_oracle_succeeds_on_every_instance(template_id, template_checks):
    """8 seeds, English and Chinese, each on its own perturbed phone (episodes start from its initial state)."""
    template_checks.oracle_solves_every_instance(template_id, seeds=8)


def test_random_agent_rarely_succeeds_on_the_new_apps(template_checks):
    solved = template_checks.random_successes(NEW_TEMPLATES)
    assert len(solved) <= 2, solved


# -- what adding four apps changed ---------------------------------------------------------
def _twelve(monkeypatch: pytest.MonkeyPatch) -> None:
    import darwin.envs.sim.phone as phone_module

    real = default_apps
    monkeypatch.setattr(phone_module, "default_apps", lambda: real()[:12])


@pytest.mark.parametrize("seed", [0, 5, 1000])
def test_the_first_launcher_page_is_what_twelve_apps_showed(monkeypatch, seed):
    """The new apps go on a second page: every seed's first page, accent, wallpaper and earlier apps' data are unchanged."""
    new = SimPhone(seed=seed)
    _twelve(monkeypatch)
    old = SimPhone(seed=seed)
    assert list(old.apps) == [a.id for a in default_apps()[:12]]
    assert {k: old.state["apps"][k] for k in old.apps} == {k: new.state["apps"][k] for k in old.apps}
    assert {k: v for k, v in old.state["perturb"].items() if k != "icon_order"} == {
        k: v for k, v in new.state["perturb"].items() if k != "icon_order"
    }
    assert new.state["perturb"]["icon_order"][:12] == old.state["perturb"]["icon_order"]
    assert (new.screenshot((168, 364)) == old.screenshot((168, 364))).all()


def test_a_swipe_shows_the_second_launcher_page():
    phone = SimPhone(seed=4)
    first = [w.text for w in phone.layout().widgets if w.kind == "app_icon"]
    assert len(first) == 12 and not set(first) & set(NEW_APPS)
    phone.execute(Scroll(x=540, y=1200, direction=Direction.RIGHT))
    second = [w for w in phone.layout().widgets if w.kind == "app_icon"]
    assert sorted(w.text for w in second) == sorted(NEW_APPS)
    assert [w.box[:2] for w in second] == [(0, 356), (270, 356), (540, 356), (810, 356)]  # the first row
    phone.execute(Scroll(x=540, y=1200, direction=Direction.RIGHT))  # no third page
    assert [w.text for w in phone.layout().widgets if w.kind == "app_icon"] == [w.text for w in second]
    tap(phone, "launcher.mail")
    assert phone.foreground == "mail"
    phone.press_home()  # home shows the first page again
    assert [w.text for w in phone.layout().widgets if w.kind == "app_icon"] == first
    phone.execute(Drag(x1=900, y1=1200, x2=100, y2=1250))  # drag the page leftwards: the next one
    assert "launcher_page" in phone.state
    phone.execute(Drag(x1=100, y1=1200, x2=900, y2=1200))
    assert [
        w.text for w in phone.layout().widgets if w.kind == "app_icon"
    ] == first and "launcher_page" not in phone.state
    for app in NEW_APPS:
        phone.execute(OpenApp(app=app))
        assert phone.foreground == app.lower()


def test_the_default_split_keeps_the_original_apps_templates():
    """New apps' templates stay out of the default generalisation split (its recorded results stand)."""
    split = split_templates()
    chosen = set(split.train_templates) | set(split.held_out_templates)
    assert not {t for t in chosen if templates()[t].app in NEW_APPS} and not set(split.held_out_apps) & set(NEW_APPS)
    everything = split_templates(split.config.model_copy(update={"exclude_apps": ()}))
    assert set(NEW_TEMPLATES) <= set(everything.train_templates) | set(everything.held_out_templates) | {
        t.template for t in everything.sets["unseen_apps"]
    }


def test_new_apps_are_known_everywhere():
    from darwin.envs.adb_apps import AppMap

    assert set(RandomActor.APPS) >= set(NEW_APPS)
    apps = AppMap.sim_apps()
    assert apps.resolve("gmail").package == "com.google.android.gm"
    assert apps.resolve("Files").package == AppMap.spa_bench().resolve("Files").package  # SPA-Bench's Files, unchanged
    for app in default_apps()[12:]:
        assert app.label in NEW_APPS and app.zh.get(app.label), app.id
