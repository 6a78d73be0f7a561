"""Reading the model's answer and checking each proposal against the templates
(:func:`validate_proposal`, :func:`read_proposals`; part of :mod:`darwin.curricula.proposer`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping, Sequence

from darwin.curricula.proposer_results import Proposal, RejectionKind
from darwin.json_replies import parse_json_answer
from darwin.memory.llm_answers import clean_text
from darwin.templates import Language, TaskTemplate, schema_line, templates
from darwin.types import TaskDefinitionError

# --------------------------------------------------------------------------- validation


def _json_text(value: object) -> str:
    """Canonical JSON of a model's value (stdlib ``json``: integers of any size, unlike orjson)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)


def _phrasing(template: TaskTemplate, params: object, language: Language) -> int:
    """A phrasing picked by the proposal's content: varied across proposals, the same on replay."""
    digest = hashlib.blake2b(_json_text([template.id, params, language]).encode(), digest_size=4)
    return int(digest.hexdigest(), 16) % len(template.phrasings[language])


def validate_proposal(
    item: object,
    position: int,
    *,
    allowed: Sequence[str],
    languages: Sequence[Language],
    step_budget: int | None = None,
) -> Proposal:
    """One item of the model's answer as a :class:`Proposal`: a task of its template, or a rejection with its reason.

    >>> p = validate_proposal({"template": "clock.set_alarm", "params": {"hour": 25}}, 0,
    ...                       allowed=["clock.set_alarm"], languages=["ENG"])
    >>> p.rejection, p.reason.split(". Schema")[0]
    ('invalid_params', "template 'clock.set_alarm': invalid parameters: hour: Input should be less than or equal to 23")
    """
    if not isinstance(item, Mapping):
        return Proposal(
            position,
            None,
            None,
            None,
            "",
            rejection="malformed",
            reason=f"a proposal must be a JSON object with 'template' and 'params', got {type(item).__name__}",
        )
    template_id, params, language = item.get("template"), item.get("params", {}), item.get("language", languages[0])
    why = clean_text(item.get("why"), 300) or ""

    def reject(kind: RejectionKind, reason: str) -> Proposal:
        return Proposal(
            position,
            template_id if isinstance(template_id, str) else None,
            params,
            language if isinstance(language, str) else None,
            why,
            rejection=kind,
            reason=reason,
        )

    if not isinstance(template_id, str) or not template_id:
        return reject("malformed", "the proposal names no template (a 'template' string)")
    registry = templates()
    if template_id not in registry:
        close = difflib.get_close_matches(template_id, list(allowed), n=1)
        return reject(
            "unknown_template", f"no template {template_id!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
        )
    if template_id not in allowed:
        return reject(
            "not_allowed",
            f"template {template_id!r} is not among the templates this curriculum may propose "
            "(held out, or not configured)",
        )
    if language not in languages:
        return reject("language", f"language {language!r} is not one of {list(languages)}")
    template = registry[template_id]
    if language not in template.phrasings:
        return reject("language", f"template {template_id!r} has no {language} phrasings")
    if not isinstance(params, Mapping):
        return reject(
            "invalid_params",
            f"params must be a JSON object of {template_id}'s parameters ({schema_line(template)}), "
            f"got {type(params).__name__}",
        )
    try:
        task = template.task(dict(params), language, _phrasing(template, params, language))
    except TaskDefinitionError as exc:
        return reject("invalid_params", str(exc))
    except (ValueError, LookupError, TypeError) as exc:
        # The schema admitted the parameters but the template could not build a task from them
        # (e.g. a name its data lacks): still the model's proposal that is unusable, not a crash.
        return reject(
            "invalid_params",
            f"template {template_id!r} cannot build a task from {_json_text(params)[:300]} "
            f"({type(exc).__name__}: {exc}); its schema admits them, so it should be tightened",
        )
    if step_budget is not None:
        task = task.model_copy(update={"step_budget": step_budget})
    return Proposal(position, template_id, task.params, language, why, task=task)


def read_proposals(
    answer: str,
    *,
    allowed: Sequence[str],
    languages: Sequence[Language],
    max_proposals: int,
    step_budget: int | None = None,
) -> tuple[Proposal, ...] | None:
    """Every proposal of a model's answer, validated; ``None`` when the answer holds no list of them.

    Read: a JSON list (in a code fence or among prose), or an object holding it under
    ``proposals`` or ``tasks``, or a single proposal object. Proposals past ``max_proposals``
    and repeats of an accepted task are rejected.
    """
    value = parse_json_answer(answer)
    if isinstance(value, dict):
        listed = next((value[k] for k in ("proposals", "tasks") if isinstance(value.get(k), list)), None)
        value = listed if listed is not None else ([value] if "template" in value else None)
    if not isinstance(value, list):
        return None
    out: list[Proposal] = []
    seen: set[str] = set()
    for position, item in enumerate(value):
        if position >= max_proposals:
            out.append(
                Proposal(
                    position,
                    None,
                    None,
                    None,
                    "",
                    rejection="too_many",
                    reason=f"past the {max_proposals} proposals asked for",
                )
            )
            continue
        proposal = validate_proposal(item, position, allowed=allowed, languages=languages, step_budget=step_budget)
        if proposal.task is not None and proposal.task.id in seen:
            proposal = Proposal(
                position,
                proposal.template,
                proposal.params,
                proposal.language,
                proposal.why,
                rejection="duplicate",
                reason=f"the same instance ({proposal.task.id}) was proposed earlier in the answer",
            )
        elif proposal.task is not None:
            seen.add(proposal.task.id)
        out.append(proposal)
    return tuple(out)
