"""Scoring maths shared by the sampler (:class:`~darwin.policies.hf.HFPolicy`) and the
learner: chat messages of a prompt, M-RoPE positions, the forbidden-token mask, masked
log-softmax and teacher-forced response log-probs. Living here, the learner and the
policy compute log-probs with one piece of code and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from darwin.types import Prompt

__all__ = [
    "MIN_SHARED_PREFIX",
    "ResponseBatch",
    "SharedPrefix",
    "compute_response_logprobs",
    "forbidden_mask",
    "forward_batch",
    "masked_log_softmax",
    "prompt_to_messages",
    "response_batch",
    "response_nll",
    "rope_index",
    "shared_prefix_length",
]


def prompt_to_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """A :class:`Prompt` in transformers' chat format (images first in each message).

    >>> from darwin.types import ChatMessage, Prompt
    >>> prompt_to_messages(Prompt(messages=(ChatMessage(role="user", text="hi"),)))
    [{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}]
    """
    if not prompt.messages:
        raise ValueError("a Prompt needs at least one message")
    out: list[dict[str, Any]] = []
    for message in prompt.messages:
        content: list[dict[str, Any]] = [{"type": "image", "image": img} for img in message.images]
        if message.text:
            content.append({"type": "text", "text": message.text})
        out.append({"role": message.role, "content": content})
    return out


def rope_index(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mm_token_type_ids: torch.Tensor,
    image_grid_thw: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """M-RoPE positions ``(3, B, L)`` and deltas ``(B, 1)`` of a left- or right-padded batch.

    Calls the model's own ``get_rope_index`` but never stores ``rope_deltas`` on the model
    (pitfall 8): positions are passed explicitly to every forward.
    """
    base = getattr(model, "model", model)
    fn = getattr(base, "get_rope_index", None)
    if fn is None:
        raise TypeError(f"{type(model).__name__} has no get_rope_index; HFPolicy needs a Qwen2-VL-family model")
    positions, deltas = fn(
        input_ids,
        mm_token_type_ids=mm_token_type_ids,
        image_grid_thw=image_grid_thw,
        attention_mask=attention_mask,
    )
    return positions, deltas.to(input_ids.device).view(-1, 1)


MIN_SHARED_PREFIX = 8
"""Shorter common prompt prefixes are not shared: their own forward would cost more than it saves."""


@dataclass(frozen=True)
class SharedPrefix:
    """The text every prompt of a batch starts with (a system turn), run once for the whole
    batch by :func:`forward_batch` and its keys and values repeated for every row.

    Attributes:
        input_ids: ``(1, S)`` its tokens.
        position_ids: ``(3, 1, S)`` its M-RoPE positions (text: the three rows are equal).
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor


@dataclass(frozen=True)
class ResponseBatch:
    """Prompt + response sequences ready for one forward (layout: ``[left-padded prompt |
    right-padded response]``; position ``P - 1 + k`` predicts response token ``k``).

    With a shared prefix of ``S`` tokens, the rows hold what follows it (``[prefix (in the
    cache) | pads | rest of the prompt | response]``), ``P`` is the padded prompt length less
    ``S`` and ``attention_mask`` covers the prefix too (``S + P + R``).

    Attributes:
        model_inputs: keyword arguments of the model's forward: ``attention_mask``,
            ``position_ids`` ``(3, B, P + R)`` and either ``input_ids``, ``mm_token_type_ids``,
            ``pixel_values`` and ``image_grid_thw`` (the vision tower runs) or ``inputs_embeds``
            ``(B, P + R, H)`` with the precomputed image features scattered in (it does not).
        responses: ``(B, R)`` response ids, 0 on padding.
        response_mask: ``(B, R)`` bool, True on response tokens.
        prompt_length: ``P``.
        prefix: the shared prefix :func:`forward_batch` runs first (``None``: not shared).
    """

    model_inputs: dict[str, torch.Tensor | None]
    responses: torch.Tensor
    response_mask: torch.Tensor
    prompt_length: int
    prefix: SharedPrefix | None = None


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor) -> int:
    """How many leading text tokens all left-padded prompts ``(B, P)`` have in common, at most
    each prompt's length less one (its last token predicts the first response token).

    >>> ids = torch.tensor([[0, 5, 6, 7, 8], [5, 6, 7, 9, 9]])
    >>> mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    >>> shared_prefix_length(ids, mask, torch.zeros_like(ids))
    3
    """
    lengths = attention_mask.sum(dim=1)
    pads = input_ids.shape[1] - lengths
    cols = torch.arange(int(lengths.min()) - 1, device=input_ids.device)
    index = pads[:, None] + cols[None, :]
    tokens = input_ids.gather(1, index)
    text = (mm_token_type_ids.gather(1, index) == 0).all(dim=0)
    same = (tokens == tokens[:1]).all(dim=0) & text
    return int(same.long().cumprod(dim=0).sum())


def response_batch(
    model: nn.Module,
    inputs: Mapping[str, torch.Tensor],
    response_ids: Sequence[Sequence[int]],
    *,
    share_prefix: bool = False,
) -> ResponseBatch:
    """Append right-padded responses to the left-padded prompts ``inputs`` (responses are
    text: modality 0) and build the forward's inputs.

    ``share_prefix``: when the prompts start with the same text of at least
    :data:`MIN_SHARED_PREFIX` tokens (the agent's system turn), take it out of the rows as a
    :class:`SharedPrefix`; :func:`forward_batch` then runs it once instead of once per row. The
    rows' positions are those of the full prompts, so the scores are the same.

    Two optional keys of ``inputs`` skip work that does not change between forwards:
    ``position_ids`` ``(3, B, P)``, the prompts' M-RoPE positions (pads 1, as
    ``get_rope_index`` writes them): the response continues the text positions at the
    prompt's largest position + 1, as ``get_rope_index`` would number it; and
    ``image_embeds`` ``(image tokens, H)``, the vision tower's output for the prompts'
    images in row order: scattered into the token embeddings in place of running the
    tower (a frozen tower gives the same features on every pass).
    """
    ids = inputs["input_ids"]
    batch, prompt_len = ids.shape
    if len(response_ids) != batch:
        raise ValueError(f"{batch} prompts but {len(response_ids)} responses")
    longest = max((len(r) for r in response_ids), default=0)
    if longest == 0:
        raise ValueError("every response needs at least one token")
    resp = torch.zeros(batch, longest, dtype=ids.dtype, device=ids.device)
    resp_mask = torch.zeros(batch, longest, dtype=inputs["attention_mask"].dtype, device=ids.device)
    for row, r in enumerate(response_ids):
        if len(r):
            resp[row, : len(r)] = torch.as_tensor(list(r), dtype=ids.dtype, device=ids.device)
            resp_mask[row, : len(r)] = 1
    full_ids = torch.cat([ids, resp], dim=1)
    full_mask = torch.cat([inputs["attention_mask"], resp_mask], dim=1)
    full_mm = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(resp)], dim=1)
    prompt_positions = inputs.get("position_ids")
    if prompt_positions is not None:
        # Left padding puts every prompt's last token at P - 1; text after it counts on.
        first = prompt_positions[:, :, -1].amax(dim=0) + 1
        steps = torch.arange(longest, device=ids.device, dtype=prompt_positions.dtype)
        resp_positions = (first[:, None] + steps[None, :]).masked_fill(resp_mask == 0, 1)
        positions = torch.cat([prompt_positions, resp_positions.unsqueeze(0).expand(3, -1, -1)], dim=2)
    else:
        positions, _ = rope_index(model, full_ids, full_mask, full_mm, inputs.get("image_grid_thw"))
    attention = full_mask
    prefix = None
    # One row has nobody to share with: its prefix would run once either way.
    share = share_prefix and batch > 1
    shared = shared_prefix_length(ids, inputs["attention_mask"], inputs["mm_token_type_ids"]) if share else 0
    if shared >= MIN_SHARED_PREFIX:
        # Each row without its prefix: [pads | prefix | rest] -> [pads | rest], pads staying
        # in front, so the prefix's keys and values can come first for every row.
        pads = prompt_len - inputs["attention_mask"].sum(dim=1)
        cols = torch.arange(full_ids.shape[1] - shared, device=ids.device)
        index = cols[None, :] + shared * (cols[None, :] >= pads[:, None])
        start = int(pads[0])
        prefix = SharedPrefix(full_ids[:1, start : start + shared], positions[:, :1, start : start + shared])
        full_ids, full_mask, full_mm = (t.gather(1, index) for t in (full_ids, full_mask, full_mm))
        positions = positions.gather(2, index.unsqueeze(0).expand(positions.shape[0], -1, -1))
        attention = torch.cat([full_mask.new_ones(batch, shared), full_mask], dim=1)
    model_inputs: dict[str, torch.Tensor | None] = {"attention_mask": attention, "position_ids": positions}
    image_embeds = inputs.get("image_embeds")
    if image_embeds is not None:
        hf: Any = model  # a Hugging Face model or backbone: get_input_embeddings and config are its own
        embeds = hf.get_input_embeddings()(full_ids)
        image_mask = full_ids == int(hf.config.image_token_id)
        if int(image_mask.sum()) != image_embeds.shape[0]:
            raise ValueError(
                f"{int(image_mask.sum())} image placeholder tokens but {image_embeds.shape[0]} precomputed "
                "image features; the features must be the prompts' images in row order"
            )
        model_inputs["inputs_embeds"] = embeds.masked_scatter(image_mask.unsqueeze(-1), image_embeds.to(embeds.dtype))
    else:
        model_inputs.update(
            input_ids=full_ids,
            mm_token_type_ids=full_mm,
            pixel_values=inputs.get("pixel_values"),
            image_grid_thw=inputs.get("image_grid_thw"),
        )
    return ResponseBatch(
        model_inputs=model_inputs,
        responses=resp,
        response_mask=resp_mask.bool(),
        prompt_length=prompt_len - (0 if prefix is None else shared),
        prefix=prefix,
    )


def forward_batch(model: nn.Module, seq: ResponseBatch, **kwargs: Any) -> Any:
    """``model(**seq.model_inputs, use_cache=False, **kwargs)``; with a shared prefix, its
    keys and values are computed first, once (gradients flow through them), and repeated for
    every row. ``model`` is a ``*ForConditionalGeneration`` or its backbone."""
    if seq.prefix is None:
        return model(**seq.model_inputs, use_cache=False, **kwargs)
    backbone: Any = getattr(model, "model", model)  # a Hugging Face backbone: language_model and get_input_embeddings
    prefix_ids = seq.prefix.input_ids
    out = backbone.language_model(
        inputs_embeds=backbone.get_input_embeddings()(prefix_ids),
        attention_mask=torch.ones_like(prefix_ids),
        position_ids=seq.prefix.position_ids,
        use_cache=True,
    )
    cache = out.past_key_values
    cache.batch_repeat_interleave(seq.responses.shape[0])
    return model(**seq.model_inputs, past_key_values=cache, use_cache=False, **kwargs)


def forbidden_mask(ids: Iterable[int], vocab_size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A ``(vocab_size,)`` bool tensor, True at the ids a policy must never sample."""
    mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    idx = sorted(int(i) for i in ids)
    if idx and (idx[0] < 0 or idx[-1] >= vocab_size):
        raise ValueError(f"forbidden token ids must lie in [0, {vocab_size}); got {idx[0]}..{idx[-1]}")
    if idx:
        mask[torch.tensor(idx, device=device)] = True
    return mask


def masked_log_softmax(logits: torch.Tensor, forbidden: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log_softmax((logits + m) / temperature)`` in float32, ``m = -inf`` on ``forbidden``."""
    masked = logits.float().masked_fill(forbidden, float("-inf"))
    return torch.log_softmax(masked / temperature, dim=-1)


def compute_response_logprobs(
    model: PreTrainedModel,
    inputs: Mapping[str, torch.Tensor],
    response_ids: Sequence[Sequence[int]],
    *,
    forbidden: torch.Tensor,
    temperature: float = 1.0,
    share_prefix: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced log-probs of ``response_ids`` after left-padded prompts ``inputs``.

    ``inputs`` is a batch from :meth:`HFPolicy.build_inputs` (``input_ids``,
    ``attention_mask``, ``mm_token_type_ids``, optionally ``pixel_values`` and
    ``image_grid_thw``; the learner adds precomputed ``position_ids`` and ``image_embeds``:
    :func:`response_batch`). Responses are appended on the right (right-padded), positions come
    from the model's ``get_rope_index`` over the real tokens, and one forward computes
    logits only for the response positions. Returns ``(logprobs, mask)``, both ``(B, R)``
    with ``R`` the longest response; padded entries are 0 in both. Gradients flow when
    enabled: the learner calls this inside its training step with the same ``forbidden``
    mask and ``temperature`` the policy recorded with. A forbidden token in a response
    scores ``-inf``; vision placeholders (``<|image_pad|>``, ``<|video_pad|>``) cannot be
    fed back to the model at all and raise ``ValueError``. ``share_prefix``: the prompts'
    common system turn runs once for the batch (:func:`response_batch`).
    """
    ids = inputs["input_ids"]
    device = ids.device
    batch, _ = ids.shape
    if len(response_ids) != batch:
        raise ValueError(f"{batch} prompts but {len(response_ids)} responses")
    placeholders = {
        int(t)
        for t in (getattr(model.config, "image_token_id", None), getattr(model.config, "video_token_id", None))
        if t is not None
    }
    for row, r in enumerate(response_ids):
        bad = placeholders.intersection(int(t) for t in r)
        if bad:
            raise ValueError(
                f"response {row} contains vision placeholder ids {sorted(bad)}; a policy never samples "
                "them (their log-prob is -inf) and the model cannot take them as text input"
            )
    longest = max((len(r) for r in response_ids), default=0)
    if longest == 0:
        empty = torch.zeros(batch, 0, device=device)
        return empty, empty.bool()
    seq = response_batch(model, inputs, response_ids, share_prefix=share_prefix)
    out = forward_batch(model, seq, logits_to_keep=longest + 1)
    logits = out.logits[:, :-1]  # position P-1+k predicts response token k
    logprobs = masked_log_softmax(logits, forbidden, temperature)
    picked = logprobs.gather(-1, seq.responses.unsqueeze(-1)).squeeze(-1)
    return picked.masked_fill(~seq.response_mask, 0.0), seq.response_mask


def response_nll(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the response tokens: the loss of supervised fine-tuning.

    Args:
        logprobs: ``(B, R)`` log-probs of the target tokens (0 where ``mask`` is False).
        mask: ``(B, R)`` bool, True on response tokens.

    Returns:
        A scalar: ``-sum(logprobs) / count(mask)`` (every token weighs the same).

    >>> response_nll(torch.tensor([[-1.0, -3.0], [-2.0, 0.0]]), torch.tensor([[True, True], [True, False]]))
    tensor(2.)
    """
    return -logprobs.sum() / mask.sum().clamp(min=1)
