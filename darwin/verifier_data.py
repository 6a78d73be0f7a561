"""Labelled screens for a learned verifier: the dataset format and its generation on SimPhones.

A learned verifier (:mod:`darwin.verifiers.learned`) judges ``(goal, screen) -> done?``. Its
data is a folder::

    examples.jsonl     one JSON object per line (below)
    images/<sha>.png   the screens, content-addressed (identical screens stored once)

with rows ``{"id", "image", "goal", "label", "task_id", "app", "language", "source",
"episode_id", "step"}``: ``image`` is the path relative to the folder, ``label`` true when the
goal holds on that screen, ``source`` who produced the episode (``oracle``, ``random``...).
Human labels for real-phone screens use the same format (``source: "human"``).

:func:`generate_verifier_data` plays episodes on SimPhones and labels *every* screen of them
with the task's rule predicate on the phone's state (the ground truth SimPhone has), so one
episode gives several examples, near misses included. Agents: the oracle (shortest plan, then
``finished``), the oracle stopped early (a near miss), the oracle followed by random steps
(screens after success, some of which undo it), a uniformly random agent and, when a
checkpoint is given, the warm-start policy; phones are perturbed (themes, wallpapers, orders,
pop-ups). Duplicate ``(screen, goal)`` pairs are stored once, so no pair can sit on both
sides of a split.

    >>> from darwin.verifier_data import split_of
    >>> split_of("settings_3", "ep-1", train_tasks={"settings_3"}, seen_apps={"Settings"}, app="Settings",
    ...          salt=0)
    'train'
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image

from darwin.actions import Finished
from darwin.agents.base import Actor
from darwin.agents.scripted import OracleActor, RandomActor
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.png import encode_png
from darwin.predicates import resolve
from darwin.tasks import goal_text
from darwin.types import Decision, Observation, Phase, Task, Transition, VerifierSpec

logger = logging.getLogger(__name__)

__all__ = [
    "EXAMPLES_FILE",
    "Split",
    "VerifierDataError",
    "VerifierExample",
    "examples_from_run",
    "generate_verifier_data",
    "load_examples",
    "split_of",
    "DatasetWriter",
    "load_image",
]

EXAMPLES_FILE = "examples.jsonl"
IMAGES_DIR = "images"
Split = Literal["train", "val", "test_episodes", "test_tasks", "test_apps"]


class VerifierDataError(ValueError):
    """A dataset folder or row that cannot be read; the message names the file, line and fix."""


@dataclass(frozen=True)
class VerifierExample:
    """One labelled screen (see the module docstring for the file format)."""

    id: str
    image: str
    goal: str
    label: bool
    task_id: str
    app: str
    language: str = "ENG"
    source: str = ""
    episode_id: str = ""
    step: int = 0


def load_examples(folder: str | Path) -> list[VerifierExample]:
    """Read a dataset folder; every problem names the line and the field."""
    root = Path(folder)
    path = root / EXAMPLES_FILE
    if not path.is_file():
        raise VerifierDataError(f"{root}: no {EXAMPLES_FILE}; create the data with `darwin verifier data --out {root}`")
    fields = set(VerifierExample.__dataclass_fields__)
    required = {"id", "image", "goal", "label", "task_id", "app"}
    out: list[VerifierExample] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VerifierDataError(f"{path}:{number}: not JSON ({exc.msg}); one JSON object per line") from None
        if not isinstance(row, dict):
            raise VerifierDataError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        missing = sorted(required - set(row))
        unknown = sorted(set(row) - fields)
        if missing or unknown:
            raise VerifierDataError(f"{path}:{number}: missing fields {missing}, unknown fields {unknown}")
        if not isinstance(row["label"], bool):
            raise VerifierDataError(f"{path}:{number}: label must be true or false, got {row['label']!r}")
        if not (root / row["image"]).is_file():
            raise VerifierDataError(f"{path}:{number}: image {row['image']!r} not found under {root}")
        out.append(VerifierExample(**row))
    if not out:
        raise VerifierDataError(f"{path}: no examples")
    return out


def load_image(folder: str | Path, example: VerifierExample) -> np.ndarray:
    """The example's screen as an ``(H, W, 3)`` uint8 array."""
    with Image.open(Path(folder) / example.image) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


class DatasetWriter:
    """Appends examples (with their screens) to a dataset folder, skipping any ``(screen,
    goal)`` pair the folder already holds."""

    def __init__(self, folder: str | Path) -> None:
        self.root = Path(folder)
        (self.root / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
        self.path = self.root / EXAMPLES_FILE
        self.seen: set[tuple[str, str]] = set()
        if self.path.is_file():
            self.seen = {(e.image, e.goal) for e in load_examples(self.root)}

    def write(self, rows: Iterable[tuple[VerifierExample, np.ndarray]]) -> int:
        """Append ``rows``; returns how many were new."""
        added = 0
        with self.path.open("a", encoding="utf-8") as fh:
            for example, screen in rows:
                png = encode_png(screen)
                rel = f"{IMAGES_DIR}/{hashlib.sha256(png).hexdigest()[:32]}.png"
                if (rel, example.goal) in self.seen:
                    continue
                self.seen.add((rel, example.goal))
                file = self.root / rel
                if not file.exists():
                    file.write_bytes(png)
                fh.write(json.dumps(asdict(replace(example, image=rel))) + "\n")
                added += 1
        return added


def split_of(task_id: str, episode_id: str, *, train_tasks: set[str], seen_apps: set[str], app: str, salt: int) -> Split:
    """The split of an example: held-out apps and tasks by name, episodes of training tasks by
    a hash of the episode id (80 % train, 10 % validation, 10 % test)."""
    if task_id not in train_tasks:
        return "test_tasks" if app in seen_apps else "test_apps"
    bucket = int(hashlib.blake2b(f"{salt}:{episode_id}".encode(), digest_size=4).hexdigest(), 16) % 10
    return "train" if bucket < 8 else ("val" if bucket == 8 else "test_episodes")


# ------------------------------------------------------------------------ from run databases
def examples_from_run(run_dir: str | Path, verifier_kind: str | None = None) -> list[tuple[VerifierExample, np.ndarray]]:
    """Labelled final screens of a finished run: every episode with a stored final screen and an
    execution verdict (by ``verifier_kind``, e.g. ``"rule"``, ``"llm_judge"`` or a human review
    recorded with ``darwin judge review --record``; default: the last verdict stored) becomes
    one example labelled by that verdict. Unverified verdicts are skipped. Runs stored before
    schema 3 have no final screens and give nothing.
    """
    from darwin.store import DB_FILENAME, RunStore

    root = Path(run_dir)
    if not (root / DB_FILENAME).is_file():
        raise VerifierDataError(f"{root}: no {DB_FILENAME}; pass a run directory written by darwin run or darwin eval")
    out: list[tuple[VerifierExample, np.ndarray]] = []
    tasks: dict[str, Task | None] = {}
    with RunStore.for_run_dir(root) as store:
        for run in store.runs():
            for episode in store.episodes(run.run_id):
                if episode.final_screenshot_path is None or not episode.finished:
                    continue
                verdicts = [
                    v for v in store.verdicts(episode.episode_id)
                    if v.phase == Phase.EXECUTION and (verifier_kind is None or v.verifier_kind == verifier_kind)
                ]
                if not verdicts or verdicts[-1].success is None:
                    continue
                if episode.task_id not in tasks:
                    tasks[episode.task_id] = store.task(episode.task_id)
                task = tasks[episode.task_id]
                if task is None:
                    continue
                verdict = verdicts[-1]
                example = VerifierExample(
                    id=f"{episode.episode_id}-final", image="", goal=goal_text(task, task.instruction),
                    label=bool(verdict.success), task_id=task.id, app=task.app, language=task.language,
                    source=f"run:{verdict.verifier_kind}", episode_id=episode.episode_id,
                    step=episode.num_steps or 0,
                )
                out.append((example, store.load_screenshot(episode.final_screenshot_path)))
    return out


# ------------------------------------------------------------------------ generation
class _EarlyStop(Actor):
    """The oracle that says ``finished`` after ``stop_after`` actions (a near miss)."""

    def __init__(self, stop_after: int) -> None:
        self.oracle = OracleActor()
        self.stop_after = stop_after
        self.taken = 0

    async def start_phase(self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec) -> None:
        self.taken = 0
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        if self.taken >= self.stop_after:
            return Decision(action=Finished(content="done"))
        self.taken += 1
        return await self.oracle.act(observation, history)


class _Wander(Actor):
    """The oracle, then ``extra`` random actions instead of ``finished`` (screens after success)."""

    def __init__(self, extra: int, seed: int) -> None:
        self.oracle = OracleActor()
        self.random = RandomActor(seed=seed, finish_probability=0.0)
        self.extra = extra
        self.done_plan = False
        self.wandered = 0

    async def start_phase(self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec) -> None:
        self.done_plan, self.wandered = False, 0
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        if not self.done_plan:
            decision = await self.oracle.act(observation, history)
            if not isinstance(decision.action, Finished):
                return decision
            self.done_plan = True
        if self.wandered >= self.extra:
            return Decision(action=Finished(content="done"))
        self.wandered += 1
        return Decision(action=self.random.sample(observation.device_size))


async def _play_and_label(
    env: SimPhoneEnv, task: Task, actor: Actor, *, size: tuple[int, int], actor_size: tuple[int, int], budget: int,
    source: str, episode_id: str,
) -> list[tuple[VerifierExample, np.ndarray]]:
    """Play one episode and label every screen (before each action and the final one); the
    actor sees the screen at ``actor_size``, the examples keep it at ``size``."""
    spec = task.verifier
    predicate, params = resolve(spec, task.id)
    goal = goal_text(task, task.instruction)
    actor.start_episode(task)
    await actor.start_phase(env, task, Phase.EXECUTION, task.instruction, spec)
    out: list[tuple[VerifierExample, np.ndarray]] = []
    history: list[Transition] = []

    def label_now(step: int, screen: np.ndarray) -> None:
        success = bool(predicate.fn(env.probe_state(), params).success)
        example = VerifierExample(
            id=f"{episode_id}-{step}", image="", goal=goal, label=success, task_id=task.id, app=task.app,
            language=task.language, source=source, episode_id=episode_id, step=step,
        )
        out.append((example, screen))

    for step in range(budget):
        screen = await env.ascreenshot(size)
        label_now(step, screen)
        seen = screen if actor_size == size else await env.ascreenshot(actor_size)
        obs = Observation(screenshot=seen, goal=goal, device_size=env.device_size, task_id=task.id, step=step)
        decision = await actor.act(obs, history)
        if decision.action is None:
            continue
        await env.aexecute(decision.action)
        history.append(Transition(episode_id, task.id, step, Phase.EXECUTION, obs, decision))
        if isinstance(decision.action, Finished):
            return out  # the final screen is the one just labelled (finished changes nothing)
    label_now(budget, await env.ascreenshot(size))
    return out


def generate_verifier_data(
    out: str | Path,
    tasks: Sequence[Task],
    *,
    episodes_per_agent: int = 6,
    seed: int = 0,
    observation_size: tuple[int, int] = (168, 364),
    budget: int = 12,
    warm_start: str | Path | None = None,
    on_episode: Callable[[str, int], None] | None = None,
) -> int:
    """Play ``episodes_per_agent`` episodes per task and agent on fresh perturbed SimPhones and
    write every labelled screen to ``out`` at ``observation_size``; returns the number of new
    examples. The warm-start agent acts on its own screen size whatever ``observation_size`` is."""
    return asyncio.run(
        _generate(out, tasks, episodes_per_agent, seed, observation_size, budget, warm_start, on_episode)
    )


async def _generate(
    out: str | Path, tasks: Sequence[Task], episodes: int, seed: int, size: tuple[int, int], budget: int,
    warm_start: str | Path | None, on_episode: Callable[[str, int], None] | None,
) -> int:
    rng = random.Random(seed)
    pool = None
    actor_size = size
    if warm_start is not None:
        from darwin.policies.pool import ActorPool

        pool = ActorPool(warm_start, temperature=1.0, seed=seed, max_batch=1)
        actor_size = pool.observation_size
    makers: dict[str, Callable[[Task], Actor]] = {
        "oracle": lambda task: OracleActor(),
        "early_stop": lambda task: _EarlyStop(rng.randrange(0, max(1, (task.golden_steps or 3)))),
        "wander": lambda task: _Wander(rng.randrange(1, 5), rng.randrange(1 << 30)),
        "random": lambda task: RandomActor(seed=rng.randrange(1 << 30), finish_probability=0.05),
    }
    if pool is not None:
        makers["warm_start"] = lambda task: pool(0)
    writer = DatasetWriter(out)
    total = 0
    try:
        for task in tasks:
            for source, make in makers.items():
                for e in range(episodes):
                    phone_seed = rng.randrange(1 << 30)
                    env = SimPhoneEnv(seed=phone_seed, perturbation=PerturbationConfig())
                    episode_id = f"{source}-{task.id}-{seed}-{e}"
                    rows = await _play_and_label(
                        env, task, make(task), size=size, actor_size=actor_size, budget=budget, source=source,
                        episode_id=episode_id,
                    )
                    total += writer.write(rows)
                    if on_episode is not None:
                        on_episode(episode_id, total)
    finally:
        if pool is not None:
            await pool.aclose()
    return total
