"""Secrets never reach the run database: the names and values that look like credentials, and
the redaction every stored run config passes through (:func:`redact_secrets`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, JsonValue, TypeAdapter

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


# --------------------------------------------------------------------------- secrets

# A name is secret-looking when its last word is one of these (``api_key``, ``hf_token``,
# ``db_password``) or when it contains one of the always-secret words anywhere. Matching
# on words rather than substrings keeps harmless fields such as ``max_tokens``,
# ``key_components`` and ``tokenizer`` in the stored config.
_SECRET_LAST_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "authorization",
        "auth",
        "cookie",
    }
)
_SECRET_ANY_WORDS = frozenset({"apikey", "secret", "password", "passwd", "credentials"})
_SECRET_VALUE_PATTERNS = re.compile(
    r"""
      \bsk-[A-Za-z0-9_\-]{6,}            # OpenAI / Anthropic style (sk-..., sk-ant-...)
    | \bAIza[0-9A-Za-z_\-]{20,}          # Google API keys
    | \bgh[pousr]_[A-Za-z0-9]{20,}       # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bhf_[A-Za-z0-9]{20,}              # Hugging Face tokens
    | \bxox[abprs]-[A-Za-z0-9\-]{10,}    # Slack tokens
    | \bAKIA[0-9A-Z]{16}\b               # AWS access key ids
    | \bBearer\s+\S{8,}                  # HTTP bearer credentials
    | [a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@  # URLs with user:password@
    """,
    re.VERBOSE,
)


def _name_words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_name(name: str) -> bool:
    """True if a config key looks like it holds a credential (``api_key``, ``hfToken``...)."""
    words = _name_words(name)
    if not words:
        return False
    joined = "".join(words)
    return words[-1] in _SECRET_LAST_WORDS or any(w in _SECRET_ANY_WORDS for w in words) or joined.endswith("apikey")


def _secret_env_values() -> frozenset[str]:
    """Values of secret-looking environment variables (so they are caught under any name)."""
    return frozenset(v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= 8)


def is_secret_value(value: str, env_secrets: frozenset[str] | None = None) -> bool:
    """True if a string looks like (or contains) a credential, or equals a secret env var."""
    if _SECRET_VALUE_PATTERNS.search(value):
        return True
    secrets = _secret_env_values() if env_secrets is None else env_secrets
    return any(s in value for s in secrets)


_DROP = object()


def redact_secrets(value: JsonValue) -> JsonValue:
    """Return a copy of a JSON-like value with everything that looks like a secret dropped.

    Drops mapping entries whose key looks secret (``api_key``, ``token``, ``password``,
    ``client_secret``...), and any string (mapping value or list item) that looks like a
    credential (``sk-...``, ``hf_...``, ``Bearer ...``, ``scheme://user:pass@host``) or equals
    the value of a secret-looking environment variable (``OPENAI_API_KEY``...).

    >>> redact_secrets({"model": "gpt-4o", "api_key": "x", "n": [1, "sk-abcdef123"]})
    {'model': 'gpt-4o', 'n': [1]}
    """
    env_secrets = _secret_env_values()

    def walk(v: JsonValue) -> object:
        if isinstance(v, str):
            return _DROP if is_secret_value(v, env_secrets) else v
        if isinstance(v, Mapping):
            out: dict[str, JsonValue] = {}
            for k, item in v.items():
                if is_secret_name(str(k)):
                    continue
                cleaned = walk(item)
                if cleaned is not _DROP:
                    out[str(k)] = cleaned  # type: ignore[assignment]  # walk returns a JsonValue once _DROP is ruled out
            return out
        if isinstance(v, list | tuple):
            return [c for c in (walk(item) for item in v) if c is not _DROP]
        return v

    result = walk(value)
    return None if result is _DROP else result  # type: ignore[return-value]  # a JsonValue once _DROP is ruled out


def _config_to_json(config: BaseModel | DataclassInstance) -> JsonValue:
    """Dump a pydantic model or dataclass config to JSON-compatible data (mode='json')."""
    if isinstance(config, BaseModel):
        return config.model_dump(mode="json")
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return TypeAdapter(type(config)).dump_python(config, mode="json")
    raise TypeError(f"config must be a pydantic BaseModel or a dataclass instance, got {type(config).__name__}")
