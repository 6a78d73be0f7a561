"""Messages: conversations with unread marks, search, new chats (with Contacts suggestions), send, delete."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.clock import time_text
from darwin.envs.sim.apps.contacts import digits, display_name
from darwin.envs.sim.apps.forms import focus_next, same, typing_cost
from darwin.envs.sim.apps.messages_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, NoParams, PredicateParams, data, norm, predicate, top

SEED_THREADS = (
    ("Mom", ("Did you eat yet?", "Call grandma this weekend")),
    ("Jack Taylor", ("Good game last night", "Rematch on Sunday?")),
    ("Grace Liu", ("Thanks for the book!", "I'll return it next week")),
    ("City Pharmacy", ("Your prescription is ready for pickup",)),
    ("Dad", ("The garage door is fixed",)),
    ("Olivia Brown", ("Can you water my plants?", "Keys are under the mat")),
    ("Bank Alerts", ("Your card ending 4821 was charged $42.10",)),
    ("Leo Bianchi", ("Pizza tonight?",)),
    ("Maya Patel", ("Slides are in the shared folder",)),
    ("Gym Club", ("Your membership renews on Dec 1",)),
)
"""Conversations a phone's seeded threads are drawn from (templates use other people, see contacts.TEMPLATE_PEOPLE)."""
TEMPLATE_LINES = (
    "Are we still on for dinner?",
    "The package arrived today",
    "Can you send me the report?",
    "My flight lands at 6",
    "I left my keys at your place",
    "The meeting moved to Friday",
    "Happy birthday!",
    "See you at the station",
    "Running ten minutes late",
    "Do you need anything from the store?",
    "The tickets are booked",
    "Call me when you can",
)
"""Incoming lines task instances put in conversations (none appears in :data:`SEED_THREADS`)."""
MAX_SHOWN = 5


def _phone_like(text: str) -> bool:
    return len(digits(text)) >= 7 and all(c.isdigit() or c in "+-() ." for c in text.strip())


def same_recipient(a: str, b: str) -> bool:
    """Thread names compare case-insensitively; phone numbers by their digits."""
    if _phone_like(a) and _phone_like(b):
        return digits(a) == digits(b)
    return norm(a) == norm(b)


class MessagesApp(SimApp):
    """Messages: the conversation list (unread first in your eye), a thread view with a composer, new chat."""

    id = "messages"
    label = "Messages"
    package = "com.google.android.apps.messaging"
    activity = "com.google.android.apps.messaging.ui.ConversationListActivity"
    color = (25, 118, 210)
    glyph = "✉"
    aliases = ("sms", "texts", "google messages")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        threads = []
        for i, (name, lines) in enumerate(rng.sample(SEED_THREADS, k=7)):
            minute = rng.randrange(7 * 60, 9 * 60 + 30)
            messages = [
                {"from_me": j % 2 == 1 and j < len(lines) - 1, "text": t, "time": time_text(minute // 60, minute % 60)}
                for j, t in enumerate(lines)
            ]
            threads.append(
                {"id": i + 1, "name": name, "messages": messages, "unread": rng.random() < 0.35, "updated": i + 1}
            )
        return {"threads": threads}

    def popup(self) -> None:
        return None  # a system app: no "rate us" prompt

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        threads = ctx.data["threads"]
        if name == "home":
            ui.app_bar("Messages", actions=[("messages.menu", "menu", lambda: ctx.screen.__setitem__("menu", True))])
            ui.field(
                "messages.search_bar",
                value="",
                focused=False,
                placeholder="Search conversations",
                on_focus=self._open_search(ctx),
                on_submit=None,
                on_clear=None,
            )
            unread = sum(1 for t in threads if t["unread"])
            ui.label("messages.unread_count", f"{unread} unread" if unread else "No unread messages")
            rows = [self._row(ctx, t, _snippet(t)) for t in sorted(threads, key=lambda t: -t["updated"])]
            ui.list("threads", ctx.scroll_offset("threads"), rows, reserve_bottom=240)
            ui.fab("messages.new", "+", self._open_new(ctx))
            if ctx.screen.get("menu"):
                ui.dialog(
                    "messages.menu_dialog",
                    "Messages",
                    "Conversation options",
                    [
                        ("messages.menu.cancel", "Cancel", lambda: ctx.screen.__setitem__("menu", False)),
                        ("messages.menu.read_all", "Mark all read", _mark_all_read(ctx)),
                    ],
                )
        elif name == "search":
            ui.app_bar("Search", on_back=ctx.popper())
            ctx.text_field(ui, "messages.query", "Search conversations", on_submit=focus_next(ctx, None))
            query = norm(ctx.field("messages.query"))
            if query:
                hits = []
                for t in sorted(threads, key=lambda t: -t["updated"]):
                    found = next((m["text"] for m in reversed(t["messages"]) if query in norm(m["text"])), None)
                    if found is not None or query in norm(t["name"]):
                        hits.append(self._row(ctx, t, found or _snippet(t)))
                if not hits:
                    ui.label("messages.no_results", f"No results for '{ctx.field('messages.query')}'")
                ui.list("results", ctx.scroll_offset("results"), ctx.shuffled(hits, "search"))
        elif name == "new":
            self._new(ui, ctx)
        elif name == "thread":
            self._thread(ui, ctx)
        else:
            raise ValueError(f"messages: unknown screen {name!r}")

    @staticmethod
    def _row(ctx: AppContext, t: dict[str, Any], subtitle: str) -> Row:
        return Row(
            f"messages.thread.{t['id']}",
            ("● " if t["unread"] else "") + t["name"],
            subtitle,
            glyph=t["name"][:1].upper(),
            on_tap=_opener(ctx, t["id"]),
        )

    @staticmethod
    def _open_search(ctx: AppContext):
        def open_search() -> None:
            ctx.push("search")
            ctx.phone.state["focus"] = "messages.query"

        return open_search

    @staticmethod
    def _open_new(ctx: AppContext):
        def open_new() -> None:
            ctx.push("new")
            ctx.phone.state["focus"] = "messages.to"

        return open_new

    def _new(self, ui: UI, ctx: AppContext) -> None:
        ui.app_bar("New conversation", on_back=ctx.popper())
        ctx.text_field(ui, "messages.to", "Type a name or phone number", on_submit=_recipient_submitter(ctx))
        typed = ctx.field("messages.to").strip()
        rows = []
        if typed and _phone_like(typed):
            rows.append(
                Row(
                    "messages.to_number",
                    f"Send to {typed}",
                    "Phone number",
                    glyph="#",
                    on_tap=_conversation_opener(ctx, typed),
                )
            )
        rows += [
            Row(
                f"messages.contact.{c['id']}",
                display_name(c),
                c["phone"],
                glyph=display_name(c)[:1].upper(),
                on_tap=_conversation_opener(ctx, display_name(c)),
            )
            for c in _suggestions(ctx, typed)
        ]
        if not typed:
            ui.label("messages.to_hint", "Top contacts", role="muted")
        ui.list("suggestions", ctx.scroll_offset("suggestions"), rows)

    def _thread(self, ui: UI, ctx: AppContext) -> None:
        s = ctx.screen
        thread = _find(ctx.data, s.get("thread"))
        if s.get("thread") is not None and thread is None:
            ui.app_bar("Conversation", on_back=ctx.popper())
            ui.label("messages.gone", "This conversation was deleted")
            return
        title = thread["name"] if thread is not None else s["to"]
        actions = [("messages.thread_menu", "menu", lambda: s.__setitem__("menu", True))] if thread is not None else []
        ui.app_bar(title, on_back=ctx.popper(), actions=actions)
        messages = thread["messages"] if thread is not None else []
        if not messages:
            ui.label("messages.empty", f"Start your conversation with {title}")
        for i, m in enumerate(messages[-MAX_SHOWN:]):
            # Labels, not rows: a message is read, never tapped, and a label's smaller type fits a longer line.
            ui.label(
                f"messages.message.{i}",
                f"{m['text']}\n{'You' if m['from_me'] else title} · {m['time']}",
                h=150,
                role="text",
            )
        ctx.text_field(ui, "messages.compose", "Text message", on_submit=_sender(ctx))
        ui.button("messages.send", "Send", lambda: _sender(ctx)(ctx.field("messages.compose")))
        if thread is not None and s.get("menu"):
            ui.dialog(
                "messages.thread_menu_dialog",
                title,
                "Conversation options",
                [
                    ("messages.thread_menu.cancel", "Cancel", lambda: s.__setitem__("menu", False)),
                    ("messages.thread_menu.delete", "Delete", lambda: s.update(menu=False, confirm=True)),
                ],
            )
        elif thread is not None and s.get("confirm"):
            ui.dialog(
                "messages.delete_dialog",
                "Delete this conversation?",
                f"Your messages with {title} will be deleted.",
                [
                    ("messages.delete.cancel", "Cancel", lambda: s.__setitem__("confirm", False)),
                    ("messages.delete.confirm", "Delete", _deleter(ctx, thread["id"])),
                ],
            )

    def handle_back(self, ctx: AppContext) -> bool:
        s = ctx.screen
        if s.get("menu") or s.get("confirm"):
            s["menu"] = s["confirm"] = False
            return True
        return False


def _snippet(t: dict[str, Any]) -> str:
    if not t["messages"]:
        return ""
    last = t["messages"][-1]
    return ("You: " if last["from_me"] else "") + last["text"]


def _find(d: dict[str, Any], thread_id: int | None) -> dict[str, Any] | None:
    return next((t for t in d["threads"] if t["id"] == thread_id), None)


def _opener(ctx: AppContext, thread_id: int):
    def open_thread() -> None:
        thread = _find(ctx.data, thread_id)
        if thread is not None:
            thread["unread"] = False  # reading a conversation marks it read
        ctx.push("thread", thread=thread_id)

    return open_thread


def _suggestions(ctx: AppContext, typed: str) -> list[dict[str, Any]]:
    contacts = sorted(ctx.app_data("contacts")["contacts"], key=lambda c: norm(display_name(c)))
    if not typed:
        return [c for c in contacts if c["starred"]][:4]
    q = norm(typed)
    return [c for c in contacts if q in norm(display_name(c)) or (digits(q) and digits(q) in digits(c["phone"]))]


def _conversation_opener(ctx: AppContext, recipient: str):
    def open_conversation() -> None:
        existing = next((t for t in ctx.data["threads"] if same_recipient(t["name"], recipient)), None)
        if existing is not None:
            existing["unread"] = False
            ctx.replace("thread", thread=existing["id"])
        else:
            ctx.replace("thread", thread=None, to=recipient)
        ctx.phone.state["focus"] = "messages.compose"  # a new chat opens with the keyboard up

    return open_conversation


def _recipient_submitter(ctx: AppContext):
    def submit(text: str) -> None:
        typed = text.strip()
        if not typed:
            return
        hits = _suggestions(ctx, typed)
        exact = [c for c in hits if norm(display_name(c)) == norm(typed)]
        if exact:
            _conversation_opener(ctx, display_name(exact[0]))()
        elif _phone_like(typed):
            _conversation_opener(ctx, typed)()
        elif len(hits) == 1:
            _conversation_opener(ctx, display_name(hits[0]))()
        else:
            ctx.toast(f"No single contact matches '{typed}'")

    return submit


def _sender(ctx: AppContext):
    def send(text: str) -> None:
        text = text.strip()
        if not text:
            return
        s = ctx.screen
        threads = ctx.data["threads"]
        clock = ctx.phone.state["clock"]["minutes"]
        message = {"from_me": True, "text": text, "time": time_text(clock // 60, clock % 60)}
        updated = max((t["updated"] for t in threads), default=0) + 1
        thread = _find(ctx.data, s.get("thread"))
        if thread is None:
            new_id = max((t["id"] for t in threads), default=0) + 1
            threads.append({"id": new_id, "name": s["to"], "messages": [message], "unread": False, "updated": updated})
            ctx.replace("thread", thread=new_id)
        else:
            thread["messages"].append(message)
            thread["updated"] = updated
            ctx.set_field("messages.compose", "")
        ctx.phone.state["focus"] = "messages.compose"

    return send


def _mark_all_read(ctx: AppContext):
    def mark() -> None:
        for t in ctx.data["threads"]:
            t["unread"] = False
        ctx.screen["menu"] = False
        ctx.toast("All conversations marked as read")

    return mark


def _deleter(ctx: AppContext, thread_id: int):
    def delete() -> None:
        ctx.data["threads"] = [t for t in ctx.data["threads"] if t["id"] != thread_id]
        ctx.pop()
        ctx.toast("Conversation deleted")

    return delete


# -- predicates -----------------------------------------------------------------------------
def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "messages" and state["popup"] is None else 1


class Sent(PredicateParams):
    to: str = Field(min_length=1, description="a contact's name, a conversation's name or a phone number")
    text: str = Field(min_length=1)

    def texts(self) -> list[str]:
        return [self.text, self.to]


def _thread_of(state: dict[str, Any], screen: dict[str, Any]) -> str | None:
    """The recipient of an open thread screen."""
    thread = next((t for t in data(state, "messages")["threads"] if t["id"] == screen.get("thread")), None)
    return thread["name"] if thread is not None else screen.get("to")


@predicate("messages.sent", Sent)
def sent(state: dict[str, Any], p: Sent) -> Check:
    """A message with exactly ``text`` (case and spacing aside) was sent to ``to``."""
    for t in data(state, "messages")["threads"]:
        if same_recipient(t["name"], p.to) and any(
            m["from_me"] and norm(m["text"]) == norm(p.text) for m in t["messages"]
        ):
            return Check.of(0)
    s = top(state, "messages")
    if s["name"] == "thread" and (recipient := _thread_of(state, s)) is not None and same_recipient(recipient, p.to):
        dialog = int(bool(s.get("menu") or s.get("confirm")))
        typed = s.get("fields", {}).get("messages.compose", "")
        focused = state["focus"] == "messages.compose" and _fg(state) == 0
        # Typing the text with a newline sends it; a composer that holds it needs only Send.
        cost = 1 if same(typed, p.text) else typing_cost([(typed, p.text)], focused)
        return Check.of(_fg(state) + dialog + cost)
    if s["name"] == "new":
        return Check.of(_fg(state) + 2)  # pick the recipient (the composer opens focused), type with a newline
    # A row and the composer, or '+' and the recipient; then the text.
    return Check.of(_fg(state) + 3)


class ThreadName(PredicateParams):
    name: str = Field(min_length=1)


@predicate("messages.no_thread", ThreadName)
def no_thread(state: dict[str, Any], p: ThreadName) -> Check:
    """No conversation with ``name`` is left."""
    hits = [t for t in data(state, "messages")["threads"] if same_recipient(t["name"], p.name)]
    if not hits:
        return Check.of(0)
    s = top(state, "messages")
    first = 4  # its row, the menu, Delete, confirm
    if s["name"] == "thread" and s.get("thread") in {t["id"] for t in hits}:
        first = 1 if s.get("confirm") else 2 if s.get("menu") else 3
    return Check.of(_fg(state) + first + 4 * (len(hits) - 1))


@predicate("messages.all_read", NoParams)
def all_read(state: dict[str, Any], p: NoParams) -> Check:
    """No conversation is marked unread."""
    unread = sum(1 for t in data(state, "messages")["threads"] if t["unread"])
    if unread == 0:
        return Check.of(0)
    s = top(state, "messages")
    if s["name"] == "home" and s.get("menu"):
        return Check.of(_fg(state) + 1)
    # 'Mark all read' from the menu (two taps), or opening each unread one (a tap each, back between).
    return Check.of(_fg(state) + min(2, 2 * unread - 1))


# -- setup steps ----------------------------------------------------------------------------
class NewMessage(PredicateParams):
    text: str = Field(min_length=1)
    from_me: bool = False
    time: str = Field("8:15 AM", description="as the thread shows it")


class NewThread(PredicateParams):
    name: str = Field(min_length=1)
    messages: list[NewMessage] = Field(min_length=1)
    unread: bool = True


class AddThreads(PredicateParams):
    """Conversations to put on the phone (newest first in the list); one with the same name is replaced."""

    threads: list[NewThread] = Field(min_length=1)
    mark_others_read: bool = Field(
        False, description="mark every other conversation read (unread counts then come from these)"
    )


@setup_step("messages.threads", AddThreads)
def _add_threads(state: dict[str, Any], p: AddThreads) -> None:
    """Add (or replace by name) the given conversations as the most recent ones."""
    d = data(state, "messages")
    if p.mark_others_read:
        for t in d["threads"]:
            t["unread"] = False
    for spec in p.threads:
        same_name = [t["id"] for t in d["threads"] if same_recipient(t["name"], spec.name)]
        new_id = same_name[0] if same_name else max((t["id"] for t in d["threads"]), default=0) + 1
        d["threads"] = [t for t in d["threads"] if not same_recipient(t["name"], spec.name)]
        updated = (
            max((t["updated"] for t in d["threads"]), default=0) + 1
        )  # newest of the others: a repeat changes nothing
        d["threads"].append(
            {
                "id": new_id,
                "name": spec.name,
                "messages": [m.model_dump() for m in spec.messages],
                "unread": spec.unread,
                "updated": updated,
            }
        )
