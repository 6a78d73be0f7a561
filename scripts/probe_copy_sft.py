"""Probe: can the warm start learn to copy a string from its goal into ``type('...')``, given
enough different strings?

The few-shot SFT probe (``scripts/probe_few_shot_sft.py``) found that the tiny policy types the
strings of the instances it trained on, not its goal's (``scripts/typed_text_source.py``). The
human templates draw their strings from short lists (``chrome.search`` from 12 queries), so a
policy can memorise every one of them instead of learning to copy. This probe separates the two
causes, too few distinct strings or a model that cannot learn to copy: it fine-tunes the
experiment's warm start on the oracle's demonstrations of ``--train`` instances of one template
whose single string parameter is a made-up two-word phrase, and writes ``--test`` instances with
phrases it never trained on, and ``human_tasks.json``, one instance of the template per string of its
own (which the warm start of a held-out app never typed), to evaluate:

    python scripts/probe_copy_sft.py --experiment examples/self_evolve.py --out runs/copy-sft
    darwin eval --experiment examples/self_evolve.py --agent tiny:runs/copy-sft \\
        --tasks runs/copy-sft/test_tasks.json --run-dir runs/copy-sft/eval
    python scripts/typed_text_source.py runs/copy-sft/eval --trained runs/copy-sft/train_tasks.json

``--vocabulary`` chooses the phrases. ``pairs`` (the default): an adjective and a noun from 20 x 18
English words, a different pair per instance, so the test pairs recombine trained words.
``invented``: two invented words (consonant-vowel syllables, none a word of the tokenizer's corpus
or of the template's strings), each word in one phrase only, so no test word was ever typed in
training; a policy that learns to copy these has learnt copying itself, not a map from known words.

A policy that copies types the test goals' phrases (``goal``); one that memorises types trained
phrases (``trained``). docs/results.md, "Self-evolution: the replaying flywheel and the few-shot SFT
probe".
"""

from __future__ import annotations

import argparse
import json
import random
import re
from itertools import product
from pathlib import Path

from darwin.models._corpus import corpus
from darwin.run.build import warm_start_checkpoint
from darwin.run.load import load_experiment
from darwin.run.self_evolution import probe_finetune
from darwin.templates import TaskTemplate, get_template
from darwin.types import Task

ADJECTIVES = "red blue green cheap quiet fast slow warm cold fresh old new small big local free easy rare dark bright"
NOUNS = "shoes lamps bikes tents maps clocks pianos boats coffee tea bread socks chairs desks phones books kites gloves"
PHRASES = [f"{a} {n}" for a, n in product(ADJECTIVES.split(), NOUNS.split())]
"""The ``pairs`` vocabulary: 360 adjective-noun pairs, none a template's string."""
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"


def invented_phrases(count: int, rng: random.Random, known: set[str]) -> list[str]:
    """``count`` phrases of two invented words each (2 or 3 consonant-vowel syllables, such as
    ``"kovira temu"``), every word distinct across phrases and none in ``known`` (lower case)."""
    words: list[str] = []
    seen = set(known)
    while len(words) < 2 * count:
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.choice((2, 3))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return [f"{words[2 * i]} {words[2 * i + 1]}" for i in range(count)]


def template_strings(template: TaskTemplate, field: str, seeds: range = range(200)) -> list[Task]:
    """One instance of ``template`` per distinct value of ``field`` among its instances of
    ``seeds``: the strings the template itself draws (``chrome.search``'s 12 queries)."""
    by_value: dict[str, Task] = {}
    for seed in seeds:
        task = template.instance(seed)
        by_value.setdefault(str(task.params[field]), task)
    return list(by_value.values())


def string_tasks(template: TaskTemplate, field: str, phrases: list[str], rng: random.Random) -> list[Task]:
    """One instance of ``template`` per phrase (its ``field`` set to it), each in an English
    phrasing drawn from ``rng``."""
    phrasings = len(template.phrasings["ENG"])
    return [template.task({field: p}, phrasing=rng.randrange(phrasings)) for p in phrases]


def check_string_template(template_id: str, field: str) -> TaskTemplate:
    """The template ``template_id``, checked to take the one string parameter ``field``.

    Raises:
        KeyError: no template has that id.
        ValueError: the template has no string parameter ``field`` that alone makes an instance.
    """
    template = get_template(template_id)
    schema = template.params.model_json_schema()
    if list(schema.get("required", [])) != [field] or schema["properties"][field].get("type") != "string":
        raise ValueError(
            f"template {template_id!r} takes {sorted(schema.get('properties', {}))} (required "
            f"{schema.get('required', [])}); the probe needs a template whose one required parameter is the "
            f"string {field!r}, such as chrome.search's 'query'"
        )
    return template


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True, help="an experiment file whose warm start to fine-tune")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--out", type=Path, required=True, help="where the fine-tuned checkpoint goes")
    parser.add_argument("--template", default="chrome.search")
    parser.add_argument("--field", default="query", help="the template's string parameter")
    parser.add_argument("--train", type=int, default=328, help="trained instances (one demonstration each)")
    parser.add_argument("--test", type=int, default=32, help="instances with phrases never trained on")
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--vocabulary", choices=("pairs", "invented"), default="pairs", help="see the docstring")
    parser.add_argument("--seed", type=int, default=0, help="which phrases train and which test")
    args = parser.parse_args(argv)
    if args.train < 1 or args.test < 1:
        parser.error("--train and --test must be >= 1")
    if args.vocabulary == "pairs" and args.train + args.test > len(PHRASES):
        parser.error(
            f"--train and --test add up to more than the {len(PHRASES)} phrases of --vocabulary pairs: "
            "lower them, or use --vocabulary invented"
        )

    rng = random.Random(args.seed)
    try:
        template = check_string_template(args.template, args.field)
    except (KeyError, ValueError) as exc:
        parser.error(str(exc))
    human = template_strings(template, args.field)
    if args.vocabulary == "pairs":
        phrases = rng.sample(PHRASES, args.train + args.test)
    else:
        texts = [*corpus(), *(str(t.params[args.field]) for t in human)]
        known = {w for text in texts for w in re.findall(r"[a-z]+", text.lower())}
        phrases = invented_phrases(args.train + args.test, rng, known)
    train = string_tasks(template, args.field, phrases[: args.train], rng)
    test = string_tasks(template, args.field, phrases[args.train :], rng)
    args.out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, tasks in (("train", train), ("test", test), ("human", human)):
        files[name] = args.out / f"{name}_tasks.json"
        files[name].write_text(json.dumps([t.model_dump(mode="json") for t in tasks], indent=1))
    config = load_experiment(args.experiment, args.preset)
    warm = warm_start_checkpoint(config)
    result = probe_finetune(
        warm,
        args.out,
        (str(files["train"]),),
        episodes=len(train),
        prefer_typing=config.sft.prefer_typing,
        steps=args.steps,
        lr=args.lr,
    )
    training = result.metadata["training"]
    summary = {
        "warm_start": str(warm),
        "template": args.template,
        "vocabulary": args.vocabulary,
        "trained_phrases": phrases[: args.train],
        "test_phrases": phrases[args.train :],
        "data": result.metadata["data"],
        "loss": [training["first_loss"], training["final_loss"]],
    }
    (args.out / "probe.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if not k.endswith("phrases")}, indent=2))  # noqa: T201 - a script's report


if __name__ == "__main__":
    main()
