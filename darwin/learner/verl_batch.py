"""Step rows -> verl's padded PPO batch for :class:`~darwin.learner.verl_learner.VerlLearner`.

:func:`to_verl_batch` lays step rows out as verl's batch (``prompts`` left-padded,
``responses`` right-padded, masks, positions, M-RoPE positions and ``multi_modal_inputs``
for screenshot rows, filler rows up to a multiple); :class:`VerlUpdateBatch` is what one
update trains on; the private helpers select, pad and convert verl batches (verl's
no-padding layout) for the worker calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from verl import DataProto

from darwin.learner.step_rows import LearnerDataError, RowInputs, StepRow
from darwin.models.scoring import rope_index
from darwin.types import Trajectory

if TYPE_CHECKING:
    from tensordict import TensorDict

__all__ = ["VerlUpdateBatch", "VerlUpdateTimings", "to_verl_batch"]


# --------------------------------------------------------------------------------------
# Step rows -> verl's batch
# --------------------------------------------------------------------------------------
def to_verl_batch(
    rows: Sequence[StepRow],
    *,
    pad_token_id: int,
    pad_to_multiple: int = 1,
    temperature: float = 1.0,
    inputs: Sequence[RowInputs] | None = None,
    rope_model: nn.Module | None = None,
    old_logprobs: torch.Tensor | None = None,
    values: torch.Tensor | None = None,
    advantages: torch.Tensor | None = None,
    returns: torch.Tensor | None = None,
) -> DataProto:
    """Rows as verl's padded PPO batch (``ray_trainer.py``'s keys), ``N`` rows, ``P`` the
    longest prompt, ``R`` the longest response; optional ``(N, R)`` tensors ride along.

    Keys: ``prompts (N', P)`` left-padded, ``responses (N', R)`` right-padded, ``input_ids``
    ``= [prompts | responses]``, ``attention_mask`` and ``position_ids`` ``(N', P + R)``
    (positions count valid tokens from 0), ``response_mask (N', R)``, and
    ``old_log_probs``, ``values``, ``advantages``, ``returns`` ``(N', R)`` float32 when
    given; ``meta_info["temperature"]``. ``N'`` is ``N`` rounded up to ``pad_to_multiple``:
    the added rows repeat row 0's tokens with ``response_mask = 0`` and zero tensors, so
    no loss sees them (verl splits batches evenly over workers and mini-batches).

    Screenshot rows (Qwen2-VL family) need ``inputs``, each row's processor output
    (:func:`~darwin.learner.step_rows.preprocess_rows`: image patches, grid, modality of each
    prompt token), and ``rope_model``, a model with ``get_rope_index`` (the policy's). Then
    ``position_ids`` is ``(N', 4, P + R)``: the text positions above, stacked on the
    model's M-RoPE positions ``(3, N', P + R)`` of the whole sequence (verl's layout for
    Qwen2-VL), and ``non_tensor_batch["multi_modal_inputs"]`` holds one dict per row
    (``pixel_values (patches, D)``, ``image_grid_thw (images, 3)``; ``None`` for a text row),
    which verl's FSDP engine passes to the model.

    >>> from darwin.learner.verl_learner import to_verl_batch
    >>> from darwin.learner.step_rows import StepRow
    >>> from darwin.types import ChatMessage, Prompt
    >>> p = Prompt(messages=(ChatMessage(role="user", text="hi"),))
    >>> rows = [StepRow("e", 0, p, (5, 6, 7), (8, 9), (-0.1, -0.2), 0.0, False, 0, "g"),
    ...         StepRow("e", 1, p, (5, 6), (4,), (-0.3,), 1.0, False, 0, "g")]
    >>> b = to_verl_batch(rows, pad_token_id=0, pad_to_multiple=4)
    >>> b.batch["input_ids"].tolist()[:2], b.batch["response_mask"].tolist()
    ([[5, 6, 7, 8, 9], [0, 5, 6, 4, 0]], [[1, 1], [1, 0], [0, 0], [0, 0]])
    >>> b.batch["position_ids"].tolist()[1]
    [0, 0, 1, 2, 2]
    """
    if not rows:
        raise LearnerDataError("to_verl_batch needs at least one row")
    if pad_to_multiple < 1:
        raise ValueError(f"pad_to_multiple must be >= 1, got {pad_to_multiple}")
    for row in rows:
        where = f"episode {row.episode_id!r} step {row.step}"
        if not row.prompt_ids:
            raise LearnerDataError(
                f"{where}: no prompt token ids recorded (Generation.prompt_ids); the verl learner "
                "trains on the ids the policy sampled from: use a policy that records them (HFPolicy)"
            )
        if row.prompt.images and (inputs is None or rope_model is None):
            raise LearnerDataError(
                f"{where}: the prompt holds {len(row.prompt.images)} image(s); pass the rows' processor inputs "
                "(inputs=preprocess_rows(policy, rows)) and the policy's model (rope_model=) for its 3-D positions"
            )
    n = len(rows)
    if inputs is not None and len(inputs) != n:
        raise ValueError(f"{n} rows but {len(inputs)} processor inputs")
    total = math.ceil(n / pad_to_multiple) * pad_to_multiple
    longest_prompt = max(len(r.prompt_ids) for r in rows)
    longest_response = max(len(r.response_ids) for r in rows)
    prompts = torch.full((total, longest_prompt), int(pad_token_id), dtype=torch.long)
    prompt_mask = torch.zeros(total, longest_prompt, dtype=torch.long)
    responses = torch.full((total, longest_response), int(pad_token_id), dtype=torch.long)
    response_attention = torch.zeros(total, longest_response, dtype=torch.long)
    for i in range(total):
        row = rows[i] if i < n else rows[0]
        p, r = len(row.prompt_ids), len(row.response_ids)
        prompts[i, longest_prompt - p :] = torch.tensor(row.prompt_ids, dtype=torch.long)
        prompt_mask[i, longest_prompt - p :] = 1
        responses[i, :r] = torch.tensor(row.response_ids, dtype=torch.long)
        response_attention[i, :r] = 1
    # Filler rows are attended to (verl needs a non-empty sequence per row) but none of their tokens is scored.
    response_mask = response_attention.clone()
    response_mask[n:] = 0
    attention_mask = torch.cat([prompt_mask, response_attention], dim=1)
    input_ids = torch.cat([prompts, responses], dim=1)
    position_ids = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)
    non_tensors: dict[str, np.ndarray] = {}
    if inputs is not None and any(r.prompt.images for r in rows):
        assert rope_model is not None  # checked per row above
        source = [inputs[i] if i < n else inputs[0] for i in range(total)]
        position_ids, non_tensors["multi_modal_inputs"] = _multimodal_positions(
            source, input_ids, attention_mask, position_ids, longest_prompt, rope_model
        )
    tensors: dict[str, torch.Tensor] = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": response_mask,
    }
    for name, value in (
        ("old_log_probs", old_logprobs),
        ("values", values),
        ("advantages", advantages),
        ("returns", returns),
    ):
        if value is None:
            continue
        if value.shape[0] != n or value.shape[1] > longest_response:
            raise ValueError(f"{name} has shape {tuple(value.shape)}; expected ({n}, <= {longest_response})")
        full = torch.zeros(total, longest_response, dtype=torch.float32)
        full[:n, : value.shape[1]] = value.detach().float().cpu()
        tensors[name] = full * response_mask  # nothing outside a response token
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info={"temperature": float(temperature)})


def _multimodal_positions(
    source: Sequence[RowInputs],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    text_positions: torch.Tensor,
    prompt_width: int,
    rope_model: nn.Module,
) -> tuple[torch.Tensor, np.ndarray]:
    """``(N', 4, L)`` positions (text row, then M-RoPE) and the per-row ``multi_modal_inputs``."""
    modality = torch.zeros_like(input_ids)
    for i, row_inputs in enumerate(source):
        length = row_inputs.mm_token_type_ids.numel()
        modality[i, prompt_width - length : prompt_width] = row_inputs.mm_token_type_ids
    grids = [r.image_grid_thw for r in source if r.image_grid_thw is not None]
    with torch.no_grad():
        rope, _ = rope_index(rope_model, input_ids, attention_mask, modality, torch.cat(grids) if grids else None)
    positions = torch.cat([text_positions.unsqueeze(1), rope.permute(1, 0, 2).to(text_positions.dtype)], dim=1)
    multi_modal = np.empty(len(source), dtype=object)
    multi_modal[:] = [
        {"pixel_values": r.pixel_values.float(), "image_grid_thw": r.image_grid_thw}
        if r.pixel_values is not None
        else None
        for r in source
    ]
    return positions, multi_modal


@dataclass(frozen=True)
class VerlUpdateBatch:
    """What one verl update trains on (:meth:`~darwin.learner.verl_learner.VerlLearner.prepare`); ``N`` step rows,
    ``R`` the longest response; tensors on the CPU, rows ``0..N-1`` of :attr:`data`.

    Attributes:
        rows, trajectories: the step rows and the trajectories they come from.
        data: the verl batch (:func:`to_verl_batch`) with ``old_log_probs`` (recomputed by
            the actor; absent during warm-up), ``values`` and ``returns`` (PPO),
            ``advantages``; ``N'`` >= ``N`` rows.
        response_mask, advantages: ``(N, R)``; values, returns: ``(N, R)`` or ``None``.
    """

    rows: list[StepRow]
    trajectories: list[Trajectory]
    data: DataProto
    response_mask: torch.Tensor
    advantages: torch.Tensor
    values: torch.Tensor | None
    returns: torch.Tensor | None
    lam: float
    empty_trajectories: int
    dropped_infra: int
    dropped_unverified: int
    prepare_s: float
    scoring_s: float
    values_s: float = 0.0
    """Part of ``scoring_s``: the critic workers' values."""
    log_probs_s: float = 0.0
    """Part of ``scoring_s``: the actor workers' old log-probs (absent during warm-up)."""

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class VerlUpdateTimings:
    """Where one :meth:`~darwin.learner.verl_learner.VerlLearner.update` spent its time beyond
    :class:`~darwin.learner.metrics.UpdateMetrics` (which has the scoring split as ``values_s`` and
    ``proximal_s``), and the workers' memory: what ``darwin bench learner --backend verl`` reports."""

    critic_train_s: float = 0.0
    actor_train_s: float = 0.0
    weight_sync_s: float = 0.0
    """Gathering the actor's full weights from its shards and loading them into the policy."""
    peak_memory_gib: float | None = None
    """The largest ``torch.cuda.max_memory_allocated`` any worker reported (verl's
    ``perf/max_memory_allocated_gb``); None when none did (CPU workers report 0)."""


@dataclass(frozen=True)
class VerlTrainedUpdate:
    """What one verl update trained on and what its workers reported, for its metrics."""

    batch: VerlUpdateBatch
    epochs: int
    actor: Mapping[str, object]
    """The actor workers' metrics (verl's names, e.g. ``actor/pg_loss``; numbers or verl ``Metric`` objects); empty during warm-up."""
    critic: Mapping[str, object]
    """The critic workers' metrics (``critic/vf_loss``, ...); empty without a critic."""
    prepared_at: float
    """``time.perf_counter()`` when the batch was ready and training began."""
    critic_trained_at: float


def _select(data: DataProto, keys: Sequence[str]) -> DataProto:
    """The tensors ``keys`` of ``data`` (those present), with the rows' screenshots when it has any."""
    present = [k for k in keys if k in data.batch]
    non_tensors = {k: v for k, v in data.non_tensor_batch.items() if k == "multi_modal_inputs"}
    return DataProto.from_dict(
        tensors={k: data.batch[k] for k in present}, non_tensors=non_tensors, meta_info=dict(data.meta_info)
    )


def _no_padding(data: DataProto) -> TensorDict:
    """``data`` in verl's no-padding layout (``left_right_2_no_padding``: jagged rows of valid tokens).

    3-D positions ``(N, 4, L)`` are rebuilt as a jagged tensor ragged on the token dimension.
    verl lets ``torch.nested.as_nested_tensor`` choose, and when every row of a batch has the
    same length it makes the 4 position rows the ragged dimension: verl's forward then pads
    them into garbage positions and the log-probs drift by ~1e-2 (found comparing with
    darwin's scoring, tests/learner/test_verl_vlm.py).
    """
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(data.to_tensordict())
    positions = data.batch["position_ids"]
    if positions.dim() == 3:
        valid = data.batch["attention_mask"].bool()
        td["position_ids"] = tu.nested_tensor_from_tensor_list(
            [positions[i][:, valid[i]] for i in range(positions.shape[0])], ragged_idx=2
        )
    return td


def _screenshots(data: DataProto, rows: int) -> int:
    """Screenshots the workers received for the first ``rows`` rows (their image grids)."""
    multi_modal = data.non_tensor_batch.get("multi_modal_inputs")
    if multi_modal is None:
        return 0
    return sum(int(item["image_grid_thw"].shape[0]) for item in multi_modal[:rows] if item is not None)


def _pad_rows(tensor: torch.Tensor, data: DataProto) -> torch.Tensor:
    """``(N, R_)`` -> ``(N', R)`` with zeros (the filler rows and columns of ``data``)."""
    total, width = data.batch["response_mask"].shape
    out = torch.zeros(total, width, dtype=torch.float32)
    out[: tensor.shape[0], : tensor.shape[1]] = tensor.float()
    return out
