"""Screenshots to the Qwen2-VL image processor's ``pixel_values`` without the processor.

:class:`PixelEncoder` is the fast path of every place that turns many ``uint8`` screenshots
into model inputs (the learner's rows, SFT's cached demonstrations); it is bit-exact with the
processor for screenshots already at the model's grid size, and :meth:`PixelEncoder.check`
proves it against the processor at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["PixelEncoder"]


class PixelEncoder:
    """``uint8`` screenshots -> the image processor's ``pixel_values``, fast and bit-exact.

    The processor's rescale/normalise is element-wise per channel, so it is tabulated once
    (by calling the processor's own ``rescale``/``normalize`` on every byte value) and the
    patch layout is Qwen2-VL's reshape/transpose. :meth:`check` compares against the
    processor and raises on any difference (e.g. a transformers change).
    """

    def __init__(self, image_processor: Any) -> None:
        import torch
        from transformers.image_utils import ChannelDimension

        ip = image_processor
        self.patch = int(ip.patch_size)
        self.temporal = int(ip.temporal_patch_size)
        self.merge = int(ip.merge_size)
        size = getattr(ip, "size", None) or {}
        self.min_pixels = int(size.get("shortest_edge", getattr(ip, "min_pixels", 0) or 0))
        self.max_pixels = int(size.get("longest_edge", getattr(ip, "max_pixels", 0) or 0)) or 1 << 62
        ramp = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256)).copy()
        x: np.ndarray = ramp
        if ip.do_rescale:
            x = ip.rescale(
                x, ip.rescale_factor, data_format=ChannelDimension.FIRST, input_data_format=ChannelDimension.FIRST
            )
        if ip.do_normalize:
            x = ip.normalize(
                x,
                ip.image_mean,
                ip.image_std,
                data_format=ChannelDimension.FIRST,
                input_data_format=ChannelDimension.FIRST,
            )
        self.lut = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32).reshape(3 * 256))
        self._offset = torch.tensor([0, 256, 512])

    def keeps(self, height: int, width: int) -> bool:
        """Whether a ``height x width`` screenshot is already at a size the processor keeps
        (both sides multiples of patch x merge, the area within its pixel budget): the only
        screenshots this encoder reproduces."""
        side = self.patch * self.merge
        return height % side == 0 and width % side == 0 and self.min_pixels <= height * width <= self.max_pixels

    def to_patches(self, images: torch.Tensor) -> torch.Tensor:
        """``(N, H, W, 3)`` uint8 -> ``(N, h*w, 3, p*p)`` uint8 in the processor's patch order."""
        n, height, width, _ = images.shape
        p, m = self.patch, self.merge
        if height % (p * m) or width % (p * m):
            raise ValueError(f"screenshots of {width}x{height} are not multiples of {p * m}")
        gh, gw = height // p, width // p
        x = images.permute(0, 3, 1, 2).reshape(n, 3, gh // m, m, p, gw // m, m, p)
        x = x.permute(0, 2, 5, 3, 6, 1, 4, 7)  # (n, gh/m, gw/m, m, m, C, p, p)
        return x.reshape(n, gh * gw, 3, p * p).contiguous()

    def from_patches(self, patches: torch.Tensor) -> torch.Tensor:
        """``(N, h*w, 3, p*p)`` uint8 patches -> ``pixel_values (N*h*w, 3*T*p*p)`` float32."""
        import torch

        n, count, channels, area = patches.shape
        out = torch.empty((n, count, channels, self.temporal, area), dtype=torch.float32)
        for c in range(channels):
            values = self.lut[c * 256 : (c + 1) * 256][patches[:, :, c].long()]
            for t in range(self.temporal):  # images repeat along the temporal patch
                out[:, :, c, t] = values
        return out.view(n * count, channels * self.temporal * area)

    def grid(self, height: int, width: int, n: int) -> torch.Tensor:
        """``image_grid_thw`` rows of ``n`` screenshots of ``height x width``."""
        import torch

        return torch.tensor([[1, height // self.patch, width // self.patch]], dtype=torch.long).repeat(n, 1)

    def __call__(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N, H, W, 3)`` uint8 -> ``pixel_values (N*h*w, 3*T*p*p)`` and ``image_grid_thw (N, 3)``."""
        n, height, width, _ = images.shape
        return self.from_patches(self.to_patches(images)), self.grid(height, width, n)

    def check(self, images: torch.Tensor, pixel_values: torch.Tensor, grid: torch.Tensor) -> None:
        """Raise unless the fast path reproduces the processor's output exactly."""
        import torch

        mine, my_grid = self(images)
        if not torch.equal(my_grid, grid.to(my_grid.dtype)) or not torch.equal(mine, pixel_values.to(mine.dtype)):
            diff = (mine - pixel_values).abs().max().item() if mine.shape == pixel_values.shape else float("nan")
            raise RuntimeError(
                "the cached pixel path no longer matches the image processor "
                f"(grid {my_grid[:1].tolist()} vs {grid[:1].tolist()}, max |diff| {diff}); "
                "this transformers version preprocesses images differently: report it"
            )
