"""Stage-1 agent state (paper section 4): a sliding window over the most recent interactions.

The window shows the ``N`` most recent interactions as text (natural-language summaries
when the model writes them, e.g. UI-TARS's ``Thought``; the raw actions otherwise) and
keeps the screenshots of only the most recent ones: the *image depth* ``K`` counts every
screenshot in the prompt, the current one included (paper, Table 1: ``K = 1``, i.e. the
current screen only). A prompt-token budget drops the oldest interactions first.

    >>> from darwin.memory.sliding_window import SlidingWindowMemory
    >>> memory = SlidingWindowMemory(max_interactions=4, image_depth=2, max_prompt_tokens=8192)
    >>> memory.config.past_images
    1
    >>> memory.select(list(range(10)))      # any sequence; agents pass transitions
    [6, 7, 8, 9]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from darwin.memory.base import (
    Memory,
    MemoryEntry,
    MemoryWindow,
    Render,
    approx_token_count,
    default_render,
)
from darwin.types import Transition

TokenCounter = Callable[[str], int]
"""Maps text to an (approximate) token count; plug in a real tokenizer with
:func:`tokenizer_counter`."""


def tokenizer_counter(tokenizer: object) -> TokenCounter:
    """Exact counts from a Hugging Face tokenizer (anything with ``encode(text, add_special_tokens=...)``)."""
    encode = getattr(tokenizer, "encode", None)
    if not callable(encode):
        raise TypeError(f"{type(tokenizer).__name__} has no encode(); pass a Hugging Face tokenizer")

    def count(text: str) -> int:
        return len(encode(text, add_special_tokens=False))

    return count


class SlidingWindowConfig(BaseModel):
    """Settings of :class:`SlidingWindowMemory` (validated when built)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_interactions: int = Field(
        8, ge=0, le=1024, description="N: most recent interactions shown in the prompt (0 = none)"
    )
    image_depth: int = Field(
        1,
        ge=1,
        le=64,
        description="K: screenshots in the prompt including the current one (paper: 1 = current screen only)",
    )
    use_summaries: bool = Field(
        True,
        description="show the model's natural-language summaries when its format has them, else raw actions",
    )
    max_prompt_tokens: int | None = Field(
        8192,
        ge=1,
        description="prompt budget in tokens (paper: 8192); the oldest interactions are dropped first; None = unbounded",
    )
    entry_overhead_tokens: int = Field(
        4, ge=0, description="tokens each shown interaction adds for chat formatting (role markers, separators)"
    )

    @property
    def past_images(self) -> int:
        """Screenshots of past steps shown (``image_depth - 1``)."""
        return self.image_depth - 1


class SlidingWindowMemory(Memory):
    """The ``N`` most recent interactions, the last ``K - 1`` of them with their screenshots.

    Configure with a :class:`SlidingWindowConfig` or its fields as keyword arguments;
    ``token_counter`` is any ``str -> int`` (default :func:`approx_token_count`). The memory
    keeps no state of its own: the window is a pure function of the history, so resuming
    or replaying an episode gives the same prompts.
    """

    def __init__(
        self,
        config: SlidingWindowConfig | None = None,
        token_counter: TokenCounter | None = None,
        **overrides: object,
    ) -> None:
        if config is not None and overrides:
            raise TypeError("pass either a SlidingWindowConfig or keyword overrides, not both")
        self.config = config if config is not None else SlidingWindowConfig.model_validate(overrides)
        self.token_counter: TokenCounter = token_counter or approx_token_count

    def count_tokens(self, text: str) -> int:
        return self.token_counter(text)

    def select(self, history: Sequence[Transition]) -> list[Transition]:
        n = self.config.max_interactions
        return list(history[-n:]) if n > 0 else []

    def window(
        self,
        history: Sequence[Transition],
        render: Render = default_render,
        *,
        reserved_tokens: int = 0,
        image_tokens: int = 0,
    ) -> MemoryWindow:
        cfg = self.config
        selected = self.select(history)
        first_image = len(selected) - cfg.past_images
        entries: list[MemoryEntry] = []
        for i, t in enumerate(selected):
            item = render(t)
            text = item.summary if (cfg.use_summaries and item.summary) else item.action
            image = t.observation.screenshot if i >= first_image else None
            tokens = self.count_tokens(text) + cfg.entry_overhead_tokens + (image_tokens if image is not None else 0)
            entries.append(MemoryEntry(transition=t, text=text, item=item, image=image, tokens=tokens))
        dropped = 0
        total = sum(e.tokens for e in entries)
        if cfg.max_prompt_tokens is not None:
            available = cfg.max_prompt_tokens - reserved_tokens
            while entries and total > available:
                total -= entries.pop(0).tokens
                dropped += 1
        return MemoryWindow(
            entries=tuple(entries),
            omitted=len(history) - len(selected),
            dropped=dropped,
            tokens=total,
        )


__all__ = [
    "SlidingWindowConfig",
    "SlidingWindowMemory",
    "TokenCounter",
    "tokenizer_counter",
]
