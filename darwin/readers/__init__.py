"""Readers: what an agent knows of a screen beyond its pixels (:mod:`darwin.readers.base`).

Built-ins, chosen as the component ``agent.reader``: ``none`` (:class:`NoReader`), ``ocr``
(:class:`OCRReader`, RapidOCR's shipped models), ``elements`` (:class:`ElementsReader`, the
accessibility tree); a user's :class:`Reader` subclass by import path.

    >>> from darwin.readers import OCRReader, Reader
    >>> issubclass(OCRReader, Reader)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "ElementsReader",
    "MarkCache",
    "NoReader",
    "OCRReader",
    "Reader",
    "ReaderError",
    "ReaderStats",
    "ReaderUnavailable",
    "read_marks",
    "read_marks_sync",
    "reader_stats",
]

if TYPE_CHECKING:
    from darwin.readers.base import (
        MarkCache,
        NoReader,
        Reader,
        ReaderError,
        ReaderStats,
        ReaderUnavailable,
        read_marks,
        read_marks_sync,
        reader_stats,
    )
    from darwin.readers.elements import ElementsReader
    from darwin.readers.ocr import OCRReader
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports);
    # the OCR engine (onnxruntime) loads only when a reader first reads
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "ElementsReader": "darwin.readers.elements",
            "MarkCache": "darwin.readers.base",
            "NoReader": "darwin.readers.base",
            "OCRReader": "darwin.readers.ocr",
            "Reader": "darwin.readers.base",
            "ReaderError": "darwin.readers.base",
            "ReaderStats": "darwin.readers.base",
            "ReaderUnavailable": "darwin.readers.base",
            "read_marks": "darwin.readers.base",
            "read_marks_sync": "darwin.readers.base",
            "reader_stats": "darwin.readers.base",
        },
    )
