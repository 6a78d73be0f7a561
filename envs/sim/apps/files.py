"""Files: folders of files with sizes and dates; open, rename, move, delete, create folders, search, sort."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.files_zh import ZH
from darwin.envs.sim.apps.forms import focus_next, same, typing_cost
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, norm, predicate, top

FOLDERS = ("Download", "Documents", "Pictures", "Music", "Movies")
"""The folders every phone starts with (ids 1..5, in this order)."""
SEED_FILES: dict[str, tuple[str, ...]] = {
    "Download": ("boarding_pass.pdf", "invoice_2291.pdf", "setup_guide.pdf", "menu.pdf", "tickets.pdf"),
    "Documents": ("resume.docx", "budget.xlsx", "lease.pdf", "notes.txt", "thesis_draft.docx"),
    "Pictures": ("IMG_0412.jpg", "IMG_0419.jpg", "Screenshot_0101.png", "beach.jpg", "cat.jpg"),
    "Music": ("morning_mix.mp3", "podcast_ep12.mp3", "ringtone.mp3"),
    "Movies": ("VID_0420.mp4", "birthday.mp4", "trailer.mp4"),
}
"""Files a phone's seeded folders are drawn from (templates add files with other names)."""
SORTS = ("Name", "Date", "Size")
MONTH = "Nov"
TODAY = 21
NAME, QUERY, FOLDER_NAME = "files.name", "files.query", "files.folder_name"


def size_text(kb: int) -> str:
    """A size as the app shows it: ``840 KB``, ``2.4 MB``, ``1.2 GB``."""
    if kb < 1024:
        return f"{kb} KB"
    if kb < 1024 * 1024:
        return f"{kb / 1024:.1f} MB"
    return f"{kb / (1024 * 1024):.1f} GB"


def date_text(day: int) -> str:
    """A modification day (of November) as the app shows it: ``Nov 12``."""
    return f"{MONTH} {day}"


def sorted_files(files: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """``files`` in the order a folder shows them: A-Z by name, newest first, or largest first."""
    if by == "Date":
        return sorted(files, key=lambda f: (-f["day"], f["name"].lower(), f["id"]))
    if by == "Size":
        return sorted(files, key=lambda f: (-f["kb"], f["name"].lower(), f["id"]))
    return sorted(files, key=lambda f: (f["name"].lower(), f["id"]))


class FilesApp(SimApp):
    """Files (like Android's Files): a folder list, folders sorted by name, date or size, file details with
    rename / move / delete, a new-folder form and search over every file."""

    id = "files"
    label = "Files"
    package = "com.google.android.documentsui"  # Android's Files app, as SPA-Bench's task lists name it
    activity = "com.android.documentsui.files.FilesActivity"
    color = (25, 118, 210)
    glyph = "▤"
    aliases = ("file manager", "my files")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        folders: list[dict[str, Any]] = [{"id": i + 1, "name": name} for i, name in enumerate(FOLDERS)]
        files: list[dict[str, Any]] = []
        for folder in folders:
            pool = SEED_FILES[folder["name"]]
            for name in rng.sample(pool, k=rng.randint(2, len(pool) - 1)):
                files.append(
                    {
                        "id": len(files) + 1,
                        "name": name,
                        "folder": folder["id"],
                        "kb": rng.randint(40, 9000),
                        "day": rng.randint(1, TODAY),
                    }
                )
        return {"folders": folders, "files": files, "sort": "Name"}

    def popup(self) -> tuple[str, str, str]:
        return ("Free up space?", "Clean up junk files to get more room for photos and apps.", "Not now")

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        if name == "home":
            ui.app_bar("Files")
            ui.field(
                "files.search_bar",
                value="",
                focused=False,
                placeholder="Search files",
                on_focus=_open_search(ctx),
                on_submit=None,
                on_clear=None,
            )
            ui.title("Internal storage", size="small")
            rows = [
                Row(
                    f"files.folder.{f['id']}",
                    f["name"],
                    _count_text(d, f["id"]),
                    glyph="▰",
                    on_tap=ctx.pusher("folder", folder=f["id"]),
                )
                for f in ctx.shuffled(d["folders"], "folders")
            ]
            ui.list("folders", ctx.scroll_offset("folders"), rows, reserve_bottom=240)
            ui.fab("files.new_folder", "+", _new_folder(ctx))
        elif name == "folder":
            self._folder(ui, ctx)
        elif name == "file":
            self._file(ui, ctx)
        elif name == "rename":
            ui.app_bar("Rename", on_back=ctx.popper())
            ctx.text_field(ui, NAME, "File name", on_submit=lambda _text: _rename(ctx))
            ui.buttons_row(
                [
                    ("files.rename.cancel", "Cancel", ctx.popper(), False),
                    ("files.rename.save", "Save", lambda: _rename(ctx), False),
                ]
            )
        elif name == "move":
            f = _find(d, ctx.screen["file"])
            ui.app_bar("Move to", on_back=ctx.popper())
            rows = [
                Row(
                    f"files.move.{g['id']}",
                    g["name"],
                    "Current folder" if f is not None and g["id"] == f["folder"] else "",
                    on_tap=None if f is None or g["id"] == f["folder"] else _mover(ctx, g["id"]),
                )
                for g in d["folders"]
            ]
            ui.list("move", ctx.scroll_offset("move"), rows)
        elif name == "new_folder":
            ui.app_bar("New folder", on_back=ctx.popper())
            ctx.text_field(ui, FOLDER_NAME, "Folder name", on_submit=lambda _text: _create_folder(ctx))
            if ctx.screen.get("error"):
                ui.label("files.new_folder.error", ctx.screen["error"], role="text")
            ui.buttons_row(
                [
                    ("files.new_folder.cancel", "Cancel", ctx.popper(), False),
                    ("files.new_folder.create", "Create", lambda: _create_folder(ctx), False),
                ]
            )
        elif name == "search":
            ui.app_bar("Search", on_back=ctx.popper())
            ctx.text_field(ui, QUERY, "Search files", on_submit=focus_next(ctx, None))
            query = norm(ctx.field(QUERY))
            if query:
                hits = [
                    _file_row(ctx, f, with_folder=True)
                    for f in sorted_files(d["files"], "Name")
                    if query in norm(f["name"])
                ]
                if not hits:
                    ui.label("files.no_results", f"No files match '{ctx.field(QUERY)}'")
                ui.list("results", ctx.scroll_offset("results"), hits)
        else:
            raise ValueError(f"files: unknown screen {name!r}")

    def _folder(self, ui: UI, ctx: AppContext) -> None:
        d = ctx.data
        folder = _folder(d, ctx.screen["folder"])
        ui.app_bar(folder["name"] if folder else "Files", on_back=ctx.popper())
        ui.buttons_row([(f"files.sort.{s.lower()}", s, _sorter(d, s), d["sort"] == s) for s in SORTS], h=112)
        files = [f for f in d["files"] if folder is not None and f["folder"] == folder["id"]]
        if not files:
            ui.label("files.empty", "This folder is empty")
        ui.list("files", ctx.scroll_offset("files"), [_file_row(ctx, f) for f in sorted_files(files, d["sort"])])

    def _file(self, ui: UI, ctx: AppContext) -> None:
        d, s = ctx.data, ctx.screen
        f = _find(d, s["file"])
        if f is None:
            ui.app_bar("Files", on_back=ctx.popper())
            ui.label("files.gone", "This file was deleted")
            return
        ui.app_bar(f["name"], on_back=ctx.popper())
        folder = _folder(d, f["folder"])
        ui.label("files.detail.size", f"Size: {size_text(f['kb'])}", role="text")
        ui.label("files.detail.date", f"Modified: {date_text(f['day'])}", role="text")
        ui.label("files.detail.folder", f"Folder: {folder['name'] if folder else ''}", role="text")
        ui.button(
            "files.rename", "Rename", ctx.pusher("rename", file=f["id"], fields={NAME: f["name"]}), role="secondary"
        )
        ui.button("files.move", "Move", ctx.pusher("move", file=f["id"]), role="secondary")
        ui.button("files.delete", "Delete", lambda: s.__setitem__("confirm", True), role="secondary")
        if s.get("confirm"):
            ui.dialog(
                "files.delete_dialog",
                "Delete file?",
                f"'{f['name']}' will be deleted permanently.",
                [
                    ("files.delete.cancel", "Cancel", lambda: s.__setitem__("confirm", False)),
                    ("files.delete.confirm", "Delete", _deleter(ctx, f["id"])),
                ],
            )

    def handle_back(self, ctx: AppContext) -> bool:
        s = ctx.screen
        if s["name"] == "file" and s.get("confirm"):
            s["confirm"] = False
            return True
        return False


# -- helpers ------------------------------------------------------------------------------
def _find(d: dict[str, Any], file_id: int | None) -> dict[str, Any] | None:
    return next((f for f in d["files"] if f["id"] == file_id), None)


def _folder(d: dict[str, Any], folder_id: int | None) -> dict[str, Any] | None:
    return next((f for f in d["folders"] if f["id"] == folder_id), None)


def _folder_named(d: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((f for f in d["folders"] if same(f["name"], name)), None)


def _count_text(d: dict[str, Any], folder_id: int) -> str:
    n = sum(1 for f in d["files"] if f["folder"] == folder_id)
    return "1 item" if n == 1 else f"{n} items"


def _file_row(ctx: AppContext, f: dict[str, Any], with_folder: bool = False) -> Row:
    subtitle = f"{size_text(f['kb'])} · {date_text(f['day'])}"
    if with_folder:
        folder = _folder(ctx.data, f["folder"])
        subtitle += f" · {folder['name'] if folder else ''}"
    return Row(f"files.file.{f['id']}", f["name"], subtitle, on_tap=ctx.pusher("file", file=f["id"]))


def _open_search(ctx: AppContext) -> Callable[[], None]:
    def open_search() -> None:
        ctx.push("search")
        ctx.phone.state["focus"] = QUERY

    return open_search


def _new_folder(ctx: AppContext) -> Callable[[], None]:
    def new_folder() -> None:
        ctx.push("new_folder")
        ctx.phone.state["focus"] = FOLDER_NAME

    return new_folder


def _sorter(d: dict[str, Any], by: str) -> Callable[[], None]:
    def sort() -> None:
        d["sort"] = by

    return sort


def _rename(ctx: AppContext) -> None:
    f = _find(ctx.data, ctx.screen["file"])
    new = ctx.field(NAME).strip()
    if f is not None and new:
        f["name"] = new
    ctx.pop()


def _mover(ctx: AppContext, folder_id: int) -> Callable[[], None]:
    def move() -> None:
        f = _find(ctx.data, ctx.screen["file"])
        if f is not None:
            f["folder"] = folder_id
            folder = _folder(ctx.data, folder_id)
            ctx.toast(f"Moved to {folder['name'] if folder else ''}")
        ctx.pop()

    return move


def _create_folder(ctx: AppContext) -> None:
    name = ctx.field(FOLDER_NAME).strip()
    if not name:
        return
    if _folder_named(ctx.data, name) is not None:
        ctx.screen["error"] = "A folder with this name exists"
        return
    new_id = max((f["id"] for f in ctx.data["folders"]), default=0) + 1
    ctx.data["folders"].append({"id": new_id, "name": name})
    ctx.pop()


def _deleter(ctx: AppContext, file_id: int) -> Callable[[], None]:
    def delete() -> None:
        ctx.data["files"] = [f for f in ctx.data["files"] if f["id"] != file_id]
        ctx.pop()
        ctx.toast("File deleted")

    return delete


# -- predicates -----------------------------------------------------------------------------
def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "files" and state["popup"] is None else 1


def _to_file(state: dict[str, Any], f: dict[str, Any]) -> int:
    """Lower bound on showing file ``f``'s details (its folder's row or a search result, then the file)."""
    s = top(state, "files")
    if s["name"] == "file" and s.get("file") == f["id"]:
        return _fg(state)
    if (s["name"] == "folder" and s.get("folder") == f["folder"]) or s["name"] == "search":
        return _fg(state) + 1
    return _fg(state) + 2


def _create_cost(state: dict[str, Any], folder: str) -> int:
    """Lower bound on creating folder ``folder`` ('+', then type its name with Enter)."""
    s = top(state, "files")
    if _fg(state) == 0 and s["name"] == "new_folder":
        current = s.get("fields", {}).get(FOLDER_NAME, "")
        return 1 if same(current, folder) else typing_cost([(current, folder)], state["focus"] is not None)
    return _fg(state) + 2


def _file_cost(state: dict[str, Any], f: dict[str, Any], name: str, folder: dict[str, Any] | None) -> int:
    """Lower bound on making file ``f`` be called ``name`` and lie in ``folder`` (None: anywhere)."""
    s = top(state, "files")
    here = _fg(state) == 0
    cost = 0
    if not same(f["name"], name):
        if here and s["name"] == "rename" and s.get("file") == f["id"]:
            current = s.get("fields", {}).get(NAME, "")
            cost += 1 if same(current, name) else typing_cost([(current, name)], state["focus"] is not None)
            if folder is not None and f["folder"] != folder["id"]:
                cost += 2  # back on its details: Move, the folder
            return cost
        cost += _to_file(state, f) + 3  # Rename, clear, type the name with Enter
        if folder is not None and f["folder"] != folder["id"]:
            cost += 2
        return cost
    if folder is not None and f["folder"] != folder["id"]:
        if here and s["name"] == "move" and s.get("file") == f["id"]:
            return 1
        return _to_file(state, f) + 2
    return 0


class FileSpec(PredicateParams):
    name: str = Field(min_length=1)
    folder: str | None = Field(None, description="the folder (by name) it must be in; None: any")
    replaces: str | None = Field(None, description="a file name no file may have any more (a rename)")

    def texts(self) -> list[str]:
        return [t for t in (self.name, self.folder) if t]


@predicate("files.file", FileSpec)
def file(state: dict[str, Any], p: FileSpec) -> Check:
    """A file called ``name`` lies in ``folder`` (when given), and no file is called ``replaces``."""
    d = data(state, "files")
    folder = _folder_named(d, p.folder) if p.folder is not None else None
    stale = [f for f in d["files"] if p.replaces is not None and same(f["name"], p.replaces)]
    found = [
        f
        for f in d["files"]
        if same(f["name"], p.name) and (p.folder is None or (folder is not None and f["folder"] == folder["id"]))
    ]
    if found and not stale:
        return Check.of(0)
    candidates = [f for f in d["files"] if same(f["name"], p.name) or f in stale]
    if not candidates:
        return Check.of(max(1, _fg(state)))  # no file to rename or move: unreachable, but never 0
    if p.folder is not None and folder is None:
        # Create the folder ('+', its name), then from the folder list: a folder, the file, Move, the folder.
        rename = 0 if any(same(f["name"], p.name) for f in candidates) else 1
        return Check.of(_create_cost(state, p.folder) + 4 + rename)
    best = min(_file_cost(state, f, p.name, folder) for f in candidates)
    return Check.of(max(1, best + 3 * max(0, len(stale) - 1)))


class FileName(PredicateParams):
    name: str = Field(min_length=1)


@predicate("files.no_file", FileName)
def no_file(state: dict[str, Any], p: FileName) -> Check:
    """No file is called ``name`` (each one: its details, Delete, confirm)."""
    hits = [f for f in data(state, "files")["files"] if same(f["name"], p.name)]
    if not hits:
        return Check.of(0)
    s = top(state, "files")
    best = min(_to_file(state, f) for f in hits)
    if s["name"] == "file" and s.get("confirm") and s.get("file") in {f["id"] for f in hits} and _fg(state) == 0:
        first = 1
    else:
        first = best + 2
    return Check.of(first + 3 * (len(hits) - 1))


class FolderName(PredicateParams):
    name: str = Field(min_length=1)

    def texts(self) -> list[str]:
        return [self.name]


@predicate("files.folder", FolderName)
def folder_exists(state: dict[str, Any], p: FolderName) -> Check:
    """A folder called ``name`` exists."""
    if _folder_named(data(state, "files"), p.name) is not None:
        return Check.of(0)
    return Check.of(_create_cost(state, p.name))


class SortBy(PredicateParams):
    by: Literal["Name", "Date", "Size"]


@predicate("files.sort", SortBy)
def sort(state: dict[str, Any], p: SortBy) -> Check:
    """Folders list their files sorted by ``by`` (a folder's sort chips)."""
    if data(state, "files")["sort"] == p.by:
        return Check.of(0)
    on_folder = _fg(state) == 0 and top(state, "files")["name"] == "folder"
    return Check.of(1 if on_folder else _fg(state) + 2)


# -- setup steps ----------------------------------------------------------------------------
class NewFile(PredicateParams):
    name: str = Field(min_length=1)
    folder: str = Field(min_length=1, description="folder name; created when missing")
    kb: int = Field(100, ge=1)
    day: int = Field(10, ge=1, le=TODAY, description="day of November it was last modified")


class AddFiles(PredicateParams):
    """Files to put on the phone; a file of the same name is replaced (a repeated setup adds nothing twice)."""

    files: list[NewFile] = Field(default_factory=list)
    folders: list[str] = Field(default_factory=list, description="(empty) folders to create")


@setup_step("files.add", AddFiles)
def _add_files(state: dict[str, Any], p: AddFiles) -> None:
    """Create the folders, then add (or replace by name) the files."""
    d = data(state, "files")

    def folder_id(name: str) -> int:
        found = _folder_named(d, name)
        if found is not None:
            return found["id"]
        new_id = max((f["id"] for f in d["folders"]), default=0) + 1
        d["folders"].append({"id": new_id, "name": name})
        return new_id

    for name in p.folders:
        folder_id(name)
    for spec in p.files:
        old = [f["id"] for f in d["files"] if same(f["name"], spec.name)]
        new_id = old[0] if old else max((f["id"] for f in d["files"]), default=0) + 1
        d["files"] = [f for f in d["files"] if not same(f["name"], spec.name)]
        d["files"].append(
            {"id": new_id, "name": spec.name, "folder": folder_id(spec.folder), "kb": spec.kb, "day": spec.day}
        )
