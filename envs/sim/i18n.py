"""SimPhone's UI languages: ``SimPhone(locale="zh")`` shows every screen in Simplified Chinese.

Translation happens when a screen is laid out, after the app has built it in English, so
apps, element ids, app state and predicates are the same in every locale. A displayed
string is looked up

1. in the foreground app's ``SimApp.zh`` dictionary (its own words: titles, labels, ...),
2. then in :data:`COMMON_ZH`, the system's words (launcher, keyboard, pop-ups, weekdays,
   "Save", "Cancel" ...).

A key starting with ``#`` names a widget id instead of a text, for words whose translation
depends on where they are (``"#clock.day.1": "二"``: the weekday letter "T" is Tuesday or
Thursday). A key may hold ``{}`` placeholders (``"Repeat: {}"`` -> ``"重复：{}"``): the text they stand
for is translated in turn; a translation may number them where the order differs
(``"{}, Nov {}"`` -> ``"11月{1}日 {0}"``). Strings found nowhere are shown unchanged (user data such as
contact names, typed text, numbers). Text with several lines, or parts joined by ``" · "``
or ``", "``, is translated part by part when the whole is not a key.

    >>> from darwin.envs.sim.i18n import translate
    >>> translate("Cancel", {}), translate("Repeat: {}", {"Repeat: {}": "重复：{}"})
    ('取消', '重复：{}')
    >>> translate("Repeat: Weekdays", {"Repeat: {}": "重复：{}"}), translate("Ada Lovelace", {})
    ('重复：工作日', 'Ada Lovelace')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from darwin.envs.sim.phone_view import AppFace
    from darwin.envs.sim.ui import Screen

Locale = Literal["en", "zh"]
LOCALES: tuple[str, ...] = get_args(Locale)
LocaleSetting = Literal["auto", "en", "zh"]
"""What experiments configure: ``auto`` plays each task on a phone in the task's language."""

TASK_LANGUAGE_LOCALE: Mapping[str, Locale] = {"ENG": "en", "CHN": "zh"}

COMMON_ZH: Mapping[str, str] = {
    # Pop-ups every app may show at launch (SimApp.popup) and system dialogs.
    "Enjoying {}?": "喜欢{}吗？",
    "Tell us what you think. It only takes a minute.": "告诉我们您的想法，只需一分钟。",
    "Not now": "以后再说",
    "Rate now": "立即评分",
    "OK": "确定",
    "Cancel": "取消",
    "Save": "保存",
    "Done": "完成",
    "Delete": "删除",
    "Edit": "编辑",
    "Add": "添加",
    "Remove": "移除",
    "Search": "搜索",
    "Send": "发送",
    "Back": "返回",
    "Next": "下一步",
    "Close": "关闭",
    "Open": "打开",
    "Share": "分享",
    "Apply": "应用",
    "Clear": "清除",
    "Confirm": "确认",
    "Settings": "设置",
    "Yes": "是",
    "No": "否",
    "On": "开",
    "Off": "关",
    "None": "无",
    "More": "更多",
    "Today": "今天",
    "Tomorrow": "明天",
    "Yesterday": "昨天",
    "Now": "现在",
    "New": "新建",
    "All": "全部",
    "Home": "首页",
    "Profile": "个人资料",
    "Account": "账号",
    "Help": "帮助",
    "About": "关于",
    "Name": "名称",
    "Title": "标题",
    "Date": "日期",
    "Time": "时间",
    "Notes": "备注",
    "Other": "其他",
    "Select": "选择",
    "Sort": "排序",
    "Filter": "筛选",
    "Retry": "重试",
    "Undo": "撤消",
    "Copy": "复制",
    "Loading…": "正在加载…",
    "No results": "无结果",
    "Saved": "已保存",
    "Deleted": "已删除",
    "Sent": "已发送",
    # Keyboard.
    "space": "空格",
    "go": "前往",
    "new line": "换行",
    # Weekdays and months (launcher date, schedules).
    "Mon": "周一",
    "Tue": "周二",
    "Wed": "周三",
    "Thu": "周四",
    "Fri": "周五",
    "Sat": "周六",
    "Sun": "周日",
    "Monday": "星期一",
    "Tuesday": "星期二",
    "Wednesday": "星期三",
    "Thursday": "星期四",
    "Friday": "星期五",
    "Saturday": "星期六",
    "Sunday": "星期日",
    "Weekdays": "工作日",
    "Weekends": "周末",
    "Every day": "每天",
    "{}, Nov {}": "11月{1}日 {0}",  # the launcher date ("Wed, Nov 21")
    "Jan": "1月",
    "Feb": "2月",
    "Mar": "3月",
    "Apr": "4月",
    "May": "5月",
    "Jun": "6月",
    "Jul": "7月",
    "Aug": "8月",
    "Sep": "9月",
    "Oct": "10月",
    "Nov": "11月",
    "Dec": "12月",
    "AM": "上午",
    "PM": "下午",
}

_TIME = re.compile(r"^(\d{1,2}:\d{2}) (AM|PM)$")

_SEPARATORS = ("\n", " · ", " – ", ", ", " - ")


def check_locale(locale: str) -> Locale:
    """``locale`` if SimPhone knows it; a ValueError naming the known ones otherwise."""
    if locale not in LOCALES:
        raise ValueError(
            f"unknown SimPhone locale {locale!r}; use one of {', '.join(LOCALES)} (e.g. SimPhone(locale='zh'))"
        )
    return locale  # type: ignore[return-value]  # checked against LOCALES above


def locale_for_task(language: str, setting: str = "auto") -> Locale:
    """The phone locale an episode of a task in ``language`` (``"ENG"``, ``"CHN"``) plays on.

    ``setting`` is ``"auto"`` (the task's language decides: Chinese tasks on Chinese UIs) or
    a fixed locale.

        >>> locale_for_task("CHN"), locale_for_task("ENG"), locale_for_task("CHN", "en")
        ('zh', 'en', 'en')
    """
    if setting == "auto":
        return TASK_LANGUAGE_LOCALE.get(language, "en")
    return check_locale(setting)


@lru_cache(maxsize=256)
def _patterns(items: tuple[tuple[str, str], ...]) -> tuple[tuple[re.Pattern[str], str], ...]:
    out = []
    for key, value in items:
        if "{}" in key:
            regex = "^" + "(.+?)".join(re.escape(part) for part in key.split("{}")) + "$"
            out.append((re.compile(regex, re.DOTALL), value))
    return tuple(out)


def _pattern_table(table: Mapping[str, str]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return _patterns(tuple((k, v) for k, v in table.items() if "{}" in k))


def translate(text: str, table: Mapping[str, str], locale: str = "zh", _depth: int = 0) -> str:
    """``text`` in ``locale``: from ``table`` (an app's dictionary), then :data:`COMMON_ZH`.

    Unknown strings come back unchanged; ``locale="en"`` returns ``text`` itself.
    """
    if locale == "en" or not text or _depth > 4:
        return text
    core = text.strip()
    if core != text:  # indented sub-items ("    Theme") keep their indent
        if not core:
            return text
        start = text.index(core)
        return text[:start] + translate(core, table, locale, _depth) + text[start + len(core) :]
    for source in (table, COMMON_ZH):
        hit = source.get(text)
        if hit is not None:
            return hit
    for source in (table, COMMON_ZH):
        for regex, value in _pattern_table(source):
            m = regex.match(text)
            if m is None:
                continue
            parts = [translate(g, table, locale, _depth + 1) for g in m.groups()]
            return _fill(value, parts)
    time = _TIME.match(text)
    if time is not None:  # "7:00 AM" -> "上午7:00"
        return f"{COMMON_ZH[time.group(2)]}{time.group(1)}"
    for sep in _SEPARATORS:
        if sep in text:
            pieces = text.split(sep)
            translated = [translate(p, table, locale, _depth + 1) for p in pieces]
            if translated != pieces:
                return ("，" if sep == ", " and _has_cjk("".join(translated)) else sep).join(translated)
    return text


def _fill(template: str, parts: list[str]) -> str:
    if "{0}" in template:  # numbered: the translation orders the parts its own way
        return re.sub(r"\{(\d)\}", lambda m: parts[int(m.group(1))], template)
    chunks = template.split("{}")
    out = [chunks[0]]
    for part, chunk in zip(parts, chunks[1:], strict=False):
        out.extend((part, chunk))
    return "".join(out)


def _has_cjk(text: str) -> bool:
    return any("\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" for c in text)


def app_label(app: AppFace, locale: str) -> str:
    """The app's launcher label in ``locale`` (its ``zh`` entry for its English label)."""
    return translate(app.label, app.zh, locale)


def translate_screen(
    screen: Screen, locale: str, apps: Mapping[str, AppFace], foreground: str | None, popup_app: str | None = None
) -> None:
    """Translate the displayed strings of a laid-out screen in place (ids, callbacks unchanged).

    Field values (what the user typed) stay as typed; their placeholders are translated.
    """
    if locale == "en":
        return
    table: Mapping[str, str] = apps[foreground].zh if foreground is not None else {}
    popup_table: Mapping[str, str] = apps[popup_app].zh if popup_app is not None and popup_app in apps else table
    for w in screen.widgets:
        if w.kind in ("scroller", "statusbar"):  # a scroll offset and the clock, not words
            continue
        if w.kind == "app_icon":
            app = apps.get(w.role.split(":", 1)[1])
            if app is not None:
                w.text = app_label(app, locale)
            continue
        source = popup_table if w.kind.startswith("dialog") else table
        by_id = source.get("#" + w.id)
        if by_id is not None:
            w.text = by_id
        elif w.kind != "field" and w.text:
            w.text = translate(w.text, source, locale)
        if w.subtitle:
            w.subtitle = translate(w.subtitle, source, locale)
        if w.placeholder:
            w.placeholder = translate(w.placeholder, source, locale)
        if w.description:
            w.description = translate(w.description, source, locale)
