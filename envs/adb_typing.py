"""Typing over ADB, byte-exact: the ``input text`` / ``input keyevent`` / ADBKeyboard commands that
type a string (:func:`type_commands`; part of :mod:`darwin.envs.adb`).
"""

from __future__ import annotations

import base64
import re

KEYCODE_ENTER = 66


_PRINTABLE_ASCII = re.compile(r"^[\x20-\x7e]*$")


# ======================================================================================
# Typing
# ======================================================================================


def _input_text_chunks(text: str, max_chars: int) -> list[str]:
    """Printable-ASCII ``text`` as ``input text`` arguments that type it exactly.

    Spaces become ``%s``; a literal ``%`` followed by ``s`` is split across two
    arguments (Android would turn ``%s`` into a space, and ``input text`` has no escape).
    """
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for i, ch in enumerate(text):
        piece = "%s" if ch == " " else ch
        if size + len(piece) > max_chars:
            chunks.append("".join(current))
            current, size = [], 0
        current.append(piece)
        size += len(piece)
        if ch == "%" and i + 1 < len(text) and text[i + 1] == "s":
            chunks.append("".join(current))
            current, size = [], 0
    if current:
        chunks.append("".join(current))
    return chunks


def type_commands(content: str, max_chars: int = 200, ime_for_ascii: bool = False) -> list[list[str]]:
    """The argv lists that type ``content`` into the focused field, byte-exact.

    Lines are separated by ``input keyevent 66`` (ENTER: a new line in a multi-line
    field, submit in a single-line one). A line of printable ASCII is typed with
    ``input text``; any other line (tabs, CJK, emoji, control characters) is committed
    by the ADBKeyboard IME from a base64 payload.

    >>> type_commands("50%s off\\n")
    [['input', 'text', '50%'], ['input', 'text', 's%soff'], ['input', 'keyevent', '66']]
    >>> type_commands("中文")
    [['am', 'broadcast', '-a', 'ADB_INPUT_B64', '--es', 'msg', '5Lit5paH']]
    """
    commands: list[list[str]] = []
    for i, line in enumerate(content.split("\n")):
        if i > 0:
            commands.append(["input", "keyevent", str(KEYCODE_ENTER)])
        if not line:
            continue
        if _PRINTABLE_ASCII.match(line) and not ime_for_ascii:
            commands.extend(["input", "text", chunk] for chunk in _input_text_chunks(line, max_chars))
        else:
            payload = base64.b64encode(line.encode("utf-8")).decode("ascii")
            commands.append(["am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", payload])
    return commands
