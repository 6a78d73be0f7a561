"""A CPU platform for verl 0.9.1, registered through verl's own plugin registry.

verl 0.9.1 registers only accelerator platforms (``nvidia``, ``huawei``, ``amd``); on a
machine without one it falls back to ``nvidia`` and its workers die in
``torch.distributed.init_process_group("cpu:gloo,cuda:nccl")`` ("Distributed package
doesn't have NCCL built in"). Ray workers import this module when started with
``VERL_USE_EXTERNAL_MODULES=darwin.learner.verl_cpu`` and ``VERL_PLATFORM=cpu`` (the
switches verl documents for out-of-tree platforms; :class:`~darwin.learner.VerlLearner`
sets them with ``VerlConfig(device="cpu")``). Nothing in verl is patched.

With it, verl's FSDP2 engine trains the actor and the critic on CPU with gloo (tested with
two workers); the critic also needs the value-model loader shim of
:mod:`darwin.learner.verl_vlm`, which the workers import beside this module.

The device module answers memory queries with 0: a CPU has no device memory to report.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

__all__ = ["PlatformCPU", "cpu_device_module"]


def _no_device_memory(*_args: object, **_kwargs: object) -> int:
    return 0


def _nothing(*_args: object, **_kwargs: object) -> None:
    return None


cpu_device_module = types.ModuleType("darwin.learner.verl_cpu.device_module")
vars(cpu_device_module).update(
    {name: getattr(torch.cpu, name) for name in dir(torch.cpu) if not name.startswith("_")},
    empty_cache=_nothing,
    ipc_collect=_nothing,
    manual_seed=torch.manual_seed,
    manual_seed_all=torch.manual_seed,
    get_rng_state=torch.get_rng_state,
    set_rng_state=torch.set_rng_state,
    memory_allocated=_no_device_memory,
    memory_reserved=_no_device_memory,
    max_memory_allocated=_no_device_memory,
    max_memory_reserved=_no_device_memory,
    reset_peak_memory_stats=_nothing,
    mem_get_info=lambda *_a, **_k: (0, 0),
    get_device_name=lambda *_a, **_k: "cpu",
    set_per_process_memory_fraction=_nothing,
)
"""What verl reaches through ``get_torch_device()`` on CPU: ``torch.cpu`` plus the memory,
RNG and cache calls verl makes on ``torch.cuda`` (no-ops or 0 on CPU)."""


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface on CPU: device ``cpu``, collectives over gloo, Ray's ``CPU`` resource."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: only VERL_PLATFORM=cpu selects it, so importing this module
        # (e.g. to read its docs) leaves verl's choice in that process unchanged.
        return False

    def current_device(self) -> str:  # type: ignore[override]  # verl's PlatformBase says int (a device index); CPU needs "cpu"
        # verl only ever moves tensors with .to(get_device_id()) / torch.device(get_device_id()):
        # "cpu" is the device those calls need (an index would mean cuda:0).
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CPU_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None
