"""What the parts of a SimPhone see of each other, as protocols: an app, the renderer and the
keyboard see the phone (:class:`PhoneView`); translation and the launcher see an app's name,
colour and Chinese words (:class:`AppFace`). :class:`~darwin.envs.sim.phone.SimPhone` and
:class:`~darwin.envs.sim.apps.base.SimApp` implement them, and the modules that only read them
import this one instead, so the phone's modules import in one direction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from darwin.envs.sim.perturb import Perturbation


class AppFace(Protocol):
    """An app as the launcher and the translation see it."""

    @property
    def label(self) -> str:
        """Name on the launcher (``"Clock"``)."""
        ...

    @property
    def color(self) -> tuple[int, int, int]:
        """The launcher icon's colour."""
        ...

    @property
    def zh(self) -> Mapping[str, str]:
        """English UI string -> Simplified Chinese."""
        ...


class PhoneView(Protocol):
    """A phone as its apps, its renderer and its keyboard see it."""

    @property
    def state(self) -> dict[str, Any]:
        """The phone's JSON state (every app's part under ``state["apps"]``)."""
        ...

    @property
    def perturbation(self) -> Perturbation:
        """This phone's look: theme, wallpaper, accent, list orders."""
        ...

    @property
    def apps(self) -> Mapping[str, AppFace]:
        """The installed apps by id."""
        ...

    @property
    def foreground(self) -> str | None:
        """The app in front, or None on the launcher."""
        ...

    @property
    def dark(self) -> bool:
        """Whether the phone shows its dark theme."""
        ...

    def go_home(self, reset_app: bool = False) -> None:
        """Return to the launcher (``reset_app``: the foreground app back to its root screen)."""

    def key_press(self, key: str) -> None:
        """Press one key of the on-screen keyboard."""
