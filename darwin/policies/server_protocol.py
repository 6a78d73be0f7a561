"""The wire side of :class:`~darwin.policies.server_client.ServerPolicy`: reading a vLLM / SGLang
chat-completion answer (:func:`parse_chat_completion`), the server's HTTP errors and which of
them are worth another attempt, and the message for a prompt the server rendered differently."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from darwin.policies.litellm import PolicyRequestError

if TYPE_CHECKING:
    from darwin.models.factory import VLM

__all__ = ["ServerCompletion", "parse_chat_completion"]

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
_VLLM_LOGPROB_FLOOR = -9999.0
"""vLLM clamps every reported log-prob to at least this value (and uses it when it has none)."""


@dataclass(frozen=True)
class ServerCompletion:
    """The parts of one chat-completion answer a policy records."""

    prompt_ids: tuple[int, ...] | None
    response_ids: tuple[int, ...]
    response_logprobs: tuple[float, ...]
    finish_reason: str | None
    model: str | None


def parse_chat_completion(payload: object) -> ServerCompletion:
    """Token ids and log-probs of a vLLM / SGLang chat-completion JSON body.

    Sampled ids come from ``choices[0].token_ids`` (``return_token_ids``) or, failing that,
    from the ``"token_id:<id>"`` tokens of ``choices[0].logprobs.content``
    (``return_tokens_as_token_ids``); log-probs from ``logprobs.content[k].logprob``; the
    prompt ids from ``prompt_token_ids`` (vLLM: top level; SGLang: on the choice).
    Raises :class:`PolicyRequestError` naming the missing field and the server option.

    >>> body = {"model": "m", "prompt_token_ids": [1, 2], "choices": [{"index": 0, "finish_reason": "stop",
    ...     "message": {"role": "assistant", "content": "hi"}, "token_ids": [7, 9],
    ...     "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5, "top_logprobs": []},
    ...                              {"token": "token_id:9", "logprob": -1.0, "top_logprobs": []}]}}]}
    >>> c = parse_chat_completion(body)
    >>> c.prompt_ids, c.response_ids, c.response_logprobs
    ((1, 2), (7, 9), (-0.5, -1.0))
    """
    if not isinstance(payload, Mapping):
        raise PolicyRequestError(f"malformed completion: expected a JSON object, got {type(payload).__name__}")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise PolicyRequestError("malformed completion: no choices[0] object in the response")
    choice = choices[0]
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list):
        raise PolicyRequestError(
            "the server returned no log-probs (choices[0].logprobs.content is missing); the request asked "
            "logprobs=true, top_logprobs=0: check that the server supports log-probs (vLLM --max-logprobs >= 0)"
        )
    values: list[float] = []
    tokens: list[int | None] = []
    for k, entry in enumerate(content):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("logprob"), (int, float)):
            raise PolicyRequestError(f"malformed completion: logprobs.content[{k}] has no numeric logprob")
        value = float(entry["logprob"])
        if not math.isfinite(value) or value <= _VLLM_LOGPROB_FLOOR:
            raise PolicyRequestError(
                f"logprobs.content[{k}].logprob = {value}: the server has no log-prob for the sampled token "
                f"(vLLM reports {_VLLM_LOGPROB_FLOOR} then); was a forbidden token sampled?"
            )
        values.append(value)
        match = _TOKEN_ID.match(str(entry.get("token", "")))
        tokens.append(int(match.group(1)) if match else None)
    raw_ids = choice.get("token_ids")
    if raw_ids is not None:
        if not isinstance(raw_ids, list) or not all(isinstance(t, int) and t >= 0 for t in raw_ids):
            raise PolicyRequestError("malformed completion: choices[0].token_ids is not a list of token ids")
        ids = [int(t) for t in raw_ids]
        parsed = [t for t in tokens if t is not None]
        if len(parsed) == len(tokens) and parsed != ids:
            raise PolicyRequestError(
                "choices[0].token_ids disagree with the 'token_id:<id>' tokens of logprobs.content"
            )
    elif all(t is not None for t in tokens):
        ids = [int(t) for t in tokens if t is not None]
    else:
        raise PolicyRequestError(
            "the server returned no sampled token ids: neither choices[0].token_ids (request field "
            "return_token_ids; vLLM 0.10.2+, SGLang) nor 'token_id:<id>' log-prob tokens (request field "
            "return_tokens_as_token_ids, or vLLM's --return-tokens-as-token-ids flag); upgrade the server"
        )
    if len(ids) != len(values):
        raise PolicyRequestError(f"the server returned {len(ids)} token ids but {len(values)} log-probs")
    prompt_raw = payload.get("prompt_token_ids")
    if prompt_raw is None:
        prompt_raw = choice.get("prompt_token_ids")
    prompt_ids: tuple[int, ...] | None = None
    if prompt_raw is not None:
        if not isinstance(prompt_raw, list) or not all(isinstance(t, int) for t in prompt_raw):
            raise PolicyRequestError("malformed completion: prompt_token_ids is not a list of token ids")
        prompt_ids = tuple(int(t) for t in prompt_raw)
    finish = choice.get("finish_reason")
    model = payload.get("model")
    return ServerCompletion(
        prompt_ids=prompt_ids,
        response_ids=tuple(ids),
        response_logprobs=tuple(values),
        finish_reason=finish if isinstance(finish, str) else None,
        model=model if isinstance(model, str) else None,
    )


class _HTTPStatusError(RuntimeError):
    """A non-2xx answer, with the server's own error message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _error_message(response: httpx.Response) -> str:
    """The server's error text: vLLM's ``{"error": {"message"}}`` / ``{"message"}``, FastAPI's ``{"detail"}``."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:500]
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return error["message"][:500]
        for key in ("message", "detail", "error"):
            if isinstance(body.get(key), str):
                return body[key][:500]
    return response.text[:500]


def _is_transient(exc: BaseException) -> bool:
    """Timeouts, connection errors, HTTP 408/409/429 and 5xx: worth another attempt."""
    if isinstance(exc, (httpx.TransportError, asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    return isinstance(exc, _HTTPStatusError) and (exc.status in (408, 409, 429) or exc.status >= 500)


def _prompt_mismatch(local: tuple[int, ...], server: tuple[int, ...], vlm: VLM) -> str:
    first = next(
        (i for i, (x, y) in enumerate(zip(local, server, strict=False)) if x != y), min(len(local), len(server))
    )
    tok = vlm.tokenizer
    return (
        f"the server rendered the prompt as {len(server)} tokens, the local processor as {len(local)}; first "
        f"difference at token {first} (server {tok.decode(list(server[first : first + 8]))!r} vs local "
        f"{tok.decode(list(local[first : first + 8]))!r}). The server's chat template or image processing "
        "(min/max pixels) differ from the checkpoint the learner uses: start the server from the same "
        "checkpoint directory (vLLM: same --chat-template, --mm-processor-kwargs max_pixels), or set "
        "verify_prompt_ids=False to let the learner reject the rows later"
    )
