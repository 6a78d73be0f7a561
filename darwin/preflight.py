"""Pre-flight checks of an experiment's distributed parts, run by ``darwin run --dry-run`` (and
before a real run starts anything slow).

A single-machine experiment needs nothing here. The paper preset spreads over an inference
server, a Ray cluster, cloud phones, verl's GPU workers and a hosted judge; each check
reaches the part (without touching a phone) and, when it is missing, says which part, the
value the experiment gave, and how to fix it. Every problem is reported at once::

    >>> from darwin.experiment import ExperimentConfig
    >>> preflight(ExperimentConfig(name="laptop"))     # sim phones, in-process policy and learner
    []
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from darwin.experiment import ExperimentConfig


@dataclass(frozen=True)
class PreflightProblem:
    """One missing or unreachable part: ``part`` names it, ``message`` says what and how to fix it."""

    part: str
    message: str

    def __str__(self) -> str:
        return f"{self.part}: {self.message}"


def preflight(config: ExperimentConfig, *, timeout_s: float = 5.0) -> list[PreflightProblem]:
    """Every problem with ``config``'s distributed set-up (empty when it can start)."""
    problems: list[PreflightProblem] = []
    problems += _policy_server(config, timeout_s)
    problems += _phones(config, timeout_s)
    problems += _learner(config)
    problems += _checkpoint(config)
    problems += _judge(config)
    return problems


def _policy_server(config: ExperimentConfig, timeout_s: float) -> list[PreflightProblem]:
    if config.policy.backend != "server" or config.policy.server is None:
        return []
    import httpx

    server = config.policy.server
    url = f"{server.base_url.rstrip('/').removesuffix('/v1')}/v1/models"
    headers = {}
    if server.api_key_env:
        key = os.environ.get(server.api_key_env)
        if not key:
            return [PreflightProblem("policy server", f"{server.api_key_env} is not set; export the server's API key in it")]
        headers["Authorization"] = f"Bearer {key}"
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return [PreflightProblem(
            "policy server", f"{url} is unreachable ({type(exc).__name__}: {exc}); launch vLLM/SGLang there as "
            "docs/scale.md shows, or point policy.server.base_url at it",
        )]
    if response.status_code != 200:
        return [PreflightProblem("policy server", f"GET {url} answered HTTP {response.status_code}: {response.text[:200]}")]
    try:
        served = [m["id"] for m in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return [PreflightProblem("policy server", f"GET {url} did not return an OpenAI model list; is it an OpenAI-compatible server?")]
    if server.model not in served:
        return [PreflightProblem("policy server", f"serves {served}, not {server.model!r}; set policy.server.model "
                                 "(vLLM --served-model-name)")]
    return []


def _phones(config: ExperimentConfig, timeout_s: float) -> list[PreflightProblem]:
    phones = config.phones
    if phones.kind == "adb" and len(phones.devices) < phones.count:
        return [PreflightProblem(
            "phones", f"phones.kind='adb' needs {phones.count} devices and {len(phones.devices)} are listed; list their serials "
            "or host:port in phones.devices (the paper preset reads $DARWIN_DEVICES, comma-separated)",
        )]
    if phones.kind == "ray" and phones.ray is not None:
        from darwin.envs.ray_phones import RayPhonesError, check_ray_address

        try:
            check_ray_address(phones.ray.address, timeout_s=timeout_s)
        except RayPhonesError as exc:
            return [PreflightProblem("Ray cluster (phones)", str(exc))]
    return []


def _learner(config: ExperimentConfig) -> list[PreflightProblem]:
    if config.learner.backend != "verl" or config.learner.verl is None:
        return []
    from darwin.learner.verl_learner import VerlBackendUnavailable, check_verl_runtime

    problems = []
    settings = config.learner.verl
    if settings.ray_address is not None and settings.ray_address != "local":
        from darwin.envs.ray_phones import RayPhonesError, check_ray_address

        try:
            check_ray_address(settings.ray_address)
        except RayPhonesError as exc:
            problems.append(PreflightProblem("Ray cluster (learner)", str(exc)))
    try:
        check_verl_runtime(settings, needs_critic=config.learner.uses_critic)
    except VerlBackendUnavailable as exc:
        problems.append(PreflightProblem("verl learner", str(exc).replace("\n", " ")))
    if not Path(settings.model_path).is_dir():
        problems.append(PreflightProblem("verl learner", f"learner.verl.model_path {settings.model_path!r} is not a directory; "
                                         "save the actor there with save_pretrained (the paper preset reads $DARWIN_CHECKPOINT)"))
    return problems


def _checkpoint(config: ExperimentConfig) -> list[PreflightProblem]:
    if config.checkpoint is None or config.phones.kind == "sim":
        return []  # sim runs build (or check) their warm start themselves
    if not Path(config.checkpoint).is_dir():
        return [PreflightProblem("checkpoint", f"{config.checkpoint!r} is not a directory; give the actor's warm-start "
                                 "checkpoint (the paper preset reads $DARWIN_CHECKPOINT)")]
    return []


def _judge(config: ExperimentConfig) -> list[PreflightProblem]:
    from darwin.components import ComponentError, build_component
    from darwin.policies.litellm import PolicyAuthError

    if config.verifier.name == "rule":
        return []
    try:
        verifier = build_component("verifier", config.verifier)
    except (ComponentError, ValueError) as exc:
        return [PreflightProblem("verifier", str(exc))]
    check = getattr(verifier, "preflight", None)
    if check is None:
        return []
    try:
        check()
    except PolicyAuthError as exc:
        return [PreflightProblem("verifier", str(exc))]
    return []
