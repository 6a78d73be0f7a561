"""Tasks: to-do lists with tasks that have a due day, a star, completion and subtasks; new lists."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.forms import same, typing_cost
from darwin.envs.sim.apps.tasks_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, predicate, top

DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
DAY_SHORT = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
FIRST_DAY = 19
"""Day 0 of the due-day picker is Monday, November 19 (today is Wednesday the 21st, as on the phone's clock)."""
SEED_LISTS = ("My Tasks", "Work")
SEED_TASKS = (
    ("My Tasks", "Call the bank"),
    ("My Tasks", "Buy birthday card"),
    ("My Tasks", "Book dentist appointment"),
    ("My Tasks", "Return library books"),
    ("My Tasks", "Water the plants"),
    ("Work", "Send weekly update"),
    ("Work", "Review pull request"),
    ("Work", "Prepare slides"),
    ("Work", "Expense report"),
)
"""Tasks a phone's lists are drawn from (templates add tasks with other titles)."""
TITLE, NEW_TITLE, LIST_NAME = "tasks.title", "tasks.new_title", "tasks.list_name"


def due_text(day: int | None) -> str:
    """A due day as the app shows it: ``Fri, Nov 23`` (``""`` for none)."""
    return "" if day is None else f"{DAY_SHORT[day]}, Nov {FIRST_DAY + day}"


class TasksApp(SimApp):
    """Tasks (like Google Tasks): a tab per list, open tasks with due days and stars, a completed section,
    a task page (title, due day, star, subtasks, complete, delete) and a new-list form."""

    id = "tasks"
    label = "Tasks"
    package = "com.google.android.apps.tasks"
    activity = "com.google.android.apps.tasks.ui.TaskListsActivity"
    color = (26, 115, 232)
    glyph = "✓"
    aliases = ("google tasks", "to-do", "todo", "to do")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        lists = [{"id": i + 1, "name": name} for i, name in enumerate(SEED_LISTS)]
        tasks: list[dict[str, Any]] = []
        for list_name, title in SEED_TASKS:
            if rng.random() < 0.3:
                continue
            tasks.append(
                {
                    "id": len(tasks) + 1,
                    "list": SEED_LISTS.index(list_name) + 1,
                    "title": title,
                    "due": rng.choice((None, None, 0, 3, 4, 6)),
                    "starred": rng.random() < 0.2,
                    "done": rng.random() < 0.25,
                    "parent": None,
                }
            )
        return {"lists": lists, "tasks": tasks}

    def popup(self) -> None:
        return None

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        if name == "home":
            self._home(ui, ctx)
        elif name == "task":
            self._task(ui, ctx)
        elif name == "new":
            s = ctx.screen
            ui.app_bar("New subtask" if s.get("parent") else "New task", on_back=ctx.popper())
            ctx.text_field(ui, NEW_TITLE, "Title", on_submit=lambda _text: _add_task(ctx))
            ui.title("Due date", size="small")
            ui.buttons_row(
                [
                    (f"tasks.new.due.{i}", DAY_SHORT[i], _screen_toggle(ctx, "due", i), s.get("due") == i)
                    for i in range(7)
                ],
                h=112,
            )
            ui.button("tasks.new.save", "Save", lambda: _add_task(ctx))
        elif name == "due":
            t = _find(d, ctx.screen["task"])
            ui.app_bar("Due date", on_back=ctx.popper())
            for i in range(7):
                ui.row(
                    f"tasks.due.{i}",
                    due_text(i),
                    checked=None,
                    on_tap=_set_due(ctx, t, i),
                    glyph="✓" if t is not None and t["due"] == i else "",
                )
            ui.row("tasks.due.none", "No date", on_tap=_set_due(ctx, t, None))
        elif name == "new_list":
            ui.app_bar("New list", on_back=ctx.popper())
            ctx.text_field(ui, LIST_NAME, "List name", on_submit=lambda _text: _add_list(ctx))
            if ctx.screen.get("error"):
                ui.label("tasks.new_list.error", ctx.screen["error"], role="text")
            ui.button("tasks.new_list.create", "Create", lambda: _add_list(ctx))
        else:
            raise ValueError(f"tasks: unknown screen {name!r}")

    def _home(self, ui: UI, ctx: AppContext) -> None:
        d, s = ctx.data, ctx.screen
        current = _current_list(d, s)
        ui.app_bar("Tasks", actions=[("tasks.new_list", "+", _new_list(ctx))])
        tabs = [(f"tasks.list.{lst['id']}", lst["name"], _list_tab(ctx, lst["id"])) for lst in d["lists"][:4]]
        ui.tabs(tabs, f"tasks.list.{current['id']}" if current else "")
        if len(d["lists"]) > 4:  # more lists than tabs: chips for the rest
            ui.buttons_row(
                [
                    (f"tasks.list.{lst['id']}", lst["name"], _list_tab(ctx, lst["id"]), current is lst)
                    for lst in d["lists"][4:8]
                ],
                h=100,
            )
        mine = [t for t in d["tasks"] if current is not None and t["list"] == current["id"] and t["parent"] is None]
        open_tasks = ctx.shuffled([t for t in mine if not t["done"]], f"open.{current['id'] if current else 0}")
        done = [t for t in mine if t["done"]]
        rows = [_row(ctx, t) for t in open_tasks]
        if done:
            shown = bool(s.get("show_done"))
            rows.append(
                Row(
                    "tasks.completed",
                    "Hide completed" if shown else f"Completed ({len(done)})",
                    on_tap=lambda: s.__setitem__("show_done", not shown),
                )
            )
            if shown:
                rows += [_row(ctx, t) for t in done]
        if not mine:
            ui.label("tasks.empty", "No tasks yet")
        ui.list("tasks", ctx.scroll_offset("tasks"), rows, reserve_bottom=240)
        ui.fab("tasks.add", "+", _new_task(ctx, current["id"] if current else 1, None), text="Add task")

    def _task(self, ui: UI, ctx: AppContext) -> None:
        d = ctx.data
        t = _find(d, ctx.screen["task"])
        if t is None:
            ui.app_bar("Tasks", on_back=ctx.popper())
            ui.label("tasks.gone", "This task was deleted")
            return
        ui.app_bar(
            "",
            on_back=self._close(ctx),
            actions=[
                ("tasks.star", "★" if t["starred"] else "☆", _flip(t, "starred")),
                ("tasks.delete", "✕", _deleter(ctx, t["id"]), "Delete"),
            ],
        )
        ctx.text_field(ui, TITLE, "Title", on_submit=lambda _text: _save_title(ctx))
        ui.row(
            "tasks.detail.due",
            f"Due {due_text(t['due'])}" if t["due"] is not None else "Add due date",
            on_tap=ctx.pusher("due", task=t["id"]),
        )
        subs = [x for x in d["tasks"] if x["parent"] == t["id"]]
        if t["parent"] is None:
            ui.title("Subtasks", size="small")
            for x in subs:
                ui.row(
                    f"tasks.sub.{x['id']}",
                    x["title"],
                    "Completed" if x["done"] else "",
                    on_tap=ctx.pusher("task", task=x["id"], fields={TITLE: x["title"]}),
                    glyph="✓" if x["done"] else "",
                )
            ui.button("tasks.add_subtask", "Add subtask", _new_task(ctx, t["list"], t["id"]), role="secondary")
        ui.button("tasks.complete", "Mark uncompleted" if t["done"] else "Mark completed", _completer(ctx, t))

    def handle_back(self, ctx: AppContext) -> bool:
        if ctx.screen["name"] == "task":
            _save_title(ctx, pop=False)  # the title saves when the page closes, as in Google Tasks
        return False

    def _close(self, ctx: AppContext) -> Callable[[], None]:
        def close() -> None:
            if not self.handle_back(ctx):
                ctx.pop()

        return close


# -- helpers ------------------------------------------------------------------------------
def _find(d: dict[str, Any], task_id: int | None) -> dict[str, Any] | None:
    return next((t for t in d["tasks"] if t["id"] == task_id), None)


def _list_named(d: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((lst for lst in d["lists"] if same(lst["name"], name)), None)


def _current_list(d: dict[str, Any], screen: dict[str, Any]) -> dict[str, Any] | None:
    wanted = screen.get("list")
    return next((lst for lst in d["lists"] if lst["id"] == wanted), d["lists"][0] if d["lists"] else None)


def _row(ctx: AppContext, t: dict[str, Any]) -> Row:
    n_subs = sum(1 for x in ctx.data["tasks"] if x["parent"] == t["id"] and not x["done"])
    parts = [
        f"Due {due_text(t['due'])}" if t["due"] is not None else "",
        "Starred" if t["starred"] else "",
        ("1 subtask" if n_subs == 1 else f"{n_subs} subtasks") if n_subs else "",
    ]
    subtitle = " · ".join(p for p in parts if p)
    return Row(
        f"tasks.task.{t['id']}",
        t["title"],
        subtitle,
        glyph="✓" if t["done"] else ("★" if t["starred"] else ""),
        on_tap=ctx.pusher("task", task=t["id"], fields={TITLE: t["title"]}),
        trailing="" if t["done"] else "Done",
        on_trailing=None if t["done"] else _completer(ctx, t, pop=False),
    )


def _list_tab(ctx: AppContext, list_id: int) -> Callable[[], None]:
    return lambda: ctx.reset_to("home", list=list_id)


def _new_list(ctx: AppContext) -> Callable[[], None]:
    def new_list() -> None:
        ctx.push("new_list")
        ctx.phone.state["focus"] = LIST_NAME

    return new_list


def _new_task(ctx: AppContext, list_id: int, parent: int | None) -> Callable[[], None]:
    def new_task() -> None:
        if ctx.screen["name"] == "task":
            _save_title(ctx, pop=False)
        ctx.push("new", list=list_id, parent=parent, due=None)
        ctx.phone.state["focus"] = NEW_TITLE

    return new_task


def _screen_toggle(ctx: AppContext, key: str, value: Any) -> Callable[[], None]:
    def toggle() -> None:
        ctx.screen[key] = None if ctx.screen.get(key) == value else value

    return toggle


def _add_task(ctx: AppContext) -> None:
    s = ctx.screen
    title = ctx.field(NEW_TITLE).strip()
    if not title:
        ctx.phone.state["focus"] = NEW_TITLE
        return
    d = ctx.data
    new_id = max((t["id"] for t in d["tasks"]), default=0) + 1
    d["tasks"].append(
        {
            "id": new_id,
            "list": s["list"],
            "title": title,
            "due": s.get("due"),
            "starred": False,
            "done": False,
            "parent": s.get("parent"),
        }
    )
    ctx.pop()


def _add_list(ctx: AppContext) -> None:
    name = ctx.field(LIST_NAME).strip()
    if not name:
        return
    d = ctx.data
    if _list_named(d, name) is not None:
        ctx.screen["error"] = "A list with this name exists"
        return
    new_id = max((lst["id"] for lst in d["lists"]), default=0) + 1
    d["lists"].append({"id": new_id, "name": name})
    ctx.reset_to("home", list=new_id)


def _save_title(ctx: AppContext, pop: bool = False) -> None:
    t = _find(ctx.data, ctx.screen.get("task"))
    title = ctx.field(TITLE).strip()
    if t is not None and title:
        t["title"] = title
    ctx.phone.state["focus"] = None
    if pop:
        ctx.pop()


def _set_due(ctx: AppContext, t: dict[str, Any] | None, day: int | None) -> Callable[[], None]:
    def set_due() -> None:
        if t is not None:
            t["due"] = day
        ctx.pop()

    return set_due


def _flip(t: dict[str, Any], key: str) -> Callable[[], None]:
    def flip() -> None:
        t[key] = not t[key]

    return flip


def _completer(ctx: AppContext, t: dict[str, Any], pop: bool = True) -> Callable[[], None]:
    def complete() -> None:
        t["done"] = not t["done"]
        if pop and t["done"]:
            _save_title(ctx)
            ctx.pop()

    return complete


def _deleter(ctx: AppContext, task_id: int) -> Callable[[], None]:
    def delete() -> None:
        ctx.data["tasks"] = [t for t in ctx.data["tasks"] if t["id"] != task_id and t["parent"] != task_id]
        ctx.pop()
        ctx.toast("Task deleted")

    return delete


# -- predicates -----------------------------------------------------------------------------
def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "tasks" and state["popup"] is None else 1


def _to_task(state: dict[str, Any], t: dict[str, Any]) -> int:
    """Lower bound on showing task ``t``'s page (its row, or its parent's page and then its row)."""
    s = top(state, "tasks")
    if _fg(state) == 0 and s["name"] == "task" and s.get("task") == t["id"]:
        return 0
    return _fg(state) + (2 if t["parent"] is not None else 1)


def _create_cost(state: dict[str, Any], title: str, due: int | None, parent: dict[str, Any] | None) -> int:
    """Lower bound on adding a task: '+' (or Add subtask), the title typed with Enter (or a due chip, then Save)."""
    s = top(state, "tasks")
    if _fg(state) == 0 and s["name"] == "new":
        current = s.get("fields", {}).get(NEW_TITLE, "")
        due_taps = int(due is not None and s.get("due") != due)
        typing = 0 if same(current, title) else typing_cost([(current, title)], state["focus"] is not None)
        return typing + due_taps if typing else due_taps + 1  # a type with Enter saves; else Save
    reach = 1 if parent is None else _to_task(state, parent) - _fg(state) + 1
    return _fg(state) + reach + 1 + (1 if due is not None else 0)


class TaskSpec(PredicateParams):
    title: str = Field(min_length=1)
    list_name: str | None = Field(None, description="the list (by name) it must be in; None: any")
    due: int | None = Field(None, ge=0, le=6, description="due day: 0 = Monday, Nov 19 ... 6 = Sunday, Nov 25")
    parent: str | None = Field(None, description="the title of the task it must be a subtask of")

    def texts(self) -> list[str]:
        return [t for t in (self.title, self.list_name) if t]


@predicate("tasks.task", TaskSpec)
def task(state: dict[str, Any], p: TaskSpec) -> Check:
    """An open task ``title`` is in list ``list_name`` (when given), due on ``due`` (when given) and a subtask of
    ``parent`` (when given)."""
    d = data(state, "tasks")
    lst = _list_named(d, p.list_name) if p.list_name is not None else None
    parents = [t for t in d["tasks"] if p.parent is not None and same(t["title"], p.parent)]

    def fits_place(t: dict[str, Any]) -> bool:
        return (p.list_name is None or (lst is not None and t["list"] == lst["id"])) and (
            p.parent is None or t["parent"] in {x["id"] for x in parents}
        )

    named = [t for t in d["tasks"] if same(t["title"], p.title) and not t["done"] and fits_place(t)]
    if any(p.due is None or t["due"] == p.due for t in named):
        return Check.of(0)
    s = top(state, "tasks")
    best = 1 << 20
    for t in named:  # in place, wrong due day: its page, the due row, the day
        on_picker = _fg(state) == 0 and s["name"] == "due" and s.get("task") == t["id"]
        best = min(best, 1 if on_picker else _to_task(state, t) + 2)
    if p.list_name is not None and lst is None:
        # A new list first ('+', its name with Enter: it opens), then '+', the title, the due day.
        on_form = _fg(state) == 0 and s["name"] == "new_list"
        make_list = 1 if on_form else _fg(state) + 2
        best = min(best, make_list + 2 + (1 if p.due is not None else 0))
    elif p.parent is not None and not parents:
        best = min(best, 99)
    else:
        for parent in parents or [None]:
            if p.parent is None:
                on_other = (
                    _fg(state) == 0
                    and s["name"] == "home"
                    and lst is not None
                    and (_current_list(d, s) or {}).get("id") != lst["id"]
                )
                best = min(best, _create_cost(state, p.title, p.due, None) + int(on_other))
            else:
                best = min(best, _create_cost(state, p.title, p.due, parent))
    return Check.of(best)


class Title(PredicateParams):
    title: str = Field(min_length=1)


class Flag(Title):
    value: bool = True


@predicate("tasks.done", Flag)
def done(state: dict[str, Any], p: Flag) -> Check:
    """A task ``title`` exists and every task of that title is completed (or, with ``value`` false, open)."""
    named = [t for t in data(state, "tasks")["tasks"] if same(t["title"], p.title)]
    wrong = [t for t in named if t["done"] != p.value]
    if named and not wrong:
        return Check.of(0)
    if not named:
        return Check.of(99)
    # Each: its row's Done pill (open tasks, from the list) or its page and the button.
    return Check.of(sum(max(1, _to_task(state, t)) for t in wrong))


@predicate("tasks.starred", Flag)
def starred(state: dict[str, Any], p: Flag) -> Check:
    """A task ``title`` exists and every task of that title is starred (or not)."""
    named = [t for t in data(state, "tasks")["tasks"] if same(t["title"], p.title)]
    wrong = [t for t in named if t["starred"] != p.value]
    if named and not wrong:
        return Check.of(0)
    if not named:
        return Check.of(99)
    return Check.of(sum(_to_task(state, t) + 1 for t in wrong))


@predicate("tasks.no_task", Title)
def no_task(state: dict[str, Any], p: Title) -> Check:
    """No task is called ``title``."""
    named = [t for t in data(state, "tasks")["tasks"] if same(t["title"], p.title)]
    return Check.of(sum(_to_task(state, t) + 1 for t in named) if named else 0)


class ListName(PredicateParams):
    name: str = Field(min_length=1)

    def texts(self) -> list[str]:
        return [self.name]


@predicate("tasks.list", ListName)
def list_exists(state: dict[str, Any], p: ListName) -> Check:
    """A list called ``name`` exists."""
    if _list_named(data(state, "tasks"), p.name) is not None:
        return Check.of(0)
    on_form = _fg(state) == 0 and top(state, "tasks")["name"] == "new_list"
    return Check.of(1 if on_form else _fg(state) + 2)


# -- setup steps ----------------------------------------------------------------------------
class NewTask(PredicateParams):
    title: str = Field(min_length=1)
    list_name: str = Field("My Tasks", min_length=1, description="the list's name; created when missing")
    due: int | None = Field(None, ge=0, le=6)
    starred: bool = False
    done: bool = False
    subtasks: list[str] = Field(default_factory=list)


class AddTasks(PredicateParams):
    """Tasks to put on the phone; one with the same title is replaced (a repeated setup adds nothing twice)."""

    tasks: list[NewTask] = Field(min_length=1)


@setup_step("tasks.add", AddTasks)
def _add_tasks(state: dict[str, Any], p: AddTasks) -> None:
    """Add (or replace by title) the given tasks and their subtasks, creating lists as needed."""
    d = data(state, "tasks")

    def list_id(name: str) -> int:
        found = _list_named(d, name)
        if found is not None:
            return found["id"]
        new_id = max((lst["id"] for lst in d["lists"]), default=0) + 1
        d["lists"].append({"id": new_id, "name": name})
        return new_id

    def put(title: str, lst: int, due: int | None, starred: bool, is_done: bool, parent: int | None) -> int:
        old = [t["id"] for t in d["tasks"] if same(t["title"], title)]
        d["tasks"] = [t for t in d["tasks"] if not same(t["title"], title) and t["parent"] not in old]
        new_id = old[0] if old else max((t["id"] for t in d["tasks"]), default=0) + 1
        d["tasks"].append(
            {
                "id": new_id,
                "list": lst,
                "title": title,
                "due": due,
                "starred": starred,
                "done": is_done,
                "parent": parent,
            }
        )
        return new_id

    for spec in p.tasks:
        lst = list_id(spec.list_name)
        parent = put(spec.title, lst, spec.due, spec.starred, spec.done, None)
        for sub in spec.subtasks:
            put(sub, lst, None, False, False, parent)
