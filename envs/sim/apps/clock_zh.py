"""Simplified Chinese UI strings of the Clock app (:attr:`ClockApp.zh`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Clock": "时钟",
    "Alarm": "闹钟",
    "Timer": "计时器",
    "Choose a city": "选择城市",
    "Home time zone": "家庭时区",
    "Select time": "选择时间",
    "Style": "样式",
    "Style: {}": "样式：{}",
    "{} (home)": "{}（家）",
    "Digital": "数字",
    "Analog": "指针",
    "Search for a city": "搜索城市",
    "Repeat: {}": "重复：{}",
    "Not scheduled": "未安排",
    "{} - off": "{} - 已关闭",
    "{} - on": "{} - 已开启",
    "Tap to change time": "点按即可更改时间",
    "Change date & time": "更改日期和时间",
    "Automatic home clock": "自动显示家庭时钟",
    "While traveling, add a clock for home": "在旅行时添加家庭所在地的时钟",
    "Alarm on": "闹钟已开启",
    "Vibrate": "振动",
    "This alarm was deleted": "此闹钟已被删除",
    "Alarm saved": "闹钟已保存",
    "Alarm deleted": "闹钟已删除",
    **{f"#clock.day.{i}": d for i, d in enumerate("一二三四五六日")},
}
