"""Screenshots over ADB: decoding and validating ``screencap -p`` PNGs, and the frames that
screen stabilisation compares (part of :mod:`darwin.envs.adb`).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import numpy as np
from isal import isal_zlib
from PIL import Image, UnidentifiedImageError

from darwin.envs.base import InfraError

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ======================================================================================
# Screenshots
# ======================================================================================


def _decode_png_unfiltered(data: bytes) -> np.ndarray | None:
    """Fast path for 8-bit RGB/RGBA PNGs whose rows all use filter 0 (what SimPhone and
    some screen-capture tools write): ISA-L inflate + a reshape. ``None`` otherwise."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        return None
    idat = []
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat.append(data[pos + 8 : pos + 8 + length])
        elif kind == b"IEND":
            break
        pos += 12 + length
    try:
        raw = isal_zlib.decompress(b"".join(idat))
    except isal_zlib.error:  # type: ignore[misc]  # isal's stub types error as an instance; it is an exception class
        return None
    stride = width * channels + 1
    if len(raw) != stride * height:
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride)
    if rows[:, 0].any():
        return None
    return rows[:, 1:].reshape(height, width, channels)[..., :3]


def decode_screenshot(data: bytes) -> np.ndarray:
    """Decode ``screencap -p`` bytes to ``(H, W, 3)`` uint8; raises ``InfraError`` on
    anything that is not a complete PNG (truncated transfers, error text, empty output)."""
    if not data.startswith(_PNG_SIGNATURE):
        head = data[:60]
        raise InfraError("bad_screenshot", f"screencap returned {len(data)} bytes that are not a PNG: {head!r}")
    array = _decode_png_unfiltered(data)
    if array is not None:
        return array
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InfraError("bad_screenshot", f"screencap PNG of {len(data)} bytes does not decode: {exc}") from None


def _resize(array: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    if size is None:
        return array
    w, h = size
    if array.shape[1] == w and array.shape[0] == h:
        return array
    image = Image.fromarray(np.ascontiguousarray(array))  # a contiguous copy is cheaper for Pillow
    factor = min(array.shape[1] // w, array.shape[0] // h)
    if factor >= 2:
        image = image.reduce(factor)
    return np.asarray(image.resize((w, h), Image.Resampling.BILINEAR))


@dataclass
class _Frame:
    png: bytes
    captured_at: float
    _array: np.ndarray | None = None
    _thumb: np.ndarray | None = None
    _resized: tuple[tuple[int, int], np.ndarray] | None = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = decode_screenshot(self.png)
        return self._array

    def resized(self, size: tuple[int, int] | None) -> np.ndarray:
        """The frame at ``size`` (cached: observations of one frame are resized once)."""
        if size is None:
            return self.array()
        if self._resized is None or self._resized[0] != size:
            self._resized = (size, _resize(self.array(), size))
        return self._resized[1]

    def thumbnail(self) -> np.ndarray:
        if self._thumb is None:
            a = self.array()
            self._thumb = np.asarray(Image.fromarray(a).reduce(8), dtype=np.int16)
        return self._thumb
