"""Probe: can the warm start learn a held-out app's templates from demonstrations of other
instances of them?

Issue 45 asks whether self-evolution's miss on the held-out apps comes from the transfer from
synthesised goals, the model's capacity, or exploration coverage. This probe gives the model the
strongest transfer source there is, short of the evaluated instances themselves: the oracle's
demonstrations of the few-shot instances of every held-out template
(``darwin.templates.few_shot_instances``, 8 per held-out app, none of them evaluated), with the same
fine-tuning the flywheel makes each round (120 steps of batch 8 at lr 5e-4). If the fine-tuned
policy still fails the held-out apps' evaluated instances, what a round's synthesised tasks could
teach is bounded by the model, not by the synthesis.

It fine-tunes the experiment's warm start (built and cached as ``darwin run`` does) and saves the
result with the evaluated and the trained task ids (``evaluated_tasks.txt``, ``trained_tasks.txt``);
``darwin eval`` then evaluates it with the run's protocol and phones, and
``scripts/typed_text_source.py`` tells whether it copies its goals' strings:

    python scripts/probe_few_shot_sft.py --experiment examples/self_evolve.py --out runs/few-shot-sft
    darwin eval --experiment examples/self_evolve.py --agent tiny:runs/few-shot-sft \\
        --tasks "$(cat runs/few-shot-sft/evaluated_tasks.txt)" --run-dir runs/few-shot-sft/eval
    python scripts/typed_text_source.py runs/few-shot-sft/eval --experiment examples/self_evolve.py \\
        --trained "$(cat runs/few-shot-sft/trained_tasks.txt)"

``--per-app 64 --episodes 256`` gives it 8 to 10 instances of every held-out template instead of one or two.

docs/results.md, "Self-evolution: the replaying flywheel and the few-shot SFT probe".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from darwin.run.build import warm_start_checkpoint
from darwin.run.load import load_experiment
from darwin.run.self_evolution import probe_finetune
from darwin.templates import few_shot_instances, split_templates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True, help="an experiment file with self_evolution set")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--out", type=Path, required=True, help="where the fine-tuned checkpoint goes")
    parser.add_argument("--per-app", type=int, default=8, help="few-shot instances per held-out app")
    parser.add_argument("--episodes", type=int, default=64, help="oracle demonstrations of them in all")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args(argv)

    config = load_experiment(args.experiment, args.preset)
    if config.self_evolution is None:
        parser.error(f"{args.experiment} (preset {args.preset!r}) sets no self_evolution: no split to probe")
    split = split_templates(config.self_evolution.split)
    shots = tuple(t.id for t in few_shot_instances(split, per_app=args.per_app))
    warm = warm_start_checkpoint(config)
    result = probe_finetune(
        warm,
        args.out,
        shots,
        episodes=args.episodes,
        prefer_typing=config.sft.prefer_typing,
        steps=args.steps,
        lr=args.lr,
    )
    evaluated = [t.id for t in split.sets["unseen_apps"]]
    (args.out / "evaluated_tasks.txt").write_text(",".join(evaluated))
    (args.out / "trained_tasks.txt").write_text(",".join(shots))
    training = result.metadata["training"]
    summary = {
        "warm_start": str(warm),
        "few_shot_instances": shots,
        "data": result.metadata["data"],
        "loss": [training["first_loss"], training["final_loss"]],
    }
    (args.out / "probe.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))  # noqa: T201 - a script's report


if __name__ == "__main__":
    main()
