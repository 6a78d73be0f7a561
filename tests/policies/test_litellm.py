"""LiteLLMPolicy end to end against a local OpenAI-compatible server started by the test."""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from darwin.policies.base import WeightSyncUnsupported
from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig, PolicyAuthError, PolicyRequestError
from darwin.types import ChatMessage, Prompt

SECRET = "sk-darwin-test-7f3c9a1e5b"
KEY_ENV = "DARWIN_TEST_LLM_KEY"


@dataclass
class Server:
    """The shared local OpenAI-compatible server (``openai_server``) answering from a script of
    statuses: an int HTTP status, or ``("sleep", seconds)`` to answer too late for the
    client's timeout; 200 (and an empty script) echoes the request's text after a click."""

    fake: Any
    script: list[Any] = field(default_factory=list)

    @property
    def api_base(self) -> str:
        return self.fake.api_base

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request's ``path``, ``authorization`` header and ``body``."""
        return self.fake.envelopes

    def reply(self, body: dict[str, Any]) -> str | int:
        step = self.script.pop(0) if self.script else 200
        if isinstance(step, tuple):
            time.sleep(step[1])
            step = 200
        if step != 200:
            return step
        user = body["messages"][-1]["content"]
        text = user if isinstance(user, str) else [p for p in user if p["type"] == "text"][0]["text"]
        return f"click(1, 2) # {text}"


@pytest.fixture
def server(openai_server: Any) -> Server:
    state = Server(openai_server)
    openai_server.reply = state.reply
    return state


def policy_for(server: Server, **overrides: Any) -> LiteLLMPolicy:
    cfg: dict[str, Any] = {
        "model": "openai/tiny-agent",
        "api_base": server.api_base,
        "api_key_env": KEY_ENV,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.02,
        "timeout_s": 5.0,
        "max_tokens": 64,
    }
    cfg.update(overrides)
    return LiteLLMPolicy(LiteLLMPolicyConfig(**cfg))


def screenshot(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (20, 12, 3), dtype=np.uint8)


def prompt(text: str, *images: np.ndarray) -> Prompt:
    return Prompt(
        messages=(
            ChatMessage(role="system", text="You are a GUI agent."),
            ChatMessage(role="user", text=text, images=images),
        )
    )


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


async def test_sends_images_text_and_env_key_but_never_logs_it(
    server: Server, key: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)  # everything, LiteLLM's and httpx's debug output included
    image = screenshot(1)
    policy = policy_for(server, temperature=0.0)
    gens = await policy.generate([prompt("Open Settings.", image), prompt("Go home.")])
    assert [g.text for g in gens] == ["click(1, 2) # Open Settings.", "click(1, 2) # Go home."]
    assert all(g.response_ids == () and g.response_logprobs == () and g.prompt_ids == () for g in gens)
    assert all(g.policy_version == 0 for g in gens)

    assert len(server.requests) == 2
    by_text = {json.dumps(r["body"]["messages"][-1]): r for r in server.requests}
    with_image = next(r for k, r in by_text.items() if "Open Settings." in k)
    assert with_image["path"] == "/v1/chat/completions"
    assert with_image["authorization"] == f"Bearer {key}"
    body = with_image["body"]
    assert body["model"] == "tiny-agent" and body["max_tokens"] == 64 and body["temperature"] == 0.0
    system, user = body["messages"]
    assert system == {"role": "system", "content": "You are a GUI agent."}
    image_part, text_part = user["content"]
    assert text_part == {"type": "text", "text": "Open Settings."}
    url = image_part["image_url"]["url"]
    assert image_part["type"] == "image_url" and url.startswith("data:image/png;base64,")
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    np.testing.assert_array_equal(decoded, image)  # lossless PNG of the screenshot
    text_only = next(r for k, r in by_text.items() if "Go home." in k)["body"]["messages"][-1]
    assert text_only == {"role": "user", "content": "Go home."}

    out, err = capfd.readouterr()
    assert key not in caplog.text and key not in out and key not in err
    assert key not in policy.config.model_dump_json() and key not in repr(policy.config)
    assert not any(key in str(v) for v in vars(policy).values())


async def test_transient_500_is_retried(server: Server, key: str, caplog: pytest.LogCaptureFixture) -> None:
    server.script = [500, 200]
    (gen,) = await policy_for(server).generate([prompt("Open Clock.", screenshot())])
    assert gen.text == "click(1, 2) # Open Clock."
    assert len(server.requests) == 2
    assert "attempt 1/4 failed" in caplog.text and key not in caplog.text


async def test_timeout_is_retried(server: Server, key: str) -> None:
    server.script = [("sleep", 1.5), 200]
    (gen,) = await policy_for(server, timeout_s=0.3).generate([prompt("Open Clock.")])
    assert gen.text.startswith("click")
    assert len(server.requests) == 2


async def test_retries_are_bounded(server: Server, key: str) -> None:
    server.script = [503, 502, 500, 200]
    with pytest.raises(PolicyRequestError, match="giving up after 3 attempts") as info:
        await policy_for(server, max_attempts=3).generate([prompt("x")])
    assert len(server.requests) == 3
    assert key not in str(info.value)


async def test_401_is_a_clear_auth_error_and_not_retried(server: Server, key: str) -> None:
    server.script = [401]
    with pytest.raises(PolicyAuthError, match=f"authentication failed.*{KEY_ENV}") as info:
        await policy_for(server).generate([prompt("x")])
    assert len(server.requests) == 1
    assert key not in str(info.value) and info.value.__cause__ is None


async def test_bad_request_is_not_retried(server: Server, key: str) -> None:
    server.script = [400]
    with pytest.raises(PolicyRequestError, match="not retried"):
        await policy_for(server).generate([prompt("x")])
    assert len(server.requests) == 1


async def test_missing_key_variable_fails_before_any_request(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(PolicyAuthError, match=f"{KEY_ENV} is not set"):
        await policy_for(server).generate([prompt("x")])
    assert server.requests == []


async def test_provider_key_unset_fails_at_once_without_retries_or_banner(
    server: Server, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # No api_key_env and no OPENAI_API_KEY: LiteLLM raises "Missing credentials" as a server
    # error before sending anything; it must not be retried as one.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(PolicyAuthError, match="no API key: set api_key_env.*OPENAI_API_KEY"):
        await policy_for(server, api_key_env=None, max_attempts=4, backoff_initial_s=5.0, backoff_max_s=5.0).generate(
            [prompt("x")]
        )
    assert server.requests == []
    captured = capfd.readouterr()
    assert "Give Feedback" not in captured.out + captured.err


# Cancelling LiteLLM mid-request leaves one of its internal coroutines un-awaited.
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
async def test_one_failure_fails_the_batch(server: Server, key: str) -> None:
    server.script = [401]
    with pytest.raises(PolicyAuthError):
        await policy_for(server, max_concurrency=1).generate([prompt("a"), prompt("b"), prompt("c")])
    assert len(server.requests) < 3  # the rest were cancelled, not sent


def test_config_never_holds_a_key() -> None:
    with pytest.raises(ValidationError, match="environment variable") as info:
        LiteLLMPolicyConfig(model="gpt-4o", api_key=SECRET)
    assert SECRET not in str(info.value)
    with pytest.raises(ValidationError, match="name\\* of an environment variable") as info:
        LiteLLMPolicyConfig(model="gpt-4o", api_key_env=SECRET)  # a pasted key, not a name
    assert SECRET not in str(info.value)
    with pytest.raises(ValidationError, match="credentials"):
        LiteLLMPolicyConfig(model="gpt-4o", extra_params={"api_key": SECRET})
    with pytest.raises(ValidationError) as info:
        LiteLLMPolicyConfig(model="", max_tokens=0, timeout_s=0)
    assert {e["loc"][0] for e in info.value.errors()} == {"model", "max_tokens", "timeout_s"}


def test_load_weights_is_unsupported() -> None:
    policy = LiteLLMPolicy(LiteLLMPolicyConfig(model="gpt-4o"))
    with pytest.raises(WeightSyncUnsupported):
        policy.load_weights({}, 1)
