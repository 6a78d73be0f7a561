"""The warm-start cache: one checkpoint per :meth:`~darwin.sft.config.SFTConfig.config_hash`
under a cache directory, trained on first use and stored atomically."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from darwin.agents.warm_start import AGENT_FILE, SFT_FILE
from darwin.sft.config import SFTConfig
from darwin.sft.training import train_sft

logger = logging.getLogger(__name__)


def ensure_warm_start(
    cache_dir: str | os.PathLike[str],
    config: SFTConfig | None = None,
    **train_kwargs: Any,
) -> Path:
    """The checkpoint for ``config`` under ``cache_dir``: cached if one with the same config
    hash exists, else trained now (:func:`train_sft`) and stored atomically.

    The directory is ``cache_dir/warm-start-<config_hash>``; a finished checkpoint always
    has ``darwin_sft.json`` (written last). Concurrent callers may both train; the first
    to finish wins and the other's copy is discarded.
    """
    config = config if config is not None else SFTConfig()
    root = Path(cache_dir)
    final = root / f"warm-start-{config.config_hash()}"
    if (final / SFT_FILE).is_file() and (final / AGENT_FILE).is_file():
        logger.info("using cached warm start %s", final)
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        train_sft(config, tmp, **train_kwargs)
        if final.exists():
            if (final / SFT_FILE).is_file():
                logger.info("another process cached %s first; discarding this copy", final)
                return final
            shutil.rmtree(final)  # an unfinished leftover
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
