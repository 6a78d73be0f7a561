"""What a served phone is to the fake adbd: the :class:`DeviceBackend` protocol, its results, the
records of what it received, and the faults a hook may raise (part of :mod:`darwin.envs.sim.adbd`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from darwin.envs.sim.adbd_wire import _split_service

# --------------------------------------------------------------------------------------
# Public data types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShellResult:
    """What one simple command produced on the device.

    ``exit_code`` is reduced to 0..255 (``& 0xFF``) as a real shell does.
    """

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


@runtime_checkable
class DeviceBackend(Protocol):
    """The phone behind an :class:`AdbdServer`.

    ``serial_props`` fills the CNXN banner (``ro.product.name``, ``ro.product.model``,
    ``ro.product.device``; defaults are used for missing keys). ``run`` executes one simple
    command and blocks as long as it likes: the server calls it in a worker thread of its
    own pool, so several calls for one device may run concurrently (make ``run``
    thread-safe or build the server with ``max_workers=1``). ``raw_command`` is the full
    command string as received (it may hold several simple commands joined by ``;``).
    Raising is allowed: the client sees exit code :data:`BACKEND_ERROR_EXIT_CODE` and the
    error on stderr, and the server logs the traceback. Unknown commands should return
    exit code 127 as ``sh`` does. The builtins ``echo``, ``true``, ``false`` and ``:`` never
    reach the backend.

    Example::

        class Echo:
            serial_props = {"ro.product.model": "Echo"}

            def run(self, argv: list[str], raw_command: str) -> ShellResult:
                return ShellResult(stdout=" ".join(argv[1:]).encode() + b"\\n")
    """

    serial_props: dict[str, str]

    def run(self, argv: list[str], raw_command: str) -> ShellResult: ...


@dataclass
class CommandRecord:
    """One service command as the device received it (see :attr:`AdbdServer.command_log`).

    Attributes:
        service: the service prefix exactly as received, e.g. ``"shell,v2,raw"``,
            ``"shell"`` or ``"exec"``.
        command: the command string exactly as received (UTF-8, undecodable bytes kept
            as surrogate escapes).
        argv: argv of the first simple command as parsed (``()`` if the command is empty
            or could not be parsed).
        executed: argv of every simple command handed to the backend, in order (``$?``
            expanded); filled while the command runs.
        exit_code: the exit status sent to the client, ``None`` while running or when the
            stream ended without one (closed by the client, dropped by a hook).
        error: why the command failed inside the server (syntax error, backend exception,
            closed by the client), else ``None``.
        received_at: ``time.time()`` when the OPEN arrived.
    """

    service: str
    command: str
    argv: tuple[str, ...] = ()
    executed: list[tuple[str, ...]] = field(default_factory=list)
    exit_code: int | None = None
    error: str | None = None
    received_at: float = field(default_factory=time.time)

    @property
    def shell_v2(self) -> bool:
        """Whether the command came over the shell v2 protocol."""
        name, args = _split_service(self.service)
        return name == "shell" and "v2" in args


class DropConnection(Exception):  # noqa: N818 - a control signal, not an error
    """Raise from a ``before_command`` hook to drop the whole TCP connection abruptly.

    A backend's ``run`` may raise it too: the command's effect stays, the connection is
    cut before any output or exit code is sent (the client never learns the outcome).
    """


class CloseStream(Exception):  # noqa: N818 - a control signal, not an error
    """Raise from a ``before_command`` hook to refuse the stream (CLSE, no output)."""


#: ``async def hook(service: str, command: str) -> None``, awaited after an OPEN arrives
#: and before it is answered. It may sleep (a slow device; sleeping forever models a
#: device that never answers OPEN), raise :class:`DropConnection` or
#: :class:`CloseStream`, or raise anything else (the command then fails with
#: :data:`BACKEND_ERROR_EXIT_CODE` and the error on stderr).
BeforeCommandHook = Callable[[str, str], Awaitable[None]]
