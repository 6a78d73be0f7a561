"""Simplified Chinese UI strings of the Files app (``FilesApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Files": "文件", "Search files": "搜索文件", "Search": "搜索", "Internal storage": "内部存储",
    "{} items": "{} 项", "1 item": "1 项", "Sort by": "排序方式", "Name": "名称", "Date": "日期", "Size": "大小",
    "This folder is empty": "此文件夹为空", "No files match '{}'": "没有与“{}”匹配的文件",
    "Size: {}": "大小：{}", "Modified: {}": "修改时间：{}", "Folder: {}": "文件夹：{}",
    "Rename": "重命名", "Move": "移动", "Delete": "删除", "Cancel": "取消", "Save": "保存", "Create": "创建",
    "File name": "文件名", "Move to": "移动到", "New folder": "新建文件夹", "Folder name": "文件夹名称",
    "Delete file?": "删除文件？", "'{}' will be deleted permanently.": "“{}”将被永久删除。",
    "This file was deleted": "此文件已被删除", "Current folder": "当前文件夹", "File deleted": "文件已删除",
    "A folder with this name exists": "已存在同名文件夹", "Moved to {}": "已移动到{}",
    "Free up space?": "释放空间？", "Clean up junk files to get more room for photos and apps.": "清理垃圾文件，为照片和应用腾出更多空间。",
    "Not now": "以后再说",
}
