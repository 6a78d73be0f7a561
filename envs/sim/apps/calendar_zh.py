"""Simplified Chinese UI strings of the Calendar app (``CalendarApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

_DAYS = "一二三四五六日"

ZH: dict[str, str] = {
    "Calendar": "日历",
    "New event": "新建活动",
    "Edit event": "修改活动",
    "Event": "活动",
    "Title": "标题",
    "Add title": "添加标题",
    "Add a title": "请添加标题",
    "Location": "地点",
    "Add location": "添加地点",
    "Date": "日期",
    "Time": "时间",
    "Start time": "开始时间",
    "Tap to change": "点按即可更改",
    "Delete event?": "要删除活动吗？",
    "Event deleted": "已删除活动",
    "Event saved": "已保存活动",
    "This event was deleted": "此活动已被删除",
    "No events": "没有活动",
    "1 event": "1 个活动",
    "{} events": "{} 个活动",
    "Starts {}": "{} 开始",
    "Day: {}": "日期：{}",
    "1 hour": "1 小时",
    "{} hours": "{} 小时",
    "{} min": "{} 分钟",
    "'{}' on {} will be deleted.": "{1}的“{0}”将被删除。",
    "{}, November {}, {}": "{2}年11月{1}日 {0}",
    "{}, November {}": "11月{1}日 {0}",
    "November {} – {}, {}": "{2}年11月{0}日 – {1}日",
    **{f"#calendar.day.{d}": f"{_DAYS[d]} {19 + d}" for d in range(7)},
    **{f"#calendar.edit.day.{d}": _DAYS[d] for d in range(7)},
}
