"""The learner's networks: building them (:func:`build_learner_models`), the critic (value
model), sequence layout, LoRA helpers.

Sequence layout (the same as :func:`darwin.models.scoring.compute_response_logprobs` and verl):
each row is ``[left-padded prompt | right-padded response]``; with ``P`` the padded prompt
length and ``R`` the longest response,

    position P - 1 + k  holds the hidden state that predicts response token k   (k = 0..R-1)

The actor's log-prob of token ``k`` is read from the logits at that position, and the
critic's value of token ``k``, ``V(s^k)`` with ``s^k`` = prompt plus tokens ``< k``, from the
value head on the same hidden state: ``values = head(h[:, P-1 : P-1+R])``, verl's
``values[:, -R-1:-1]``. This is the state-before-token convention :func:`darwin.algos.gae.trajectory_gae`
expects (``delta^k = r^k + gamma V(s^{k+1}) - V(s^k)``).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch
from torch import nn
from transformers import PreTrainedModel

from darwin.learner.config import LearnerConfig, LoraConfig
from darwin.models.anatomy import backbone_of, hidden_size_of, vision_tower_of
from darwin.models.scoring import forward_batch, response_batch


@runtime_checkable
class TrainablePolicy(Protocol):
    """What the learner needs of a sampling policy (:class:`~darwin.policies.hf.HFPolicy`
    has it): the model and processor to copy and re-score with, the forbidden-token mask and
    log-prob temperature it sampled with, its version, and a way to receive new weights."""

    vlm: Any

    @property
    def device(self) -> torch.device: ...
    @property
    def version(self) -> int: ...
    @property
    def forbidden_mask(self) -> torch.Tensor: ...
    @property
    def logprob_temperature(self) -> float: ...

    def load_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None: ...

    def build_inputs(self, prompts: Sequence[Any]) -> Mapping[str, torch.Tensor]: ...


__all__ = [
    "LearnerModels",
    "TrainablePolicy",
    "ValueModel",
    "apply_lora",
    "build_learner_models",
    "copy_model",
    "lora_merged_state_dict",
    "set_adapters_enabled",
]


class ValueModel(nn.Module):
    """The critic: a Qwen2-VL-family backbone and a scalar value head.

    ``forward(inputs, response_ids)`` returns ``(values, mask)``, both ``(B, R)``: the value
    of each response token (state before the token, see the module docstring), 0 on padding.
    With ``shared=True`` the backbone is the actor's: this module then owns only the head
    (its ``state_dict`` holds ``head.*`` only) and the learner reads the hidden states from
    the actor's own forward.

    Value head init (paper): ``calibrated`` sets weight 0 and bias ``bias``, so every first
    value is exactly ``bias`` (0.1: returns lie in [0, 1]); ``random`` uses torch's
    ``nn.Linear`` init, drawn from the learner's generator.
    """

    def __init__(
        self,
        backbone: nn.Module,
        hidden_size: int,
        *,
        shared: bool,
        init: str,
        bias: float,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.shared = shared
        if shared:
            self._backbone_ref = [backbone]  # not registered: the actor owns these parameters
        else:
            self.backbone = backbone
        param = next(backbone.parameters())
        # skip_init: torch's own Linear init would draw from the global RNG.
        self.head = torch.nn.utils.skip_init(nn.Linear, hidden_size, 1, device=param.device, dtype=torch.float32)
        with torch.no_grad():
            if init == "calibrated":
                self.head.weight.zero_()
                self.head.bias.fill_(float(bias))
            elif init == "random":  # nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
                bound = 1.0 / math.sqrt(hidden_size)
                for p in (self.head.weight, self.head.bias):
                    p.copy_((torch.rand(p.shape, generator=generator) * 2 - 1) * bound)
            else:
                raise ValueError(f"value head init must be 'calibrated' or 'random', got {init!r}")

    @property
    def trunk(self) -> nn.Module:
        """The backbone (owned, or the actor's when shared)."""
        return self._backbone_ref[0] if self.shared else self.backbone

    def head_values(self, hidden: torch.Tensor, prompt_length: int, response_length: int) -> torch.Tensor:
        """``(B, L, H)`` hidden states -> ``(B, R)`` values at positions ``P-1 .. P-2+R``."""
        h = hidden[:, prompt_length - 1 : prompt_length - 1 + response_length]
        return self.head(h.float()).squeeze(-1)

    def forward(
        self,
        inputs: Mapping[str, torch.Tensor],
        response_ids: Sequence[Sequence[int]],
        *,
        backbone_grad: bool = True,
        share_prefix: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        trunk = self.trunk
        seq = response_batch(trunk, inputs, response_ids, share_prefix=share_prefix)
        ctx = contextlib.nullcontext() if backbone_grad else torch.no_grad()
        with ctx:
            out = forward_batch(trunk, seq)
        values = self.head_values(out.last_hidden_state, seq.prompt_length, seq.responses.shape[1])
        return values.masked_fill(~seq.response_mask, 0.0), seq.response_mask


# --------------------------------------------------------------------------------------
# LoRA (peft, imported on first use)
# --------------------------------------------------------------------------------------
def _peft() -> Any:
    try:
        import peft
    except ImportError as exc:  # pragma: no cover - peft is installed in the dev environment
        raise ImportError("LearnerConfig.finetunes.lora needs the 'peft' package: pip install peft") from exc
    return peft


def apply_lora(model: nn.Module, settings: LoraConfig, generator: torch.Generator) -> nn.Module:
    """Inject LoRA adapters in place (base weights frozen), initialised from ``generator``.

    peft initialises ``lora_A`` from torch's global RNG; that happens inside a forked RNG
    scope (global state untouched) and ``lora_A`` is then redrawn from the learner's own
    generator, so runs are reproducible without global seeding. ``lora_B`` starts at 0, so
    the adapted model equals the base model until the first step.
    """
    peft = _peft()
    config = peft.LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
    )
    param = next(model.parameters())
    devices = [param.device.index or 0] if param.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        peft.inject_adapter_in_model(config, model)
    layers = [m for m in model.modules() if isinstance(m, peft.tuners.lora.LoraLayer)]
    if not layers:
        raise ValueError(
            f"LoRA target_modules {list(settings.target_modules)} matched no module of "
            f"{type(model).__name__}; name linear layers of the text decoder (e.g. 'q_proj')"
        )
    with torch.no_grad():
        for layer in layers:
            weight = layer.lora_A["default"].weight
            bound = 1.0 / math.sqrt(weight.shape[1])  # kaiming_uniform(a=sqrt(5)), peft's default
            weight.copy_((torch.rand(weight.shape, generator=generator) * 2 - 1) * bound)
    return model


def lora_merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The full state dict of the base architecture with every adapter merged
    (``W + B A * scaling``), keys as in the model before :func:`apply_lora`. Without
    adapters: the model's own state dict (detached)."""
    peft = _peft() if _has_lora(model) else None
    sd = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    if peft is not None:
        with torch.no_grad():
            for name, module in model.named_modules():
                if isinstance(module, peft.tuners.lora.LoraLayer) and "default" in module.lora_A:
                    base = module.get_base_layer()
                    prefix = f"{name}." if name else ""
                    out[f"{prefix}weight"] = base.weight.detach() + module.get_delta_weight("default").to(
                        base.weight.dtype
                    )
    for key, value in sd.items():
        if ".lora_" in key:
            continue
        clean = key.replace(".base_layer.", ".")
        out.setdefault(clean, value.detach())
    return out


def _has_lora(model: nn.Module) -> bool:
    return any(".lora_A." in name for name, _ in model.named_parameters())


@contextlib.contextmanager
def set_adapters_enabled(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Temporarily enable/disable every LoRA adapter (disabled: the frozen base model)."""
    peft = _peft()
    layers = [m for m in model.modules() if isinstance(m, peft.tuners.tuners_utils.BaseTunerLayer)]
    previous = [not m.disable_adapters for m in layers]
    for m in layers:
        m.enable_adapters(enabled)
    try:
        yield
    finally:
        for m, was in zip(layers, previous, strict=True):
            m.enable_adapters(was)


_M = TypeVar("_M", bound=nn.Module)


def copy_model(model: _M, device: torch.device | None = None) -> _M:
    """A deep copy with its own parameters (tied weights stay tied), in eval mode, on
    ``device`` when one is given."""
    clone = copy.deepcopy(model)
    clone.eval()
    if device is not None:
        clone.to(device)  # in place (nn.Module.to returns the module itself)
    return clone


# --------------------------------------------------------------------------------------
# Building the learner's models
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerModels:
    """The models a :class:`~darwin.learner.local.LocalLearner` trains and scores with.

    Attributes:
        actor: a copy of the policy's model (LoRA adapters if ``config.finetunes.lora``).
        actor_backbone: the actor's decoder (:func:`backbone_of`); a shared critic's trunk.
        lm_head: the actor's output embedding (its logits give the entropy).
        critic: the value model (PPO), or ``None`` (critic-free estimators).
        reference: a frozen copy of the initial model (``ppo.kl_coef > 0`` without LoRA), or
            ``None`` (no KL, or LoRA: the base model is the actor with adapters disabled).
    """

    actor: PreTrainedModel
    actor_backbone: nn.Module
    lm_head: nn.Module
    critic: ValueModel | None
    reference: PreTrainedModel | None


def build_learner_models(
    base: PreTrainedModel, config: LearnerConfig, device: torch.device, generator: torch.Generator
) -> LearnerModels:
    """Copy ``base`` (the policy's model; never trained in place) into the learner's models
    on ``device`` (see ``docs/learner.md``, "Models"). Draws from ``generator`` in a fixed
    order (actor LoRA, critic LoRA, random value head), so a seeded learner is reproducible."""
    cfg = config
    actor = copy_model(base, device)
    if cfg.finetunes.lora is not None:
        apply_lora(actor, cfg.finetunes.lora, generator)
    else:
        actor.requires_grad_(True)
    actor_backbone = backbone_of(actor)
    lm_head = actor.get_output_embeddings()

    critic: ValueModel | None = None
    if cfg.uses_critic:
        if cfg.critic.backbone == "shared":
            trunk = actor_backbone
        else:
            trunk = copy_model(backbone_of(base), device)
            if cfg.finetunes.lora is not None and cfg.finetunes.lora.critic:
                apply_lora(trunk, cfg.finetunes.lora, generator)
            else:
                trunk.requires_grad_(True)
        critic = ValueModel(
            trunk,
            hidden_size_of(base),
            shared=cfg.critic.backbone == "shared",
            init=cfg.critic.value_head_init,
            bias=cfg.critic.value_head_bias,
            generator=generator,
        )
        critic.eval()  # no dropout anywhere: the models only ever run in eval mode

    reference: PreTrainedModel | None = None
    if cfg.ppo.kl_coef > 0 and cfg.finetunes.lora is None:
        reference = copy_model(base, device).requires_grad_(False)
    if cfg.speed.freeze_vision:
        # Every model's tower is then the base model's, so one feature pass serves them all.
        for model in (actor_backbone, critic.trunk if critic is not None else None):
            if model is not None:
                vision_tower_of(model).requires_grad_(False)
    elif cfg.critic.freeze_vision and critic is not None and not critic.shared:
        # The critic's tower stays the base model's, as the reference's does: one feature pass serves both.
        vision_tower_of(critic.trunk).requires_grad_(False)
    return LearnerModels(
        actor=actor, actor_backbone=actor_backbone, lm_head=lm_head, critic=critic, reference=reference
    )
