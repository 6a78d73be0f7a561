"""Settings of the verl learner backend (``LearnerConfig(backend="verl", verl=VerlConfig(...))``).

Only the distributed side lives here; the algorithm (GAE, clip, learning rates, warm-up,
value-head bias) stays in :class:`~darwin.learner.config.LearnerConfig`, shared with the local
learner. Importing this module needs neither Ray nor verl, so experiments that name the
verl backend validate (``darwin run --dry-run``) on any machine::

    >>> from darwin.learner.verl_config import VerlConfig
    >>> s = VerlConfig(model_path="/ckpt/actor", gpus_per_node=8, nodes=2, micro_batch_size_per_gpu=4)
    >>> s.world_size, s.strategy, s.device
    (16, 'fsdp2', 'cuda')
    >>> VerlConfig(model_path="/ckpt/actor", max_token_len_per_gpu=16384).resolved_infer_max_token_len_per_gpu
    32768
    >>> VerlConfig(model_path="", gpus_per_node=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: 2 validation errors for VerlConfig
    ...
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["VerlConfig"]


class VerlConfig(BaseModel):
    """Where and how verl's FSDP workers run (frozen, validated when built).

    Attributes are verl's names where one exists (``actor_rollout_ref.actor.fsdp_config.*``,
    ``trainer.n_gpus_per_node``, ``trainer.nnodes``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_path: str = Field(
        ...,
        min_length=1,
        description="HF checkpoint directory of the actor (the policy's model saved with save_pretrained); "
        "the critic is built from it with darwin's calibrated value head",
    )
    gpus_per_node: int = Field(1, ge=1, description="workers per node (verl: trainer.n_gpus_per_node)")
    nodes: int = Field(1, ge=1, description="nodes of the Ray cluster used (verl: trainer.nnodes)")
    device: Literal["cuda", "cpu"] = Field(
        "cuda",
        description="'cuda': verl's own platform (GPU machines); 'cpu': darwin's CPU platform plugin "
        "for verl with gloo (actor and critic; the critic's loader gets sdpa attention: darwin.learner.verl_vlm)",
    )
    strategy: Literal["fsdp", "fsdp2"] = Field(
        "fsdp2",
        description="verl's FSDP engine: 'fsdp2' (fully_shard; the only one that runs on CPU) or 'fsdp' (FSDP1)",
    )
    fsdp_size: int = Field(-1, description="shard group size; -1 = all workers (verl's default)")
    param_offload: bool = Field(False, description="offload parameters to CPU between calls (verl: param_offload)")
    optimizer_offload: bool = Field(False, description="offload optimizer states to CPU between calls")
    model_dtype: Literal["fp32", "bf16"] = Field("fp32", description="dtype of the sharded master weights")
    compute_dtype: Literal["fp32", "bf16"] | None = Field(
        None,
        description="FSDP mixed precision: the dtype forward and backward run in (verl: fsdp_config.mixed_precision."
        "param_dtype; reduce and buffer dtypes stay fp32); None = bf16 on 'cuda', fp32 on 'cpu' (CPUs have no fast bf16 "
        "path, and fp32 keeps log-probs equal to darwin's scoring)",
    )
    attn_implementation: Literal["flash_attention_2", "sdpa", "eager"] = Field(
        "flash_attention_2",
        description="transformers attention of the actor (the CPU platform needs 'sdpa' or 'eager')",
    )
    micro_batch_size_per_gpu: int = Field(
        2,
        ge=1,
        description="rows per forward/backward on each worker (verl: ppo_micro_batch_size_per_gpu); unused with "
        "max_token_len_per_gpu",
    )
    max_token_len_per_gpu: int | None = Field(
        None,
        ge=1,
        description="token-budgeted micro-batches (verl: use_dynamic_bsz with ppo_max_token_len_per_gpu): each "
        "worker packs its rows into micro-batches of at most this many prompt + response tokens, so short rows "
        "share a pass and a long one gets its own; None = micro_batch_size_per_gpu rows per micro-batch",
    )
    infer_max_token_len_per_gpu: int | None = Field(
        None,
        ge=1,
        description="the same budget for the forward-only passes (old log-probs, values; verl: "
        "log_prob_max_token_len_per_gpu); None = 2 x max_token_len_per_gpu, as verl's recipes set it (a forward "
        "pass keeps no activations for a backward one)",
    )
    remove_padding: bool = Field(
        False,
        description="pack every micro-batch's rows into one sequence without padding tokens (verl: "
        "use_remove_padding); the packed attention of Qwen2-VL-family models needs flash_attention_2 on 'cuda'",
    )
    gradient_checkpointing: bool = Field(
        True,
        description="recompute each layer's activations in the backward pass (verl: enable_gradient_checkpointing, "
        "its default): about a third more compute for activations that no longer grow with the layers",
    )
    fused_kernels: Literal["off", "torch", "triton"] = Field(
        "off",
        description="the actor's log-probs and entropy straight from its last hidden states, 512 tokens at a time, "
        "so the (tokens x vocabulary) logits never exist whole (verl: model.use_fused_kernels with "
        "fused_kernel_options.impl_backend); 'triton': verl's Triton kernel, GPUs only; 'off': the full logits, as "
        "transformers computes them. Measured on an H200 (docs/benchmarks.md): unfused, a 16,384-token micro-batch's "
        "fp32 logits over Qwen's 151,936-word vocabulary take 10 GB, and the actor's passes took 3.4x the critic's time",
    )
    use_torch_compile: bool = Field(False, description="torch.compile verl's entropy kernel")
    ray_address: str | None = Field(
        None,
        description="an existing Ray cluster ('auto', 'ray://host:10001'); None = a local one started for the learner",
    )
    ray_num_cpus: int | None = Field(
        None, ge=1, description="logical CPUs of a locally started Ray (None: Ray's count); each CPU worker holds one"
    )

    @property
    def resolved_compute_dtype(self) -> str:
        """``compute_dtype``, or the device's default (bf16 on GPUs, fp32 on CPU)."""
        if self.compute_dtype is not None:
            return self.compute_dtype
        return "fp32" if self.device == "cpu" else "bf16"

    @property
    def resolved_infer_max_token_len_per_gpu(self) -> int | None:
        """The forward-only passes' token budget: ``infer_max_token_len_per_gpu``, or twice the training one."""
        if self.infer_max_token_len_per_gpu is not None or self.max_token_len_per_gpu is None:
            return self.infer_max_token_len_per_gpu
        return 2 * self.max_token_len_per_gpu

    @property
    def world_size(self) -> int:
        """Workers per role (actor, critic): ``gpus_per_node * nodes``."""
        return self.gpus_per_node * self.nodes

    def problems(self) -> list[str]:
        """Inconsistencies, each naming the field and the fix ([] if none)."""
        out: list[str] = []
        if self.device == "cpu" and self.strategy != "fsdp2":
            out.append(
                "verl.strategy='fsdp' (FSDP1) asks for an accelerator device: use strategy='fsdp2' with device='cpu'"
            )
        if self.device == "cpu" and self.attn_implementation == "flash_attention_2":
            out.append("verl.attn_implementation='flash_attention_2' needs a GPU: use 'sdpa' with device='cpu'")
        if self.remove_padding and (self.device != "cuda" or self.attn_implementation != "flash_attention_2"):
            out.append(
                f"verl.remove_padding=True with device={self.device!r} and attn_implementation="
                f"{self.attn_implementation!r}: packed rows attend across each other's boundaries unless "
                "flash_attention_2 on 'cuda' separates them; set remove_padding=False or use flash_attention_2 on a GPU"
            )
        if self.fused_kernels == "triton" and self.device != "cuda":
            out.append(
                "verl.fused_kernels='triton' needs a GPU (Triton compiles for it): use fused_kernels='torch' with "
                f"device={self.device!r}"
            )
        if self.infer_max_token_len_per_gpu is not None and self.max_token_len_per_gpu is None:
            out.append(
                "verl.infer_max_token_len_per_gpu needs max_token_len_per_gpu (verl batches the training and the "
                "forward-only passes the same way): set both, or neither"
            )
        if self.fsdp_size != -1 and (self.fsdp_size < 1 or self.world_size % self.fsdp_size):
            out.append(f"verl.fsdp_size={self.fsdp_size} must be -1 or divide the world size {self.world_size}")
        return out
