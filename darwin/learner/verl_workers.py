"""The Ray worker class of the verl learner: verl's own ``TrainingWorker`` with two additions.

verl 0.9.1 drives both its actor (inside ``ActorRolloutRefWorker``) and its critic through
``verl.workers.engine_workers.TrainingWorker`` (``ray_trainer.py`` builds the critic group
from it directly). ``darwin_training_worker()`` is that class, plus

- on CPU (``VerlConfig(device="cpu")``) a plain ``gloo`` default process group, set up
  before verl would ask for ``"cpu:gloo,cpu:gloo"`` (an invalid backend string);
- :meth:`full_state_dict`: the actor's full weights, gathered with the engine's
  ``get_per_tensor_param`` (the call verl itself uses to push weights to its rollout
  servers), handed to darwin's policy after each actor update;
- the critic loaded with the configured attention on GPUs too
  (:func:`darwin.learner.verl_vlm.install_valuehead_loader`; verl's own loader always asks
  for flash-attention);
- on Linux, the worker dies with its raylet (:func:`_die_with_parent`): a run killed with
  ``kill -9`` takes its raylet with it, and its workers, orphaned in a gloo collective that
  never completes, would otherwise live on (the paper path's kill -9 test found two).

"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from tensordict import TensorDict

__all__ = ["TrainingWorkerGroup", "darwin_training_worker"]


class PendingOutput(Protocol):
    """What a non-blocking worker-group call returns (verl's ``DataProtoFuture``)."""

    def get(self) -> TensorDict: ...


class TrainingWorkerGroup(Protocol):
    """A ``RayWorkerGroup`` of :func:`darwin_training_worker` as the verl learner drives it.

    verl binds every ``@register`` method of the worker class onto the group when it starts
    the workers, so these methods exist at run time but not on ``RayWorkerGroup``'s class.
    A blocking call returns one result per worker; ``infer_batch`` and
    ``train_mini_batch`` are non-blocking (``.get()`` waits for the collected output).
    """

    @property
    def workers(self) -> list[Any]:
        """The Ray actor handles of the workers."""
        ...

    def reset(self) -> list[None]: ...

    def set_loss_fn(self, loss_fn: Callable[..., Any]) -> list[None]: ...

    def full_state_dict(self) -> list[dict[str, torch.Tensor] | None]: ...

    def infer_batch(self, data: TensorDict) -> PendingOutput: ...

    def train_mini_batch(self, data: TensorDict) -> PendingOutput: ...

    def save_checkpoint(
        self, local_path: str, hdfs_path: str | None, global_step: int, max_ckpt_to_keep: int | None
    ) -> list[Any]: ...

    def load_checkpoint(self, local_path: str, hdfs_path: str | None, del_local_after_load: bool) -> list[Any]: ...


@functools.cache
def darwin_training_worker() -> type:
    """The worker class (built on first use: verl's worker module imports its server stack,
    uvicorn and fastapi, which only the verl backend needs). Ray ships it to the workers by
    value; its base class comes from the workers' own verl."""
    from verl.single_controller.base.decorator import Dispatch, register
    from verl.utils.device import get_device_name
    from verl.workers.engine_workers import TrainingWorker, TrainingWorkerConfig

    class DarwinTrainingWorker(TrainingWorker):
        """verl's ``TrainingWorker`` (``reset``, ``infer_batch``, ``train_mini_batch``,
        ``save_checkpoint``, ``load_checkpoint``) plus :meth:`full_state_dict`."""

        def __init__(self, config: TrainingWorkerConfig) -> None:
            _die_with_parent()
            if get_device_name() == "cpu" and not dist.is_initialized():
                # verl builds f"cpu:gloo,{device}:{backend}", which is "cpu:gloo,cpu:gloo" on CPU
                # and rejected by torch; verl skips its own init when a group exists.
                dist.init_process_group(
                    backend="gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"])
                )
            from darwin.learner.verl_vlm import install_valuehead_loader

            install_valuehead_loader()  # the critic with the configured attention, also on GPUs
            super().__init__(config)

        # Dispatch's members are registered at import (Dispatch.ONE_TO_ALL is the same object),
        # so only the lookup by name is one the type checker knows.
        @register(dispatch_mode=Dispatch["ONE_TO_ALL"])
        def full_state_dict(self) -> dict[str, torch.Tensor] | None:
            """The model's full (unsharded) weights in HF key names on rank 0, ``None`` elsewhere.

            Every rank must take part: each tensor is all-gathered from its shards.
            """
            params, _ = self.engine.get_per_tensor_param()
            gathered = {name: tensor.detach().to("cpu", copy=True) for name, tensor in params}
            return gathered if self.rank == 0 else None

    return DarwinTrainingWorker


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent (the raylet that started it) dies.
    Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
