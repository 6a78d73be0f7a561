"""What the verl learner needs from the machine and the checkpoints before its workers start.

:func:`check_verl_runtime` names what is missing for a :class:`~darwin.learner.verl_config.VerlConfig`
here (:class:`VerlBackendUnavailable`); :func:`prepare_critic_checkpoint` saves the actor
checkpoint as verl's value model with the calibrated value head; :class:`WeightReceiver` is
what the learner pushes weights to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from darwin.learner.verl_config import VerlConfig

__all__ = ["VerlBackendUnavailable", "WeightReceiver", "check_verl_runtime", "prepare_critic_checkpoint"]


class VerlBackendUnavailable(RuntimeError):
    """The machine cannot run the verl learner as configured (no GPU, no Ray, missing packages)."""


@runtime_checkable
class WeightReceiver(Protocol):
    """What the verl learner pushes weights to: a policy with a version (``HFPolicy`` is one)."""

    @property
    def version(self) -> int: ...

    def load_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None: ...


# --------------------------------------------------------------------------------------
# The critic's initial checkpoint (calibrated value head)
# --------------------------------------------------------------------------------------
def prepare_critic_checkpoint(
    actor_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    init: str,
    bias: float,
    attn_implementation: str = "sdpa",
) -> Path:
    """Save the actor checkpoint as verl's value model: ``AutoModelForTokenClassification``
    with ``num_labels=1`` (backbone weights from the actor), the ``score`` head set to
    weight 0 and bias ``bias`` when ``init == "calibrated"`` (every first value is then
    exactly ``bias``), transformers' random init when ``init == "random"``.
    """
    from transformers import AutoConfig, AutoModelForTokenClassification

    import darwin.learner.verl_vlm  # noqa: F401  (registers the Qwen2-VL-family value models)

    src, dst = Path(actor_path), Path(out)
    config = AutoConfig.from_pretrained(src, num_labels=1, attn_implementation=attn_implementation)
    if type(config) not in AutoModelForTokenClassification._model_mapping:
        raise VerlBackendUnavailable(
            f"{src}: {type(config).__name__} has no ...ForTokenClassification class, the value-model "
            "format verl's critic loads; darwin registers one for the Qwen2-VL family and transformers has them "
            "for text decoders (Qwen2, Llama, ...)"
        )
    config.classifier_dropout = 0.0
    config.tie_word_embeddings = False
    model = AutoModelForTokenClassification.from_pretrained(src, config=config, dtype=torch.float32)
    if init == "calibrated":
        with torch.no_grad():
            head = model.score
            head.weight.zero_()
            if head.bias is None:
                raise VerlBackendUnavailable(
                    f"{type(model).__name__}.score has no bias; the calibrated value head (value_head_bias) needs one"
                )
            head.bias.fill_(float(bias))
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dst)
    return dst


# --------------------------------------------------------------------------------------
# Runtime checks
# --------------------------------------------------------------------------------------
def check_verl_runtime(settings: VerlConfig, *, needs_critic: bool) -> None:
    """Raise :class:`VerlBackendUnavailable` naming what is missing for ``settings`` here."""
    problems: list[str] = []
    for module, hint in (
        ("ray", "pip install 'ray[default]'"),
        ("uvicorn", "pip install uvicorn fastapi (verl's 'verl-core' extra)"),
        ("fastapi", "pip install fastapi"),
    ):
        try:
            __import__(module)
        except ImportError:
            problems.append(f"{module} is not installed: {hint}")
    if settings.device == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 and settings.ray_address is None:
            problems.append(
                "verl.device='cuda' but this machine has no GPU (torch.cuda.is_available() is False): run on a "
                "GPU machine, point verl.ray_address at a GPU Ray cluster, or use backend='local'"
            )
        elif settings.ray_address is None and count < settings.gpus_per_node:
            problems.append(f"verl.gpus_per_node={settings.gpus_per_node} but this machine has {count} GPU(s)")
        if settings.attn_implementation == "flash_attention_2":
            try:
                __import__("flash_attn")
            except ImportError:
                problems.append(
                    "verl.attn_implementation='flash_attention_2' needs the flash-attn package (or use 'sdpa' with verl.remove_padding=False)"
                )
    if problems:
        raise VerlBackendUnavailable("the verl learner cannot start here:\n- " + "\n- ".join(problems))
