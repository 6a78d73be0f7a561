"""The paper's path in miniature: stand-ins for what a laptop cannot have, so the paper preset's
real parts all run on one machine (``darwin paper-path``; docs/scale.md).

The paper preset (``examples/spa_bench.py --preset paper``) trains UI-TARS-1.5 served by vLLM
with verl's PPO and critic warm-up, on cloud phones, judged by gemini-2.5-flash. Here each
part is reached exactly as the preset reaches it (environment variables, the same
experiment fields), and only what cannot exist on a laptop is replaced:

=========================  ===================================================================
the paper preset           :class:`PaperPathStandIns`
=========================  ===================================================================
UI-TARS-1.5-7B checkpoint  a tiny random Qwen2.5-VL saved in Hugging Face layout
                           (:func:`write_tiny_uitars_checkpoint`), run as agent format
                           ``uitars-1.5``: ``$DARWIN_CHECKPOINT``
vLLM / SGLang server       ``darwin serve-policy`` (vLLM's protocol: token ids, log-probs,
                           SGLang's ``/update_weights_from_disk``): ``$DARWIN_POLICY_URL``
cloud phones               SimPhones served over the adbd wire protocol (``darwin phones
                           serve``), connected to a private real ``adb`` server:
                           ``$DARWIN_DEVICES``, ``$DARWIN_ADB_SERVER``
gemini-2.5-flash           :class:`JudgeStandIn`, an OpenAI-compatible chat endpoint reached
                           through LiteLLM: ``$DARWIN_JUDGE_MODEL``, ``$DARWIN_JUDGE_API_BASE``
verl on GPUs               verl's workers on 2 CPU processes with gloo (the
                           ``paper-miniature`` preset)
=========================  ===================================================================

    >>> from darwin.miniature import JudgeStandIn
    >>> with JudgeStandIn(success_rate=1.0) as judge:
    ...     import httpx
    ...     answer = httpx.post(judge.base_url + "/chat/completions", json={"messages": [
    ...         {"role": "user", "content": "Was the task completed?"}]}).json()
    >>> answer["choices"][0]["message"]["content"]
    '{"reason": "stand-in verdict", "answer": "yes"}'
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import cast

import httpx

from darwin.envs.adb_server import PrivateAdbServer, free_port

logger = logging.getLogger(__name__)

__all__ = ["JudgeStandIn", "PaperPathStandIns", "StandInError", "write_tiny_uitars_checkpoint"]

SERVED_MODEL = "ui-tars-1.5-tiny"
"""The name ``darwin serve-policy`` serves the tiny checkpoint under (``$DARWIN_POLICY_MODEL``)."""


class StandInError(RuntimeError):
    """A stand-in did not start; the message names it and carries its own output."""


def write_tiny_uitars_checkpoint(path: str | os.PathLike[str], *, seed: int = 0) -> Path:
    """A tiny random Qwen2.5-VL (UI-TARS-1.5's family) in plain Hugging Face layout: the
    model's ``config.json`` and weights, the processor's files, nothing of darwin's own."""
    from darwin.models.config import TinyVLMConfig
    from darwin.models.factory import build_tiny_vlm

    out = Path(path)
    vlm = build_tiny_vlm(TinyVLMConfig(family="qwen2_5_vl", screen_width=112, screen_height=252), seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    vlm.model.save_pretrained(out)
    vlm.processor.save_pretrained(out)
    return out


class JudgeStandIn:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint standing in for a hosted judge.

    It answers every request in the judge's JSON format, ``"yes"`` for a stable
    ``success_rate`` share of the requests (chosen by a hash of the request's text and
    images, so a retried request gets the same verdict) and ``"no"`` otherwise. It cannot
    see whether a task was done: it exists to carry the judge's protocol, not its judgement.
    ``requests`` counts the chat requests answered.
    """

    def __init__(self, *, success_rate: float = 0.3, host: str = "127.0.0.1", port: int = 0) -> None:
        if not 0.0 <= success_rate <= 1.0:
            raise ValueError(f"success_rate must lie in [0, 1], got {success_rate}")
        self.success_rate = success_rate
        self.requests = 0
        self._lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
                logger.debug("judge stand-in: " + format, *args)

            def _send(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "judge", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError as exc:
                    self._send(400, {"error": {"message": f"invalid JSON: {exc}"}})
                    return
                self._send(200, judge.answer(body))

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``.../v1``), what LiteLLM's ``api_base`` takes."""
        host, port = cast(tuple[str, int], self._server.server_address[:2])  # a TCP server: (host, port, ...)
        return f"http://{host}:{port}/v1"

    def answer(self, body: dict) -> dict:
        """The chat-completion response to one request body."""
        digest = hashlib.sha256(json.dumps(body.get("messages", []), sort_keys=True).encode()).digest()
        verdict = "yes" if int.from_bytes(digest[:4], "big") / 2**32 < self.success_rate else "no"
        with self._lock:
            self.requests += 1
        text = json.dumps({"reason": "stand-in verdict", "answer": verdict})
        return {
            "id": f"chatcmpl-{digest[:6].hex()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "judge"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def start(self) -> JudgeStandIn:
        self._thread = threading.Thread(target=self._server.serve_forever, name="judge-stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> JudgeStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PaperPathStandIns:
    """Start every stand-in of the paper path under ``work_dir``; :meth:`env` is what the
    paper preset reads. Use as a context manager (everything started is stopped on exit).

    Args:
        work_dir: the checkpoint, the weight-sync directory, the servers' logs.
        phones: SimPhones served over the adbd protocol (``$DARWIN_DEVICES``).
        judge_success_rate: the judge stand-in's share of "yes" verdicts.
        seed: the tiny checkpoint's and the phones' seed.
    """

    def __init__(
        self, work_dir: str | os.PathLike[str], *, phones: int = 2, judge_success_rate: float = 0.3, seed: int = 0
    ) -> None:
        if phones < 1:
            raise ValueError(f"phones must be >= 1, got {phones}")
        self.work_dir = Path(work_dir).absolute()
        self.phones = phones
        self.seed = seed
        self.judge = JudgeStandIn(success_rate=judge_success_rate)
        self.checkpoint = self.work_dir / "ui-tars-1.5-tiny"
        self.weights_dir = self.work_dir / "weights"
        self.policy_port = free_port()
        self.adb_server: PrivateAdbServer | None = None
        self.devices: list[str] = []
        self._processes: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    @property
    def adb_port(self) -> int:
        """Port of the stand-ins' private adb server (set by :meth:`start`)."""
        if self.adb_server is None:
            raise StandInError("the stand-ins are not started: no adb server yet")
        return self.adb_server.port

    @property
    def policy_url(self) -> str:
        return f"http://127.0.0.1:{self.policy_port}"

    def env(self) -> dict[str, str]:
        """The paper preset's environment variables, pointing at the stand-ins."""
        return {
            "DARWIN_CHECKPOINT": str(self.checkpoint),
            "DARWIN_AGENT_FORMAT": "uitars-1.5",
            "DARWIN_DEVICES": ",".join(self.devices),
            "DARWIN_ADB_SERVER": f"127.0.0.1:{self.adb_port}",
            "DARWIN_POLICY_URL": self.policy_url,
            "DARWIN_POLICY_MODEL": SERVED_MODEL,
            "DARWIN_WEIGHTS_DIR": str(self.weights_dir),
            "DARWIN_JUDGE_MODEL": "openai/judge",
            "DARWIN_JUDGE_API_BASE": self.judge.base_url,
            # LiteLLM's OpenAI client wants a key; the stand-in ignores it.
            "OPENAI_API_KEY": "stand-in",
        }

    def served_weight_version(self) -> str:
        """The label of the weights ``darwin serve-policy`` serves now (SGLang's ``/get_weight_version``)."""
        return str(httpx.get(f"{self.policy_url}/get_weight_version", timeout=10).json()["weight_version"])

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 120.0) -> PaperPathStandIns:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        write_tiny_uitars_checkpoint(self.checkpoint, seed=self.seed)
        adb = shutil.which("adb")
        if adb is None:
            raise StandInError(
                "the `adb` binary is not installed (Debian/Ubuntu: apt-get install adb); the phones "
                "are reached through a real adb server"
            )
        self.adb_server = PrivateAdbServer(adb=adb).start()
        self.judge.start()
        darwin = [sys.executable, "-m", "darwin.cli"]
        ready = self.work_dir / "phones.json"
        ready.unlink(missing_ok=True)
        self._spawn(
            "policy server",
            [
                *darwin,
                "serve-policy",
                "--checkpoint",
                str(self.checkpoint),
                "--port",
                str(self.policy_port),
                "--served-model-name",
                SERVED_MODEL,
                "--max-new-tokens",
                "24",
            ],
        )
        self._spawn(
            "phones",
            [
                *darwin,
                "phones",
                "serve",
                "--count",
                str(self.phones),
                "--seed",
                str(self.seed),
                "--connect",
                "--adb-port",
                str(self.adb_port),
                "--ready-file",
                str(ready),
            ],
        )
        deadline = time.monotonic() + timeout_s
        while not ready.exists() or not self._policy_ready():
            self._check_alive()
            if time.monotonic() > deadline:
                raise StandInError(f"the stand-ins did not start within {timeout_s:.0f} s:\n{self._logs()}")
            time.sleep(0.5)
        self.devices = list(json.loads(ready.read_text())["addresses"])
        logger.info(
            "paper-path stand-ins up: policy %s, phones %s, judge %s",
            self.policy_url,
            self.devices,
            self.judge.base_url,
        )
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.work_dir / f"{name.replace(' ', '-')}.log"
        handle = log.open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        handle.close()
        self._processes.append((name, process, log))

    def _policy_ready(self) -> bool:
        try:
            return httpx.get(f"{self.policy_url}/v1/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _check_alive(self) -> None:
        for name, process, log in self._processes:
            if process.poll() is not None:
                raise StandInError(
                    f"the {name} stand-in exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}"
                )

    def _logs(self) -> str:
        return "\n".join(
            f"--- {name} ---\n{log.read_text(errors='replace')[-2000:]}" for name, _, log in self._processes
        )

    def stop(self) -> None:
        for _, process, _ in reversed(self._processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _, process, _ in self._processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self._processes.clear()
        self.judge.stop()
        if self.adb_server is not None:
            self.adb_server.stop()

    def __enter__(self) -> PaperPathStandIns:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
