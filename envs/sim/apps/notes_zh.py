"""Simplified Chinese UI strings of the Notes app (``NotesApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Notes": "笔记",
    "Search your notes": "搜索笔记",
    "Search": "搜索",
    "New note": "新建笔记",
    "Edit note": "修改笔记",
    "Note": "笔记",
    "Title": "标题",
    "Pinned": "已置顶",
    "Not pinned": "未置顶",
    "Pin": "置顶",
    "Unpin": "取消置顶",
    "Delete": "删除",
    "Cancel": "取消",
    "Delete note?": "要删除笔记吗？",
    "'{}' will be deleted.": "“{}”将被删除。",
    "Note deleted": "已删除笔记",
    "Empty note discarded": "已舍弃空白笔记",
    "(empty note)": "（空白笔记）",
    "No matching notes for '{}'": "没有与“{}”匹配的笔记",
}
