"""The ``ocr`` reader: RapidOCR's PP-OCR models (shipped inside the ``rapidocr`` wheel) on
onnxruntime's CPU, reading English and Chinese off the screenshot itself, so it works on any
phone (no accessibility tree needed). Nothing is downloaded: the detection and recognition
models load from the installed package.

The engine is built once per process and settings and shared by every reader instance (and so
every phone) of the process; reads go through :func:`~darwin.readers.base.read_marks`, which
caches by screenshot content. RapidOCR batches a screen's text lines through the recogniser
(``rec_batch_num``); screens are read one at a time per reader.

    >>> from darwin.readers.ocr import OCRReader
    >>> OCRReader(min_score=0.6).cache_key
    'ocr(min_score=0.6,scale=1.0,max_marks=48)'
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from darwin.readers.base import Reader, ReaderError, check_screenshot, clean_text, order_marks, scale_box
from darwin.types import Mark

if TYPE_CHECKING:
    from darwin.envs.base import PhoneEnv

logger = logging.getLogger(__name__)

MAX_OCR_SIDE = 4096
"""Longest screenshot side the OCR reader accepts (a 10,000-pixel-tall capture is refused
with a clear error instead of allocating the detector's feature maps for it)."""

_ENGINES: dict[int, Any] = {}
_ENGINES_LOCK = threading.Lock()


def ocr_engine(threads: int) -> Any:
    """The process's RapidOCR engine for ``threads`` onnxruntime threads (built on first use)."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(threads)
        if engine is None:
            try:
                from rapidocr import RapidOCR
            except ImportError as exc:  # a dependency of darwin: only a broken install lacks it
                raise ReaderError(
                    "the ocr reader needs the rapidocr and onnxruntime packages: pip install rapidocr onnxruntime"
                ) from exc
            engine = RapidOCR(
                params={
                    "Global.log_level": "error",
                    "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                }
            )
            _ENGINES[threads] = engine
        return engine


class OCRReader(Reader):
    """Text lines read off the pixels, with their boxes (``clickable`` unknown).

    ``min_score``: lines the recogniser is less sure of are dropped. ``scale``: the screenshot
    is resized by this factor before reading (2.0 reads a 252x560 observation at 504x1120; small
    text reads better larger, at about 4x the time). ``threads``: onnxruntime's threads.
    ``max_marks``: at most this many marks, in reading order.
    """

    def __init__(self, min_score: float = 0.5, scale: float = 1.0, threads: int = 2, max_marks: int = 48) -> None:
        if not 0.0 <= min_score <= 1.0:
            raise ValueError(f"min_score={min_score} must lie in [0, 1]")
        if not 0.25 <= scale <= 4.0:
            raise ValueError(f"scale={scale} must lie in [0.25, 4]")
        if not 1 <= threads <= 64:
            raise ValueError(f"threads={threads} must lie in [1, 64]")
        if not 1 <= max_marks <= 512:
            raise ValueError(f"max_marks={max_marks} must lie in [1, 512]")
        self.min_score = min_score
        self.scale = scale
        self.threads = threads
        self.max_marks = max_marks

    @property
    def cache_key(self) -> str:
        return f"ocr(min_score={self.min_score},scale={self.scale},max_marks={self.max_marks})"

    def read(
        self, screenshot: np.ndarray, device_size: tuple[int, int], env: PhoneEnv | None = None
    ) -> tuple[Mark, ...]:
        check_screenshot(screenshot, device_size)
        h, w = screenshot.shape[:2]
        if max(h, w) * self.scale > MAX_OCR_SIDE:
            raise ReaderError(
                f"a {w}x{h} screenshot read at scale {self.scale} exceeds {MAX_OCR_SIDE} pixels on a side: "
                "capture the screen at the agent's resolution (agent.observation_size) or lower the scale"
            )
        if min(h, w) * self.scale < 8:  # nothing legible fits; the detector would reject the shape
            return ()
        image = np.ascontiguousarray(screenshot, dtype=np.uint8)
        if self.scale != 1.0:
            from PIL import Image

            size = (max(1, round(w * self.scale)), max(1, round(h * self.scale)))
            image = np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BICUBIC))
        result = ocr_engine(self.threads)(image)
        boxes, texts, scores = result.boxes, result.txts, result.scores
        if boxes is None or texts is None or scores is None:
            return ()
        image_size = (image.shape[1], image.shape[0])
        marks = []
        for quad, text, score in zip(boxes, texts, scores, strict=True):
            if float(score) < self.min_score:
                continue
            cleaned = clean_text(str(text))
            if not cleaned:
                continue
            quad = np.asarray(quad, dtype=np.float64)
            box = (quad[:, 0].min(), quad[:, 1].min(), quad[:, 0].max() + 1, quad[:, 1].max() + 1)
            marks.append(
                Mark(
                    text=cleaned,
                    box=scale_box(box, image_size, device_size),
                    clickable=None,
                    score=round(float(score), 4),
                )
            )
        return order_marks(marks, self.max_marks)


__all__ = ["MAX_OCR_SIDE", "OCRReader", "ocr_engine"]
