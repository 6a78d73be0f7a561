"""Cross-app templates: information carried from one app to another, and workflows over two apps.

Modelled on SPA-Bench's cross-app categories (``darwin/data/spa-bench/cross-app-*.csv``):
*information transfer* (read a value in one app, write it in another: a contact's number
texted to a friend, an event's time set as an alarm, a definition posted on X) and
*multi-app workflows* (do something in each of two apps: save a hotel and note it, turn on
dark theme in Settings and in Google Play).

Each template declares every app it needs (``apps``, the app the goal starts in first), so
held-out-app splits keep a template out of training when any of its apps is held out
(:func:`darwin.templates.split_templates`). Its verifier is usually ``all.of`` over both
apps' state: the source app's data still as the instance set it (``contacts.contact``,
``calendar.event``, ``notes.note``, ``data.has``...) and the target app's change
(``messages.sent``, ``notes.note``, ``clock.alarm_exists``...), so a goal met by first
changing the source fails. Where the source is an app's fixed content (a price, a
definition, a time zone's offset) only the target is checked; the value itself can only be
read in the source app.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from darwin.envs.sim.apps.amazon import STYLES, result_price, result_title
from darwin.envs.sim.apps.booking import DESTINATIONS, HOTELS, night_price
from darwin.envs.sim.apps.calendar import DAY_FULL, LOCATIONS, TEMPLATE_EVENTS
from darwin.envs.sim.apps.clock import TIME_ZONES, time_text
from darwin.envs.sim.apps.contacts import TEMPLATE_PEOPLE
from darwin.envs.sim.apps.dictionary import ENTRIES, FIRST_SENSE_WORDS
from darwin.envs.sim.apps.messages import TEMPLATE_LINES
from darwin.envs.sim.apps.play import APP_INFO, CATALOG
from darwin.envs.sim.apps.settings import MAIN_ENTRIES, TIMEOUTS, TOGGLE_KEYS
from darwin.envs.sim.apps.x import ACCOUNTS
from darwin.templates import Language, TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

ZH_DAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
ZH_TIMEOUTS = {
    "15 seconds": "15秒",
    "30 seconds": "30秒",
    "1 minute": "1分钟",
    "2 minutes": "2分钟",
    "5 minutes": "5分钟",
    "10 minutes": "10分钟",
    "30 minutes": "30分钟",
}

# What a solution may change, by app (reading a source app has its own traces: a look-up is
# a recent word, an opened conversation is read, a search fills a form or a tab).
THREADS = ("apps.messages.data.threads",)
READ_MARKS = ("apps.messages.data.threads.*.unread",)
NOTES = ("apps.notes.data.notes",)
ALARMS = ("apps.clock.data.alarms", "apps.clock.data.next_id")
EVENTS = ("apps.calendar.data.events",)
CONTACTS = ("apps.contacts.data.contacts",)
RECENTS = ("apps.dictionary.data.recents",)
SEARCHES = ("apps.amazon.data.recent_searches",)
SEARCH_FORM = ("apps.booking.data.search",)
SAVED = ("apps.booking.data.saved",)
TABS = ("apps.chrome.data.tabs", "apps.chrome.data.current", "apps.chrome.data.history")
DRAFTS = ("apps.x.data.drafts",)
POSTS = ("apps.x.data.posts",)
FOLLOWING = ("apps.x.data.following",)
DEFAULT_DATES = {"checkin": "24 Nov", "checkout": "26 Nov"}

X_POSTS = (
    "Good morning from the simulator",
    "Learning to use my phone",
    "Trying out the new update",
    "Coffee first, then emails",
    "What a great day for a walk",
    "Reading a good book tonight",
)
"""Post texts instances put in notes and drafts."""
NOTE_TITLES = ("Post idea", "To share", "For X")
SEARCHES_WEB = (
    "weather in Paris",
    "bitcoin price",
    "how to tie a tie",
    "NBA scores",
    "cheap flights to Rome",
    "pasta recipes",
    "museum opening hours",
    "train to Berlin",
)


def _v(predicate: str, **params: Any) -> VerifierSpec:
    return VerifierSpec(predicate=predicate, params=params)


def _all(*checks: VerifierSpec) -> VerifierSpec:
    """Every check holds (the ``all.of`` predicate): the source app's state and the target app's."""
    return _v("all.of", checks=[c.model_dump() for c in checks])


def _sent(to: str, text: str) -> VerifierSpec:
    return _v("messages.sent", to=to, text=text)


def _person(first_last: tuple[str, ...], phone: str, email: str = "") -> dict[str, Any]:
    first, last = first_last
    return {"first": first, "last": last, "phone": phone, "email": email}


def _contacts(*people: tuple[str, str, str]) -> StateSetup:
    """``(name, phone, email)`` people added to Contacts."""
    return StateSetup(
        step="contacts.add",
        params={"contacts": [_person(tuple(name.split(" ", 1)), phone, email) for name, phone, email in people]},
    )


def _names(rng: random.Random, k: int) -> list[str]:
    return [f"{first} {last}" for first, last in rng.sample(TEMPLATE_PEOPLE, k)]


def _phones(rng: random.Random, k: int) -> list[str]:
    return [f"+1 555-02{n}" for n in rng.sample(range(10, 100), k)]


def _email(name: str, rng: random.Random) -> str:
    first, _, last = name.partition(" ")
    return f"{first.lower()}.{last.lower()}@{rng.choice(('mail.com', 'work.org', 'home.net'))}"


def _time(rng: random.Random) -> tuple[int, int]:
    # Quarter past or to the hour (seeded events start on the hour or half hour), never 7:xx,
    # 8:00 or 10:00 (the alarms every phone starts with): a time no app holds yet.
    return rng.choice((9, 11, 12, 13, 14, 15, 16, 17, 18, 19)), rng.choice((15, 45))


def _first_sense(word: str) -> str:
    return ENTRIES[word][1].split("\n")[0]


def _cross(
    id: str,
    apps: tuple[str, ...],
    params: type[TemplateParams],
    sample: Callable[[random.Random], Any],
    phrasings: Mapping[Language, Sequence[str]],
    verifier: Callable[[Any], VerifierSpec],
    allowed: Callable[[Any], Sequence[str]],
    description: str,
    difficulty: int,
    step_budget: int,
    setup: Callable[[Any], Sequence[StateSetup]] = lambda p: (),
    wording: Callable[[Any], Mapping[str, str]] | None = None,
) -> TaskTemplate:
    return register(
        TaskTemplate(
            id=f"cross.{id}",
            app=apps[0],
            apps=apps,
            params=params,
            sample=sample,
            phrasings=phrasings,
            verifier=verifier,
            allowed_changes=allowed,
            setup=setup,
            wording=wording,
            difficulty=difficulty,
            step_budget=step_budget,
            description=description,
        )
    )


# ----------------------------------------------------------------------------- Contacts ->


class ShareContact(TemplateParams):
    """A contact (``name``, ``phone``, ``email``) and a recipient contact (``to``, ``to_phone``), both added by the instance."""

    name: str = Field(min_length=3)
    phone: str = Field(min_length=7)
    email: str = Field(min_length=5)
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)


def _share_contact(rng: random.Random) -> ShareContact:
    name, to = _names(rng, 2)
    phone, to_phone = _phones(rng, 2)
    return ShareContact(name=name, phone=phone, email=_email(name, rng), to=to, to_phone=to_phone)


def _share_setup(p: ShareContact) -> tuple[StateSetup, ...]:
    return (_contacts((p.name, p.phone, p.email), (p.to, p.to_phone, "")),)


def _kept(p: ShareContact) -> VerifierSpec:
    return _v("contacts.contact", name=p.name, phone=p.phone, email=p.email)


_cross(
    "contact_phone_to_message",
    ("Contacts", "Messages"),
    ShareContact,
    _share_contact,
    {
        "ENG": (
            "Look up {name}'s phone number in Contacts and text it to {to}.",
            "Send {to} a message with {name}'s phone number (find it in Contacts).",
            "{to} needs {name}'s number: text it to them, just the number.",
        ),
        "CHN": ("在通讯录里查到{name}的电话号码，然后发短信告诉{to}。", "把{name}的手机号用短信发给{to}（只发号码）。"),
    },
    lambda p: _all(_kept(p), _sent(p.to, p.phone)),
    lambda p: THREADS,
    "information transfer: a contact's phone number texted to another contact",
    3,
    28,
    setup=_share_setup,
)

_cross(
    "contact_email_to_message",
    ("Contacts", "Messages"),
    ShareContact,
    _share_contact,
    {
        "ENG": (
            "Find {name}'s email address in Contacts and send it to {to} in a message.",
            "Text {to} the email address of {name}, as saved in Contacts.",
        ),
        "CHN": ("在通讯录里找到{name}的邮箱地址，用短信发给{to}。", "把通讯录中{name}的电子邮箱发短信告诉{to}。"),
    },
    lambda p: _all(_kept(p), _sent(p.to, p.email)),
    lambda p: THREADS,
    "information transfer: a contact's email address texted to another contact",
    3,
    28,
    setup=_share_setup,
)

_cross(
    "contact_phone_to_note",
    ("Contacts", "Notes"),
    ShareContact,
    _share_contact,
    {
        "ENG": (
            "Create a note titled '{name}' whose text is {name}'s phone number from Contacts.",
            "Copy {name}'s phone number from Contacts into a new note; title it '{name}'.",
        ),
        "CHN": (
            "新建一条标题为“{name}”的笔记，内容是通讯录里{name}的电话号码。",
            "把{name}的手机号从通讯录抄到一条新笔记里，标题写“{name}”。",
        ),
    },
    lambda p: _all(_kept(p), _v("notes.note", title=p.name, body=p.phone)),
    lambda p: NOTES,
    "information transfer: a contact's phone number written into a new note",
    2,
    28,
    setup=_share_setup,
)

_cross(
    "contact_email_to_note",
    ("Contacts", "Notes"),
    ShareContact,
    _share_contact,
    {
        "ENG": (
            "Save {name}'s email address from Contacts in a new note titled '{name} email'.",
            "Write a note called '{name} email' containing the email address Contacts has for {name}.",
        ),
        "CHN": (
            "把通讯录中{name}的邮箱存到一条标题为“{name} email”的新笔记里。",
            "新建笔记“{name} email”，内容是{name}的电子邮箱。",
        ),
    },
    lambda p: _all(_kept(p), _v("notes.note", title=f"{p.name} email", body=p.email)),
    lambda p: NOTES,
    "information transfer: a contact's email address written into a new note",
    2,
    28,
    setup=_share_setup,
)


# ----------------------------------------------------------------------------- Calendar ->


class EventShare(TemplateParams):
    """An event the instance adds (``title`` on ``day`` at ``hour:minute``, at ``location``) and a contact ``to``."""

    title: str = Field(min_length=1)
    day: int = Field(ge=0, le=6, description="0 = Monday 19 November")
    hour: int = Field(ge=0, le=23)
    minute: int = Field(ge=0, le=59)
    location: str = Field(min_length=1)
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)


def _event_share(rng: random.Random) -> EventShare:
    hour, minute = _time(rng)
    return EventShare(
        title=rng.choice(TEMPLATE_EVENTS),
        day=rng.randrange(7),
        hour=hour,
        minute=minute,
        location=rng.choice(LOCATIONS),
        to=_names(rng, 1)[0],
        to_phone=_phones(rng, 1)[0],
    )


def _event_words(p: EventShare) -> dict[str, str]:
    return {
        "title": p.title,
        "day": DAY_FULL[p.day],
        "zh_day": ZH_DAYS[p.day],
        "time": time_text(p.hour, p.minute),
        "zh_time": f"{p.hour}:{p.minute:02d}",
        "location": p.location,
        "to": p.to,
    }


def _event_setup(p: EventShare) -> tuple[StateSetup, ...]:
    return (
        StateSetup(
            step="calendar.events",
            params={
                "events": [{"title": p.title, "day": p.day, "hour": p.hour, "minute": p.minute, "location": p.location}]
            },
        ),
        _contacts((p.to, p.to_phone, "")),
    )


def _event_kept(p: EventShare) -> VerifierSpec:
    return _v("calendar.event", title=p.title, day=p.day, hour=p.hour, minute=p.minute, location=p.location)


_cross(
    "event_time_to_alarm",
    ("Calendar", "Clock"),
    EventShare,
    _event_share,
    {
        "ENG": (
            "Check when my '{title}' on {day} starts in Calendar and set an alarm for that time.",
            "Set an alarm in Clock for the start time of the '{title}' event on {day}.",
            "Look up '{title}' ({day}) in my calendar, then create an alarm at the time it begins.",
        ),
        "CHN": (
            "在日历里查看{zh_day}“{title}”的开始时间，然后在时钟里设一个同一时间的闹钟。",
            "按{zh_day}日程“{title}”的开始时间设置一个闹钟。",
        ),
    },
    lambda p: _all(_event_kept(p), _v("clock.alarm_exists", hour=p.hour, minute=p.minute)),
    lambda p: ALARMS,
    "information transfer: an alarm at the time of a calendar event",
    3,
    32,
    setup=_event_setup,
    wording=_event_words,
)

_cross(
    "event_title_to_note",
    ("Calendar", "Notes"),
    EventShare,
    _event_share,
    {
        "ENG": (
            "What is on my calendar on {day} at {time}? Write the event's title as a new note.",
            "Find the event at {time} on {day} in Calendar and jot its title down in Notes.",
        ),
        "CHN": (
            "我{zh_day}{zh_time}有什么日程？把日程标题记成一条新笔记。",
            "在日历中找到{zh_day}{zh_time}的日程，把标题写进备忘录。",
        ),
    },
    lambda p: _all(_event_kept(p), _v("notes.has_note", text=p.title)),
    lambda p: NOTES,
    "information transfer: the title of a calendar event written into a note",
    2,
    28,
    setup=_event_setup,
    wording=_event_words,
)

_cross(
    "event_location_to_message",
    ("Calendar", "Messages"),
    EventShare,
    _event_share,
    {
        "ENG": (
            "Text {to} where my '{title}' on {day} takes place (just the location from Calendar).",
            "Send {to} the location of the '{title}' event on {day}.",
        ),
        "CHN": (
            "把我{zh_day}“{title}”的地点发短信告诉{to}（只发日历里的地点）。",
            "给{to}发消息，告诉对方{zh_day}日程“{title}”的地点。",
        ),
    },
    lambda p: _all(_event_kept(p), _sent(p.to, p.location)),
    lambda p: THREADS,
    "information transfer: a calendar event's location texted to a contact",
    3,
    28,
    setup=_event_setup,
    wording=_event_words,
)

_cross(
    "event_time_to_message",
    ("Calendar", "Messages"),
    EventShare,
    _event_share,
    {
        "ENG": (
            "Text {to} the time my '{title}' on {day} starts, as Calendar shows it (like 9:15 AM).",
            "Let {to} know when '{title}' on {day} begins: send just the start time from Calendar (e.g. 4:45 PM).",
        ),
        "CHN": (
            "把{zh_day}“{title}”的开始时间按日历显示的格式（如 9:15 AM）发短信给{to}。",
            "告诉{to}{zh_day}“{title}”几点开始：只发日历上的时间（例如 4:45 PM）。",
        ),
    },
    lambda p: _all(_event_kept(p), _sent(p.to, time_text(p.hour, p.minute))),
    lambda p: THREADS,
    "information transfer: a calendar event's start time texted to a contact",
    3,
    28,
    setup=_event_setup,
    wording=_event_words,
)


# ----------------------------------------------------------------------------- Messages ->


class MessageAsk(TemplateParams):
    """A conversation the instance adds: ``name`` asks for something at ``hour:minute`` on ``day`` (``title``)."""

    name: str = Field(min_length=3)
    phone: str = Field(min_length=7)
    title: str = Field(min_length=1)
    day: int = Field(ge=0, le=6)
    hour: int = Field(ge=0, le=23)
    minute: int = Field(ge=0, le=59)

    def line(self) -> str:
        return f"Can we do {self.title} on {DAY_FULL[self.day]} at {time_text(self.hour, self.minute)}?"

    def call_line(self) -> str:
        return f"Please call me at {time_text(self.hour, self.minute)}"


def _ask(rng: random.Random) -> MessageAsk:
    hour, minute = _time(rng)
    return MessageAsk(
        name=_names(rng, 1)[0],
        phone=_phones(rng, 1)[0],
        title=rng.choice(TEMPLATE_EVENTS),
        day=rng.randrange(7),
        hour=hour,
        minute=minute,
    )


def _thread(name: str, text: str) -> StateSetup:
    return StateSetup(
        step="messages.threads", params={"threads": [{"name": name, "messages": [{"text": text}], "unread": True}]}
    )


def _thread_kept(name: str) -> VerifierSpec:
    return _v("data.has", app="messages", key="threads", match={"name": name})


def _ask_words(p: MessageAsk) -> dict[str, str]:
    return {"name": p.name}


_cross(
    "message_to_alarm",
    ("Messages", "Clock"),
    MessageAsk,
    _ask,
    {
        "ENG": (
            "{name} texted me the time to call them. Set an alarm for that time.",
            "Read {name}'s message and set an alarm at the time they asked me to call.",
        ),
        "CHN": (
            "{name}发短信说了让我回电的时间，按那个时间设一个闹钟。",
            "看一下{name}的短信，在对方要我打电话的时间设置闹钟。",
        ),
    },
    lambda p: _all(_thread_kept(p.name), _v("clock.alarm_exists", hour=p.hour, minute=p.minute)),
    lambda p: ALARMS + READ_MARKS,
    "information transfer: an alarm at a time a message asks for",
    3,
    32,
    setup=lambda p: (_thread(p.name, p.call_line()),),
    wording=_ask_words,
)

_cross(
    "message_to_event",
    ("Messages", "Calendar"),
    MessageAsk,
    _ask,
    {
        "ENG": (
            "{name} proposed a plan by text. Add it to my calendar: the activity as the title, on the day and at the time they said.",
            "Read {name}'s latest message and create the calendar event it proposes (title, day and time).",
        ),
        "CHN": (
            "{name}发短信约了一件事。把它加到日历：标题用那件事的名称（英文原文），日期和时间按短信里的。",
            "看{name}的最新短信，按其中的活动、日期和时间创建日程。",
        ),
    },
    lambda p: _all(_thread_kept(p.name), _v("calendar.event", title=p.title, day=p.day, hour=p.hour, minute=p.minute)),
    lambda p: EVENTS + READ_MARKS,
    "information transfer: a calendar event a message proposes",
    3,
    40,
    setup=lambda p: (_thread(p.name, p.line()),),
    wording=_ask_words,
)


class NewNumber(TemplateParams):
    """A contact (``name``, ``old_phone``) whose conversation says their number is now ``new_phone``."""

    name: str = Field(min_length=3)
    old_phone: str = Field(min_length=7)
    new_phone: str = Field(min_length=7)


def _new_number(rng: random.Random) -> NewNumber:
    old, new = _phones(rng, 2)
    return NewNumber(name=_names(rng, 1)[0], old_phone=old, new_phone=new)


_cross(
    "message_number_to_contact",
    ("Messages", "Contacts"),
    NewNumber,
    _new_number,
    {
        "ENG": (
            "{name} texted me their new number. Update their contact with it.",
            "Read {name}'s message and change their phone number in Contacts to the new one.",
        ),
        "CHN": ("{name}发短信告诉了我新号码，请更新通讯录里的联系人。", "看{name}的短信，把通讯录中其电话改成新号码。"),
    },
    lambda p: _all(_thread_kept(p.name), _v("contacts.phone", name=p.name, phone=p.new_phone)),
    lambda p: ("apps.contacts.data.contacts.*.phone", *READ_MARKS),
    "information transfer: a new phone number from a message saved to the contact",
    3,
    28,
    setup=lambda p: (_contacts((p.name, p.old_phone, "")), _thread(p.name, f"My new number is {p.new_phone}")),
    wording=lambda p: {"name": p.name},
)


class MessageToNote(TemplateParams):
    """A conversation with ``name`` whose last message is ``text``; the note to write is titled ``title``."""

    name: str = Field(min_length=3)
    text: str = Field(min_length=1)
    title: str = Field(min_length=1)


_cross(
    "message_to_note",
    ("Messages", "Notes"),
    MessageToNote,
    lambda rng: MessageToNote(
        name=_names(rng, 1)[0], text=rng.choice(TEMPLATE_LINES), title=rng.choice(("From chat", "Saved text", "Keep"))
    ),
    {
        "ENG": (
            "Copy {name}'s last message into a new note titled '{title}'.",
            "Save what {name} last texted me in Notes, in a note called '{title}'.",
        ),
        "CHN": (
            "把{name}最后一条短信的内容复制到一条标题为“{title}”的新笔记里。",
            "把{name}最近发来的消息存进备忘录，笔记标题为“{title}”。",
        ),
    },
    lambda p: _all(_thread_kept(p.name), _v("notes.note", title=p.title, body=p.text)),
    lambda p: NOTES + READ_MARKS,
    "information transfer: a received message copied into a note",
    2,
    28,
    setup=lambda p: (_thread(p.name, p.text),),
    wording=lambda p: {"name": p.name, "title": p.title},
)


# ----------------------------------------------------------------------------- Notes ->


class NoteValue(TemplateParams):
    """A note the instance adds (``title``, ``body`` holding ``value``) and a contact ``to``."""

    title: str = Field(min_length=1)
    body: str = Field(min_length=1)
    value: str = Field(min_length=1)
    what: str = Field(min_length=1)
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)


NOTE_VALUES = (
    ("Door code", "Front door code 4172", "4172", "front door code"),
    ("Locker", "Gym locker number 5207", "5207", "gym locker number"),
    ("Bike lock", "Bike lock combination 8305", "8305", "bike lock combination"),
    ("Wifi", "Guest wifi password sunflower42", "sunflower42", "guest wifi password"),
    ("Parking", "Parked on level 3, spot 118", "118", "parking spot number"),
)
ZH_WHAT = {
    "front door code": "前门密码",
    "gym locker number": "健身房储物柜号码",
    "bike lock combination": "自行车锁密码",
    "guest wifi password": "访客WiFi密码",
    "parking spot number": "停车位号码",
}


def _note_value(rng: random.Random) -> NoteValue:
    title, body, value, what = rng.choice(NOTE_VALUES)
    return NoteValue(title=title, body=body, value=value, what=what, to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0])


def _note(title: str, body: str) -> StateSetup:
    return StateSetup(step="notes.add", params={"notes": [{"title": title, "body": body}]})


_cross(
    "note_value_to_message",
    ("Notes", "Messages"),
    NoteValue,
    _note_value,
    {
        "ENG": (
            "Find the {what} in my notes and text it to {to} (just the value).",
            "{to} needs the {what}. It is in Notes: send it to them.",
        ),
        "CHN": (
            "在备忘录里找到{zh_what}，只把它发短信给{to}。",
            "{to}需要{zh_what}，它记在备忘录里，请发给对方（只发数值）。",
        ),
    },
    lambda p: _all(_v("notes.note", title=p.title, body=p.body), _sent(p.to, p.value)),
    lambda p: THREADS,
    "information transfer: a value kept in a note texted to a contact",
    3,
    28,
    setup=lambda p: (_note(p.title, p.body), _contacts((p.to, p.to_phone, ""))),
    wording=lambda p: {"what": p.what, "zh_what": ZH_WHAT.get(p.what, p.what), "to": p.to},
)


class NotePost(TemplateParams):
    """A note (``title``) whose text is ``text``, to publish on X."""

    title: str = Field(min_length=1)
    text: str = Field(min_length=1)


_cross(
    "note_to_x_post",
    ("Notes", "X"),
    NotePost,
    lambda rng: NotePost(title=rng.choice(NOTE_TITLES), text=rng.choice(X_POSTS)),
    {
        "ENG": ("Post the text of my note '{title}' on X.", "Publish on X exactly what my '{title}' note says."),
        "CHN": ("把备忘录“{title}”的内容发布到X上。", "在X上发帖，内容和笔记“{title}”完全一样。"),
    },
    lambda p: _all(_v("notes.note", title=p.title, body=p.text), _v("x.posted", content=p.text)),
    lambda p: POSTS,
    "information transfer: a note's text posted on X",
    2,
    24,
    setup=lambda p: (_note(p.title, p.text),),
    wording=lambda p: {"title": p.title},
)


class NoteContact(TemplateParams):
    """A note (``title``) saying ``name: phone``; the contact to create."""

    title: str = Field(min_length=1)
    name: str = Field(min_length=3)
    phone: str = Field(min_length=7)


_cross(
    "note_to_contact",
    ("Notes", "Contacts"),
    NoteContact,
    lambda rng: NoteContact(
        title=rng.choice(("New number", "Met today", "Call back")), name=_names(rng, 1)[0], phone=_phones(rng, 1)[0]
    ),
    {
        "ENG": (
            "My note '{title}' has a name and a phone number. Save them as a new contact.",
            "Create a contact from the name and number written in the note '{title}'.",
        ),
        "CHN": (
            "备忘录“{title}”里记着一个名字和电话，把它存成新联系人。",
            "根据笔记“{title}”中的姓名和号码新建联系人。",
        ),
    },
    lambda p: _all(
        _v("notes.note", title=p.title, body=f"{p.name}: {p.phone}"), _v("contacts.contact", name=p.name, phone=p.phone)
    ),
    lambda p: CONTACTS,
    "information transfer: a name and number from a note saved as a contact",
    3,
    32,
    setup=lambda p: (_note(p.title, f"{p.name}: {p.phone}"),),
    wording=lambda p: {"title": p.title},
)


# ----------------------------------------------------------------------------- Merriam-Webster ->


class WordShare(TemplateParams):
    """A word (its first line is one whole sense) and a contact ``to``."""

    word: str
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)

    @field_validator("word")
    @classmethod
    def _word(cls, v: str) -> str:
        if v not in FIRST_SENSE_WORDS:
            raise ValueError(f"{v!r}'s first line is not a whole sense; use one of {', '.join(FIRST_SENSE_WORDS)}")
        return v


def _word_share(rng: random.Random) -> WordShare:
    return WordShare(word=rng.choice(FIRST_SENSE_WORDS), to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0])


def _looked_up(p: WordShare) -> VerifierSpec:
    return _v("dictionary.looked_up", words=[p.word])


_cross(
    "definition_to_x_draft",
    ("Merriam-Webster", "X"),
    WordShare,
    _word_share,
    {
        "ENG": (
            "Look up '{word}' in Merriam-Webster and save a draft post on X with its first definition.",
            "Draft an X post that is exactly the first definition Merriam-Webster gives for {word}.",
        ),
        "CHN": (
            "在韦氏词典里查“{word}”，然后在X上保存一条草稿，内容是它的第一条释义（英文原文）。",
            "在X起草一条帖子，内容为韦氏词典中{word}的第一条释义。",
        ),
    },
    lambda p: _all(_looked_up(p), _v("x.draft", content=_first_sense(p.word))),
    lambda p: RECENTS + DRAFTS,
    "information transfer: a dictionary definition drafted as an X post",
    3,
    28,
    wording=lambda p: {"word": p.word},
)

_cross(
    "definition_to_note",
    ("Merriam-Webster", "Notes"),
    WordShare,
    _word_share,
    {
        "ENG": (
            "Look up '{word}' and write its first definition in a new note titled '{word}'.",
            "Make a vocabulary note: title '{word}', text its first Merriam-Webster definition.",
        ),
        "CHN": (
            "查询单词“{word}”，新建一条标题为“{word}”的笔记，内容是它的第一条释义（英文原文）。",
            "做一条生词笔记：标题“{word}”，正文为韦氏词典的第一条释义。",
        ),
    },
    lambda p: _all(_looked_up(p), _v("notes.note", title=p.word, body=_first_sense(p.word))),
    lambda p: RECENTS + NOTES,
    "information transfer: a dictionary definition written into a note",
    3,
    28,
    wording=lambda p: {"word": p.word},
)

_cross(
    "definition_to_message",
    ("Merriam-Webster", "Messages"),
    WordShare,
    _word_share,
    {
        "ENG": (
            "{to} asked what '{word}' means. Look it up and text them its first definition.",
            "Send {to} the first Merriam-Webster definition of {word}.",
        ),
        "CHN": (
            "{to}问“{word}”是什么意思。查一下词典，把第一条释义（英文原文）发短信给对方。",
            "把韦氏词典中{word}的第一条释义发给{to}。",
        ),
    },
    lambda p: _all(_looked_up(p), _sent(p.to, _first_sense(p.word))),
    lambda p: RECENTS + THREADS,
    "information transfer: a dictionary definition texted to a contact",
    3,
    28,
    setup=lambda p: (_contacts((p.to, p.to_phone, "")),),
    wording=lambda p: {"word": p.word, "to": p.to},
)


# ----------------------------------------------------------------------------- Amazon, Booking.com, Clock, Google Play ->


class PriceShare(TemplateParams):
    """An Amazon search result (``query``, ``style``) and a contact ``to``."""

    query: str = Field(min_length=1)
    style: str
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)

    @field_validator("style")
    @classmethod
    def _style(cls, v: str) -> str:
        if v not in STYLES:
            raise ValueError(f"unknown style {v!r}; Amazon lists {', '.join(STYLES)}")
        return v


AMAZON_QUERIES = (
    "headphones",
    "running shoes",
    "water bottle",
    "desk lamp",
    "backpack",
    "yoga mat",
    "umbrella",
    "charger",
)


def _price_share(rng: random.Random) -> PriceShare:
    return PriceShare(
        query=rng.choice(AMAZON_QUERIES), style=rng.choice(STYLES), to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0]
    )


def _price_words(p: PriceShare) -> dict[str, str]:
    return {"query": p.query, "title": result_title(p.style, p.query), "to": p.to}


def _price(p: PriceShare) -> str:
    return result_price(STYLES.index(p.style))


_cross(
    "price_to_message",
    ("Amazon", "Messages"),
    PriceShare,
    _price_share,
    {
        "ENG": (
            "Search Amazon for {query}, find the price of the {title} and text it to {to} (like $12.99).",
            "Send {to} the Amazon price of the {title} (search '{query}'), written as Amazon shows it.",
        ),
        "CHN": (
            "在亚马逊搜索{query}，把“{title}”的价格（如 $12.99）发短信给{to}。",
            "把亚马逊上“{title}”的价格按页面显示的格式发给{to}（搜索{query}）。",
        ),
    },
    lambda p: _sent(p.to, _price(p)),
    lambda p: SEARCHES + THREADS,
    "information transfer: an Amazon price texted to a contact",
    3,
    28,
    setup=lambda p: (_contacts((p.to, p.to_phone, "")),),
    wording=_price_words,
)

_cross(
    "price_to_note",
    ("Amazon", "Notes"),
    PriceShare,
    _price_share,
    {
        "ENG": (
            "Note the Amazon price of the {title}: a new note titled '{title}' whose text is the price (search '{query}').",
            "Search Amazon for {query} and write the {title}'s price (as shown, like $12.99) in a note titled '{title}'.",
        ),
        "CHN": (
            "在亚马逊搜索{query}，新建标题为“{title}”的笔记，内容是它的价格（如 $12.99）。",
            "把“{title}”在亚马逊的价格记到备忘录，笔记标题为“{title}”。",
        ),
    },
    lambda p: _v("notes.note", title=result_title(p.style, p.query), body=_price(p)),
    lambda p: SEARCHES + NOTES,
    "information transfer: an Amazon price written into a note",
    3,
    28,
    wording=_price_words,
)


class HotelShare(TemplateParams):
    """A Booking.com property (``hotel`` in ``city``) and a contact ``to``."""

    hotel: str
    city: str
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)

    @field_validator("hotel")
    @classmethod
    def _hotel(cls, v: str) -> str:
        if v not in HOTELS:
            raise ValueError(f"unknown property {v!r}; Booking.com lists {', '.join(HOTELS)}")
        return v

    @field_validator("city")
    @classmethod
    def _city(cls, v: str) -> str:
        if v not in DESTINATIONS:
            raise ValueError(f"unknown city {v!r}; use one of {', '.join(DESTINATIONS)}")
        return v


def _hotel_share(rng: random.Random) -> HotelShare:
    return HotelShare(
        hotel=rng.choice(HOTELS), city=rng.choice(DESTINATIONS), to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0]
    )


_cross(
    "hotel_price_to_message",
    ("Booking.com", "Messages"),
    HotelShare,
    _hotel_share,
    {
        "ENG": (
            "Search stays in {city} on Booking.com and text {to} the nightly price of {hotel}, as listed (like EUR 95).",
            "Send {to} what {hotel} in {city} costs per night on Booking.com (the price as shown).",
        ),
        "CHN": (
            "在Booking.com搜索{city}的住宿，把{hotel}每晚的价格（如 EUR 95）发短信给{to}。",
            "把Booking.com上{city}的{hotel}每晚价格按页面显示发给{to}。",
        ),
    },
    lambda p: _sent(p.to, night_price(p.hotel)),
    lambda p: SEARCH_FORM + THREADS,
    "information transfer: a hotel's nightly price texted to a contact",
    3,
    36,
    setup=lambda p: (StateSetup(step="booking.search", params=DEFAULT_DATES), _contacts((p.to, p.to_phone, ""))),
    wording=lambda p: {"hotel": p.hotel, "city": p.city, "to": p.to},
)

_cross(
    "save_hotel_and_note",
    ("Booking.com", "Notes"),
    HotelShare,
    _hotel_share,
    {
        "ENG": (
            "Save {hotel} in {city} on Booking.com, then write '{hotel}, {city}' in a new note.",
            "Add {hotel}, {city} to my Booking.com saved list and jot '{hotel}, {city}' down in Notes.",
        ),
        "CHN": (
            "在Booking.com收藏{city}的{hotel}，然后新建一条笔记写上“{hotel}, {city}”。",
            "把{hotel}, {city}加入Booking.com收藏，并在备忘录里记下“{hotel}, {city}”。",
        ),
    },
    lambda p: _all(
        _v("booking.saved", property=f"{p.hotel}, {p.city}"), _v("notes.has_note", text=f"{p.hotel}, {p.city}")
    ),
    lambda p: SAVED + SEARCH_FORM + NOTES,
    "multi-app workflow: save a property on Booking.com and note it",
    3,
    40,
    setup=lambda p: (StateSetup(step="booking.search", params=DEFAULT_DATES),),
    wording=lambda p: {"hotel": p.hotel, "city": p.city},
)


class ZoneShare(TemplateParams):
    """A city of the Clock's time-zone list and a contact ``to``."""

    zone: str
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if v not in dict(TIME_ZONES):
            raise ValueError(f"{v!r} is not in the Clock's time-zone list")
        return v


_cross(
    "zone_offset_to_message",
    ("Clock", "Messages"),
    ZoneShare,
    lambda rng: ZoneShare(
        zone=rng.choice([z for z, _ in TIME_ZONES]), to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0]
    ),
    {
        "ENG": (
            "Find {zone}'s GMT offset in the Clock's time zone list and text it to {to}, as listed.",
            "Send {to} the GMT offset the Clock shows for {zone}.",
        ),
        "CHN": (
            "在时钟的时区列表中找到{zone}的GMT偏移，按列表显示的内容发短信给{to}。",
            "把时钟里{zone}的GMT偏移发给{to}。",
        ),
    },
    lambda p: _sent(p.to, dict(TIME_ZONES)[p.zone]),
    lambda p: THREADS,
    "information transfer: a time zone's offset from the Clock texted to a contact",
    3,
    32,
    setup=lambda p: (_contacts((p.to, p.to_phone, "")),),
)


class AppRating(TemplateParams):
    """A Google Play catalogue app whose rating goes into a note."""

    app: str

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        if v not in CATALOG:
            raise ValueError(f"{v!r} is not in Google Play's catalogue: {', '.join(CATALOG)}")
        return v


_cross(
    "app_rating_to_note",
    ("Google Play", "Notes"),
    AppRating,
    lambda rng: AppRating(app=rng.choice(CATALOG)),
    {
        "ENG": (
            "Check {app}'s star rating on Google Play and save it in a note titled '{app}'.",
            "Write {app}'s Google Play rating (just the number) in a new note called '{app}'.",
        ),
        "CHN": (
            "在Google Play查看{app}的评分，存到一条标题为“{app}”的笔记里。",
            "新建笔记“{app}”，内容是它在Google Play上的评分（只写数字）。",
        ),
    },
    lambda p: _v("notes.note", title=p.app, body=APP_INFO[p.app][0]),
    lambda p: NOTES,
    "information transfer: an app's Play Store rating written into a note",
    3,
    28,
)


# ----------------------------------------------------------------------------- X, Chrome, Settings ->


class DraftNote(TemplateParams):
    """An X draft the instance saves, to copy into a note."""

    text: str = Field(min_length=1)


_cross(
    "x_draft_to_note",
    ("X", "Notes"),
    DraftNote,
    lambda rng: DraftNote(text=rng.choice(X_POSTS)),
    {
        "ENG": (
            "One of my X drafts starts with '{start}'. Copy its whole text into a new note.",
            "Save the full text of my X draft that begins '{start}' in Notes.",
        ),
        "CHN": (
            "我在X上有一条以“{start}”开头的草稿，把它的全文复制到一条新笔记里。",
            "把X上以“{start}”开头的那条草稿全文保存到备忘录。",
        ),
    },
    lambda p: _all(_v("x.draft", content=p.text), _v("notes.has_note", text=p.text)),
    lambda p: NOTES,
    "information transfer: an X draft copied into a note",
    2,
    24,
    setup=lambda p: (StateSetup(step="x.drafts", params={"drafts": [p.text]}),),
    wording=lambda p: {"start": " ".join(p.text.split()[:2])},
)


class FollowShare(TemplateParams):
    """An X account to follow (the instance unfollows it) and a contact ``to`` to tell."""

    handle: str
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)

    @field_validator("handle")
    @classmethod
    def _handle(cls, v: str) -> str:
        if v not in dict(ACCOUNTS):
            raise ValueError(f"unknown account {v!r}; X knows {', '.join(h for h, _ in ACCOUNTS)}")
        return v


_cross(
    "follow_and_text",
    ("X", "Messages"),
    FollowShare,
    lambda rng: FollowShare(
        handle=rng.choice([h for h, _ in ACCOUNTS]), to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0]
    ),
    {
        "ENG": (
            "Follow @{handle} on X, then text {to} '@{handle}'.",
            "On X, follow the account @{handle} and send {to} the handle '@{handle}' by message.",
        ),
        "CHN": ("在X上关注@{handle}，然后发短信“@{handle}”给{to}。", "关注X账号@{handle}，并把“@{handle}”发给{to}。"),
    },
    lambda p: _all(_v("x.following", handle=p.handle), _sent(p.to, f"@{p.handle}")),
    lambda p: FOLLOWING + THREADS,
    "multi-app workflow: follow an account on X and share it by message",
    3,
    36,
    setup=lambda p: (StateSetup(step="x.follows", params={"unfollow": [p.handle]}), _contacts((p.to, p.to_phone, ""))),
)


class WebNote(TemplateParams):
    """A web search to run in Chrome and keep in a note."""

    query: str = Field(min_length=1)


_cross(
    "search_and_note",
    ("Chrome", "Notes"),
    WebNote,
    lambda rng: WebNote(query=rng.choice(SEARCHES_WEB)),
    {
        "ENG": (
            "Search Google for '{query}' in Chrome, then write '{query}' in a new note to remember it.",
            "Look up '{query}' in Chrome and keep the query in Notes.",
        ),
        "CHN": (
            "在Chrome中用Google搜索“{query}”，然后新建一条笔记写上“{query}”。",
            "用Chrome搜索“{query}”，并把这个搜索词记到备忘录里。",
        ),
    },
    lambda p: _all(_v("chrome.tab_with_query", query=p.query), _v("notes.has_note", text=p.query)),
    lambda p: TABS + NOTES,
    "multi-app workflow: a web search in Chrome and a note of it",
    2,
    28,
)


class WebInstall(TemplateParams):
    """A Play catalogue app to read about in Chrome, then install (the instance uninstalls it)."""

    app: str

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        if v not in CATALOG:
            raise ValueError(f"{v!r} is not in Google Play's catalogue: {', '.join(CATALOG)}")
        return v


_cross(
    "search_and_install",
    ("Chrome", "Google Play"),
    WebInstall,
    lambda rng: WebInstall(app=rng.choice(CATALOG)),
    {
        "ENG": (
            "Search the web for '{app} review' in Chrome, then install {app} from Google Play.",
            "Research {app} in Chrome (search '{app} review') and then get it from the Play Store.",
        ),
        "CHN": (
            "在Chrome中搜索“{app} review”，然后从Google Play安装{app}。",
            "先用Chrome搜索“{app} review”了解一下，再去应用商店安装{app}。",
        ),
    },
    lambda p: _all(_v("chrome.tab_with_query", query=f"{p.app} review"), _v("play.installed", app=p.app)),
    lambda p: TABS + ("apps.play.data.installed",),
    "multi-app workflow: research an app in Chrome and install it from Google Play",
    3,
    32,
    setup=lambda p: (StateSetup(step="play.apps", params={"uninstall": [p.app]}),),
)


class TimeoutShare(TemplateParams):
    """The screen timeout the instance sets and a contact ``to``."""

    value: str
    to: str = Field(min_length=3)
    to_phone: str = Field(min_length=7)

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        if v not in TIMEOUTS:
            raise ValueError(f"unknown timeout {v!r}; use one of {', '.join(TIMEOUTS)}")
        return v


_cross(
    "timeout_to_message",
    ("Settings", "Messages"),
    TimeoutShare,
    lambda rng: TimeoutShare(
        value=rng.choice([t for t in TIMEOUTS if t != "30 seconds"]), to=_names(rng, 1)[0], to_phone=_phones(rng, 1)[0]
    ),
    {
        "ENG": (
            "Check my screen timeout in Settings and text it to {to}, as Settings shows it.",
            "{to} asked about my screen timeout: look it up in Settings and send it to them.",
        ),
        "CHN": (
            "在设置里查看屏幕超时时间，按设置里显示的英文原文发短信给{to}。",
            "{to}问我屏幕超时设的是多少：在设置里查一下，用英文原文发给对方。",
        ),
    },
    lambda p: _all(_v("settings.screen_timeout", value=p.value), _sent(p.to, p.value)),
    lambda p: THREADS,
    "information transfer: a Settings value texted to a contact",
    3,
    28,
    setup=lambda p: (
        StateSetup(step="settings.values", params={"screen_timeout": p.value}),
        _contacts((p.to, p.to_phone, "")),
    ),
    wording=lambda p: {"to": p.to, "zh_value": ZH_TIMEOUTS[p.value]},
)


class DarkEverywhere(TemplateParams):
    """Dark theme on (or off) in Settings and the matching Google Play theme (the instance sets the opposite)."""

    enabled: bool


_cross(
    "dark_theme_everywhere",
    ("Settings", "Google Play"),
    DarkEverywhere,
    lambda rng: DarkEverywhere(enabled=rng.random() < 0.5),
    {
        "ENG": (
            "{verb} dark theme in Settings, then set Google Play's theme to {theme} too.",
            "Make both the system (Settings > Display) and Google Play use the {theme} theme.",
        ),
        "CHN": (
            "在设置中{zh_do}深色主题，然后把Google Play的主题也设为{zh_theme}。",
            "让系统（设置 > 显示）和Google Play都使用{zh_theme}主题。",
        ),
    },
    lambda p: _all(
        _v("settings.dark_theme", enabled=p.enabled), _v("play.theme", theme="Dark" if p.enabled else "Light")
    ),
    lambda p: ("apps.settings.data.dark_theme", "apps.play.data.theme"),
    "multi-app workflow: the same theme in Settings and in Google Play",
    3,
    36,
    setup=lambda p: (
        StateSetup(step="settings.values", params={"dark_theme": not p.enabled}),
        StateSetup(step="play.theme", params={"theme": "Light" if p.enabled else "Dark"}),
    ),
    wording=lambda p: {
        "verb": "Turn on" if p.enabled else "Turn off",
        "theme": "Dark" if p.enabled else "Light",
        "zh_do": "打开" if p.enabled else "关闭",
        "zh_theme": "深色" if p.enabled else "浅色",
    },
)


class AlarmThenNote(TemplateParams):
    """An alarm to set and a note that reminds what it is for."""

    hour: int = Field(ge=0, le=23)
    minute: int = Field(ge=0, le=59)
    reason: str = Field(min_length=1)


REASONS = ("Take the medicine", "Call the bank", "Leave for the airport", "Water the plants", "Start the laundry")


def _alarm_note_words(p: AlarmThenNote) -> dict[str, str]:
    return {"time": time_text(p.hour, p.minute), "zh_time": f"{p.hour}:{p.minute:02d}", "reason": p.reason}


_cross(
    "alarm_and_note",
    ("Clock", "Notes"),
    AlarmThenNote,
    lambda rng: AlarmThenNote(hour=(t := _time(rng))[0], minute=t[1], reason=rng.choice(REASONS)),
    {
        "ENG": (
            "Set an alarm for {time} and write a note titled '{time}' saying '{reason}'.",
            "Remind me: an alarm at {time}, plus a note '{time}' with the text '{reason}'.",
        ),
        "CHN": (
            "设置一个{zh_time}的闹钟，再写一条标题为“{time}”、内容为“{reason}”的笔记。",
            "提醒我：{zh_time}的闹钟，以及一条标题“{time}”、正文“{reason}”的笔记。",
        ),
    },
    lambda p: _all(
        _v("clock.alarm_exists", hour=p.hour, minute=p.minute),
        _v("notes.note", title=time_text(p.hour, p.minute), body=p.reason),
    ),
    lambda p: ALARMS + NOTES,
    "multi-app workflow: an alarm and a note that says what it is for",
    3,
    40,
    wording=_alarm_note_words,
)


class ToggleAlarm(TemplateParams):
    """A Settings section toggle to switch on (the instance switches it off) and an alarm to set."""

    key: str = Field(description="'<section>:<toggle>', e.g. 'battery:Battery Saver'")
    hour: int = Field(ge=0, le=23)
    minute: int = Field(0, description="0, 15, 30 or 45 (the time picker's minutes)")

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v not in TOGGLE_KEYS:
            raise ValueError(f"unknown toggle {v!r}; use one of {', '.join(TOGGLE_KEYS)}")
        return v


ZH_TOGGLES = {
    "Wi-Fi": "WLAN",
    "Mobile data": "移动数据",
    "Airplane mode": "飞行模式",
    "Bluetooth": "蓝牙",
    "NFC": "NFC",
    "Battery Saver": "省电模式",
    "Adaptive Battery": "自适应电池",
    "Vibrate for calls": "来电振动",
    "Touch sounds": "触摸提示音",
    "Use location": "使用位置信息",
    "Color inversion": "颜色反转",
    "Extra dim": "极暗模式",
    "Show passwords": "显示密码",
    "Themed icons": "主题图标",
    "Automatic updates": "自动更新",
    "Show system apps": "显示系统应用",
    "Storage manager": "存储管理器",
}
SECTION_TITLES = {key: title for key, title, _, _ in MAIN_ENTRIES}


def _toggle_alarm_words(p: ToggleAlarm) -> dict[str, str]:
    section, name = p.key.split(":", 1)
    return {
        "toggle": name,
        "section": SECTION_TITLES[section],
        "zh_toggle": ZH_TOGGLES.get(name, name),
        "time": time_text(p.hour, p.minute),
        "zh_time": f"{p.hour}:{p.minute:02d}",
    }


_cross(
    "toggle_and_alarm",
    ("Settings", "Clock"),
    ToggleAlarm,
    lambda rng: ToggleAlarm(
        key=rng.choice(TOGGLE_KEYS), hour=rng.choice((5, 6, 9, 11, 21, 22)), minute=rng.choice((0, 15, 30, 45))
    ),
    {
        "ENG": (
            "In the Settings app, enable '{toggle}'. Open the Clock app and set an alarm for {time}.",
            "Turn on {toggle} in {section} settings, then set an alarm for {time} in Clock.",
        ),
        "CHN": (
            "在设置中开启{zh_toggle}，然后打开时钟设置一个{zh_time}的闹钟。",
            "进入设置打开{zh_toggle}，再到时钟里新建{zh_time}的闹钟。",
        ),
    },
    lambda p: _all(
        _v("settings.toggle", key=p.key, enabled=True), _v("clock.alarm_exists", hour=p.hour, minute=p.minute)
    ),
    lambda p: (f"apps.settings.data.toggles.{p.key}", *ALARMS),
    "multi-app workflow: a Settings switch and an alarm (SPA-Bench General_Tool)",
    2,
    32,
    setup=lambda p: (StateSetup(step="settings.values", params={"toggles": {p.key: False}}),),
    wording=_toggle_alarm_words,
)


class ThemeFollow(TemplateParams):
    """Dark theme on in Settings, and Google Play's theme set to ``theme`` (the instance starts elsewhere)."""

    theme: str = Field(description="'System default', 'Dark' or 'Light'")
    start: str = Field(description="Google Play's theme when the instance starts")

    @field_validator("theme", "start")
    @classmethod
    def _theme(cls, v: str) -> str:
        if v not in PLAY_THEMES:
            raise ValueError(f"unknown theme {v!r}; use one of {', '.join(PLAY_THEMES)}")
        return v


PLAY_THEMES = ("Light", "Dark", "System default")
ZH_THEMES = {"Light": "浅色", "Dark": "深色", "System default": "跟随系统"}

_cross(
    "dark_theme_then_app_theme",
    ("Settings", "Google Play"),
    ThemeFollow,
    lambda rng: ThemeFollow(theme=(pair := rng.sample(PLAY_THEMES, 2))[0], start=pair[1]),
    {
        "ENG": (
            "Go to Settings and switch to dark theme, then open Google Play and set its theme to '{theme}'.",
            "Turn on the system dark theme, and in Google Play's settings choose the '{theme}' theme.",
        ),
        "CHN": (
            "进入设置，切换到深色模式，然后打开Google Play，将主题设置为“{zh_theme}”。",
            "打开系统的深色主题，再在Google Play设置中把主题改为“{zh_theme}”。",
        ),
    },
    lambda p: _all(_v("settings.dark_theme", enabled=True), _v("play.theme", theme=p.theme)),
    lambda p: ("apps.settings.data.dark_theme", "apps.play.data.theme"),
    "multi-app workflow: system dark theme, then an app's theme (SPA-Bench General_Tool)",
    3,
    36,
    setup=lambda p: (
        StateSetup(step="settings.values", params={"dark_theme": False}),
        StateSetup(step="play.theme", params={"theme": p.start}),
    ),
    wording=lambda p: {"theme": p.theme, "zh_theme": ZH_THEMES[p.theme]},
)
