"""verl's critic for Qwen2-VL-family policies: a value model transformers can load, and a
value-model loader that honours the configured attention.

verl builds its critic with ``verl.utils.model.load_valuehead_model``, which asks
``AutoModelForTokenClassification`` for a ``num_labels = 1`` model and falls back to trl's
value-head wrapper. For the Qwen2-VL family neither exists: transformers 5.10 registers no
token-classification class for ``Qwen2VLConfig`` / ``Qwen2_5_VLConfig``, and trl is not a
dependency. Importing this module (the driver does it in :func:`prepare_critic_checkpoint
<darwin.learner.verl_runtime.prepare_critic_checkpoint>`, the workers through
``VERL_USE_EXTERNAL_MODULES``) registers darwin's value model for both configs:

- :class:`Qwen2VLForTokenValue` / :class:`Qwen2_5_VLForTokenValue`: the vision-language
  backbone (``model``, the same module the policy has) plus a linear ``score`` head
  (hidden size to 1, with bias), returning one value per token as token-classification
  ``logits`` ``(B, L, 1)``: the critic the local learner trains, in the format verl loads;
- a checkpoint conversion mapping per class, reusing ``Qwen2VLForConditionalGeneration``'s.
  Without it transformers reads the text backbone's checkpoint keys (``model.layers.*``)
  as unexpected, leaves the text backbone at its random init and raises nothing.

The loader (:func:`install_valuehead_loader`, installed in every worker: on darwin's CPU
platform when verl imports this module, on GPUs by the worker class):
``load_valuehead_model`` passes ``attn_implementation="flash_attention_2"`` literally, which
needs a GPU with flash-attn installed; without it verl falls back to trl's value-head wrapper
(a different model and checkpoint format) or fails. The installed loader makes the same call
with the attention the critic's config carries (``VerlConfig.attn_implementation``: ``sdpa``
on CPU; verl's FSDP engine imports the name at call time). ``tests/learner/test_verl_vlm.py``
fails once verl stops writing the literal, so the loader can go.

    >>> from transformers import AutoModelForTokenClassification, Qwen2VLConfig
    >>> import darwin.learner.verl_vlm as verl_vlm
    >>> AutoModelForTokenClassification._model_mapping[Qwen2VLConfig].__name__
    'Qwen2VLForTokenValue'
"""

from __future__ import annotations

import logging
import os

import torch
from torch import nn
from transformers import AutoModelForTokenClassification, PreTrainedModel
from transformers.conversion_mapping import (
    get_checkpoint_conversion_mapping,
    register_checkpoint_conversion_mapping,
)
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    Qwen2_5_VLModel,
    Qwen2_5_VLPreTrainedModel,
)
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel, Qwen2VLPreTrainedModel

logger = logging.getLogger(__name__)

__all__ = [
    "Qwen2VLForTokenValue",
    "Qwen2_5_VLForTokenValue",
    "install_valuehead_loader",
    "load_value_model",
    "valuehead_loader_hardcodes_flash_attention",
]

"""The attention the CPU shim loads value models with (flash-attention needs a GPU)."""


class _TokenValueMixin:
    """``forward`` of a value model: backbone hidden states -> ``score`` -> ``logits (B, L, 1)``."""

    model: PreTrainedModel
    score: nn.Linear

    def _add_backbone_and_head(self, config: Qwen2VLConfig | Qwen2_5_VLConfig, backbone: type[PreTrainedModel]) -> None:
        """``model`` (the policy's backbone class) and ``score`` (hidden size to ``num_labels``, with bias)."""
        self.num_labels = int(getattr(config, "num_labels", 1))
        self.model = backbone(config)
        self.score = nn.Linear(_hidden_size(config), self.num_labels, bias=True)
        self.post_init()  # type: ignore[attr-defined]  # a mixin: the classes using it are PreTrainedModels, whose post_init this is

    def get_input_embeddings(self) -> nn.Module:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.model.set_input_embeddings(value)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: object,
    ) -> TokenClassifierOutput:
        kwargs.pop("labels", None)
        kwargs.pop("use_cache", None)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            pixel_values=pixel_values,
            image_grid_thw=image_grid_thw,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            **kwargs,
        )
        hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
        return TokenClassifierOutput(logits=self.score(hidden))


def _hidden_size(config: Qwen2VLConfig | Qwen2_5_VLConfig) -> int:
    text = getattr(config, "text_config", None)
    return int(text.hidden_size if text is not None else config.hidden_size)


class Qwen2VLForTokenValue(_TokenValueMixin, Qwen2VLPreTrainedModel):
    """Qwen2-VL backbone + scalar ``score`` head: verl's value model (critic) for Qwen2-VL.

    ``AutoModelForTokenClassification.from_pretrained(actor_dir, num_labels=1)`` builds it
    from a ``Qwen2VLForConditionalGeneration`` checkpoint (backbone loaded, head new).
    """

    def __init__(self, config: Qwen2VLConfig) -> None:
        super().__init__(config)
        self._add_backbone_and_head(config, Qwen2VLModel)


class Qwen2_5_VLForTokenValue(_TokenValueMixin, Qwen2_5_VLPreTrainedModel):  # noqa: N801 (transformers' naming)
    """Qwen2.5-VL (UI-TARS-1.5) backbone + scalar ``score`` head: verl's value model for Qwen2.5-VL."""

    def __init__(self, config: Qwen2_5_VLConfig) -> None:
        super().__init__(config)
        self._add_backbone_and_head(config, Qwen2_5_VLModel)


def _register() -> None:
    mapping = AutoModelForTokenClassification._model_mapping
    for config_class, model_class in (
        (Qwen2VLConfig, Qwen2VLForTokenValue),
        (Qwen2_5_VLConfig, Qwen2_5_VLForTokenValue),
    ):
        if config_class not in mapping:
            AutoModelForTokenClassification.register(config_class, model_class)
        if get_checkpoint_conversion_mapping(model_class.__name__) is None:
            register_checkpoint_conversion_mapping(
                model_class.__name__, get_checkpoint_conversion_mapping("Qwen2VLForConditionalGeneration")
            )


_register()


def valuehead_loader_hardcodes_flash_attention() -> bool:
    """Whether verl's ``load_valuehead_model`` still writes ``attn_implementation="flash_attention_2"``."""
    import inspect

    import verl.utils.model as verl_model

    source = inspect.getsource(verl_model.load_valuehead_model)
    return 'attn_implementation="flash_attention_2"' in source


def load_value_model(local_path, torch_dtype, model_config, trust_remote_code):  # noqa: ANN001, ANN201 (verl's signature)
    """verl's ``load_valuehead_model`` (same arguments) for darwin's value-model checkpoints:
    ``AutoModelForTokenClassification`` with the attention ``model_config`` carries (verl's
    ``HFModelConfig`` builds it with ``VerlConfig.attn_implementation``) instead of a fixed
    ``flash_attention_2``. A model that is not a token-classification model raises
    transformers' own error instead of verl's "install trl" message, so the cause stays visible."""
    return AutoModelForTokenClassification.from_pretrained(
        pretrained_model_name_or_path=local_path,
        torch_dtype=torch_dtype,
        config=model_config,
        attn_implementation=getattr(model_config, "_attn_implementation", None) or "flash_attention_2",
        trust_remote_code=trust_remote_code,
    )


def install_valuehead_loader() -> None:
    """Point ``verl.utils.model.load_valuehead_model`` at :func:`load_value_model` (idempotent)."""
    import verl.utils.model as verl_model

    if verl_model.load_valuehead_model is not load_value_model:
        verl_model.load_valuehead_model = load_value_model
        logger.debug("verl's value-model loader takes the attention from the critic's config")


if os.environ.get("VERL_PLATFORM") == "cpu":
    # A worker of VerlConfig(device="cpu"): verl imports this module at start through VERL_USE_EXTERNAL_MODULES.
    install_valuehead_loader()
