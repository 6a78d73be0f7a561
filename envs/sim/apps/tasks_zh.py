"""Simplified Chinese UI strings of the Tasks app (``TasksApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Tasks": "任务", "My Tasks": "我的任务", "Work": "工作", "New list": "新建列表", "List name": "列表名称",
    "Create": "创建", "Cancel": "取消", "Save": "保存", "New task": "新任务", "Title": "标题", "Add task": "添加任务",
    "No tasks yet": "暂无任务", "Completed ({})": "已完成（{}）", "Hide completed": "隐藏已完成",
    "Due {} · {}": "截止日期：{} · {}", "Due {}": "截止日期：{}", "Add due date": "添加截止日期", "Due date": "截止日期", "No date": "无日期",
    "Subtasks": "子任务", "Add subtask": "添加子任务", "New subtask": "新子任务", "Mark completed": "标记为已完成",
    "Mark uncompleted": "标记为未完成", "Delete": "删除", "Task deleted": "任务已删除", "Completed": "已完成",
    "This task was deleted": "此任务已被删除", "Starred": "已加星标", "Done": "完成",
    "A list with this name exists": "已存在同名列表", "{} subtasks": "{} 个子任务", "1 subtask": "1 个子任务",
    "Mon": "周一", "Tue": "周二", "Wed": "周三", "Thu": "周四", "Fri": "周五", "Sat": "周六", "Sun": "周日",
    "Mon, Nov 19": "11月19日 周一", "Tue, Nov 20": "11月20日 周二", "Wed, Nov 21": "11月21日 周三",
    "Thu, Nov 22": "11月22日 周四", "Fri, Nov 23": "11月23日 周五", "Sat, Nov 24": "11月24日 周六", "Sun, Nov 25": "11月25日 周日",
}
