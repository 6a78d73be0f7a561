"""A small byte-level BPE tokenizer with Qwen2-VL's special tokens and chat template.

The tokenizer is a real :class:`transformers.Qwen2Tokenizer` (a ``PreTrainedTokenizerFast``
/ ``TokenizersBackend``) with Qwen2's pre-tokenizer (digits split one by one), NFC
normaliser and byte-level decoder; only its vocabulary is small. Its merges are learned
in-process from :mod:`darwin.models._corpus` (deterministic, about 0.2 s), so no hub
access is needed. Because the alphabet is all 256 bytes, *every* string round-trips
(non-ASCII costs one to four tokens per character). The special tokens follow the base
vocabulary in the order Qwen2-VL (and, with ``qwen2_5_vl``, Qwen2.5-VL) uses::

    >>> from darwin.models.tokenizer import build_tokenizer
    >>> tok = build_tokenizer("qwen2_vl", vocab_size=2000)
    >>> len(tok), tok.convert_tokens_to_ids("<|image_pad|>")
    (2000, 1998)
    >>> tok.decode(tok.encode("type(content='héllo 你好')"))
    "type(content='héllo 你好')"
"""

from __future__ import annotations

import json
import logging
from typing import cast

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AddedToken, PreTrainedTokenizerBase
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

from darwin.models._corpus import corpus
from darwin.models.tokens import (
    CHAT_TEMPLATE,
    MAX_BASE_VOCAB,
    QWEN2_VL_SPECIAL_TOKENS,
    Family,
    special_tokens_for,
)

logger = logging.getLogger(__name__)


def _train_bpe(base_vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Learn a byte-level BPE of exactly ``base_vocab_size`` tokens from the built-in corpus."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=base_vocab_size,
        min_frequency=1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    if len(vocab) != base_vocab_size:
        raise ValueError(
            f"vocab_size asks for {base_vocab_size} BPE tokens but the built-in corpus supports "
            f"only {len(vocab)}: lower vocab_size"
        )
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return vocab, merges


def build_tokenizer(family: Family, vocab_size: int) -> Qwen2Tokenizer:
    """Build a Qwen2-VL-style tokenizer of exactly ``vocab_size`` tokens (specials included).

    The base BPE takes ``vocab_size - len(special_tokens_for(family))`` ids, the special
    tokens the last ones in Qwen's order. ``eos`` is ``<|im_end|>`` (what an assistant
    turn ends with), ``pad`` is ``<|endoftext|>`` (as in Qwen2-VL), padding is on the left
    (batched generation) and the Qwen2-VL chat template is attached.
    """
    specials = special_tokens_for(family)
    base = vocab_size - len(specials)
    if not 256 <= base <= MAX_BASE_VOCAB:
        raise ValueError(
            f"vocab_size={vocab_size} leaves {base} ids for the base vocabulary, which must be "
            f"256 (one per byte) to {MAX_BASE_VOCAB} (the built-in corpus's merges), plus "
            f"{len(specials)} special tokens: choose vocab_size in "
            f"[{256 + len(specials)}, {MAX_BASE_VOCAB + len(specials)}]"
        )
    vocab, merges = _train_bpe(base)
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,  # type: ignore[arg-type]  # transformers annotates str | list[str]; it takes (a, b) pairs too
        unk_token=None,  # type: ignore[arg-type]  # transformers annotates str; None (no unk token) is accepted
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )
    # Qwen2Tokenizer registers its named special tokens (only <|endoftext|> so far) while
    # building; re-adding it is a no-op, so every token lands in Qwen's order after the
    # base vocabulary. eos becomes <|im_end|> only once it has its id.
    is_special = {t: t in QWEN2_VL_SPECIAL_TOKENS for t in specials}
    tok.add_tokens([AddedToken(t, special=is_special[t], normalized=False) for t in specials])
    tok.add_special_tokens({"extra_special_tokens": [t for t in QWEN2_VL_SPECIAL_TOKENS if t != "<|endoftext|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = CHAT_TEMPLATE
    check_special_token_ids(tok, family, base)
    return tok


def check_special_token_ids(tok: PreTrainedTokenizerBase, family: Family, first_id: int) -> None:
    """Raise if the special tokens do not sit at ``first_id, first_id+1, ...`` in Qwen order."""
    specials = special_tokens_for(family)
    got = cast(list[int], tok.convert_tokens_to_ids(list(specials)))  # a list in, a list out
    want = list(range(first_id, first_id + len(specials)))
    if got != want:
        raise RuntimeError(
            f"special token ids {dict(zip(specials, got, strict=True))} are not the expected {want}; "
            "this transformers version orders added tokens differently"
        )
    if len(tok) != first_id + len(specials):
        raise RuntimeError(f"tokenizer has {len(tok)} tokens, expected {first_id + len(specials)}")
