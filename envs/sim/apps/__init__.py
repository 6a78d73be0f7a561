"""The apps installed on every SimPhone (one module per app)."""

from __future__ import annotations

from darwin.envs.sim.apps.amazon import AmazonApp
from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.booking import BookingApp
from darwin.envs.sim.apps.calculator import CalculatorApp
from darwin.envs.sim.apps.calendar import CalendarApp
from darwin.envs.sim.apps.chrome import ChromeApp
from darwin.envs.sim.apps.clock import ClockApp
from darwin.envs.sim.apps.contacts import ContactsApp
from darwin.envs.sim.apps.dictionary import DictionaryApp
from darwin.envs.sim.apps.files import FilesApp
from darwin.envs.sim.apps.mail import MailApp
from darwin.envs.sim.apps.messages import MessagesApp
from darwin.envs.sim.apps.notes import NotesApp
from darwin.envs.sim.apps.play import PlayApp
from darwin.envs.sim.apps.settings import SettingsApp
from darwin.envs.sim.apps.tasks import TasksApp
from darwin.envs.sim.apps.x import XApp


def default_apps() -> list[SimApp]:
    """Fresh instances of the built-in apps, in canonical launcher order.

    New apps go at the end: every app's seeded data is drawn from one generator in this
    order, so appending keeps the earlier apps' data byte-identical for every seed.
    """
    return [
        AmazonApp(),
        BookingApp(),
        ChromeApp(),
        ClockApp(),
        SettingsApp(),
        DictionaryApp(),
        PlayApp(),
        XApp(),
        ContactsApp(),
        CalendarApp(),
        MessagesApp(),
        NotesApp(),
        FilesApp(),
        MailApp(),
        CalculatorApp(),
        TasksApp(),
    ]


__all__ = ["AppContext", "SimApp", "default_apps"]
