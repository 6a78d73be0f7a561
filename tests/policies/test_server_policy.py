"""ServerPolicy against a real local HTTP server speaking vLLM's chat-completion shapes.

The server (:class:`LocalPolicyServer`) samples with darwin's tiny model, so its log-probs are
real; the tests check them against a teacher-forced forward of the same model, the learner's
scoring function, and local sampling with the same seeds; weight sync through both endpoints;
and every failure mode a real server can produce (auth, 5xx, missing fields) against a
stdlib HTTP server answering with crafted bodies.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from pydantic import ValidationError

from darwin.models.config import TinyVLMConfig
from darwin.models.factory import VLM, build_tiny_vlm
from darwin.models.scoring import compute_response_logprobs
from darwin.policies.base import WeightSyncUnsupported
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.policies.litellm import PolicyAuthError, PolicyRequestError
from darwin.policies.local_policy_server import LocalPolicyServer
from darwin.policies.server_client import ServerPolicy
from darwin.policies.server_client_config import ServerPolicyConfig
from darwin.policies.server_protocol import parse_chat_completion
from darwin.run.build import policy_factory
from darwin.run.config import PolicyConfig
from darwin.types import ChatMessage, Prompt

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

CONFIG = TinyVLMConfig(screen_width=112, screen_height=224)
NEW_TOKENS = 12


def tiny() -> VLM:
    """A fresh tiny model; the same seed gives bit-identical weights (server and client copies)."""
    return build_tiny_vlm(CONFIG, seed=0)


def screen(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (224, 112, 3), dtype=np.uint8)


def prompts(n: int = 4, *, seeded: bool = True) -> list[Prompt]:
    """Ragged: with and without screenshots, one with two, different lengths."""
    out = []
    for i in range(n):
        images = () if i % 3 == 0 else (screen(i),) if i % 3 == 1 else (screen(i), screen(i + 100))
        out.append(
            Prompt(
                messages=(
                    ChatMessage(role="system", text="You are a GUI agent."),
                    ChatMessage(role="user", text=f"Task {i}: open the app number {i * 7}.", images=images),
                ),
                seed=1000 + i if seeded else None,
            )
        )
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPolicyServer]:
    with LocalPolicyServer(tiny(), served_model_name="tiny", max_new_tokens=NEW_TOKENS, max_batch=8) as srv:
        yield srv


@pytest.fixture(scope="module")
def local() -> VLM:
    return tiny()


def config(base_url: str, **overrides: object) -> ServerPolicyConfig:
    values: dict[str, object] = {
        "base_url": base_url,
        "model": "tiny",
        "max_tokens": NEW_TOKENS,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.02,
        "max_attempts": 3,
        "timeout_s": 30.0,
    }
    values.update(overrides)
    return ServerPolicyConfig(**values)


def test_logprobs_equal_teacher_forced_forward_and_learner_scoring(server: LocalPolicyServer, local: VLM) -> None:
    policy = ServerPolicy(local, config(server.base_url))
    batch = prompts(6)
    gens = asyncio.run(policy.generate(batch))
    reference = HFPolicy(local, HFPolicyConfig(max_new_tokens=NEW_TOKENS))
    teacher = reference.teacher_forced_logprobs(batch, [g.response_ids for g in gens])
    inputs = policy.build_inputs(batch)
    learner, _ = compute_response_logprobs(
        local.model,
        {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)},
        [g.response_ids for g in gens],
        forbidden=policy.forbidden_mask,
        temperature=policy.logprob_temperature,
    )
    for row, (gen, lp) in enumerate(zip(gens, teacher, strict=True)):
        assert len(gen.response_ids) == len(gen.response_logprobs) >= 1
        recorded = torch.tensor(gen.response_logprobs)
        assert torch.allclose(recorded, lp, atol=1e-4), (row, recorded, lp)
        assert torch.allclose(recorded, learner[row, : len(gen.response_ids)].float(), atol=1e-4)
        mask = inputs["attention_mask"][row].bool()
        assert gen.prompt_ids == tuple(inputs["input_ids"][row][mask].tolist())  # what the learner re-tokenizes
        assert gen.policy_version == 0
    reference.close()


def test_token_ids_round_trip_and_equal_local_sampling_with_the_same_seeds(
    server: LocalPolicyServer, local: VLM
) -> None:
    batch = prompts(5)
    gens = asyncio.run(ServerPolicy(local, config(server.base_url)).generate(batch))
    with HFPolicy(local, HFPolicyConfig(max_new_tokens=NEW_TOKENS)) as reference:
        expected = reference.generate_sync(batch)
    assert [g.response_ids for g in gens] == [e.response_ids for e in expected]
    assert [g.text for g in gens] == [e.text for e in expected]
    assert all(g.response_ids and all(isinstance(t, int) for t in g.response_ids) for g in gens)


def test_request_asks_the_server_for_ids_logprobs_and_the_full_distribution(local: VLM) -> None:
    policy = ServerPolicy(local, config("http://127.0.0.1:1/v1", temperature=0.7))
    body = policy.request_body(prompts(2)[1], seed=5)
    assert policy.config.base_url == "http://127.0.0.1:1"
    assert body["logprobs"] is True and body["top_logprobs"] == 0
    assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    assert (body["temperature"], body["top_p"], body["top_k"], body["repetition_penalty"]) == (0.7, 1.0, -1, 1.0)
    assert body["seed"] == 5 and body["skip_special_tokens"] is False
    assert set(body["stop_token_ids"]) == set(policy.eos_token_ids)
    assert {int(k) for k in body["logit_bias"]} == set(policy.forbidden_token_ids)
    assert set(body["logit_bias"].values()) == {-100.0}
    image_part = body["messages"][1]["content"][0]
    assert image_part["type"] == "image_url" and image_part["image_url"]["url"].startswith("data:image/png;base64,")
    assert policy.logprob_temperature == 0.7


def test_many_concurrent_prompts_are_batched_by_the_server_and_keep_their_order(
    server: LocalPolicyServer, local: VLM
) -> None:
    batch = prompts(24)
    before = server.batcher_stats().batches
    gens = asyncio.run(ServerPolicy(local, config(server.base_url, max_concurrency=24)).generate(batch))
    stats = server.batcher_stats()
    assert len(gens) == 24
    assert stats.batches - before < 24  # requests shared batches on the server
    one_by_one = [asyncio.run(ServerPolicy(local, config(server.base_url)).generate([p]))[0] for p in batch[:6]]
    assert [g.response_ids for g in gens[:6]] == [g.response_ids for g in one_by_one]


def test_policy_draws_seeds_in_call_order_when_prompts_have_none(server: LocalPolicyServer, local: VLM) -> None:
    batch = prompts(3, seeded=False)
    a = asyncio.run(ServerPolicy(local, config(server.base_url, seed=7)).generate(batch))
    b = asyncio.run(ServerPolicy(local, config(server.base_url, seed=7)).generate(batch))
    assert [g.response_ids for g in a] == [g.response_ids for g in b]


def _perturbed(vlm: VLM, scale: float, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        k: v + scale * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v.clone()
        for k, v in vlm.model.state_dict().items()
    }


def _low_rank_update(vlm: VLM, rank: int, seed: int, targets: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The base weights plus a rank-``rank`` change on every target linear (what a LoRA learner sends)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in vlm.model.state_dict().items():
        module = key.rsplit(".", 1)[0]
        if key.endswith(".weight") and module.rsplit(".", 1)[-1] in targets and value.dim() == 2:
            b = torch.randn(value.shape[0], rank, generator=gen) * 0.3
            a = torch.randn(rank, value.shape[1], generator=gen) * 0.3
            out[key] = value + b @ a
        else:
            out[key] = value.clone()
    return out


def _check_against(weights: dict[str, torch.Tensor], batch: list[Prompt], gens: list) -> float:
    """Max |server log-prob - teacher-forced log-prob under ``weights``|."""
    vlm = tiny()
    vlm.model.load_state_dict(weights)
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=NEW_TOKENS)) as reference:
        teacher = reference.teacher_forced_logprobs(batch, [g.response_ids for g in gens])
    return max(float((torch.tensor(g.response_logprobs) - t).abs().max()) for g, t in zip(gens, teacher, strict=True))


def test_disk_weight_sync_changes_the_servers_model_and_version(tmp_path: Path) -> None:
    local = tiny()
    batch = prompts(4)
    with LocalPolicyServer(tiny(), served_model_name="tiny", max_new_tokens=NEW_TOKENS) as srv:
        policy = ServerPolicy(local, config(srv.base_url, weight_sync="disk", weights_dir=str(tmp_path)))
        before = asyncio.run(policy.generate(batch))
        new = _perturbed(local, 0.05, seed=1)
        policy.load_weights(new, version=1)
        after = asyncio.run(policy.generate(batch))
        assert policy.version == 1 and all(g.policy_version == 1 for g in after)
        assert _check_against(new, batch, after) < 1e-4  # the server now samples from the new model
        assert [g.response_ids for g in after] != [g.response_ids for g in before]
        assert _check_against(dict(local.model.state_dict()), batch, after) > 1e-3
        assert (tmp_path / "v1" / "config.json").is_file()
        policy.load_weights(_perturbed(local, 0.05, seed=2), version=2)
        policy.load_weights(_perturbed(local, 0.05, seed=3), version=3)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["v2", "v3"]  # keep_versions=2
        with pytest.raises(ValueError, match="greater than the current version"):
            policy.load_weights(new, version=3)


def test_a_resumed_run_resyncs_a_server_left_ahead_of_its_checkpoint(tmp_path: Path) -> None:
    """A run killed after pushing version 1 but before checkpointing it resumes at version 0:
    the server must serve version 0's weights again, not the orphaned push."""
    from darwin.learner.checkpoint import sync_policy_to_checkpoint

    local = tiny()
    batch = prompts(4)
    saved = {k: v.clone() for k, v in local.model.state_dict().items()}  # the checkpoint's actor (version 0)
    with LocalPolicyServer(tiny(), served_model_name="tiny", max_new_tokens=NEW_TOKENS) as srv:
        killed = ServerPolicy(local, config(srv.base_url, weight_sync="disk", weights_dir=str(tmp_path / "a")))
        assert killed.served_weight_version() == "0"
        killed.load_weights(_perturbed(local, 0.05, seed=1), version=1)  # pushed, never checkpointed
        assert killed.served_weight_version() == "1"
        resumed = ServerPolicy(tiny(), config(srv.base_url, weight_sync="disk", weights_dir=str(tmp_path / "b")))
        sync_policy_to_checkpoint(resumed, saved, 0, tmp_path)
        assert resumed.served_weight_version() == "0" and resumed.version == 0
        assert _check_against(saved, batch, asyncio.run(resumed.generate(batch))) < 1e-4
        assert not resumed.resync_weights(saved, 0)  # in step now: nothing is pushed
        lora = ServerPolicy(tiny(), config(srv.base_url, weight_sync="lora", weights_dir=str(tmp_path / "c")))
        assert not lora.resync_weights(saved, 0)  # LoRA requests name the base model: never ahead


def test_lora_weight_sync_loads_versioned_adapters(tmp_path: Path) -> None:
    local = tiny()
    batch = prompts(4)
    targets = ("q_proj", "v_proj")
    with LocalPolicyServer(tiny(), served_model_name="tiny", max_new_tokens=NEW_TOKENS) as srv:
        policy = ServerPolicy(
            local,
            config(
                srv.base_url, weight_sync="lora", weights_dir=str(tmp_path), lora_rank=4, lora_target_modules=targets
            ),
        )
        for version in (1, 2, 3):
            new = _low_rank_update(local, rank=4, seed=version, targets=targets)
            policy.load_weights(new, version=version)
            gens = asyncio.run(policy.generate(batch))
            assert policy.served_model == f"darwin-v{version}" == srv.active_model
            assert all(g.policy_version == version for g in gens)
            assert _check_against(new, batch, gens) < 1e-4
        served = [m["id"] for m in httpx.get(srv.base_url + "/v1/models").json()["data"]]
        assert served == ["tiny", "darwin-v2", "darwin-v3"]  # v1 unloaded (keep_versions=2)
        config_json = json.loads((tmp_path / "darwin-v3" / "adapter_config.json").read_text())
        assert config_json["r"] == 4 and sorted(config_json["target_modules"]) == sorted(targets)


def test_lora_sync_refuses_weights_an_adapter_cannot_carry(tmp_path: Path, local: VLM) -> None:
    policy = ServerPolicy(
        local,
        config(
            "http://127.0.0.1:1",
            weight_sync="lora",
            weights_dir=str(tmp_path),
            lora_rank=2,
            lora_target_modules=("q_proj",),
        ),
    )
    with pytest.raises(ValueError, match="non-adapted tensors changed"):
        policy.write_lora_adapter(_perturbed(local, 0.01, seed=0), tmp_path / "a")
    with pytest.raises(ValueError, match="changes of rank > 2"):
        policy.write_lora_adapter(_low_rank_update(local, rank=5, seed=0, targets=("q_proj",)), tmp_path / "b")


def test_weight_sync_none_and_config_errors(local: VLM) -> None:
    with pytest.raises(WeightSyncUnsupported, match="weight_sync"):
        ServerPolicy(local, config("http://127.0.0.1:1")).load_weights({}, 1)
    with pytest.raises(ValidationError, match="needs weights_dir"):
        config("http://127.0.0.1:1", weight_sync="lora")
    with pytest.raises(ValidationError, match="http"):
        config("127.0.0.1:8000")
    with pytest.raises(ValidationError, match="name"):
        config("http://127.0.0.1:1", api_key_env="sk-this-is-a-key")


def test_learner_trains_through_a_server_policy(server: LocalPolicyServer, tmp_path: Path) -> None:
    from darwin.learner.config import LearnerConfig, LoraConfig
    from darwin.learner.local import LocalLearner

    local = tiny()
    with LocalPolicyServer(tiny(), served_model_name="tiny", max_new_tokens=NEW_TOKENS) as srv:
        policy = ServerPolicy(
            local,
            config(
                srv.base_url,
                weight_sync="lora",
                weights_dir=str(tmp_path),
                lora_rank=2,
                lora_target_modules=("q_proj", "v_proj"),
            ),
        )
        learner = LocalLearner(
            policy,
            LearnerConfig(
                speed={"device": "cpu"}, finetunes={"lora": LoraConfig(rank=2, target_modules=("q_proj", "v_proj"))}
            ),
        )
        with torch.no_grad():  # stand-in for an optimizer step on the adapters
            for name, param in learner.actor.named_parameters():
                if "lora_B" in name:
                    param.add_(0.05)
        policy.load_weights(learner.actor_state_dict(), version=1)
        gens = asyncio.run(policy.generate(prompts(3)))
        assert _check_against(learner.actor_state_dict(), prompts(3), gens) < 1e-4


# --------------------------------------------------------------------------------------
# Failure modes, against a server answering with crafted bodies
# --------------------------------------------------------------------------------------
class Scripted:
    """A stdlib HTTP server: ``answer(attempt, body) -> (status, json or text)``; counts requests."""

    def __init__(self, answer: Callable[[int, dict], tuple[int, object]]) -> None:
        self.answer = answer
        self.bodies: list[dict] = []
        self.headers: list[str | None] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.bodies.append(body)
                owner.headers.append(self.headers.get("Authorization"))
                status, reply = owner.answer(len(owner.bodies), body)
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Scripted:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def vllm_body(prompt_token_ids: list[int], ids: list[int], values: list[float], **drop: bool) -> dict:
    choice: dict = {
        "index": 0,
        "message": {"role": "assistant", "content": "x"},
        "finish_reason": "length",
        "stop_reason": None,
        "token_ids": ids,
        "logprobs": {
            "content": [
                {"token": f"token_id:{t}", "logprob": v, "bytes": [], "top_logprobs": []}
                for t, v in zip(ids, values, strict=True)
            ]
        },
    }
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "tiny",
        "choices": [choice],
        "usage": {"prompt_tokens": len(prompt_token_ids), "completion_tokens": len(ids), "total_tokens": 0},
        "prompt_token_ids": prompt_token_ids,
    }
    if drop.get("token_ids"):
        del choice["token_ids"]
    if drop.get("token_id_strings"):
        for entry in choice["logprobs"]["content"]:
            entry["token"] = "abc"
    if drop.get("logprobs"):
        choice["logprobs"] = None
    if drop.get("prompt_ids"):
        del body["prompt_token_ids"]
    return body


def _local_ids(policy: ServerPolicy, prompt: Prompt) -> list[int]:
    inputs = policy.build_inputs([prompt])
    return inputs["input_ids"][0][inputs["attention_mask"][0].bool()].tolist()


def test_parse_accepts_either_id_source_and_names_what_is_missing() -> None:
    ok = parse_chat_completion(vllm_body([1], [5, 6], [-0.1, -0.2], token_ids=True))
    assert ok.response_ids == (5, 6)  # from the "token_id:<id>" strings alone
    ok = parse_chat_completion(vllm_body([1], [5, 6], [-0.1, -0.2], token_id_strings=True))
    assert ok.response_ids == (5, 6)  # from choices[0].token_ids alone
    with pytest.raises(PolicyRequestError, match="return_tokens_as_token_ids"):
        parse_chat_completion(vllm_body([1], [5], [-0.1], token_ids=True, token_id_strings=True))
    with pytest.raises(PolicyRequestError, match="no log-probs"):
        parse_chat_completion(vllm_body([1], [5], [-0.1], logprobs=True))
    with pytest.raises(PolicyRequestError, match="no log-prob for the sampled token"):
        parse_chat_completion(vllm_body([1], [5], [-9999.0]))
    with pytest.raises(PolicyRequestError, match="choices"):
        parse_chat_completion({"object": "chat.completion"})
    sglang = vllm_body([1], [5], [-0.1], prompt_ids=True)
    sglang["choices"][0]["prompt_token_ids"] = [1]
    assert parse_chat_completion(sglang).prompt_ids == (1,)


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ({"logprobs": True}, "no log-probs"),
        ({"token_ids": True, "token_id_strings": True}, "return_tokens_as_token_ids"),
        ({"prompt_ids": True}, "return_token_ids"),
    ],
)
def test_missing_fields_fail_with_the_server_option_to_set(local: VLM, drop: dict, message: str) -> None:
    policy = ServerPolicy(local, config("http://127.0.0.1:1"))
    prompt = prompts(1)[0]
    with Scripted(lambda n, body: (200, vllm_body(_local_ids(policy, prompt), [5], [-0.5], **drop))) as srv:
        policy = ServerPolicy(local, config(srv.url))
        with pytest.raises(PolicyRequestError, match=message):
            asyncio.run(policy.generate([prompt]))
        assert len(srv.bodies) == 1  # a malformed answer is not retried


def test_prompt_rendered_differently_by_the_server_is_caught(local: VLM) -> None:
    prompt = prompts(1)[0]
    with Scripted(lambda n, body: (200, vllm_body([1, 2, 3], [5], [-0.5]))) as srv:
        with pytest.raises(PolicyRequestError, match="chat template"):
            asyncio.run(ServerPolicy(local, config(srv.url)).generate([prompt]))
        gen = asyncio.run(ServerPolicy(local, config(srv.url, verify_prompt_ids=False)).generate([prompt]))
        assert gen[0].prompt_ids == (1, 2, 3)  # recorded as served; the learner rejects the row later


def test_auth_errors_raise_at_once(local: VLM, monkeypatch: pytest.MonkeyPatch, server: LocalPolicyServer) -> None:
    with Scripted(lambda n, body: (401, {"error": "Unauthorized"})) as srv:
        monkeypatch.setenv("DARWIN_TEST_VLLM_KEY", "secret-key-123")
        with pytest.raises(PolicyAuthError, match="DARWIN_TEST_VLLM_KEY"):
            asyncio.run(ServerPolicy(local, config(srv.url, api_key_env="DARWIN_TEST_VLLM_KEY")).generate(prompts(1)))
        assert len(srv.bodies) == 1 and srv.headers == ["Bearer secret-key-123"]
    monkeypatch.delenv("DARWIN_TEST_VLLM_KEY")
    with pytest.raises(PolicyAuthError, match="not set"):
        asyncio.run(
            ServerPolicy(local, config(server.base_url, api_key_env="DARWIN_TEST_VLLM_KEY")).generate(prompts(1))
        )


def test_local_server_checks_the_api_key(local: VLM, monkeypatch: pytest.MonkeyPatch) -> None:
    with LocalPolicyServer(tiny(), served_model_name="tiny", max_new_tokens=4, api_key="k-123") as srv:
        with pytest.raises(PolicyAuthError, match="HTTP 401"):
            asyncio.run(ServerPolicy(local, config(srv.base_url, max_tokens=4)).generate(prompts(1)))
        monkeypatch.setenv("DARWIN_TEST_LOCAL_KEY", "k-123")
        policy = ServerPolicy(local, config(srv.base_url, max_tokens=4, api_key_env="DARWIN_TEST_LOCAL_KEY"))
        gens = asyncio.run(policy.generate(prompts(1)))
        assert 1 <= len(gens[0].response_ids) <= 4


def test_server_errors_are_retried_then_reported(local: VLM, caplog: pytest.LogCaptureFixture) -> None:
    prompt = prompts(1)[0]
    policy = ServerPolicy(local, config("http://127.0.0.1:1"))
    ids = _local_ids(policy, prompt)
    with Scripted(
        lambda n, body: (
            (503, {"error": {"message": "overloaded", "type": "x", "code": 503}})
            if n < 3
            else (200, vllm_body(ids, [5, 6], [-0.5, -0.25]))
        )
    ) as srv:
        gens = asyncio.run(ServerPolicy(local, config(srv.url)).generate([prompt]))
        assert gens[0].response_ids == (5, 6) and len(srv.bodies) == 3
        assert "attempt 1/3 failed" in caplog.text
    with Scripted(lambda n, body: (500, {"error": {"message": "engine dead", "type": "x", "code": 500}})) as srv:
        with pytest.raises(PolicyRequestError, match="giving up after 3 attempts.*engine dead"):
            asyncio.run(ServerPolicy(local, config(srv.url)).generate([prompt]))
        assert len(srv.bodies) == 3
    with Scripted(
        lambda n, body: (400, {"error": {"message": "max_tokens too large", "type": "BadRequestError", "code": 400}})
    ) as srv:
        with pytest.raises(PolicyRequestError, match="not retried.*max_tokens too large"):
            asyncio.run(ServerPolicy(local, config(srv.url)).generate([prompt]))
        assert len(srv.bodies) == 1
    with pytest.raises(PolicyRequestError, match="giving up after 3 attempts.*Connect"):
        asyncio.run(ServerPolicy(local, config("http://127.0.0.1:9")).generate([prompt]))


def test_local_server_refuses_what_it_cannot_honour(server: LocalPolicyServer, local: VLM) -> None:
    policy = ServerPolicy(local, config(server.base_url))
    body = policy.request_body(prompts(1)[0], seed=1)
    for change, field in [
        ({"temperature": 0.5}, "temperature"),
        ({"top_p": 0.9}, "top_p"),
        ({"chat_template": "{{ messages }}"}, "chat_template"),
        ({"max_tokens": NEW_TOKENS + 1}, "max_tokens"),
        ({"logit_bias": {"5": 3.0}}, "logit_bias"),
    ]:
        answer = httpx.post(server.base_url + "/v1/chat/completions", json={**body, **change})
        assert answer.status_code == 400 and answer.json()["error"]["param"] == field
    answer = httpx.post(server.base_url + "/v1/chat/completions", json={**body, "model": "nope"})
    assert answer.status_code == 404 and "does not exist" in answer.json()["error"]["message"]


# --------------------------------------------------------------------------------------
# The experiment's policy backend
# --------------------------------------------------------------------------------------
def test_experiment_validates_and_builds_the_server_backend(
    tmp_path: Path, server: LocalPolicyServer, local: VLM
) -> None:
    from darwin.learner.config import LearnerConfig, LoraConfig
    from darwin.run.config import ExperimentConfig

    with pytest.raises(ValidationError, match="needs policy.server"):
        PolicyConfig(backend="server")
    with pytest.raises(ValidationError, match="backend = 'hf'"):
        PolicyConfig(server=config(server.base_url))
    assert policy_factory(PolicyConfig()) is None  # the in-process HFPolicy
    lora = config(
        server.base_url, weight_sync="lora", weights_dir=str(tmp_path), lora_rank=4, lora_target_modules=("q_proj",)
    )
    with pytest.raises(ValidationError, match="cannot receive the learner's updates"):
        ExperimentConfig(name="x", policy=PolicyConfig(backend="server", server=config(server.base_url)))
    with pytest.raises(ValidationError, match="set learner.finetunes.lora"):
        ExperimentConfig(name="x", policy=PolicyConfig(backend="server", server=lora))
    experiment = ExperimentConfig(
        name="x",
        policy=PolicyConfig(backend="server", server=lora, temperature=1.0, seed=3),
        learner=LearnerConfig(finetunes={"lora": LoraConfig(rank=4, target_modules=("q_proj",))}),
    )
    make = policy_factory(experiment.policy)
    assert make is not None
    policy = make(local, HFPolicyConfig(temperature=1.0, seed=3, max_new_tokens=5))
    assert isinstance(policy, ServerPolicy)
    assert (policy.config.max_tokens, policy.config.seed, policy.config.weight_sync) == (5, 3, "lora")
    gens = asyncio.run(policy.generate(prompts(2)))
    assert all(1 <= len(g.response_ids) <= 5 for g in gens)


def test_a_run_samples_from_the_server_and_pushes_every_update_to_it(tmp_path: Path) -> None:
    from darwin.agents.warm_start import load_warm_start
    from darwin.learner.config import LearnerConfig
    from darwin.models.factory import load_vlm
    from darwin.run.config import EvaluationConfig, ExperimentConfig, PhonesConfig
    from darwin.run.recipe import run_experiment
    from darwin.sft.cache import ensure_warm_start
    from darwin.sft.config import SFTConfig

    sft = SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0)
    warm = ensure_warm_start(str(tmp_path / "cache"), sft)
    with LocalPolicyServer(
        load_vlm(warm), served_model_name="warm", max_new_tokens=load_warm_start(warm).max_new_tokens
    ) as srv:
        experiment = ExperimentConfig(
            name="served",
            tasks=("settings_dark_theme",),
            horizon=4,
            phones=PhonesConfig(count=2, seed=3),
            checkpoint=str(warm),
            policy=PolicyConfig(
                max_batch=2,
                max_wait=0.01,
                backend="server",
                server=ServerPolicyConfig(
                    base_url=srv.base_url,
                    model="warm",
                    weight_sync="disk",
                    weights_dir=str(tmp_path / "weights"),
                    backoff_initial_s=0.05,
                    backoff_max_s=0.2,
                ),
            ),
            learner=LearnerConfig(
                critic={"warmup_updates": 1}, speed={"micro_batch_size": 4}, ppo_epochs=1, mini_batch_size=8
            ),
            rollout_steps=8,
            updates=2,
            evaluation=EvaluationConfig(samples=0),
        )
        result = run_experiment(experiment, tmp_path / "run")
        assert result.updates == 2
        manifest = json.loads((tmp_path / "run" / "checkpoint" / "learner.json").read_text())
        assert manifest["policy_version"] >= 1 and srv.requests > 0
        assert srv.policy.version >= 1  # the server's model received the learner's weights
        assert (tmp_path / "weights" / f"v{manifest['policy_version']}" / "config.json").is_file()
