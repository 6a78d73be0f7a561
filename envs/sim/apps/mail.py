"""Mail: Inbox, Starred, Sent and Drafts tabs, reading, composing, replying, forwarding, stars, archive,
delete, labels and search."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pydantic import Field

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.forms import focus_next, same, typing_cost
from darwin.envs.sim.apps.mail_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, norm, predicate, top

ME = "me@simphone.com"
LABELS = ("Work", "Travel", "Receipts", "Family")
SEED_MAIL = (
    ("Ana Lopez", "ana.lopez@gmail.com", "Lunch on Thursday?", "Are you free for lunch on Thursday at noon?"),
    ("Ben Ode", "ben.ode@outlook.com", "Photos from the hike", "Here are the photos from Saturday's hike."),
    ("Acme Bank", "alerts@acmebank.com", "Your monthly statement", "Your November statement is ready to view."),
    ("Cloud Drive", "no-reply@clouddrive.com", "Storage almost full", "You have used 95% of your storage."),
    ("Priya Shah", "priya.shah@work.com", "Quarterly report", "Please review the draft report before Friday."),
    ("City Library", "info@citylibrary.org", "Books due soon", "Two of your books are due on Monday."),
    ("Tom Berg", "tom.berg@gmail.com", "Weekend plans", "Want to go cycling this weekend?"),
    ("FastAir", "trips@fastair.com", "Your flight is confirmed", "Flight FA 218 to Lisbon departs at 7:40 AM."),
)
"""Mail a phone's inbox is drawn from (templates add mail with other subjects)."""
TABS = (("inbox", "Inbox"), ("starred", "Starred"), ("sent", "Sent"), ("drafts", "Drafts"))
TO, SUBJECT, BODY, QUERY = "mail.to", "mail.subject", "mail.body", "mail.query"
BOXES = ("inbox", "sent", "drafts", "archive", "trash")


class MailApp(SimApp):
    """Mail (like Gmail): tabs for Inbox, Starred, Sent and Drafts; a message view with star, archive,
    delete, labels, reply and forward; a composer that keeps a draft when closed; labels and search."""

    id = "mail"
    label = "Mail"
    package = "com.google.android.gm"
    activity = "com.google.android.gm.ConversationListActivityGmail"
    color = (217, 48, 37)
    glyph = "M"
    aliases = ("gmail", "email", "e-mail", "google mail")
    root_screen = "inbox"
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        chosen = rng.sample(SEED_MAIL, k=6)
        emails = []
        for i, (name, address, subject, body) in enumerate(chosen):
            emails.append(
                {
                    "id": i + 1,
                    "box": "inbox",
                    "from": name,
                    "address": address,
                    "to": ME,
                    "subject": subject,
                    "body": body,
                    "time": f"{8 + i}:{rng.choice((5, 20, 35, 50)):02d} AM",
                    "order": i + 1,
                    "starred": rng.random() < 0.2,
                    "unread": rng.random() < 0.5,
                    "labels": [],
                }
            )
        return {"emails": emails, "labels": list(LABELS), "next_id": len(emails) + 1}

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        if name in ("inbox", "starred", "sent", "drafts"):
            ui.app_bar("Mail", actions=[("mail.labels", "menu", ctx.pusher("labels"))])
            ui.field(
                "mail.search_bar",
                value="",
                focused=False,
                placeholder="Search in mail",
                on_focus=_open_search(ctx),
                on_submit=None,
                on_clear=None,
            )
            ui.bottom_nav([(f"mail.tab.{key}", text, _tab(ctx, key)) for key, text in TABS], f"mail.tab.{name}")
            mails = _in_tab(d, name)
            if not mails:
                ui.label("mail.empty", f"Nothing in {dict(TABS)[name]}")
            ui.list(name, ctx.scroll_offset(name), [_row(ctx, m) for m in mails], reserve_bottom=240)
            ui.fab("mail.compose", "✎", _compose(ctx), text="Compose")
        elif name == "email":
            self._email(ui, ctx)
        elif name == "compose":
            s = ctx.screen
            ui.app_bar("Compose email", on_back=_closer(ctx), actions=[("mail.send", "➤", _sender(ctx), "Send")])
            ctx.text_field(ui, TO, "To", on_submit=focus_next(ctx, SUBJECT))
            ctx.text_field(ui, SUBJECT, "Subject", on_submit=focus_next(ctx, BODY))
            ctx.text_field(ui, BODY, "Compose email", multiline=True, h=400)
            if s.get("error"):
                ui.label("mail.compose.error", s["error"], role="text")
        elif name == "search":
            ui.app_bar("Search", on_back=ctx.popper())
            ctx.text_field(ui, QUERY, "Search in mail", on_submit=focus_next(ctx, None))
            query = norm(ctx.field(QUERY))
            if query:
                hits = [
                    _row(ctx, m)
                    for m in _newest(d["emails"])
                    if m["box"] != "trash"
                    and any(query in norm(m[k]) for k in ("from", "address", "to", "subject", "body"))
                ]
                if not hits:
                    ui.label("mail.no_results", f"No mail matches '{ctx.field(QUERY)}'")
                ui.list("results", ctx.scroll_offset("results"), hits)
        elif name == "labels":
            ui.app_bar("Labels", on_back=ctx.popper())
            rows = [
                Row(f"mail.label.{lab}", lab, _count(d, lab), on_tap=ctx.pusher("label", label=lab))
                for lab in d["labels"]
            ]
            ui.list("labels", ctx.scroll_offset("labels"), rows)
        elif name == "label":
            lab = ctx.screen["label"]
            ui.app_bar(lab, on_back=ctx.popper())
            mails = [m for m in _newest(d["emails"]) if lab in m["labels"] and m["box"] != "trash"]
            if not mails:
                ui.label("mail.empty", "Nothing with this label")
            ui.list("labelled", ctx.scroll_offset("labelled"), [_row(ctx, m) for m in mails])
        elif name == "label_picker":
            m = _find(d, ctx.screen["email"])
            ui.app_bar("Label as", on_back=ctx.popper())
            for lab in d["labels"]:
                ui.toggle_row(f"mail.pick.{lab}", lab, m is not None and lab in m["labels"], _label_toggler(m, lab))
        else:
            raise ValueError(f"mail: unknown screen {name!r}")

    def _email(self, ui: UI, ctx: AppContext) -> None:
        m = _find(ctx.data, ctx.screen["email"])
        if m is None or m["box"] == "trash":
            ui.app_bar("Mail", on_back=ctx.popper())
            ui.label("mail.gone", "This message was deleted")
            return
        ui.app_bar(
            "",
            on_back=ctx.popper(),
            actions=[
                ("mail.star", "★" if m["starred"] else "☆", _flip_star(m)),
                ("mail.archive", "▣", _mover(ctx, m, "archive", "Archived"), "Archive"),
                ("mail.delete", "✕", _mover(ctx, m, "trash", "Moved to Trash"), "Delete"),
            ],
        )
        ui.title(m["subject"] or "(no subject)")
        ui.label(
            "mail.detail.from", f"From: {m['from']} <{m['address']}>" if m["box"] != "sent" else "From: me", role="text"
        )
        ui.label("mail.detail.to", f"To: {m['to']}")
        ui.label("mail.detail.labels", f"Labels: {', '.join(m['labels'])}" if m["labels"] else "No labels")
        ui.label("mail.detail.body", m["body"], h=300, role="text")
        ui.buttons_row(
            [
                ("mail.reply", "Reply", _reply(ctx, m), False),
                ("mail.forward", "Forward", _forward(ctx, m), False),
                ("mail.label_as", "Label", ctx.pusher("label_picker", email=m["id"]), False),
            ]
        )

    def handle_back(self, ctx: AppContext) -> bool:
        if ctx.screen["name"] == "compose":
            _close_compose(ctx)  # closing the composer keeps a draft, as in Gmail; the stack then pops
        return False


# -- helpers ------------------------------------------------------------------------------
def _find(d: dict[str, Any], email_id: int | None) -> dict[str, Any] | None:
    return next((m for m in d["emails"] if m["id"] == email_id), None)


def _newest(emails: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(emails, key=lambda m: (-m["order"], m["id"]))


def _in_tab(d: dict[str, Any], tab: str) -> list[dict[str, Any]]:
    if tab == "starred":
        return [m for m in _newest(d["emails"]) if m["starred"] and m["box"] != "trash"]
    return [m for m in _newest(d["emails"]) if m["box"] == tab]


def _count(d: dict[str, Any], label: str) -> str:
    n = sum(1 for m in d["emails"] if label in m["labels"] and m["box"] != "trash")
    return f"{n}" if n else ""


def _row(ctx: AppContext, m: dict[str, Any]) -> Row:
    if m["box"] == "drafts":
        who, on_tap = "Draft", _open_draft(ctx, m)
    else:
        who = f"To: {m['to']}" if m["box"] == "sent" else m["from"]
        on_tap = _opener(ctx, m)
    glyph = "●" if m["unread"] else ("★" if m["starred"] else "")
    return Row(f"mail.email.{m['id']}", who, m["subject"] or "(no subject)", on_tap=on_tap, glyph=glyph)


def _tab(ctx: AppContext, key: str) -> Callable[[], None]:
    return lambda: ctx.reset_to(key)


def _open_search(ctx: AppContext) -> Callable[[], None]:
    def open_search() -> None:
        ctx.push("search")
        ctx.phone.state["focus"] = QUERY

    return open_search


def _compose(ctx: AppContext, **fields: str) -> Callable[[], None]:
    def compose() -> None:
        filled = {k: v for k, v in fields.items() if v}
        ctx.push("compose", draft=None, fields=filled, initial=dict(filled))
        ctx.phone.state["focus"] = TO if not fields.get(TO) else BODY

    return compose


def _reply(ctx: AppContext, m: dict[str, Any]) -> Callable[[], None]:
    subject = m["subject"] if m["subject"].startswith("Re: ") else f"Re: {m['subject']}"
    return _compose(ctx, **{TO: m["address"], SUBJECT: subject})


def _forward(ctx: AppContext, m: dict[str, Any]) -> Callable[[], None]:
    return _compose(ctx, **{SUBJECT: f"Fwd: {m['subject']}", BODY: m["body"]})


def _opener(ctx: AppContext, m: dict[str, Any]) -> Callable[[], None]:
    def open_email() -> None:
        m["unread"] = False
        ctx.push("email", email=m["id"])

    return open_email


def _open_draft(ctx: AppContext, m: dict[str, Any]) -> Callable[[], None]:
    def open_draft() -> None:
        to = "" if m["to"] == ME else m["to"]
        filled = {TO: to, SUBJECT: m["subject"], BODY: m["body"]}
        ctx.push("compose", draft=m["id"], fields=filled, initial=dict(filled))

    return open_draft


def _flip_star(m: dict[str, Any]) -> Callable[[], None]:
    def flip() -> None:
        m["starred"] = not m["starred"]

    return flip


def _mover(ctx: AppContext, m: dict[str, Any], box: str, toast: str) -> Callable[[], None]:
    def move() -> None:
        m["box"] = box
        ctx.pop()
        ctx.toast(toast)

    return move


def _label_toggler(m: dict[str, Any] | None, label: str) -> Callable[[], None]:
    def toggle() -> None:
        if m is None:
            return
        if label in m["labels"]:
            m["labels"].remove(label)
        else:
            m["labels"].append(label)

    return toggle


def _store(ctx: AppContext, box: str) -> None:
    """Save the composer's fields as a message in ``box`` (its draft becomes it, or a new one)."""
    d, s = ctx.data, ctx.screen
    to, subject, body = ctx.field(TO).strip(), ctx.field(SUBJECT).strip(), ctx.field(BODY).strip()
    draft = _find(d, s.get("draft"))
    order = max((m["order"] for m in d["emails"]), default=0) + 1
    if draft is None:
        draft = {"id": d["next_id"], "from": "me", "address": ME, "starred": False, "unread": False, "labels": []}
        d["next_id"] += 1
        d["emails"].append(draft)
    draft.update({"box": box, "to": to, "subject": subject, "body": body, "time": "9:41 AM", "order": order})


def _sender(ctx: AppContext) -> Callable[[], None]:
    def send() -> None:
        if not ctx.field(TO).strip():
            ctx.screen["error"] = "Add a recipient"
            return
        _store(ctx, "sent")
        ctx.pop()
        ctx.toast("Message sent")

    return send


def _close_compose(ctx: AppContext) -> None:
    initial = ctx.screen.get("initial", {})
    if all(ctx.field(k).strip() == initial.get(k, "").strip() for k in (TO, SUBJECT, BODY)):
        return  # nothing changed: no new draft (an opened draft stays as it was)
    if any(ctx.field(k).strip() for k in (TO, SUBJECT, BODY)):
        _store(ctx, "drafts")
        ctx.toast("Saved as draft")
    elif ctx.screen.get("draft") is not None:
        ctx.data["emails"] = [m for m in ctx.data["emails"] if m["id"] != ctx.screen["draft"]]


def _closer(ctx: AppContext) -> Callable[[], None]:
    def close() -> None:
        _close_compose(ctx)
        ctx.pop()

    return close


# -- predicates -----------------------------------------------------------------------------
def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "mail" and state["popup"] is None else 1


def _matches(subject: str, wanted: str) -> bool:
    return same(subject, wanted)


def _to_email(state: dict[str, Any], m: dict[str, Any]) -> int:
    """Lower bound on showing message ``m`` (a list showing it, then its row)."""
    s = top(state, "mail")
    if _fg(state) == 0 and s["name"] == "email" and s.get("email") == m["id"]:
        return 0
    return _fg(state) + 1


def _compose_cost(state: dict[str, Any], to: str, subject: str | None, body: str | None, box: str) -> int:
    """Lower bound on composing a message and sending it (or closing it as a draft)."""

    def pairs(fields: dict[str, str]) -> list[tuple[str, str]]:
        out = [(fields.get(TO, ""), to)]
        if subject is not None:
            out.append((fields.get(SUBJECT, ""), subject))
        if body is not None:
            out.append((fields.get(BODY, ""), body))
        return out

    s = top(state, "mail")
    if _fg(state) == 0 and s["name"] == "compose":
        fields = s.get("fields", {})
        return typing_cost(pairs(fields), state["focus"] is not None) + 1
    # From elsewhere: open a composer (Compose opens with To focused; Reply / Forward fill some fields).
    best = 1 + typing_cost(pairs({}), True) + 1
    if subject is not None and (subject.startswith("Re: ") or subject.startswith("Fwd: ")):
        base = subject.split(": ", 1)[1]
        for m in data(state, "mail")["emails"]:
            if same(m["subject"], base) and m["box"] != "trash":
                filled = {SUBJECT: subject, BODY: m["body"] if subject.startswith("Fwd: ") else ""}
                if subject.startswith("Re: "):
                    filled[TO] = m["address"]
                best = min(best, _to_email(state, m) - _fg(state) + 1 + typing_cost(pairs(filled), True) + 1)
    return _fg(state) + best


class Sent(PredicateParams):
    to: str = Field(min_length=1, description="the recipient's address")
    subject: str | None = None
    body: str | None = None

    def texts(self) -> list[str]:
        return [t for t in (self.to, self.subject, self.body) if t]


def _is(m: dict[str, Any], p: Sent) -> bool:
    return (
        norm(m["to"]) == norm(p.to)
        and (p.subject is None or same(m["subject"], p.subject))
        and (p.body is None or same(m["body"], p.body))
    )


@predicate("mail.sent", Sent)
def sent(state: dict[str, Any], p: Sent) -> Check:
    """A message to ``to`` (with ``subject`` / ``body`` when given) was sent."""
    if any(m["box"] == "sent" and _is(m, p) for m in data(state, "mail")["emails"]):
        return Check.of(0)
    return Check.of(_compose_cost(state, p.to, p.subject, p.body, "sent"))


@predicate("mail.draft", Sent)
def draft(state: dict[str, Any], p: Sent) -> Check:
    """A draft to ``to`` (with ``subject`` / ``body`` when given) is saved, and no such message was sent."""
    emails = data(state, "mail")["emails"]
    if any(m["box"] == "sent" and _is(m, p) for m in emails):
        return Check.of(99)  # sent, not kept: cannot be undone
    if any(m["box"] == "drafts" and _is(m, p) for m in emails):
        return Check.of(0)
    return Check.of(_compose_cost(state, p.to, p.subject, p.body, "drafts"))


class Subject(PredicateParams):
    subject: str = Field(min_length=1)


class StarSpec(Subject):
    starred: bool = True


def _with_subject(state: dict[str, Any], subject: str) -> list[dict[str, Any]]:
    return [m for m in data(state, "mail")["emails"] if _matches(m["subject"], subject) and m["box"] != "trash"]


@predicate("mail.starred", StarSpec)
def starred(state: dict[str, Any], p: StarSpec) -> Check:
    """Every message with ``subject`` (one at least) is starred (or not)."""
    hits = _with_subject(state, p.subject)
    wrong = [m for m in hits if m["starred"] != p.starred]
    if hits and not wrong:
        return Check.of(0)
    if not hits:
        return Check.of(99)
    return Check.of(sum(_to_email(state, m) + 1 for m in wrong))


class BoxSpec(Subject):
    box: str = Field(description="inbox, archive or trash")


@predicate("mail.in_box", BoxSpec)
def in_box(state: dict[str, Any], p: BoxSpec) -> Check:
    """A message with ``subject`` exists and every one is in ``box`` (archive: archived; trash: deleted)."""
    hits = [m for m in data(state, "mail")["emails"] if _matches(m["subject"], p.subject)]
    wrong = [m for m in hits if m["box"] != p.box]
    if hits and not wrong:
        return Check.of(0)
    if not hits:
        return Check.of(99)
    return Check.of(sum(_to_email(state, m) + 1 for m in wrong))


class LabelSpec(Subject):
    label: str = Field(min_length=1)


@predicate("mail.labelled", LabelSpec)
def labelled(state: dict[str, Any], p: LabelSpec) -> Check:
    """Every message with ``subject`` (one at least) carries ``label``."""
    hits = _with_subject(state, p.subject)
    wrong = [m for m in hits if not any(same(lab, p.label) for lab in m["labels"])]
    if hits and not wrong:
        return Check.of(0)
    if not hits:
        return Check.of(99)
    s = top(state, "mail")
    total = 0
    for m in wrong:
        if _fg(state) == 0 and s["name"] == "label_picker" and s.get("email") == m["id"]:
            total += 1
        else:
            total += _to_email(state, m) + 2  # Label, the label
    return Check.of(total)


# -- setup steps ----------------------------------------------------------------------------
class NewMail(PredicateParams):
    sender: str = Field(min_length=1, description="the sender's name")
    address: str = Field(min_length=1)
    subject: str = Field(min_length=1)
    body: str = ""
    starred: bool = False
    unread: bool = True
    labels: list[str] = Field(default_factory=list)
    box: str = "inbox"


class AddMail(PredicateParams):
    """Messages to put at the top of the inbox; one with the same subject is replaced (a repeated setup adds nothing twice)."""

    emails: list[NewMail] = Field(min_length=1)


@setup_step("mail.add", AddMail)
def _add_mail(state: dict[str, Any], p: AddMail) -> None:
    """Add (or replace by subject) the given messages, newest last."""
    d = data(state, "mail")
    for spec in p.emails:
        old = [m["id"] for m in d["emails"] if same(m["subject"], spec.subject)]
        d["emails"] = [m for m in d["emails"] if not same(m["subject"], spec.subject)]
        if old:
            new_id = old[0]
        else:
            new_id = d["next_id"]
            d["next_id"] += 1
        order = max((m["order"] for m in d["emails"]), default=0) + 1
        d["emails"].append(
            {
                "id": new_id,
                "box": spec.box,
                "from": spec.sender,
                "address": spec.address,
                "to": ME,
                "subject": spec.subject,
                "body": spec.body,
                "time": "9:30 AM",
                "order": order,
                "starred": spec.starred,
                "unread": spec.unread,
                "labels": list(spec.labels),
            }
        )
        for lab in spec.labels:
            if lab not in d["labels"]:
                d["labels"].append(lab)
