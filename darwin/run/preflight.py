"""Pre-flight checks of an experiment's distributed parts, run by ``darwin run --dry-run`` (and
before a real run starts anything slow).

A single-machine experiment needs nothing here. The paper preset spreads over an inference
server, a Ray cluster, cloud phones, verl's GPU workers and a hosted judge; each check
reaches the part (without touching a phone) and, when it is missing, says which part, the
value the experiment gave, and how to fix it. The actor's checkpoint (and verl's
``model_path``) is read from its files before anything starts: a Hugging Face directory
(``config.json``) of a model family the agents run (Qwen2-VL / Qwen2.5-VL; a text-only model
cannot read screenshots), with its processor (image processor, tokenizer, chat template), in
a layout the agent format can use (``agent.format`` unset only runs ``darwin sft``
warm starts; a UI-TARS directory needs ``agent.format = 'uitars-1.5'``). Every problem is
reported at once::

    >>> from darwin.run.config import ExperimentConfig
    >>> preflight(ExperimentConfig(name="laptop"))     # sim phones, in-process policy and learner
    []
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from darwin.components import ComponentSpec
from darwin.models.tokens import Family

if TYPE_CHECKING:
    from darwin.run.config import ExperimentConfig


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
    if config.policy.backend.name != "server" or config.policy.server is None:
        return []
    import httpx

    server = config.policy.server
    url = f"{server.base_url.rstrip('/').removesuffix('/v1')}/v1/models"
    headers = {}
    if server.api_key_env:
        key = os.environ.get(server.api_key_env)
        if not key:
            return [
                PreflightProblem("policy server", f"{server.api_key_env} is not set; export the server's API key in it")
            ]
        headers["Authorization"] = f"Bearer {key}"
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return [
            PreflightProblem(
                "policy server",
                f"{url} is unreachable ({type(exc).__name__}: {exc}); launch vLLM/SGLang there as "
                "docs/scale.md shows, or point policy.server.base_url at it",
            )
        ]
    if response.status_code != 200:
        return [
            PreflightProblem("policy server", f"GET {url} answered HTTP {response.status_code}: {response.text[:200]}")
        ]
    try:
        served = [m["id"] for m in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return [
            PreflightProblem(
                "policy server", f"GET {url} did not return an OpenAI model list; is it an OpenAI-compatible server?"
            )
        ]
    if server.model not in served:
        return [
            PreflightProblem(
                "policy server",
                f"serves {served}, not {server.model!r}; set policy.server.model (vLLM --served-model-name)",
            )
        ]
    return []


def _phones(config: ExperimentConfig, timeout_s: float) -> list[PreflightProblem]:
    phones = config.phones
    if phones.provider.name == "adb" and len(phones.devices) < phones.count:
        return [
            PreflightProblem(
                "phones",
                f"phones.provider='adb' needs {phones.count} devices and {len(phones.devices)} are listed; list their "
                "serials or host:port in phones.devices (the paper preset reads $DARWIN_DEVICES, comma-separated)",
            )
        ]
    if phones.on_ray and phones.ray is not None:
        from darwin.envs.ray_phones import RayPhonesError, check_ray_address

        try:
            check_ray_address(phones.ray.address, timeout_s=timeout_s)
        except RayPhonesError as exc:
            return [PreflightProblem("Ray cluster (phones)", str(exc))]
    return []


def _learner(config: ExperimentConfig) -> list[PreflightProblem]:
    if config.learner.backend.name != "verl" or config.learner.verl is None:
        return []
    from darwin.learner.verl_runtime import VerlBackendUnavailable, check_verl_runtime

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
    return problems  # learner.verl.model_path is read with the checkpoint (_checkpoint)


def _checkpoint(config: ExperimentConfig) -> list[PreflightProblem]:
    """The actor's checkpoint (``checkpoint``), and verl's ``model_path`` when it is another
    directory, read before any phone or worker starts."""
    problems = []
    if config.checkpoint is not None:  # None: the SFT warm start is built (and checked) by the run
        problems += [
            PreflightProblem("checkpoint", m)
            for m in checkpoint_problems(config.checkpoint, agent_format=config.agent.format)
        ]
    verl = config.learner.verl if config.learner.backend.name == "verl" else None
    if verl is not None and not _same_dir(verl.model_path, config.checkpoint):
        problems += [
            PreflightProblem("verl learner", m)
            for m in checkpoint_problems(verl.model_path, field="learner.verl.model_path", check_format=False)
        ]
    return problems


def _same_dir(a: str, b: str | None) -> bool:
    return b is not None and Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


SUPPORTED_MODEL_TYPES: tuple[str, ...] = get_args(Family)
"""``config.json`` model types darwin's agents and policies run (``darwin.models.factory.load_vlm``:
Qwen2-VL, e.g. UI-TARS-1.0, and Qwen2.5-VL, e.g. UI-TARS-1.5)."""


def checkpoint_problems(
    path: str | os.PathLike[str],
    *,
    agent_format: ComponentSpec | str | None = None,
    field: str = "checkpoint",
    check_format: bool = True,
) -> list[str]:
    """What keeps ``path`` from serving as the actor's model, read from its files alone (no
    weights are loaded): a missing directory or ``config.json``, a model family darwin's
    agents do not run (a text-only model among them), missing processor files (image
    processor, tokenizer, chat template) and, with ``check_format``, an agent format the
    directory cannot serve (``agent_format`` None, the warm start's own, needs a ``darwin sft``
    warm start).
    ``field`` names the setting in the messages. Empty when the directory looks right."""
    src = Path(path)
    where = repr(str(path)) if field == "checkpoint" else f"{field} {str(path)!r}"
    if not src.is_dir():
        return [
            f"{where} is not a directory; give the actor's warm-start checkpoint (the paper preset reads $DARWIN_CHECKPOINT)"
        ]
    problems = _model_problems(src, where)
    if check_format:
        problems += _format_problems(src, where, agent_format)
    return problems


def _read_json(file: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(data, None)``, or ``(None, why)`` for a file that is not a JSON object."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{file} cannot be read as JSON ({exc})"
    if not isinstance(data, dict):
        return None, f"{file} holds {type(data).__name__}, not a JSON object"
    return data, None


def _model_problems(src: Path, where: str) -> list[str]:
    config_file = src / "config.json"
    if not config_file.is_file():
        return [
            f"{where} has no config.json, so it is not a Hugging Face model directory; give the directory a "
            "model was saved to with save_pretrained (e.g. UI-TARS-1.5-7B as downloaded from the Hub, or a "
            "`darwin sft` warm start; the paper preset reads $DARWIN_CHECKPOINT)"
        ]
    config, error = _read_json(config_file)
    if config is None:
        return [f"{error}; download the checkpoint again or re-save it with save_pretrained"]
    problems = []
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        family = " or ".join(SUPPORTED_MODEL_TYPES)
        architectures = ", ".join(str(a) for a in config.get("architectures") or ()) or "no architectures listed"
        if "vision_config" not in config:
            problems.append(
                f"{where} holds a text-only model (model_type {model_type!r}, {architectures}: no vision_config) but the "
                f"agent reads screenshots; give a vision-language checkpoint of the Qwen2-VL family (model_type {family}, "
                "e.g. UI-TARS-1.5-7B or Qwen2.5-VL-7B-Instruct)"
            )
        else:
            problems.append(
                f"{where} holds model_type {model_type!r} ({architectures}), which darwin's agents and policies do not run; "
                f"give a Qwen2-VL-family checkpoint (model_type {family}, e.g. UI-TARS-1.5-7B)"
            )
    missing = _missing_processor_parts(src)
    if missing:
        problems.append(
            f"{where} has no {'; no '.join(missing)}: the policy (and the inference server) render prompts and screenshots "
            "with the checkpoint's own processor; save it beside the weights, e.g. "
            "AutoProcessor.from_pretrained(<the base model, e.g. ByteDance-Seed/UI-TARS-1.5-7B>).save_pretrained(DIR) "
            "or a darwin VLM's vlm.save_pretrained(DIR)"
        )
    return problems


def _missing_processor_parts(src: Path) -> list[str]:
    """The processor parts ``src`` lacks, named with their files. Hub checkpoints (UI-TARS,
    Qwen2.5-VL) keep the image processor in ``preprocessor_config.json``; transformers 5's
    ``save_pretrained`` (darwin's processors too) nests it in ``processor_config.json``."""
    processor, _ = (
        _read_json(src / "processor_config.json") if (src / "processor_config.json").is_file() else (None, None)
    )
    tokenizer_config, _ = (
        _read_json(src / "tokenizer_config.json") if (src / "tokenizer_config.json").is_file() else (None, None)
    )
    missing = []
    if not (src / "preprocessor_config.json").is_file() and not (processor and "image_processor" in processor):
        missing.append(
            "image processor (preprocessor_config.json, or processor_config.json with an image_processor entry)"
        )
    if not (src / "tokenizer.json").is_file() and not (
        (src / "vocab.json").is_file() and (src / "merges.txt").is_file()
    ):
        missing.append("tokenizer (tokenizer.json, or vocab.json and merges.txt)")
    templates = (
        (src / "chat_template.jinja").is_file(),
        (src / "chat_template.json").is_file(),
        bool(processor and processor.get("chat_template")),
        bool(tokenizer_config and tokenizer_config.get("chat_template")),
    )
    if not any(templates):
        missing.append(
            "chat template (chat_template.jinja, chat_template.json, or chat_template in tokenizer_config.json)"
        )
    return missing


def _format_problems(src: Path, where: str, agent_format: ComponentSpec | str | None) -> list[str]:
    """``agent.format`` unset reads the prompt format from a ``darwin sft`` warm
    start's records; a named format runs any Qwen2-VL-family directory (darwin's formats
    name a prompt and coordinate convention, not a model family: a tiny Qwen2-VL trained in
    UI-TARS-1.5's format is as valid as UI-TARS-1.5-7B, so no family is matched here)."""
    from darwin.agents.warm_start import AGENT_FILE
    from darwin.models.factory import TINY_CONFIG_FILE
    from darwin.sft.config import SFT_FORMAT_VERSION

    if agent_format is not None:
        return []
    record_file = src / AGENT_FILE
    if not record_file.is_file():
        return [
            f"{where} is not a darwin SFT warm start (no {AGENT_FILE}), and agent.format unset runs only "
            "those (the prompt format is read from that file); set agent.format to the format the model speaks, "
            "e.g. 'uitars-1.5' for a UI-TARS-1.5 checkpoint, with agent.observation_size (the paper preset reads "
            "$DARWIN_AGENT_FORMAT), or give a checkpoint written by `darwin sft`"
        ]
    record, error = _read_json(record_file)
    if record is None:
        return [f"{error}; retrain the warm start with `darwin sft`"]
    if record.get("format_version") != SFT_FORMAT_VERSION or record.get("kind") != "tiny":
        return [
            f"{record_file} is a warm-start record of kind={record.get('kind')!r} format_version="
            f"{record.get('format_version')!r}, not this darwin's (tiny, {SFT_FORMAT_VERSION}); retrain it with `darwin sft`"
        ]
    if not (src / TINY_CONFIG_FILE).is_file():
        return [
            f"{where} has {AGENT_FILE} but no {TINY_CONFIG_FILE} (both are written by `darwin sft`); retrain it with "
            "`darwin sft`, or set agent.format to the format the model speaks (e.g. 'tiny' or 'uitars-1.5')"
        ]
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
