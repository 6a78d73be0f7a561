"""The POSIX ``sh`` subset the fake adbd understands: splitting a command string into simple
commands and argv (:func:`parse_command`; part of :mod:`darwin.envs.sim.adbd`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# --------------------------------------------------------------------------------------
# POSIX sh subset: command splitting
# --------------------------------------------------------------------------------------


class ShellSyntaxError(ValueError):
    """A command string uses shell syntax this server does not implement, or is invalid."""


class _LastStatus:
    """Placeholder for ``$?`` inside a word."""

    def __repr__(self) -> str:
        return "$?"


_STATUS = _LastStatus()
_WordPart = str | _LastStatus


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command of a command list.

    ``connector`` is the operator before it (``";"`` for the first one, ``"&&"`` or
    ``"||"``); ``words`` hold literal text and ``$?`` placeholders, see :meth:`argv`.
    """

    connector: str
    words: tuple[tuple[_WordPart, ...], ...]

    def argv(self, last_status: int = 0) -> list[str]:
        """The argv with ``$?`` replaced by ``last_status``."""
        return [
            "".join(str(last_status) if part is _STATUS else part for part in word)  # type: ignore[misc]  # mypy does not narrow str | _LastStatus on `is _STATUS`
            for word in self.words
        ]


_RESERVED_WORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until"}
    | {"for", "in", "{", "}", "!", "[[", "]]", "function", "select"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SPECIAL_PARAM = set("@*#$!-0123456789")
_DQ_ESCAPABLE = set('$`"\\')


def parse_command(command: str) -> list[SimpleCommand]:
    """Split a command string into simple commands with POSIX ``sh`` quoting rules.

    Supported: blanks, single quotes, double quotes (with ``\\$ \\` \\" \\\\`` escapes),
    backslash escapes and line continuations, ``#`` comments, ``;``, newlines, ``&&``,
    ``||`` and ``$?``. Anything that would need a real shell (pipes, ``&``, redirections,
    subshells, ``$VAR``, command substitution, keywords, leading ``VAR=value``) raises
    :class:`ShellSyntaxError`; unquoted glob characters and ``~`` stay literal.
    ``parse_command(" ".join(map(shlex.quote, argv)))[0].argv() == argv`` for any argv.

    >>> [c.argv() for c in parse_command("input text 'a b'; echo \\"x\\"$?")]
    [['input', 'text', 'a b'], ['echo', 'x0']]
    """
    commands: list[SimpleCommand] = []
    words: list[tuple[_WordPart, ...]] = []
    quoted_flags: list[bool] = []
    parts: list[_WordPart] | None = None  # the word being built, None between words
    quoted = False
    connector = ";"
    awaiting_command = False  # after && or ||: a command must follow
    i = 0
    n = len(command)

    def unsupported(what: str) -> ShellSyntaxError:
        return ShellSyntaxError(
            f"{what} at offset {i} of {command!r} is not supported by the darwin adbd "
            "shell (only simple commands joined by ';', '&&', '||' or newlines, "
            "with quoting and $?)"
        )

    def start_word() -> list[_WordPart]:
        nonlocal parts
        if parts is None:
            parts = []
        return parts

    def end_word() -> None:
        nonlocal parts, quoted
        if parts is not None:
            words.append(tuple(parts))
            quoted_flags.append(quoted)
            parts = None
            quoted = False

    def end_command(operator: str) -> None:
        nonlocal connector, awaiting_command
        end_word()
        if words:
            _check_command_words(words, quoted_flags, command)
            commands.append(SimpleCommand(connector, tuple(words)))
            words.clear()
            quoted_flags.clear()
            connector = ";" if operator == "\n" else operator
            awaiting_command = operator in ("&&", "||")
        elif operator == "\n":
            return  # blank line; a pending && / || keeps waiting for its command
        else:
            raise ShellSyntaxError(f"syntax error: unexpected {operator!r} at offset {i} of {command!r}")

    def dollar(target: list[_WordPart]) -> int:
        """Handle a '$' at ``i``; return how many characters were consumed."""
        nxt = command[i + 1] if i + 1 < n else ""
        if nxt == "?":
            target.append(_STATUS)
            return 2
        if nxt and (nxt.isalnum() or nxt == "_" or nxt in "{(" or nxt in _SPECIAL_PARAM):
            raise unsupported(f"expansion '${nxt}'")
        target.append("$")  # a lone '$' is literal in sh
        return 1

    while i < n:
        ch = command[i]
        if ch in " \t":
            end_word()
            i += 1
        elif ch == "\n":
            end_command("\n")
            i += 1
        elif ch == "#" and parts is None:
            while i < n and command[i] != "\n":
                i += 1
        elif ch == "\\":
            if i + 1 < n and command[i + 1] == "\n":
                i += 2  # line continuation
            elif i + 1 < n:
                start_word().append(command[i + 1])
                quoted = True
                i += 2
            else:
                start_word().append("\\")
                i += 1
        elif ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError(f"unterminated single quote at offset {i} of {command!r}")
            start_word().append(command[i + 1 : end])
            quoted = True
            i = end + 1
        elif ch == '"':
            word = start_word()
            quoted = True
            i += 1
            while True:
                if i >= n:
                    raise ShellSyntaxError(f"unterminated double quote in {command!r}")
                c = command[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and command[i + 1] in _DQ_ESCAPABLE:
                    word.append(command[i + 1])
                    i += 2
                elif c == "\\" and i + 1 < n and command[i + 1] == "\n":
                    i += 2
                elif c == "$":
                    i += dollar(word)
                elif c == "`":
                    raise unsupported("command substitution '`'")
                else:
                    word.append(c)
                    i += 1
        elif ch == "$":
            i += dollar(start_word())
        elif ch == "`":
            raise unsupported("command substitution '`'")
        elif ch == ";":
            if command.startswith(";;", i):
                raise unsupported("';;'")
            end_command(";")
            i += 1
        elif ch == "&":
            if command.startswith("&&", i):
                end_command("&&")
                i += 2
            else:
                raise unsupported("background job '&'")
        elif ch == "|":
            if command.startswith("||", i):
                end_command("||")
                i += 2
            else:
                raise unsupported("pipe '|'")
        elif ch in "<>":
            raise unsupported(f"redirection {ch!r}")
        elif ch in "()":
            raise unsupported(f"subshell {ch!r}")
        else:
            start_word().append(ch)
            i += 1
    end_word()
    if words:
        end_command(";")
    elif awaiting_command:
        raise ShellSyntaxError(f"syntax error: {command!r} ends with {connector!r}")
    return commands


def _check_command_words(words: Sequence[tuple[_WordPart, ...]], quoted_flags: Sequence[bool], command: str) -> None:
    first = words[0]
    if quoted_flags[0] or not all(isinstance(p, str) for p in first):
        return
    text = "".join(first)  # type: ignore[arg-type]  # every part is a str: checked above (all() does not narrow)
    if text in _RESERVED_WORDS:
        raise ShellSyntaxError(f"shell keyword {text!r} in {command!r} is not supported by the darwin adbd shell")
    if _ASSIGNMENT.match(text):
        raise ShellSyntaxError(
            f"variable assignment {text!r} in {command!r} is not supported by the darwin "
            "adbd shell (quote the word if it is a command name)"
        )
