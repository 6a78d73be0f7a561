"""Labelled screens for a learned verifier: the dataset format and its generation on SimPhones.

A learned verifier (:mod:`darwin.verifiers.learned`) judges ``(goal, screen) -> done?``,
optionally also reading the screen before the last action with that action marked on it. Its
data is a folder::

    examples.jsonl     one JSON object per line (below)
    images/<sha>.png   the screens, content-addressed (identical screens stored once)

with rows ``{"id", "image", "goal", "label", "task_id", "app", "language", "source",
"episode_id", "step", "previous_image", "last_action", "device_size"}``: ``image`` is the path
relative to the folder, ``label`` true when the goal holds on that screen, ``source`` who
produced the episode (``oracle``, ``random``...). The last three are optional (rows written
before they existed load unchanged): ``previous_image`` is the screen before the last action
that acted on the phone (relative path; ``""`` when there is none: the first screen of an
episode), ``last_action`` that action as :func:`darwin.actions.action_to_json` writes it
(``""``: none) and ``device_size`` the phone's ``[width, height]`` in pixels, which the action's
coordinates refer to (required with a ``last_action``). Human labels for real-phone screens use
the same format (``source: "human"``).

:func:`generate_verifier_data` plays episodes on SimPhones and labels *every* screen of them
with the task's rule predicate on the phone's state (the ground truth SimPhone has), so one
episode gives several examples, near misses included, each with the screen before its last
action and that action. Agents: the oracle (shortest plan, then
``finished``), the oracle stopped early (a near miss), the oracle followed by random steps
(screens after success, some of which undo it), a uniformly random agent and, when a
checkpoint is given, the warm-start policy; phones are perturbed (themes, wallpapers, orders,
pop-ups). Duplicate examples (the same screen, goal, previous screen and last action) are
stored once, so no such example can sit on both sides of a split (the same screen and goal
reached by different last actions are kept apart: they are different inputs).

    >>> from darwin.verifiers.learned.data import split_of
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
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np
from PIL import Image

from darwin.actions import Action, Finished, action_to_json, is_terminal, parse_action
from darwin.agents.base import Actor
from darwin.agents.scripted import OracleActor, RandomActor
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.png import encode_png
from darwin.predicates import resolve
from darwin.task_registry import goal_text
from darwin.types import ACTOR, Decision, Observation, Phase, Task, Transition, VerifierSpec

if TYPE_CHECKING:
    from darwin.store import RunStore
    from darwin.store_rows import StoredStep, VerdictRow

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
    "LabelledScreen",
    "load_image",
    "load_previous_image",
    "play_and_label",
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
    previous_image: str = ""
    """The screen before the last action (relative path); ``""``: none (an episode's first screen)."""
    last_action: str = ""
    """The last action as JSON (:func:`darwin.actions.action_to_json`); ``""``: none."""
    device_size: tuple[int, int] | None = None
    """The phone's ``(width, height)``, which ``last_action``'s coordinates refer to."""

    def action(self) -> Action | None:
        """``last_action`` parsed (``None`` when there is none)."""
        return parse_action(self.last_action) if self.last_action else None


class LabelledScreen(NamedTuple):
    """An example with its screen and, when it has one, the screen before its last action
    (what :meth:`DatasetWriter.write` stores; a plain ``(example, screen)`` pair works too)."""

    example: VerifierExample
    screen: np.ndarray
    previous: np.ndarray | None = None


def _check_history(row: dict[str, object], root: Path, where: str) -> None:
    """The optional history fields of a row: types, the previous screen's file, a parsable
    action with the device size its coordinates refer to."""
    previous, action, size = row.get("previous_image", ""), row.get("last_action", ""), row.get("device_size")
    if not isinstance(previous, str) or not isinstance(action, str):
        raise VerifierDataError(f'{where}: previous_image and last_action must be strings ("" for none)')
    if previous and not (root / previous).is_file():
        raise VerifierDataError(f"{where}: previous_image {previous!r} not found under {root}")
    if size is not None and not (
        isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)
    ):
        raise VerifierDataError(f"{where}: device_size must be [width, height] in pixels, got {size!r}")
    if action:
        try:
            parse_action(action)
        except ValueError as exc:
            raise VerifierDataError(
                f"{where}: last_action is not an action ({exc.__class__.__name__}); "
                "write it with darwin.actions.action_to_json"
            ) from None
        if size is None:
            raise VerifierDataError(f"{where}: a last_action needs the device_size its coordinates refer to")


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
        _check_history(row, root, f"{path}:{number}")
        if row.get("device_size") is not None:
            row["device_size"] = tuple(row["device_size"])  # JSON has no tuples
        out.append(VerifierExample(**row))
    if not out:
        raise VerifierDataError(f"{path}: no examples")
    return out


def _read_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def load_image(folder: str | Path, example: VerifierExample) -> np.ndarray:
    """The example's screen as an ``(H, W, 3)`` uint8 array."""
    return _read_rgb(Path(folder) / example.image)


def load_previous_image(folder: str | Path, example: VerifierExample) -> np.ndarray | None:
    """The screen before the example's last action (``None`` when it has none)."""
    return _read_rgb(Path(folder) / example.previous_image) if example.previous_image else None


_Key = tuple[str, str, str, str]


def _key(example: VerifierExample) -> _Key:
    """What makes two examples the same input: the screen, the goal, the previous screen and the last action."""
    return example.image, example.goal, example.previous_image, example.last_action


class DatasetWriter:
    """Appends examples (with their screens) to a dataset folder, skipping any example whose
    screen, goal, previous screen and last action the folder already holds."""

    def __init__(self, folder: str | Path) -> None:
        self.root = Path(folder)
        (self.root / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
        self.path = self.root / EXAMPLES_FILE
        self.seen: set[_Key] = set()
        if self.path.is_file():
            self.seen = {_key(e) for e in load_examples(self.root)}

    def _store(self, image: np.ndarray) -> str:
        """Write a screen once (content-addressed); its path relative to the folder."""
        png = encode_png(image)
        rel = f"{IMAGES_DIR}/{hashlib.sha256(png).hexdigest()[:32]}.png"
        file = self.root / rel
        if not file.exists():
            file.write_bytes(png)
        return rel

    def write(self, rows: Iterable[LabelledScreen | tuple[VerifierExample, np.ndarray]]) -> int:
        """Append ``rows`` (with their previous screens, when they have one); returns how many were new."""
        added = 0
        with self.path.open("a", encoding="utf-8") as fh:
            for row in rows:
                example, screen = row[0], row[1]
                previous = row.previous if isinstance(row, LabelledScreen) else None
                stored = replace(
                    example,
                    image=self._store(screen),
                    previous_image="" if previous is None else self._store(previous),
                )
                if _key(stored) in self.seen:
                    continue
                self.seen.add(_key(stored))
                fh.write(json.dumps(asdict(stored)) + "\n")
                added += 1
        return added


def split_of(
    task_id: str, episode_id: str, *, train_tasks: set[str], seen_apps: set[str], app: str, salt: int
) -> Split:
    """The split of an example: held-out apps and tasks by name, episodes of training tasks by
    a hash of the episode id (80 % train, 10 % validation, 10 % test)."""
    if task_id not in train_tasks:
        return "test_tasks" if app in seen_apps else "test_apps"
    bucket = int(hashlib.blake2b(f"{salt}:{episode_id}".encode(), digest_size=4).hexdigest(), 16) % 10
    return "train" if bucket < 8 else ("val" if bucket == 8 else "test_episodes")


# ------------------------------------------------------------------------ from run databases
def _fit(image: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``image`` at ``like``'s size (stored steps keep the agent's screen, the final screen may differ)."""
    if image.shape[:2] == like.shape[:2]:
        return image
    return np.asarray(
        Image.fromarray(image).resize((like.shape[1], like.shape[0]), Image.Resampling.BILINEAR), dtype=np.uint8
    )


def _last_move(steps: Sequence[StoredStep]) -> StoredStep | None:
    """The episode's last actor step that acted on the phone (not ``finished``/``answer``, not a
    parse error) and kept its screen: the screen before the final one's last action."""
    for step in reversed(steps):
        if step.agent != ACTOR or step.action_json is None or step.screenshot_path is None:
            continue
        if not is_terminal(parse_action(step.action_json)):
            return step
    return None


def _stored_label(verdicts: Sequence[VerdictRow], verifier_kind: str | None) -> tuple[bool, str] | None:
    """An episode's execution label and where it came from: the last verdict of ``verifier_kind``
    (any kind when ``None``), else, when a composite in audit mode had that kind as its auditor
    (a run rewarded by the learned verifier and audited by the rule), the auditor's verdict read
    from the composite's reason; ``None`` when neither is there or it is unverified."""
    from darwin.verifiers.composite import parse_audit

    execution = [v for v in verdicts if v.phase == Phase.EXECUTION]
    own = [v for v in execution if verifier_kind is None or v.verifier_kind == verifier_kind]
    if own:
        last = own[-1]
        return None if last.success is None else (bool(last.success), last.verifier_kind)
    for v in reversed(execution):
        note = parse_audit(v.reason) if v.verifier_kind == "composite" else None
        if note is not None and note.auditor == verifier_kind:
            return None if note.auditor_success is None else (note.auditor_success, f"{note.auditor}(audit)")
    return None


HUMAN = "human"
"""``verifier_kind`` of the labels people gave in ``darwin view`` (the run database's labels table)."""


def _human_label(store: RunStore, episode_id: str) -> tuple[bool, str] | None:
    given = [lab for lab in store.labels(episode_id=episode_id) if lab.phase == Phase.EXECUTION]
    return None if not given else (given[-1].success, HUMAN)


def examples_from_run(run_dir: str | Path, verifier_kind: str | None = None) -> list[LabelledScreen]:
    """Labelled final screens of a finished run: every episode with a stored final screen and an
    execution verdict (by ``verifier_kind``, e.g. ``"rule"``, ``"llm_judge"`` or a human review
    recorded with ``darwin judge review --record``, or the auditor of a composite in audit mode;
    ``"human"``: the label a person gave in ``darwin view``; default: the last verdict stored)
    becomes
    one example labelled by that verdict, with the stored screen before the episode's last
    action (resized to the final screen's size) and that action when the run kept them.
    Unverified verdicts are skipped. Runs stored before schema 3 have no final screens and give
    nothing.
    """
    from darwin.database import DB_FILENAME
    from darwin.store import RunStore

    root = Path(run_dir)
    if not (root / DB_FILENAME).is_file():
        raise VerifierDataError(f"{root}: no {DB_FILENAME}; pass a run directory written by darwin run or darwin eval")
    out: list[LabelledScreen] = []
    tasks: dict[str, Task | None] = {}
    with RunStore.for_run_dir(root) as store:
        for run in store.runs():
            for episode in store.episodes(run.run_id):
                if episode.final_screenshot_path is None or not episode.finished:
                    continue
                label = (
                    _human_label(store, episode.episode_id)
                    if verifier_kind == HUMAN
                    else _stored_label(store.verdicts(episode.episode_id), verifier_kind)
                )
                if label is None:
                    continue
                if episode.task_id not in tasks:
                    tasks[episode.task_id] = store.task(episode.task_id)
                task = tasks[episode.task_id]
                if task is None:
                    continue
                success, kind = label
                final = store.load_screenshot(episode.final_screenshot_path)
                move = None if episode.device_size is None else _last_move(store.steps(episode.episode_id))
                example = VerifierExample(
                    id=f"{episode.episode_id}-final",
                    image="",
                    goal=goal_text(task, task.instruction),
                    label=success,
                    task_id=task.id,
                    app=task.app,
                    language=task.language,
                    source=f"run:{kind}",
                    episode_id=episode.episode_id,
                    step=episode.num_steps or 0,
                    last_action="" if move is None or move.action_json is None else move.action_json,
                    device_size=None if move is None else episode.device_size,
                )
                previous = (
                    None
                    if move is None or move.screenshot_path is None
                    else _fit(
                        store.load_screenshot(move.screenshot_path),
                        final,
                    )
                )
                out.append(LabelledScreen(example, final, previous))
    return out


# ------------------------------------------------------------------------ generation
class _EarlyStop(Actor):
    """The oracle that says ``finished`` after ``stop_after`` actions (a near miss)."""

    def __init__(self, stop_after: int) -> None:
        self.oracle = OracleActor()
        self.stop_after = stop_after
        self.taken = 0

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
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

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
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


async def play_and_label(
    env: SimPhoneEnv,
    task: Task,
    actor: Actor,
    *,
    size: tuple[int, int],
    actor_size: tuple[int, int],
    budget: int,
    source: str,
    episode_id: str,
    keep_hidden_successes: bool = False,
) -> list[LabelledScreen]:
    """Play one episode and label every screen (before each action and the final one), each
    with the screen before the last action that acted on the phone and that action (none for
    the first screen); the actor sees the screen at ``actor_size``, the examples keep it at
    ``size``.

    A screen on which the goal holds while a different app (or the launcher) is in front from the
    one where the goal was first reached is dropped unless ``keep_hidden_successes``: the state still satisfies the
    predicate (the alarm stays set after ``press_home``), but the screen shows nothing of it, so
    as a label for a screen-reading verifier it is noise."""
    if task.start is not None:
        raise ValueError(
            f"task {task.id} starts inside a demonstration (Task.start, a reverse curriculum's): label its "
            "episodes from the task's own initial state, without start"
        )
    spec = task.verifier
    predicate, params = resolve(spec, task.id)
    goal = goal_text(task, task.instruction)
    # The instance's state goes on the phone first, as in every workflow's episode: a question
    # about a day's events is only answerable with that day's events set up.
    await env.abegin_task(task)
    if task.setup:
        await env.aapply_setup(task.setup)
    actor.start_episode(task)
    await actor.start_phase(env, task, Phase.EXECUTION, task.instruction, spec)
    out: list[LabelledScreen] = []
    history: list[Transition] = []
    before: tuple[np.ndarray, Action] | None = None  # the screen before the last move, and the move

    reached = False
    reached_in: str | None = None  # the app in front when the goal first held

    def label_now(step: int, screen: np.ndarray) -> None:
        nonlocal reached, reached_in
        state = env.probe_state()
        success = bool(predicate.fn(state, params).success)
        if success and not reached:
            reached, reached_in = True, state.get("foreground")
        if success and not keep_hidden_successes and state.get("foreground") != reached_in:
            return
        example = VerifierExample(
            id=f"{episode_id}-{step}",
            image="",
            goal=goal,
            label=success,
            task_id=task.id,
            app=task.app,
            language=task.language,
            source=source,
            episode_id=episode_id,
            step=step,
            last_action="" if before is None else action_to_json(before[1]),
            device_size=None if before is None else env.device_size,
        )
        out.append(LabelledScreen(example, screen, None if before is None else before[0]))

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
        if not is_terminal(decision.action):  # an answer changes no screen: the move before it stays the last
            before = (screen, decision.action)
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
    keep_hidden_successes: bool = False,
) -> int:
    """Play ``episodes_per_agent`` episodes per task and agent on fresh perturbed SimPhones and
    write every labelled screen to ``out`` at ``observation_size``; returns the number of new
    examples. The warm-start agent acts on its own screen size whatever ``observation_size`` is.
    Success screens after the agent left the app where the goal was reached are dropped unless
    ``keep_hidden_successes`` (see :func:`play_and_label`)."""
    return asyncio.run(
        _generate(
            out,
            tasks,
            episodes_per_agent,
            seed,
            observation_size,
            budget,
            warm_start,
            on_episode,
            keep_hidden_successes,
        )
    )


async def _generate(
    out: str | Path,
    tasks: Sequence[Task],
    episodes: int,
    seed: int,
    size: tuple[int, int],
    budget: int,
    warm_start: str | Path | None,
    on_episode: Callable[[str, int], None] | None,
    keep_hidden_successes: bool,
) -> int:
    rng = random.Random(seed)
    pool = None
    actor_size = size
    if warm_start is not None:
        from darwin.agents.pool import ActorPool

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
                    rows = await play_and_label(
                        env,
                        task,
                        make(task),
                        size=size,
                        actor_size=actor_size,
                        budget=budget,
                        source=source,
                        episode_id=episode_id,
                        keep_hidden_successes=keep_hidden_successes,
                    )
                    total += writer.write(rows)
                    if on_episode is not None:
                        on_episode(episode_id, total)
    finally:
        if pool is not None:
            await pool.aclose()
    return total
