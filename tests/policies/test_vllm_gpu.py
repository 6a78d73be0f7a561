"""ServerPolicy against a real vLLM server on a GPU (``pip install -e ".[gpu]"``; docs/scale.md).

The tiny Qwen2-VL is saved in Hugging Face layout (model + processor, as UI-TARS arrives) and
served by ``vllm serve`` with the flags darwin needs (``--logprobs-mode processed_logprobs``,
``--generation-config vllm``, ``--enable-lora`` with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``;
float32 so the engine and the CPU learner can agree to 1e-3). The test then checks what
tests/policies/test_server_policy.py checks against darwin's local server: the prompt token
ids vLLM conditioned on equal darwin's own rendering (screenshot included), the recorded
log-probs of the sampled tokens equal :func:`darwin.models.scoring.compute_response_logprobs`
teacher-forced on the same model, and LoRA weight sync makes vLLM serve the next version
(and the new weights).

Skipped, with the reason, where there is no CUDA device or vLLM is not installed; vLLM is
only ever imported by the server subprocess, never when this module is collected.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from darwin.models.factory import VLM, build_tiny_vlm
from darwin.models.scoring import compute_response_logprobs
from darwin.policies.server_client import ServerPolicy
from darwin.policies.server_client_config import ServerPolicyConfig
from darwin.types import ChatMessage, Prompt

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA device (torch.cuda.is_available() is False): vLLM serves on GPUs only",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason='vLLM is not installed: pip install -e ".[gpu]" on a GPU machine (docs/scale.md)',
    ),
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]

SERVED = "tiny"
NEW_TOKENS = 16
LORA_RANK = 8
LORA_TARGETS = ("q_proj", "v_proj")
TOLERANCE = 1e-3
"""Recorded vs teacher-forced log-probs: vLLM runs float32 on the GPU, the learner float32 on the CPU."""
STARTUP_TIMEOUT_S = 900.0


def tiny() -> VLM:
    """The tiny Qwen2-VL (252x560 screens); the same seed gives bit-identical weights."""
    return build_tiny_vlm(seed=0)


def screen(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (560, 252, 3), dtype=np.uint8)


def prompts() -> list[Prompt]:
    """Every prompt carries a screenshot (the second one two), as an agent's step does."""
    return [
        Prompt(
            messages=(
                ChatMessage(role="system", text="You are a GUI agent."),
                ChatMessage(
                    role="user",
                    text=f"Task {i}: open the app number {i * 7}.",
                    images=(screen(i),) if i != 1 else (screen(i), screen(i + 100)),
                ),
            ),
            seed=1000 + i,
        )
        for i in range(3)
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class VllmServer:
    """A running ``vllm serve`` process: its URL and its log file."""

    base_url: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else "(no log)"

    def served_models(self) -> list[str]:
        return [m["id"] for m in httpx.get(f"{self.base_url}/v1/models", timeout=10).json()["data"]]


def vllm_command() -> list[str]:
    """The ``vllm`` console script of this interpreter's environment (or on PATH)."""
    beside = Path(sys.executable).with_name("vllm")
    found = str(beside) if beside.is_file() else shutil.which("vllm")
    if found is None:
        pytest.fail('vllm is importable but its `vllm` command is missing; reinstall it (pip install -e ".[gpu]")')
    return [found]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model in Hugging Face layout, as a UI-TARS checkpoint directory is laid out."""
    path = tmp_path_factory.mktemp("vllm") / "tiny-hf"
    vlm = tiny()
    vlm.model.save_pretrained(path)
    vlm.processor.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def vllm_server(checkpoint: Path) -> Iterator[VllmServer]:
    port = free_port()
    log = checkpoint.parent / "vllm.log"
    command = [
        *vllm_command(),
        "serve",
        str(checkpoint),
        "--served-model-name",
        SERVED,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",  # log-probs to 1e-3 of the CPU learner's float32 recomputation
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "8",
        "--gpu-memory-utilization",
        "0.3",
        "--enforce-eager",
        "--seed",
        "0",
        "--limit-mm-per-prompt",
        '{"image": 2, "video": 0}',
        "--logprobs-mode",
        "processed_logprobs",  # the log-prob after the ban and the temperature (what darwin records)
        "--max-logprobs",
        "1",
        "--generation-config",
        "vllm",  # not the checkpoint's generation_config.json sampling defaults
        "--enable-lora",
        "--max-lora-rank",
        str(LORA_RANK),
        "--max-loras",
        "2",
    ]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = VllmServer(base_url=f"http://127.0.0.1:{port}", log=log, process=process)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"vllm serve exited with code {process.returncode} before serving; its log:\n{server.log_tail()}"
                )
            try:
                if SERVED in server.served_models():
                    break
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"vllm serve did not answer /v1/models within {STARTUP_TIMEOUT_S:.0f} s; its log:\n{server.log_tail()}"
                )
            time.sleep(2.0)
        yield server
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's own process group (it was started in a new session), then SIGKILL."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _low_rank_update(vlm: VLM, seed: int) -> dict[str, torch.Tensor]:
    """The base weights plus a rank-``LORA_RANK`` change on every target linear (what a LoRA learner sends)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in vlm.model.state_dict().items():
        module = key.rsplit(".", 1)[0]
        if key.endswith(".weight") and module.rsplit(".", 1)[-1] in LORA_TARGETS and value.dim() == 2:
            b = torch.randn(value.shape[0], LORA_RANK, generator=gen) * 0.05
            a = torch.randn(LORA_RANK, value.shape[1], generator=gen) * 0.05
            out[key] = value + b @ a
        else:
            out[key] = value.clone()
    return out


def _max_logprob_gap(policy: ServerPolicy, model: torch.nn.Module, batch: list[Prompt], gens: list) -> float:
    """Max |recorded - teacher-forced| over every sampled token, scored by ``model`` as the learner does."""
    inputs = policy.build_inputs(batch)
    tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    with torch.no_grad():
        learner, _ = compute_response_logprobs(
            model,
            tensors,
            [g.response_ids for g in gens],
            forbidden=policy.forbidden_mask,
            temperature=policy.logprob_temperature,
        )
    gaps = [
        float((torch.tensor(g.response_logprobs) - learner[row, : len(g.response_ids)].float()).abs().max())
        for row, g in enumerate(gens)
    ]
    return max(gaps)


@pytest.mark.timeout(1800)
def test_vllm_serves_the_tokens_logprobs_and_weights_darwin_trains_on(vllm_server: VllmServer, tmp_path: Path) -> None:
    local = tiny()
    policy = ServerPolicy(
        local,
        ServerPolicyConfig(
            base_url=vllm_server.base_url,
            model=SERVED,
            max_tokens=NEW_TOKENS,
            temperature=1.0,
            timeout_s=120.0,
            weight_sync="lora",
            weights_dir=str(tmp_path / "weights"),
            lora_rank=LORA_RANK,
            lora_target_modules=LORA_TARGETS,
        ),
    )
    batch = prompts()

    # 1. What vLLM conditioned on is darwin's own rendering, screenshots included.
    gens = asyncio.run(policy.generate(batch))
    inputs = policy.build_inputs(batch)
    assert int((inputs["mm_token_type_ids"] == 1).sum()) > 0  # the prompts hold image tokens
    for row, gen in enumerate(gens):
        mask = inputs["attention_mask"][row].bool()
        assert gen.prompt_ids == tuple(inputs["input_ids"][row][mask].tolist()), row
        assert len(gen.response_ids) == len(gen.response_logprobs) >= 1
        assert gen.policy_version == 0

    # 2. The recorded log-probs are the learner's teacher-forced ones on the same weights.
    gap = _max_logprob_gap(policy, local.model, batch, gens)
    assert gap < TOLERANCE, (
        f"vLLM's log-probs differ from compute_response_logprobs by {gap:.2e}; log:\n{vllm_server.log_tail(2000)}"
    )

    # 3. LoRA weight sync: vLLM loads the adapter, serves the next version, and samples from the new weights.
    new = _low_rank_update(local, seed=1)
    policy.load_weights(new, version=1)
    assert policy.version == 1 and policy.served_model == "darwin-v1"
    assert "darwin-v1" in vllm_server.served_models()
    after = asyncio.run(policy.generate(batch))
    assert all(g.policy_version == 1 for g in after)
    updated = tiny()
    updated.model.load_state_dict(new)
    gap = _max_logprob_gap(policy, updated.model, batch, after)
    assert gap < TOLERANCE, f"after the LoRA sync vLLM's log-probs differ from the new weights' by {gap:.2e}"
