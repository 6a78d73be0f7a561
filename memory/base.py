"""Memory modules hold the agent state between steps (the paper's context processing).

An agent asks its memory which past interactions and images to put in the prompt.

    >>> from darwin.memory.base import Memory
    >>> class LastOnly(Memory):
    ...     def select(self, history):
    ...         return list(history[-1:])
    >>> LastOnly().select([1, 2, 3])
    [3]

Agents call :meth:`Memory.window`, which returns the selected interactions already
rendered as text (by the agent's ``render`` callable: its own history format) and says
which of them keep their screenshot. A memory that only implements :meth:`Memory.select`
gets text-only history; :class:`darwin.memory.sliding_window.SlidingWindowMemory` adds an image depth and
a prompt-token budget. A window may also carry *notes* (knowledge about the app, summaries
of earlier episodes or of the older steps of this one, from
:class:`darwin.memory.llm.LLMMemoryManager`), which agents show before the history as a
:func:`format_notes` block; memories without notes leave them empty and the prompt unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from darwin.actions import action_to_json
from darwin.types import Task, Trajectory, Transition


@dataclass(frozen=True)
class HistoryItem:
    """How one past step reads in a prompt, in the agent's own format.

    ``action`` is the raw action as the model writes it (always present); ``summary`` is a
    natural-language account when the model's format produces one (UI-TARS's ``Thought``,
    Qwen3-VL's ``Action:`` line), else ``None``.
    """

    action: str
    summary: str | None = None


Render = Callable[[Transition], HistoryItem]
"""An agent's renderer of one past transition."""


def approx_token_count(text: str) -> int:
    """A tokenizer-free estimate: ~4 ASCII characters per token, one token per other character.

    Byte-level BPEs (Qwen, GPT) average 3.5-4.5 characters per token on English and about
    one token per CJK character; this errs on the high side for code-like text.

    >>> approx_token_count("click(start_box='(10,20)')"), approx_token_count("打开设置")
    (7, 4)
    """
    ascii_chars = sum(1 for c in text if c < "\x80")
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


NOTES_OVERHEAD_TOKENS = 2
"""Tokens of the separators around a notes block in a prompt (a newline before and after)."""


def format_notes(notes: Sequence[str]) -> str:
    r"""The notes block agents put before the history: ``Notes:`` then one ``- note`` line each
    (whitespace inside a note collapsed, so every note stays on one line); ``""`` for none.

    >>> print(format_notes(["Dark theme is under Display.", "Alarms:\n  the + button adds one"]))
    Notes:
    - Dark theme is under Display.
    - Alarms: the + button adds one
    >>> format_notes([])
    ''
    """
    if not notes:
        return ""
    return "Notes:\n" + "\n".join(f"- {' '.join(note.split())}" for note in notes)


def default_render(transition: Transition) -> HistoryItem:
    """Format-neutral rendering: the action's JSON (or the parse error) and any ``Thought:``."""
    decision = transition.decision
    if decision.action is not None:
        action = action_to_json(decision.action)
    else:
        reason = decision.parse_error.reason if decision.parse_error is not None else "no action"
        action = f"invalid output ({reason})"
    summary = None
    if decision.generation is not None:
        text = decision.generation.text
        i = text.find("Thought:")
        if i >= 0:
            rest = text[i + len("Thought:") : i + 2000]
            j = rest.find("Action:")
            summary = (rest if j < 0 else rest[:j]).strip() or None
    return HistoryItem(action=action, summary=summary)


@dataclass(frozen=True)
class MemoryEntry:
    """One past interaction as it goes into the prompt."""

    transition: Transition = field(repr=False)
    text: str
    """The rendered history text (a summary or the raw action, per the memory's settings)."""
    item: HistoryItem
    """Both renderings, for agents whose format shows them together."""
    image: np.ndarray | None = field(default=None, repr=False)
    """The screenshot the agent saw at that step, when within the memory's image depth."""
    tokens: int = 0
    """Estimated prompt tokens of this entry (text and image)."""

    @property
    def step(self) -> int:
        return self.transition.step


@dataclass(frozen=True)
class MemoryWindow:
    """What of the history one prompt shows: entries oldest first, plus what was left out."""

    entries: tuple[MemoryEntry, ...] = ()
    omitted: int = 0
    """Older interactions outside the window (not selected)."""
    dropped: int = 0
    """Selected interactions dropped (oldest first) to keep the prompt within its token budget."""
    tokens: int = 0
    """Estimated tokens of the entries shown (and of the notes, see :attr:`notes_tokens`)."""
    notes: tuple[str, ...] = ()
    """Knowledge and summaries to show before the history (one line each, most relevant
    first); agents render them with :func:`format_notes`. Empty for memories without any."""
    notes_tokens: int = 0
    """Estimated tokens of ``format_notes(notes)`` plus :data:`NOTES_OVERHEAD_TOKENS`; a memory
    that fills :attr:`notes` counts them against its budget itself (agents reserve only the
    rest of the prompt)."""

    @property
    def images(self) -> list[np.ndarray]:
        """The past screenshots shown, oldest first."""
        return [e.image for e in self.entries if e.image is not None]


class Memory(ABC):
    """Chooses what of the episode history goes into the next prompt."""

    @abstractmethod
    def select(self, history: Sequence[Transition]) -> list[Transition]:
        """The past transitions to show, oldest first."""

    def reset(self) -> None:
        """Forget per-episode state (called when an episode starts)."""

    def start_episode(self, task: Task | None = None) -> None:
        """An episode of ``task`` starts (the agent calls it; default: :meth:`reset`).

        Memories that keep knowledge across episodes retrieve what concerns ``task`` here.
        """
        self.reset()

    async def observe(self, history: Sequence[Transition]) -> None:
        """Called before each prompt is built, with the episode so far (default: nothing).

        The place for work a memory must await, e.g. asking a model to update a running
        summary; :meth:`window` itself stays synchronous.
        """

    async def end_episode(self, trajectory: Trajectory) -> None:
        """Called once an episode has ended, with its whole trajectory (default: nothing).

        Memories that learn across episodes distil and store the episode here.
        """

    def count_tokens(self, text: str) -> int:
        """Estimated prompt tokens of ``text`` (agents use it for the fixed part of a prompt)."""
        return approx_token_count(text)

    def close(self) -> None:
        """Release what the memory holds open (database connections, threads); default: nothing.

        Called once, when the actor pool that made the memory closes; it must be safe to call twice.
        """

    def window(
        self,
        history: Sequence[Transition],
        render: Render = default_render,
        *,
        reserved_tokens: int = 0,
        image_tokens: int = 0,
    ) -> MemoryWindow:
        """The selected interactions rendered for a prompt.

        ``reserved_tokens`` (the rest of the prompt) and ``image_tokens`` (one screenshot)
        let budgeted memories fit the prompt limit; this default shows :meth:`select`'s
        transitions as text (summaries when the renderer gives them) with no past images.
        """
        selected = self.select(history)
        entries = []
        for t in selected:
            item = render(t)
            entries.append(MemoryEntry(transition=t, text=item.summary or item.action, item=item))
        return MemoryWindow(entries=tuple(entries), omitted=max(0, len(history) - len(selected)))
