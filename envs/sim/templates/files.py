"""Files templates: delete, rename and move files, create folders, sort; read a file's size and date,
name the largest file of a folder, count a folder's files."""

from __future__ import annotations

import random

from pydantic import Field, field_validator

from darwin.envs.sim.apps.files import FOLDERS, SORTS, date_text, size_text
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

FILES = ("apps.files.data.files",)
NEW_FILES = (
    ("passport_scan.pdf", "Documents"),
    ("wifi_router_manual.pdf", "Download"),
    ("holiday_photo.jpg", "Pictures"),
    ("tax_return_2028.pdf", "Documents"),
    ("concert_ticket.pdf", "Download"),
    ("voice_memo.m4a", "Music"),
    ("school_play.mp4", "Movies"),
    ("car_insurance.pdf", "Documents"),
    ("recipe_card.png", "Pictures"),
    ("gym_schedule.pdf", "Download"),
)
"""Files task instances add (names disjoint from the seeded files, envs/sim/apps/files.py)."""
RENAMES = ("old_copy.pdf", "archive_1.pdf", "keep.pdf", "backup.pdf", "final.pdf", "scan_02.pdf")
NEW_FOLDERS = ("Receipts", "Travel", "Work", "School", "Projects", "Taxes")
PROJECT = (
    ("brief.pdf", 820),
    ("budget_v2.xlsx", 2450),
    ("logo.png", 1310),
    ("timeline.docx", 390),
    ("photos.zip", 6120),
)
ZH_SORTS = {"Name": "名称", "Date": "日期", "Size": "大小"}


class FileParams(TemplateParams):
    name: str = Field(min_length=1)
    folder: str = Field(min_length=1, description="the folder it starts in")
    kb: int = Field(300, ge=1)
    day: int = Field(12, ge=1, le=21)


class RenameParams(FileParams):
    new_name: str = Field(min_length=1)


class MoveParams(FileParams):
    target: str = Field(min_length=1, description="the folder to move it to")

    @field_validator("target")
    @classmethod
    def _other(cls, v: str) -> str:
        if v not in FOLDERS + NEW_FOLDERS:
            raise ValueError(f"{v!r} is not a folder name the templates use: {', '.join(FOLDERS + NEW_FOLDERS)}")
        return v


class FolderParams(TemplateParams):
    folder: str = Field(min_length=1)


class SortParams(TemplateParams):
    by: str

    @field_validator("by")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in SORTS:
            raise ValueError(f"unknown sort {v!r}; use one of {', '.join(SORTS)}")
        return v


class ProjectParams(TemplateParams):
    folder: str = Field(min_length=1, description="a new folder the instance fills")
    count: int = Field(ge=2, le=5, description="how many files it holds")


def _file(rng: random.Random) -> dict:
    name, folder = rng.choice(NEW_FILES)
    return {
        "name": name,
        "folder": folder,
        "kb": rng.choice((180, 640, 1530, 2870, 4410, 7980)),
        "day": rng.randint(2, 20),
    }


def _add(p: FileParams) -> StateSetup:
    return StateSetup(
        step="files.add", params={"files": [{"name": p.name, "folder": p.folder, "kb": p.kb, "day": p.day}]}
    )


def _project(p: ProjectParams) -> StateSetup:
    files = [
        {"name": name, "folder": p.folder, "kb": kb, "day": 3 + i} for i, (name, kb) in enumerate(PROJECT[: p.count])
    ]
    return StateSetup(step="files.add", params={"files": files})


def _largest(p: ProjectParams) -> str:
    return max(PROJECT[: p.count], key=lambda f: f[1])[0]


register(
    TaskTemplate(
        id="files.delete_file",
        app="Files",
        params=FileParams,
        difficulty=1,
        step_budget=12,
        description="delete a file (the instance adds it)",
        sample=lambda rng: FileParams(**_file(rng)),
        phrasings={
            "ENG": (
                "Delete the file {name}.",
                "Remove {name} from my phone.",
                "In Files, delete {name} from the {folder} folder.",
            ),
            "CHN": ("删除文件 {name}。", "在文件应用中，把“{folder}”文件夹里的 {name} 删掉。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="files.no_file", params={"name": p.name}),
        allowed_changes=lambda p: FILES,
    )
)

register(
    TaskTemplate(
        id="files.rename_file",
        app="Files",
        params=RenameParams,
        difficulty=2,
        step_budget=16,
        description="rename a file (the instance adds it)",
        sample=lambda rng: RenameParams(**_file(rng), new_name=rng.choice(RENAMES)),
        phrasings={
            "ENG": ("Rename {name} to {new_name}.", "In Files, change the name of {name} to {new_name}."),
            "CHN": ("把 {name} 重命名为 {new_name}。", "在文件应用中，将 {name} 的名称改为 {new_name}。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(
            predicate="files.file", params={"name": p.new_name, "folder": p.folder, "replaces": p.name}
        ),
        allowed_changes=lambda p: ("apps.files.data.files.*.name",),
        subgoals=lambda p: (VerifierSpec(predicate="files.no_file", params={"name": p.name}),),
    )
)

register(
    TaskTemplate(
        id="files.move_file",
        app="Files",
        params=MoveParams,
        difficulty=2,
        step_budget=16,
        description="move a file to another existing folder (the instance adds it)",
        sample=lambda rng: MoveParams(**(f := _file(rng)), target=rng.choice([x for x in FOLDERS if x != f["folder"]])),
        phrasings={
            "ENG": (
                "Move {name} to the {target} folder.",
                "Put the file {name} in {target}.",
                "In Files, move {name} from {folder} to {target}.",
            ),
            "CHN": ("把 {name} 移动到“{target}”文件夹。", "在文件应用中，将 {name} 从“{folder}”移到“{target}”。"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="files.file", params={"name": p.name, "folder": p.target}),
        allowed_changes=lambda p: ("apps.files.data.files.*.folder",),
    )
)

register(
    TaskTemplate(
        id="files.create_folder",
        app="Files",
        params=FolderParams,
        difficulty=1,
        step_budget=12,
        description="create a folder",
        sample=lambda rng: FolderParams(folder=rng.choice(NEW_FOLDERS)),
        phrasings={
            "ENG": (
                "Create a folder named {folder}.",
                "Make a new folder called '{folder}' in Files.",
                "Add a {folder} folder to my files.",
            ),
            "CHN": ("新建一个名为“{folder}”的文件夹。", "在文件应用中创建文件夹“{folder}”。"),
        },
        verifier=lambda p: VerifierSpec(predicate="files.folder", params={"name": p.folder}),
        allowed_changes=lambda p: ("apps.files.data.folders",),
    )
)

register(
    TaskTemplate(
        id="files.organize",
        app="Files",
        params=MoveParams,
        difficulty=3,
        step_budget=24,
        description="create a folder and move a file into it (the instance adds the file)",
        sample=lambda rng: MoveParams(**_file(rng), target=rng.choice(NEW_FOLDERS)),
        phrasings={
            "ENG": (
                "Create a folder called {target} and move {name} into it.",
                "Make a new '{target}' folder in Files and put {name} there.",
            ),
            "CHN": (
                "新建文件夹“{target}”，并把 {name} 移进去。",
                "在文件应用中创建“{target}”文件夹，然后将 {name} 移到其中。",
            ),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="files.file", params={"name": p.name, "folder": p.target}),
        allowed_changes=lambda p: ("apps.files.data.folders", "apps.files.data.files.*.folder"),
        subgoals=lambda p: (
            VerifierSpec(predicate="files.folder", params={"name": p.target}),
            VerifierSpec(predicate="files.file", params={"name": p.name, "folder": p.target}),
        ),
    )
)

register(
    TaskTemplate(
        id="files.sort_files",
        app="Files",
        params=SortParams,
        difficulty=1,
        step_budget=10,
        description="sort folders' files by name, date or size (the instance starts from another order)",
        sample=lambda rng: SortParams(by=rng.choice(("Date", "Size"))),
        phrasings={
            "ENG": ("Sort my files by {by_lower}.", "In Files, show the files of a folder sorted by {by_lower}."),
            "CHN": ("把文件按{zh_by}排序。", "在文件应用中，让文件夹里的文件按{zh_by}排序。"),
        },
        wording=lambda p: {"by_lower": p.by.lower(), "zh_by": ZH_SORTS[p.by]},
        verifier=lambda p: VerifierSpec(predicate="files.sort", params={"by": p.by}),
        allowed_changes=lambda p: ("apps.files.data.sort",),
    )
)

register(
    TaskTemplate(
        id="files.file_size",
        app="Files",
        params=FileParams,
        difficulty=1,
        step_budget=10,
        description="answer: the size of a file (number matcher, as the app shows it)",
        sample=lambda rng: FileParams(**_file(rng)),
        phrasings={
            "ENG": (
                "How big is the file {name}? Answer with the size Files shows.",
                "What is the size of {name} in the {folder} folder?",
            ),
            "CHN": ("文件 {name} 有多大？请按文件应用显示的大小回答。", "“{folder}”文件夹里的 {name} 大小是多少？"),
        },
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": size_text(p.kb),
                "tolerance": 0.05,
                "app": "files",
                "via": ["home", "folder"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="files.file_date",
        app="Files",
        params=FileParams,
        difficulty=2,
        step_budget=12,
        description="answer: when a file was last modified (find it first: its folder or a search)",
        sample=lambda rng: FileParams(**_file(rng)),
        phrasings={
            "ENG": ("When was {name} last modified?", "Find the file {name}: on what date was it last changed?"),
            "CHN": ("{name} 最后一次修改是在哪天？", "找到文件 {name}：它最后修改的日期是哪天？"),
        },
        wording=lambda p: {"name": p.name},
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "choice",
                "expected": date_text(p.day),
                "accepted": [f"November {p.day}", f"{p.day} Nov", f"{p.day} November"],
                "app": "files",
                "via": ["home", "folder"],
                "inputs": [p.name],
            },
        ),
        allowed_changes=lambda p: ("apps.files.data.sort",),
    )
)

register(
    TaskTemplate(
        id="files.largest_file",
        app="Files",
        params=ProjectParams,
        difficulty=2,
        step_budget=12,
        description="answer: the largest file of a folder (the instance fills a new folder)",
        sample=lambda rng: ProjectParams(folder=rng.choice(NEW_FOLDERS), count=rng.randint(3, 5)),
        phrasings={
            "ENG": (
                "Which is the largest file in the {folder} folder? Answer with its name.",
                "In Files, what is the biggest file in {folder}?",
            ),
            "CHN": ("“{folder}”文件夹中最大的文件是哪个？请回答文件名。", "在文件应用中，“{folder}”里哪个文件最大？"),
        },
        setup=lambda p: (_project(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": _largest(p), "app": "files", "via": ["home", "folder"]},
        ),
        allowed_changes=lambda p: ("apps.files.data.sort",),
    )
)

register(
    TaskTemplate(
        id="files.count_files",
        app="Files",
        params=ProjectParams,
        difficulty=1,
        step_budget=10,
        description="answer: how many files a folder holds (the instance fills a new folder)",
        sample=lambda rng: ProjectParams(folder=rng.choice(NEW_FOLDERS), count=rng.randint(2, 5)),
        phrasings={
            "ENG": ("How many files are in my {folder} folder?", "Count the files in the {folder} folder."),
            "CHN": ("“{folder}”文件夹里有多少个文件？", "数一数“{folder}”文件夹中有几个文件。"),
        },
        setup=lambda p: (_project(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "number", "expected": f"{p.count} items", "app": "files", "via": ["home"]},
        ),
        allowed_changes=lambda p: (),
    )
)
