"""Reinforcement learning with a reader: what RL learns that the warm start was not taught.

The default run (`examples/spa_bench.py`) with three changes, one protocol for three questions:

- The warm start taps the list row that shows a task's word (`sft.prefer_typing=false`), the plan
  the tiny model cannot learn from pixels (it does not read which of ten rows says "Berlin").
- Two of the eight base tasks are held out of the demonstrations (`HELD_OUT`: booking.com_3 and
  settings_dark_theme); RL trains on all eight, so on those two everything beyond the warm start's
  transfer is RL's.
- The demonstrations also search Booking.com for four more destinations (Paris, London, Rome and
  Vienna beside booking.com_0's Berlin: examples/tasks/booking_cities_trained.yaml), so the word in
  a goal varies in training; the evaluation adds five destinations that never appear in training
  (task set `unseen_words`, examples/tasks/booking_cities_unseen.yaml) beside the trained Berlin.

Preset `reader` (the default): the agent reads the screen with the `elements` reader (SimPhone's
accessibility tree, docs/agents.md "Readers, marks and pointing actions"): the marks' texts are
listed in its prompt, and a press can point at the mark that reads the goal's words. Preset
`pixels`: the same run without a reader, the paired control. The reader run takes 23-29
minutes on 2 cores, by the machine; docs/results.md ("The agent reads") gives what it measured:

    darwin run examples/reader_rl.py --seed 0                    # the reader
    darwin run examples/reader_rl.py --preset pixels --seed 0    # the same run without it
"""

from pathlib import Path

from darwin.run.config import ExperimentConfig
from darwin.run.load import apply_overrides, load_experiment
from darwin.task_registry import task_set

HELD_OUT = ("booking.com_3", "settings_dark_theme")
"""Base tasks the warm start never sees demonstrated (RL trains on them)."""

TRAINED_WORDS = Path(__file__).with_name("tasks") / "booking_cities_trained.yaml"
"""Booking.com searches for five destinations (Berlin, Paris, London, Rome, Vienna) the warm start sees demonstrated."""

UNSEEN_WORDS = Path(__file__).with_name("tasks") / "booking_cities_unseen.yaml"
"""Booking.com searches for destinations that no demonstration and no training task names."""

READERS = {"reader": '{"name": "elements"}', "pixels": '{"name": "none"}'}
"""Preset name -> the warm start's reader (the RL agent reads as its warm start does)."""


def build(preset: str) -> ExperimentConfig:
    if preset == "default":
        preset = "reader"
    if preset not in READERS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(READERS)}")
    demonstrated = [t.id for t in task_set("base8") if t.id not in HELD_OUT] + [str(TRAINED_WORDS)]
    default = load_experiment(Path(__file__).with_name("spa_bench.py"))
    return apply_overrides(
        default,
        [
            f"name=reader_rl_{preset}",
            "sft.prefer_typing=false",
            f"sft.agent.reader={READERS[preset]}",
            "sft.tasks=[" + ", ".join(f'"{t}"' for t in demonstrated) + "]",
            'evaluation.task_sets={"unseen_words": ["' + str(UNSEEN_WORDS) + '"]}',
            f"notes=spa_bench's default, list-tapping warm start without demonstrations of {' and '.join(HELD_OUT)} "
            "and with four more Booking.com destinations, "
            f"reader {READERS[preset]}; evaluated also on five unseen Booking.com destinations",
        ],
    )
