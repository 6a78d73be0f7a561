"""The options both ``darwin judge`` commands take, and the judges they describe.

:func:`judge_options` adds the judge configuration, model, request and bootstrap options to
a command; :func:`judges_from_options` builds the judges those options name and checks that
each can be asked (a missing or rejected API key stops the command at once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from darwin.cli.common import parse_size

if TYPE_CHECKING:
    from darwin.verifiers.judge.llm_judge import LLMJudge

__all__ = ["judge_options", "judges_from_options", "parse_device_size"]


def parse_device_size(text: str | None) -> tuple[int, int] | None:
    """``--device-size WIDTHxHEIGHT`` as a size (``None`` when not given); any size a phone may have."""
    return None if text is None else parse_size(text, example="1080x2400", max_size=None)


def judge_options(default_configs: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding the judge options to a command (``default_configs`` names the
    ``--config`` default in its help); the command receives them as keyword arguments."""
    options = [
        click.option(
            "--config",
            "configs",
            multiple=True,
            metavar="PRESET|FILE",
            help=f"a judge configuration: a preset (final_state, trajectory, marked, purpose, summary, marked_summary, all) or a YAML/JSON file of llm_judge fields; repeat for several  [default: {default_configs}]",
        ),
        click.option(
            "--model",
            default=None,
            help="LiteLLM model name, e.g. gemini/gemini-2.5-flash or openai/<served-name> with --api-base  [default: gemini/gemini-2.5-flash]",
        ),
        click.option("--api-base", default=None, help="base URL of an OpenAI-compatible server (vLLM, ...)"),
        click.option(
            "--api-key-env",
            default=None,
            help="name of the environment variable holding the key  [default: the provider's standard one]",
        ),
        click.option(
            "--temperature",
            default=None,
            type=click.FloatRange(0.0, 2.0),
            help="sampling temperature  [default: the provider's]",
        ),
        click.option(
            "--samples",
            default=None,
            type=click.IntRange(1, 15),
            help="answers per verdict, majority decides  [default: 1]",
        ),
        click.option(
            "--max-images", default=None, type=click.IntRange(1, 64), help="screenshots per request  [default: 8]"
        ),
        click.option(
            "--max-side",
            default=None,
            type=click.IntRange(64, 4096),
            help="longest screenshot side in pixels  [default: 768]",
        ),
        click.option("--show-reasoning", is_flag=True, default=False, help="show the agent's own words to the judge"),
        click.option(
            "--concurrency", default=None, type=click.IntRange(1, 1024), help="requests in flight  [default: 8]"
        ),
        click.option(
            "--timeout",
            default=None,
            type=click.FloatRange(0.1, 3600.0),
            help="seconds per request attempt  [default: 60]",
        ),
        click.option(
            "--attempts",
            default=None,
            type=click.IntRange(1, 20),
            help="attempts per request (transient errors)  [default: 4]",
        ),
        click.option(
            "--device-size",
            default=None,
            help="phone pixels WIDTHxHEIGHT for runs stored without them (schema < 3)  [default: 1080x2400]",
        ),
        click.option("--seed", default=0, show_default=True, type=int, help="seed of the bootstrap intervals"),
        click.option(
            "--resamples", default=1000, show_default=True, type=click.IntRange(50), help="bootstrap resamples"
        ),
        click.option(
            "--show",
            default=20,
            show_default=True,
            type=click.IntRange(0),
            help="disagreeing episodes printed per configuration",
        ),
    ]

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def judges_from_options(configs: Sequence[str], o: dict[str, Any]) -> dict[str, LLMJudge]:
    """The judges ``configs`` name, with the model and request settings of the options ``o``,
    each checked by its preflight; a bad configuration or a missing key stops the command."""
    from darwin.policies.litellm import PolicyAuthError
    from darwin.verifiers.judge.calibration import build_judges
    from darwin.verifiers.judge.llm_judge import JudgeConfigError

    llm = {
        "model": o["model"],
        "api_base": o["api_base"],
        "api_key_env": o["api_key_env"],
        "temperature": o["temperature"],
        "timeout_s": o["timeout"],
        "max_attempts": o["attempts"],
        "max_concurrency": o["concurrency"],
    }
    try:
        judges = build_judges(
            configs,
            llm,
            samples=o["samples"],
            max_images=o["max_images"],
            max_side=o["max_side"],
            show_reasoning=o["show_reasoning"] or None,
        )
        for j in judges.values():
            j.preflight()
    except JudgeConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/--model") from None
    except PolicyAuthError as exc:
        raise click.ClickException(str(exc)) from None
    return judges
