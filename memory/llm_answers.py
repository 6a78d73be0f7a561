"""Reading the model's answers: the knowledge and summaries it distils, and the cleaning of any
text it returns (:func:`parse_distillation`, :func:`parse_summary`, :func:`clean_text`; part of
:mod:`darwin.memory.llm`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from darwin.json_replies import parse_json_answer

_WORD = re.compile(r"\w+")


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class KnowledgeItem:
    """One fact from a distillation answer; ``app`` when the model named another app."""

    text: str
    app: str | None = None


@dataclass(frozen=True)
class Distillation:
    """What the memory model made of one episode."""

    summary: str | None
    knowledge: tuple[KnowledgeItem, ...] = ()


def clean_text(value: object, limit: int) -> str | None:
    """A stripped one-line string of at most ``limit`` characters, or ``None`` if ``value``
    is not a string with some words in it."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not _WORD.search(text):
        return None
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


_SUMMARY_KEYS = ("summary", "episode_summary")
_KNOWLEDGE_KEYS = ("knowledge", "app_knowledge", "facts")
_FACT_KEYS = ("fact", "text", "knowledge", "content")


def parse_distillation(text: str, limit: int = 300) -> Distillation | None:
    """Read a distillation answer; ``None`` when it is malformed.

    The answer asked for is ``{"summary": "...", "knowledge": ["...", ...]}``; also read: the
    object inside a code fence or among prose, facts as objects (``{"fact": "...", "app":
    "..."}``), a single fact as a string, and a bare list of facts (no summary). ``{"summary":
    "", "knowledge": []}`` is a valid answer that taught nothing.

    >>> parse_distillation('```json\\n{"summary": "Opened Clock.", "knowledge": ["Alarms are on the Alarm tab."]}\\n```')
    Distillation(summary='Opened Clock.', knowledge=(KnowledgeItem(text='Alarms are on the Alarm tab.', app=None),))
    >>> parse_distillation('[{"fact": "Wi-Fi is under Network", "app": "Settings"}]').knowledge
    (KnowledgeItem(text='Wi-Fi is under Network', app='Settings'),)
    >>> parse_distillation('I could not find anything.') is None
    True
    """
    value = parse_json_answer(text)
    summary: str | None = None
    items: list[object]
    if isinstance(value, dict):
        summary_keys = [k for k in _SUMMARY_KEYS if k in value]
        knowledge_keys = [k for k in _KNOWLEDGE_KEYS if k in value]
        if not summary_keys and not knowledge_keys:
            return None
        if summary_keys:
            raw = value[summary_keys[0]]
            if raw is not None and not isinstance(raw, str):
                return None
            summary = clean_text(raw, limit)
        raw_items = value[knowledge_keys[0]] if knowledge_keys else None
        if raw_items is None:
            items = []
        elif isinstance(raw_items, (str, dict)):
            items = [raw_items]
        elif isinstance(raw_items, list):
            items = raw_items
        else:
            return None
    elif isinstance(value, list):
        items = value
    else:
        return None
    knowledge: list[KnowledgeItem] = []
    readable = 0
    for item in items:
        if isinstance(item, str):
            readable += 1
            fact = clean_text(item, limit)
            if fact is not None:
                knowledge.append(KnowledgeItem(fact))
        elif isinstance(item, dict):
            fact = next((item[k] for k in _FACT_KEYS if isinstance(item.get(k), str)), None)
            if item.get("kind") == "summary" or (fact is None and isinstance(item.get("summary"), str)):
                readable += 1
                summary = summary or clean_text(fact if fact is not None else item.get("summary"), limit)
                continue
            if fact is None:
                continue
            readable += 1
            cleaned = clean_text(fact, limit)
            if cleaned is not None:
                app = item.get("app")
                knowledge.append(KnowledgeItem(cleaned, app.strip() if isinstance(app, str) and app.strip() else None))
    if items and not readable:
        return None
    return Distillation(summary=summary, knowledge=tuple(knowledge))


def parse_summary(text: str, limit: int = 800) -> str | None:
    """Read a running-summary answer (``{"summary": "..."}``); ``None`` when malformed.

    >>> parse_summary('{"summary": "Opened Settings; on the Display page now."}')
    'Opened Settings; on the Display page now.'
    """
    value = parse_json_answer(text)
    if isinstance(value, dict):
        return clean_text(value.get("summary"), limit)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return clean_text(" ".join(value), limit)
    return None
