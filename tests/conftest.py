"""Fixtures shared by every test folder.

``openai_server``: a local OpenAI-compatible chat-completions endpoint for tests of anything
that talks to a hosted model through LiteLLM (memory, workflows' planners and checkers,
judges). It speaks the real HTTP protocol; the test decides each answer and reads every
request back (``openai_server.request_text(body)`` / ``request_images(body)``: tests run
with ``--import-mode=importlib``, so helpers travel on the fixture, not by import).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

pytest_plugins = ["pytester"]  # tests/test_process_hygiene.py runs pytest on a test of its own

# adbutils runs `adb start-server` (a server on the default port 5037, left running) whenever
# the adb server it talks to refuses a connection. The tests never start a server they do not
# own, so adbutils gets `false` as its adb binary and a dead server stays an error.
os.environ["ADBUTILS_ADB_PATH"] = shutil.which("false") or "/bin/false"

Reply = str | int
"""What the fake answers one request with: the assistant's text (HTTP 200) or an error status."""


def request_text(body: dict[str, Any]) -> str:
    """All text parts of a chat request's messages, joined by newlines (images left out)."""
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "\n".join(parts)


def request_images(body: dict[str, Any]) -> int:
    """How many images a chat request carries."""
    return sum(
        1
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for p in message["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    )


@dataclass
class FakeOpenAI:
    """State of the local server: ``reply(body) -> Reply`` decides; ``requests`` records bodies."""

    reply: Callable[[dict[str, Any]], Reply] = lambda body: "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every request body, in arrival order."""
    envelopes: list[dict[str, Any]] = field(default_factory=list)
    """Per request: its ``path``, ``authorization`` header and ``body``."""
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    models: list[str] = field(default_factory=lambda: ["fake-llm"])
    """What ``GET /v1/models`` lists (the served model names)."""

    request_text = staticmethod(request_text)
    request_images = staticmethod(request_images)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def texts(self) -> list[str]:
        """The text of every request so far, in arrival order."""
        with self.lock:
            return [request_text(b) for b in self.requests]

    def litellm_config(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments of a ``LiteLLMPolicyConfig`` pointed at this server (fast retries)."""
        cfg: dict[str, Any] = {
            "model": "openai/fake-llm",
            "api_base": self.api_base,
            "api_key_env": "DARWIN_FAKE_LLM_KEY",
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.02,
            "timeout_s": 5.0,
            "max_attempts": 2,
        }
        cfg.update(overrides)
        return cfg


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A running fake; ``DARWIN_FAKE_LLM_KEY`` is set so configs from ``litellm_config`` work."""
    monkeypatch.setenv("DARWIN_FAKE_LLM_KEY", "sk-fake-test-key")
    state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append(body)
                state.envelopes.append(
                    {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
                )
            try:
                answer = state.reply(body)
            except Exception:  # noqa: BLE001 - a bug in the test's reply shows as a 500 (and in the test's log)
                logging.getLogger(__name__).exception("openai_server reply failed")
                answer = 500
            if isinstance(answer, int):
                status = answer
                payload: dict[str, Any] = {"error": {"message": f"scripted {answer}", "type": "test", "code": answer}}
            else:
                status = 200
                payload = {
                    "id": "cmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", ""),
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and went away

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/v1/models":
                self.send_error(404)
                return
            data = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in state.models]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


@pytest.fixture
def no_process_left_behind() -> Iterator[None]:
    """Fails the test when a process it started outlives it, even one whose parent died first.

    For the test's duration this test process is a child subreaper (Linux ``prctl``): an
    orphan of anything the test started (an adb server of a killed run, a Ray worker)
    becomes this process's child instead of init's, so it is found, killed and named.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip(f"prctl(PR_SET_CHILD_SUBREAPER) failed (errno {ctypes.get_errno()}): needs Linux")
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    try:
        yield
        deadline = time.monotonic() + 20  # processes told to stop get this long to exit
        while True:
            left = _alive_new_descendants(me, before)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        named = []
        for process in left:
            try:
                named.append(f"{process.pid} {' '.join(process.cmdline())[:200]}")
                process.kill()
            except psutil.NoSuchProcess:
                pass
        assert not named, "processes outlived the test that started them:\n" + "\n".join(named)
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        _reap_adopted(me, before)


def _alive_new_descendants(me: psutil.Process, before: set[int]) -> list[psutil.Process]:
    alive = []
    for process in me.children(recursive=True):
        try:
            if process.pid not in before and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            pass
    if not alive:
        _reap_adopted(me, before)
    return alive


def _reap_adopted(me: psutil.Process, before: set[int]) -> None:
    """Collect the exit status of adopted orphans that have exited (else they stay zombies)."""
    for process in me.children():
        if process.pid not in before:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(process.pid, os.WNOHANG)


_SMALL_RUN = {
    "tasks": '["settings_dark_theme","amazon_0"]',
    "phones.count": "2",
    "sft.steps": "3",
    "sft.warmup_steps": "1",
    "sft.batch_size": "4",
    "sft.phones": "2",
    "sft.episodes": "4",
    "sft.heldout_episodes": "0",
    "policy.max_batch": "2",
    "policy.max_wait": "0.01",
    "learner.mini_batch_size": "8",
    "learner.speed.micro_batch_size": "4",
    "rollout_steps": "12",
    "updates": "2",
    "learner.critic.warmup_updates": "1",
    "evaluation.samples": "0",
    "time_budget_s": "null",
}
"""`--set` overrides for a run of a few updates of two tasks on two phones (`tests/test_paper_findings.py`,
`tests/curricula/test_reverse.py`): what a short training test starts from."""


@pytest.fixture
def small_run() -> dict[str, str]:
    """`--set` overrides (key -> value) for a short training run; a copy to change freely."""
    return dict(_SMALL_RUN)


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture
def load_script() -> Callable[[str], ModuleType]:
    """Loads ``scripts/<name>.py`` as the module ``name`` (the scripts are not a package)."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        assert spec is not None and spec.loader is not None, f"no script {name!r} in {SCRIPTS}"
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the script runs
        spec.loader.exec_module(module)
        return module

    return load
