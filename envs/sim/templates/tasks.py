"""Tasks templates: add tasks (with a due day, to a list, as subtasks), complete, star, delete, reschedule;
new lists; when a task is due, how many tasks of a list are done."""

from __future__ import annotations

from pydantic import Field

from darwin.envs.sim.apps.tasks import DAY_NAMES, due_text
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

TASKS = ("apps.tasks.data.tasks",)
NEW_TITLES = (
    "Pay the electricity bill",
    "Pick up the parcel",
    "Renew car insurance",
    "Call grandma",
    "Buy a new umbrella",
    "Clean the fridge",
    "Order printer ink",
    "Book a haircut",
)
"""Task titles instances use (disjoint from the seeded tasks, envs/sim/apps/tasks.py)."""
SUBTASKS = ("Find the receipt", "Check the address", "Ask for a quote", "Compare prices", "Write it down")
NEW_LISTS = ("Groceries", "Chores", "Travel", "Errands", "Garden")
ZH_DAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
ZH_LISTS = {"My Tasks": "我的任务", "Work": "工作"}


class TaskParams(TemplateParams):
    title: str = Field(min_length=1)


class DueParams(TaskParams):
    due: int = Field(ge=0, le=6, description="0 = Monday, Nov 19 ... 6 = Sunday, Nov 25")


class InList(TaskParams):
    list_name: str = Field(min_length=1)


class Reschedule(DueParams):
    old_due: int = Field(ge=0, le=6)


class Subtask(TaskParams):
    subtask: str = Field(min_length=1)


class Count(TemplateParams):
    list_name: str = Field(min_length=1, description="a new list the instance fills")
    open_tasks: int = Field(ge=1, le=3)
    done_tasks: int = Field(ge=0, le=3)


def _add(title: str, **extra: object) -> StateSetup:
    return StateSetup(step="tasks.add", params={"tasks": [{"title": title, **extra}]})


def _words(p: TemplateParams) -> dict[str, str]:
    words = {k: str(v) for k, v in p.model_dump().items()}
    for key in ("due", "old_due"):
        if key in words:
            day = int(words[key])
            words[f"{key}_day"], words[f"zh_{key}"] = DAY_NAMES[day], f"{ZH_DAYS[day]}（11月{19 + day}日）"
    if "list_name" in words:
        words["zh_list"] = ZH_LISTS.get(words["list_name"], words["list_name"])
    return words


def _count_setup(p: Count) -> StateSetup:
    titles = NEW_TITLES[: p.open_tasks + p.done_tasks]
    return StateSetup(
        step="tasks.add",
        params={
            "tasks": [{"title": t, "list_name": p.list_name, "done": i >= p.open_tasks} for i, t in enumerate(titles)]
        },
    )


register(
    TaskTemplate(
        id="tasks.add_task",
        app="Tasks",
        params=TaskParams,
        difficulty=1,
        step_budget=10,
        description="add a task to the default list",
        sample=lambda rng: TaskParams(title=rng.choice(NEW_TITLES)),
        phrasings={
            "ENG": ("Add a task '{title}'.", "Put '{title}' on my to-do list.", "Create a new task: {title}."),
            "CHN": ("添加一个任务“{title}”。", "把“{title}”加到我的待办事项里。"),
        },
        verifier=lambda p: VerifierSpec(predicate="tasks.task", params={"title": p.title}),
        allowed_changes=lambda p: TASKS,
    )
)

register(
    TaskTemplate(
        id="tasks.add_due_task",
        app="Tasks",
        params=DueParams,
        difficulty=2,
        step_budget=14,
        description="add a task due on a day of this week",
        sample=lambda rng: DueParams(title=rng.choice(NEW_TITLES), due=rng.randrange(7)),
        phrasings={
            "ENG": (
                "Add a task '{title}' due on {due_day}.",
                "Create the task '{title}' with the due date {due_day}, Nov {due_date}.",
            ),
            "CHN": ("添加任务“{title}”，截止日期为{zh_due}。", "新建任务“{title}”，设在{zh_due}到期。"),
        },
        wording=lambda p: {**_words(p), "due_date": str(19 + p.due)},
        verifier=lambda p: VerifierSpec(predicate="tasks.task", params={"title": p.title, "due": p.due}),
        allowed_changes=lambda p: TASKS,
        subgoals=lambda p: (
            VerifierSpec(predicate="tasks.task", params={"title": p.title}),
            VerifierSpec(predicate="tasks.task", params={"title": p.title, "due": p.due}),
        ),
    )
)

register(
    TaskTemplate(
        id="tasks.complete_task",
        app="Tasks",
        params=TaskParams,
        difficulty=1,
        step_budget=10,
        description="mark a task completed (the instance adds it)",
        sample=lambda rng: TaskParams(title=rng.choice(NEW_TITLES)),
        phrasings={
            "ENG": (
                "Mark the task '{title}' as completed.",
                "I have done '{title}': tick it off.",
                "Complete the task '{title}'.",
            ),
            "CHN": ("把任务“{title}”标记为已完成。", "我已经完成了“{title}”，把它勾掉。"),
        },
        setup=lambda p: (_add(p.title, due=4),),
        verifier=lambda p: VerifierSpec(predicate="tasks.done", params={"title": p.title}),
        allowed_changes=lambda p: ("apps.tasks.data.tasks.*.done",),
    )
)

register(
    TaskTemplate(
        id="tasks.star_task",
        app="Tasks",
        params=TaskParams,
        difficulty=1,
        step_budget=10,
        description="star a task (the instance adds it, unstarred)",
        sample=lambda rng: TaskParams(title=rng.choice(NEW_TITLES)),
        phrasings={
            "ENG": ("Star the task '{title}'.", "Mark '{title}' as important with a star."),
            "CHN": ("给任务“{title}”加星标。", "把“{title}”标为重要（加星标）。"),
        },
        setup=lambda p: (_add(p.title),),
        verifier=lambda p: VerifierSpec(predicate="tasks.starred", params={"title": p.title}),
        allowed_changes=lambda p: ("apps.tasks.data.tasks.*.starred",),
    )
)

register(
    TaskTemplate(
        id="tasks.delete_task",
        app="Tasks",
        params=TaskParams,
        difficulty=1,
        step_budget=10,
        description="delete a task (the instance adds it)",
        sample=lambda rng: TaskParams(title=rng.choice(NEW_TITLES)),
        phrasings={
            "ENG": ("Delete the task '{title}'.", "Remove '{title}' from my tasks."),
            "CHN": ("删除任务“{title}”。", "把“{title}”从任务里删掉。"),
        },
        setup=lambda p: (_add(p.title),),
        verifier=lambda p: VerifierSpec(predicate="tasks.no_task", params={"title": p.title}),
        allowed_changes=lambda p: TASKS,
    )
)

register(
    TaskTemplate(
        id="tasks.reschedule",
        app="Tasks",
        params=Reschedule,
        difficulty=2,
        step_budget=12,
        description="move a task's due day (the instance adds it due on another day)",
        sample=lambda rng: Reschedule(
            title=rng.choice(NEW_TITLES), due=(d := rng.sample(range(7), 2))[0], old_due=d[1]
        ),
        phrasings={
            "ENG": (
                "The task '{title}' is due on {old_due_day}; move it to {due_day}.",
                "Change the due date of '{title}' to {due_day}.",
            ),
            "CHN": ("任务“{title}”原定{zh_old_due}到期，把它改到{zh_due}。", "把“{title}”的截止日期改为{zh_due}。"),
        },
        wording=_words,
        setup=lambda p: (_add(p.title, due=p.old_due),),
        verifier=lambda p: VerifierSpec(predicate="tasks.task", params={"title": p.title, "due": p.due}),
        allowed_changes=lambda p: ("apps.tasks.data.tasks.*.due",),
    )
)

register(
    TaskTemplate(
        id="tasks.new_list",
        app="Tasks",
        params=InList,
        difficulty=3,
        step_budget=16,
        description="create a list and add a first task to it",
        sample=lambda rng: InList(title=rng.choice(NEW_TITLES), list_name=rng.choice(NEW_LISTS)),
        phrasings={
            "ENG": (
                "Create a new list called '{list_name}' and add the task '{title}' to it.",
                "Make a '{list_name}' task list with '{title}' on it.",
            ),
            "CHN": (
                "新建一个名为“{list_name}”的列表，并在其中添加任务“{title}”。",
                "创建任务列表“{list_name}”，在里面加上“{title}”。",
            ),
        },
        verifier=lambda p: VerifierSpec(predicate="tasks.task", params={"title": p.title, "list_name": p.list_name}),
        allowed_changes=lambda p: ("apps.tasks.data.lists", *TASKS),
        subgoals=lambda p: (
            VerifierSpec(predicate="tasks.list", params={"name": p.list_name}),
            VerifierSpec(predicate="tasks.task", params={"title": p.title, "list_name": p.list_name}),
        ),
    )
)

register(
    TaskTemplate(
        id="tasks.add_subtask",
        app="Tasks",
        params=Subtask,
        difficulty=2,
        step_budget=14,
        description="add a subtask under a task (the instance adds the task)",
        sample=lambda rng: Subtask(title=rng.choice(NEW_TITLES), subtask=rng.choice(SUBTASKS)),
        phrasings={
            "ENG": ("Add a subtask '{subtask}' to the task '{title}'.", "Under '{title}', add the step '{subtask}'."),
            "CHN": ("给任务“{title}”添加子任务“{subtask}”。", "在“{title}”下面加一个子任务“{subtask}”。"),
        },
        setup=lambda p: (_add(p.title),),
        verifier=lambda p: VerifierSpec(predicate="tasks.task", params={"title": p.subtask, "parent": p.title}),
        allowed_changes=lambda p: TASKS,
    )
)

register(
    TaskTemplate(
        id="tasks.due_date",
        app="Tasks",
        params=DueParams,
        difficulty=1,
        step_budget=10,
        description="answer: the day a task is due",
        sample=lambda rng: DueParams(
            title=rng.choice(NEW_TITLES), due=rng.choice((0, 1, 3, 4, 5, 6))
        ),  # not today: the launcher shows it
        phrasings={
            "ENG": ("When is the task '{title}' due?", "What is the due date of '{title}'?"),
            "CHN": ("任务“{title}”什么时候到期？", "“{title}”的截止日期是哪天？"),
        },
        wording=lambda p: {"title": p.title},
        setup=lambda p: (_add(p.title, due=p.due),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "choice",
                "expected": due_text(p.due),
                "accepted": [
                    DAY_NAMES[p.due],
                    f"Nov {19 + p.due}",
                    f"November {19 + p.due}",
                    f"{DAY_NAMES[p.due]}, November {19 + p.due}",
                ],
                "app": "tasks",
                "via": ["home"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="tasks.count_done",
        app="Tasks",
        params=Count,
        difficulty=2,
        step_budget=10,
        description="answer: how many tasks of a list are completed (the instance fills a new list)",
        sample=lambda rng: Count(
            list_name=rng.choice(NEW_LISTS), open_tasks=rng.randint(1, 3), done_tasks=rng.randint(1, 3)
        ),
        phrasings={
            "ENG": (
                "How many tasks in my {list_name} list are completed?",
                "How many tasks have I ticked off in the {list_name} list?",
            ),
            "CHN": ("“{list_name}”列表里有多少个任务已完成？", "“{list_name}”列表中我已经完成了几个任务？"),
        },
        wording=lambda p: {"list_name": p.list_name},
        setup=lambda p: (_count_setup(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "number", "expected": f"Completed ({p.done_tasks})", "app": "tasks", "via": ["home"]},
        ),
        allowed_changes=lambda p: (),
    )
)
