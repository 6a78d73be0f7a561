"""``open_app`` over ADB: app names to packages and launch activities (:class:`AppMap`), and the
CSV overrides it reads (part of :mod:`darwin.envs.adb`).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import NamedTuple

_PACKAGE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")


# ======================================================================================
# open_app: names to packages
# ======================================================================================


class AppTarget(NamedTuple):
    """Where ``open_app`` goes: a package and, if known, the activity for ``am start -n``."""

    package: str
    activity: str | None = None


def _app_key(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


class AppMap:
    """App names (as agents write them) to Android packages and activities.

    Built from SPA-Bench's task lists (``task_app`` / ``task_app_CHN`` -> ``adb_app``,
    ``adb_home_page``), the SimPhone apps (label, id, aliases) and your overrides, in that
    order (later wins). Lookups ignore case, spaces and punctuation, so ``"Google Play"``,
    ``"google_play"`` and ``"googleplay"`` are the same app; a package name works too.

    >>> apps = AppMap.default(overrides={"My Bank": "com.bank.app/.Main"})
    >>> apps.resolve("booking.com")
    AppTarget(package='com.booking', activity='com.booking.appindex.presentation.activity.SearchActivity')
    >>> apps.resolve("my bank")
    AppTarget(package='com.bank.app', activity='com.bank.app.Main')
    >>> apps.resolve("com.example.unlisted")
    AppTarget(package='com.example.unlisted', activity=None)
    >>> apps.resolve("no such app") is None
    True
    """

    def __init__(self, entries: Mapping[str, AppTarget | str] | None = None) -> None:
        self._by_key: dict[str, AppTarget] = {}
        self.update(entries or {})

    @staticmethod
    def _target(value: AppTarget | str) -> AppTarget:
        if isinstance(value, AppTarget):
            return value
        package, _, activity = value.partition("/")
        if not _PACKAGE_NAME.match(package):
            raise ValueError(
                f"app target {value!r} is not 'package' or 'package/activity' (e.g. 'com.android.chrome/com.google.android.apps.chrome.Main')"
            )
        if activity.startswith("."):
            activity = package + activity
        return AppTarget(package, activity or None)

    def add(self, name: str, target: AppTarget | str) -> None:
        """Map ``name`` (and the target's package name) to ``target``."""
        resolved = self._target(target)
        key = _app_key(name)
        if not key:
            raise ValueError(f"app name {name!r} has no letters or digits")
        self._by_key[key] = resolved
        self._by_key.setdefault(_app_key(resolved.package), resolved)

    def update(self, entries: Mapping[str, AppTarget | str]) -> None:
        for name, target in entries.items():
            self.add(name, target)

    def resolve(self, name: str) -> AppTarget | None:
        """The target for ``name``; an unlisted package name maps to itself (launcher
        intent); ``None`` if the name is unknown."""
        target = self._by_key.get(_app_key(name))
        if target is not None:
            return target
        if _PACKAGE_NAME.match(name.strip()):
            return AppTarget(name.strip())
        return None

    def __len__(self) -> int:
        return len(self._by_key)

    @classmethod
    def spa_bench(cls) -> AppMap:
        """The package/activity columns of SPA-Bench's single-app task lists (ENG + CHN)."""
        apps = cls()
        folder = resources.files("darwin") / "data" / "spa-bench"
        for name in ("single-app-ENG.csv", "single-app-CHN.csv"):
            with (folder / name).open(encoding="utf-8-sig") as handle:
                for row in csv.DictReader(handle):
                    target = AppTarget(row["adb_app"].strip(), row["adb_home_page"].strip() or None)
                    for column in ("task_app", "task_app_CHN"):
                        if row.get(column):
                            apps.add(row[column], target)
        return apps

    @classmethod
    def sim_apps(cls) -> AppMap:
        """The SimPhone's apps: label, id and aliases to package and activity."""
        from darwin.envs.sim.apps import default_apps

        apps = cls()
        for app in default_apps():
            target = AppTarget(app.package, app.activity)
            for name in (app.label, app.id, *app.aliases):
                apps.add(name, target)
        return apps

    @classmethod
    def default(cls, overrides: Mapping[str, AppTarget | str] | None = None) -> AppMap:
        """SPA-Bench, then the SimPhone apps, then ``overrides``."""
        apps = cls.spa_bench()
        apps._by_key.update(cls.sim_apps()._by_key)
        apps.update(overrides or {})
        return apps


def load_app_overrides(path: str | Path) -> dict[str, str]:
    """Read ``name,package[/activity]`` lines (a CSV without header) for :class:`AppMap`."""
    overrides: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, row in enumerate(csv.reader(handle), start=1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) != 2:
                raise ValueError(f"{path}:{lineno}: expected 'name,package[/activity]', got {row!r}")
            overrides[row[0].strip()] = row[1].strip()
    return overrides
