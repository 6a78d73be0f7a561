"""Calibrating and reviewing LLM judges: labelled episodes, resumable judging, metrics.

``darwin judge calibrate`` runs judge configurations over labelled episodes and reports the
paper's Table 3 per language (accuracy, precision, recall, F1, each with a bootstrap 95%
interval) with the episodes on which judge and label disagree; ``darwin judge review``
judges a finished run and reports agreement with the verdicts stored there. This module
holds their logic; the commands are in :mod:`darwin.cli`.

Labelled episodes (:func:`load_cases`) come from

- a **run database** (a run directory holding ``run.db``, or the database file): on SimPhone
  the rule verdicts are ground truth, so a judge is calibrated without human labelling
  (``labels="rule"``); ``labels="stored"`` takes whatever verdict the run stored (review);
- a **labelled folder or CSV** for human-labelled (real-phone) trajectories, in the format
  of :func:`load_csv_cases` (documented in ``docs/verification.md``).

Judging is resumable (:class:`ResultsFile`): every verdict is appended to a JSON-lines file
as soon as it arrives, keyed by the judge's fingerprint and the episode, and a rerun skips
what is there.

    >>> m = judge_metrics([True, True, False, False], [True, False, False, None], resamples=200, seed=0)
    >>> m.n, m.unverified, m.accuracy.value, m.precision.value, m.recall.value
    (3, 1, 0.6666666666666666, 1.0, 0.5)
"""

from __future__ import annotations

import asyncio
import csv
import difflib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic import ValidationError

from darwin.actions import Action, is_terminal, parse_action
from darwin.algos.classification import Interval, bootstrap_metrics
from darwin.database import DB_FILENAME, StoreError, StoreOpenError
from darwin.store import SCREENSHOT_DIRNAME, RunStore
from darwin.store_rows import EpisodeRow, StoredStep
from darwin.task_registry import goal_text
from darwin.types import ACTOR, Phase, TerminationReason
from darwin.verifiers.judge.llm_judge import (
    JudgeCase,
    JudgeStep,
    LLMJudge,
    config_fingerprint,
    final_answer,
)

logger = logging.getLogger(__name__)

__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_DEVICE_SIZE",
    "CalibrationMetrics",
    "Estimate",
    "JudgedCase",
    "LabelSourceError",
    "LabelledCase",
    "ResultsFile",
    "agreement_counts",
    "final_screen",
    "judge_cases",
    "judge_metrics",
    "load_cases",
    "load_csv_cases",
    "load_run_cases",
    "record_judge_verdicts",
]

DEFAULT_DEVICE_SIZE = (1080, 2400)
"""Phone size assumed for episodes stored before schema version 3 (SimPhone's)."""

CSV_COLUMNS = ("episode_id", "instruction", "label", "trajectory_dir")
"""Required columns of a labels CSV; optional: ``language``, ``app``, ``task_id``,
``answer``, ``device_width``, ``device_height``."""

_YES = {"1", "yes", "y", "true", "success", "是"}
_NO = {"0", "no", "n", "false", "failure", "fail", "否"}
_UNSCORED = {TerminationReason.INFRA_TRUNCATED, TerminationReason.ERROR, TerminationReason.ALREADY_DONE}


class LabelSourceError(ValueError):
    """A label source that cannot be read; the message names the input and the fix."""


@dataclass(frozen=True)
class LabelledCase:
    """One phase of one episode to judge, with its label (``None``: unverified when stored).

    ``load`` reads the screenshots only when the case is judged.
    """

    key: str
    episode_id: str
    task_id: str
    language: Literal["ENG", "CHN"]
    label: bool | None
    label_kind: str
    load: Callable[[], JudgeCase] = field(repr=False, compare=False)
    phase: Phase = Phase.EXECUTION


# --------------------------------------------------------------------------- sources


def load_cases(
    source: str | Path,
    *,
    labels: Literal["rule", "stored", "human"] = "rule",
    phase: Phase = Phase.EXECUTION,
    device_size: tuple[int, int] | None = None,
) -> list[LabelledCase]:
    """Labelled cases from a run directory / run database, a labelled folder, or a CSV.

    Raises :class:`LabelSourceError` naming the input and the fix when it is none of these
    or cannot be read.
    """
    path = Path(source)
    if path.is_dir() and (path / DB_FILENAME).is_file():
        return load_run_cases(path / DB_FILENAME, labels=labels, phase=phase, device_size=device_size)
    if path.is_dir() and (path / "labels.csv").is_file():
        return load_csv_cases(path / "labels.csv")
    if path.is_file() and path.suffix.lower() == ".csv":
        return load_csv_cases(path)
    if path.is_file() and path.suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        return load_run_cases(path, labels=labels, phase=phase, device_size=device_size)
    what = (
        "does not exist"
        if not path.exists()
        else "is neither a run directory (with run.db), a run database (.db), a labels CSV nor a folder with labels.csv"
    )
    raise LabelSourceError(
        f"label source {str(path)!r} {what}. Fix: pass a `darwin run`/`darwin eval` directory, its run.db, "
        "or a labelled folder/CSV in the format of docs/verification.md"
    )


def load_run_cases(
    db_path: str | Path,
    *,
    labels: Literal["rule", "stored", "human"] = "rule",
    phase: Phase = Phase.EXECUTION,
    device_size: tuple[int, int] | None = None,
) -> list[LabelledCase]:
    """The finished, scored episodes of every run in a run database.

    ``labels="rule"``: the label is the phase's rule verdict (episodes without one are left
    out); ``labels="human"``: a person's label of the phase (the labels table ``darwin view``
    writes; unlabelled episodes are left out); ``labels="stored"``: the first verdict stored for
    the phase, whatever verifier gave it (``None`` when unverified). Infrastructure truncations, errors and goals that already
    held are left out (nothing was judged there).
    """
    path = Path(db_path)
    if not path.is_file():
        raise LabelSourceError(
            f"no run database at {str(path)!r}. Fix: pass a directory written by `darwin run` or `darwin eval`"
        )
    screenshots = path.parent / SCREENSHOT_DIRNAME
    try:
        store = RunStore(path, screenshot_dir=screenshots)
    except StoreOpenError as exc:
        raise LabelSourceError(
            f"cannot read run database {str(path)!r}: {exc} (or upgrade darwin: pip install -U darwin-mobile-agent)"
        ) from None
    cases: list[LabelledCase] = []
    skipped = 0
    assumed_size = 0
    try:
        for run in store.runs():
            for episode in store.episodes(run.run_id):
                case = _run_case(store, screenshots, episode, labels, phase, device_size)
                if case is None:
                    skipped += 1
                    continue
                if episode.device_size is None and device_size is None:
                    assumed_size += 1
                cases.append(case)
    except StoreError as exc:
        raise LabelSourceError(f"cannot read run database {str(path)!r}: {exc}") from None
    finally:
        store.close()
    if skipped:
        logger.info(
            "%s: %d episode(s) without a %s label for the %s phase left out",
            path,
            skipped,
            labels,
            phase.value,
        )
    if assumed_size:
        logger.warning(
            "%s: %d episode(s) stored without the phone's size (schema < 3): assuming %dx%d (SimPhone); "
            "pass --device-size for other phones",
            path,
            assumed_size,
            *DEFAULT_DEVICE_SIZE,
        )
    return cases


def _run_case(
    store: RunStore,
    screenshots: Path,
    episode: EpisodeRow,
    labels: Literal["rule", "stored", "human"],
    phase: Phase,
    device_size: tuple[int, int] | None,
) -> LabelledCase | None:
    if not episode.finished or episode.termination_reason in _UNSCORED or phase not in episode.phase_success:
        return None
    verdicts = [v for v in store.verdicts(episode.episode_id) if v.phase == phase]
    if labels == "rule":
        ruled = [v for v in verdicts if v.verifier_kind == "rule" and v.success is not None]
        if not ruled:
            return None
        label, kind = ruled[0].success, "rule"
    elif labels == "human":
        given = [lab for lab in store.labels(episode_id=episode.episode_id) if lab.phase == phase]
        if not given:
            return None
        label, kind = given[-1].success, "human"
    else:
        label = verdicts[0].success if verdicts else episode.phase_success.get(phase)
        kind = verdicts[0].verifier_kind if verdicts else "episode"
    task = store.task(episode.task_id)
    if task is None:
        return None
    instruction = next((text for p, text, _, _ in task.phases() if p == phase), task.instruction)
    all_steps = [s for s in store.steps(episode.episode_id) if s.agent == ACTOR]
    steps = [s for s in all_steps if s.phase == phase]
    later = [s for s in all_steps if _PHASE_ORDER[s.phase] > _PHASE_ORDER[phase] and s.screenshot_path]
    final_rel = final_screen(steps, later, episode)
    size = episode.device_size or device_size or DEFAULT_DEVICE_SIZE
    goal = goal_text(task, instruction)
    language = task.language

    def load() -> JudgeCase:
        judged = [
            JudgeStep(
                screenshot=None if s.screenshot_path is None else _read_png(screenshots / s.screenshot_path),
                action=s.action,
                device_size=size,
                reasoning=s.response_text,
            )
            for s in steps
        ]
        final = None if final_rel is None else _read_png(screenshots / final_rel)
        return JudgeCase(
            goal=goal,
            language=language,
            steps=judged,
            final_screenshot=final,
            answer=final_answer([s.action for s in steps]),
        )

    return LabelledCase(
        key=f"{episode.episode_id}:{phase.value}",
        episode_id=episode.episode_id,
        task_id=episode.task_id,
        language=language,
        label=label,
        label_kind=kind,
        load=load,
        phase=phase,
    )


_PHASE_ORDER = {Phase.SETUP: 0, Phase.EXECUTION: 1, Phase.TEARDOWN: 2}


def final_screen(steps: Sequence[StoredStep], later: Sequence[StoredStep], episode: EpisodeRow) -> str | None:
    """The screen after the phase's last action: the next phase's first screen, else the
    episode's final screen, else (for a phase that ended on finished/answer, which changes
    nothing) the screen of its last step."""
    if later:
        return later[0].screenshot_path
    if episode.final_screenshot_path is not None:
        return episode.final_screenshot_path
    if steps and steps[-1].screenshot_path is not None:
        action = steps[-1].action
        if action is not None and is_terminal(action):
            return steps[-1].screenshot_path
    return None


def _read_png(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def load_csv_cases(csv_path: str | Path) -> list[LabelledCase]:
    """Human-labelled trajectories from a CSV file (UTF-8, header row).

    Required columns: ``episode_id`` (unique), ``instruction`` (the task as given to the
    agent), ``label`` (``1``/``0``, ``yes``/``no``, ``true``/``false``, ``success``/``failure``,
    ``是``/``否``), ``trajectory_dir`` (a folder, relative to the CSV's folder). Optional:
    ``language`` (``ENG`` or ``CHN``; default ``ENG``), ``app`` (shown before the
    instruction), ``task_id`` (default: the episode id), ``answer`` (the agent's answer to
    a question), ``device_width`` and ``device_height`` (the phone's pixels that action
    coordinates refer to; default 1080x2400).

    Each ``trajectory_dir`` holds ``final.png`` (the screen at the end; required),
    optionally ``actions.jsonl`` (one darwin action as JSON per line, e.g.
    ``{"type": "click", "x": 540, "y": 1200}``, or ``null`` for a step without a valid
    action) and ``step_000.png``, ``step_001.png``, ... (the screen before each step).

    Raises :class:`LabelSourceError` naming the file, the line and the fix.
    """
    path = Path(csv_path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise LabelSourceError(f"label file {str(path)!r} does not exist. Fix: check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelSourceError(
            f"cannot read label file {str(path)!r} ({type(exc).__name__}: {exc}). Fix: save it as a UTF-8 CSV with a header row "
            f"({', '.join(CSV_COLUMNS)}, ...) readable by this user"
        ) from None
    rows = list(csv.DictReader(text.splitlines()))
    header = [h.strip() for h in (rows[0].keys() if rows else next(csv.reader(text.splitlines()), []))]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise LabelSourceError(
            f"label file {str(path)!r} lacks the column(s) {', '.join(missing)}. Fix: the header row must name at least "
            f"{', '.join(CSV_COLUMNS)} (see docs/verification.md)"
        )
    cases: list[LabelledCase] = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
        case = _csv_case(path, line, row)
        if case.episode_id in seen:
            raise LabelSourceError(
                f"{path}: line {line}: episode_id {case.episode_id!r} appears twice. Fix: give every trajectory its own id"
            )
        seen.add(case.episode_id)
        cases.append(case)
    if not cases:
        raise LabelSourceError(f"label file {str(path)!r} has no rows. Fix: add one row per labelled trajectory")
    return cases


def _csv_case(path: Path, line: int, row: dict[str, str]) -> LabelledCase:
    def fail(problem: str, fix: str) -> LabelSourceError:
        return LabelSourceError(f"{path}: line {line}: {problem}. Fix: {fix}")

    episode_id = row["episode_id"]
    if not episode_id or not row["instruction"]:
        raise fail("episode_id and instruction must not be empty", "fill them in")
    raw = row["label"].lower()
    if raw not in _YES and raw not in _NO:
        raise fail(
            f"label {row['label']!r} is not a yes/no label", "write 1/0, yes/no, true/false, success/failure or 是/否"
        )
    written_language = (row.get("language") or "ENG").upper()
    if written_language not in ("ENG", "CHN"):
        raise fail(f"language {row.get('language')!r} is not ENG or CHN", "write ENG or CHN")
    language: Literal["ENG", "CHN"] = "CHN" if written_language == "CHN" else "ENG"
    try:
        size = (
            int(row.get("device_width") or DEFAULT_DEVICE_SIZE[0]),
            int(row.get("device_height") or DEFAULT_DEVICE_SIZE[1]),
        )
    except ValueError:
        raise fail(
            "device_width/device_height are not whole numbers", "write the phone's pixels, e.g. 1080 and 2400"
        ) from None
    folder = (path.parent / row["trajectory_dir"]).resolve()
    if not (folder / "final.png").is_file():
        raise fail(
            f"{folder / 'final.png'} does not exist", "put the screen at the end of the trajectory there, as final.png"
        )
    actions: list[Action | None] = []
    actions_file = folder / "actions.jsonl"
    if actions_file.is_file():
        for n, text in enumerate(actions_file.read_text(encoding="utf-8").splitlines(), start=1):
            if not text.strip():
                continue
            try:
                actions.append(None if text.strip() == "null" else parse_action(text))
            except (ValidationError, ValueError) as exc:
                first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                raise fail(
                    f"{actions_file} line {n} is not a darwin action ({first})",
                    'write one action per line, e.g. {"type": "click", "x": 540, "y": 1200}, or null',
                ) from None
    app = row.get("app") or ""
    goal = f"{app}: {row['instruction']}" if app else row["instruction"]
    answer = row.get("answer") or None

    def load() -> JudgeCase:
        steps = []
        for i, action in enumerate(actions):
            shot = folder / f"step_{i:03d}.png"
            steps.append(
                JudgeStep(screenshot=_read_png(shot) if shot.is_file() else None, action=action, device_size=size)
            )
        return JudgeCase(
            goal=goal,
            language=language,
            steps=steps,
            final_screenshot=_read_png(folder / "final.png"),
            answer=answer or final_answer(actions),
        )

    return LabelledCase(
        key=episode_id,
        episode_id=episode_id,
        task_id=row.get("task_id") or episode_id,
        language=language,
        label=raw in _YES,
        label_kind="human",
        load=load,
    )


# --------------------------------------------------------------------------- judging


@dataclass(frozen=True)
class JudgedCase:
    """A judge's verdict on a labelled case, with what it cost."""

    config: str
    key: str
    episode_id: str
    task_id: str
    language: str
    phase: str
    label: bool | None
    success: bool | None
    reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    requests: int = 0


class ResultsFile:
    """Judged cases kept in a JSON-lines file, one per line as soon as it is judged, keyed by
    the judge's fingerprint and the case: a rerun with the same judge skips them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], dict[str, Any]] = {}
        if self.path.is_file():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
                try:
                    row = json.loads(line)
                    self._rows[(row["fingerprint"], row["key"])] = row
                except (json.JSONDecodeError, KeyError, TypeError):
                    logger.warning(
                        "%s: line %d is not a judged case (an interrupted write?); it will be judged again",
                        self.path,
                        n,
                    )

    def get(self, fingerprint: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._rows.get((fingerprint, key))

    def add(self, fingerprint: str, judged: JudgedCase) -> None:
        row = {"fingerprint": fingerprint, **asdict(judged)}
        with self._lock:
            self._rows[(fingerprint, judged.key)] = row
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")


async def judge_cases(
    judges: Mapping[str, LLMJudge],
    cases: Sequence[LabelledCase],
    results: ResultsFile | None = None,
    on_judged: Callable[[JudgedCase], None] | None = None,
) -> dict[str, list[JudgedCase]]:
    """Every judge's verdict on every case (those already in ``results`` are not asked
    again), in case order per judge name. An authentication error stops everything at once."""
    out: dict[str, dict[str, JudgedCase]] = {name: {} for name in judges}
    todo: list[tuple[str, LLMJudge, LabelledCase]] = []
    for name, judge in judges.items():
        fingerprint = config_fingerprint(judge.config)
        for case in cases:
            row = results.get(fingerprint, case.key) if results is not None else None
            if row is None:
                todo.append((name, judge, case))
            else:
                out[name][case.key] = JudgedCase(
                    **{
                        **{k: row[k] for k in JudgedCase.__dataclass_fields__ if k in row},
                        "config": name,
                        "label": case.label,
                    }
                )
    limits = {name: asyncio.Semaphore(judge.config.llm.max_concurrency) for name, judge in judges.items()}

    async def one(name: str, judge: LLMJudge, case: LabelledCase) -> None:
        async with limits[name]:
            verdict = await judge.judge(await asyncio.to_thread(case.load))
        usage = verdict.usage
        judged = JudgedCase(
            config=name,
            key=case.key,
            episode_id=case.episode_id,
            task_id=case.task_id,
            language=case.language,
            phase=case.phase.value,
            label=case.label,
            success=verdict.success,
            reason=verdict.reason,
            prompt_tokens=0 if usage is None else usage.prompt_tokens,
            completion_tokens=0 if usage is None else usage.completion_tokens,
            cost_usd=None if usage is None else usage.cost_usd,
            requests=0 if usage is None else usage.requests,
        )
        out[name][case.key] = judged
        if results is not None:
            results.add(config_fingerprint(judge.config), judged)
        if on_judged is not None:
            on_judged(judged)

    tasks = [asyncio.ensure_future(one(*item)) for item in todo]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return {name: [by_key[c.key] for c in cases if c.key in by_key] for name, by_key in out.items()}


# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Estimate:
    """A metric and its bootstrap 95% interval (``None`` when undefined, e.g. no positives)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def fmt(self) -> str:
        """``0.833 (0.50-1.00)``, or ``-`` when undefined."""
        if self.value is None:
            return "-"
        if self.low is None or self.high is None:
            return f"{self.value:.3f}"
        return f"{self.value:.3f} ({self.low:.2f}-{self.high:.2f})"


@dataclass(frozen=True)
class CalibrationMetrics:
    """A judge against labels (positive = task complete) over its verified verdicts;
    ``unverified`` counts the cases it could not decide (left out of the metrics)."""

    n: int
    unverified: int
    tp: int
    fp: int
    tn: int
    fn: int
    accuracy: Estimate
    precision: Estimate
    recall: Estimate
    f1: Estimate


def judge_metrics(
    labels: Sequence[bool],
    predictions: Sequence[bool | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> CalibrationMetrics:
    """Accuracy, precision, recall and F1 of ``predictions`` against ``labels``, each with a
    percentile bootstrap 95% interval (``resamples`` resamples of the verified cases, drawn
    with ``np.random.default_rng(seed)``; :func:`darwin.algos.classification.bootstrap_metrics`).
    ``None`` predictions are unverified: counted, not scored. A metric undefined on the data
    (precision without predicted positives) is ``None``; resamples where it is undefined are
    left out of its interval."""
    if len(labels) != len(predictions):
        raise ValueError(f"{len(labels)} labels but {len(predictions)} predictions")
    verified = [(bool(y), bool(p)) for y, p in zip(labels, predictions, strict=True) if p is not None]
    unverified = len(labels) - len(verified)
    if not verified:
        empty = Estimate(None)
        return CalibrationMetrics(0, unverified, 0, 0, 0, 0, accuracy=empty, precision=empty, recall=empty, f1=empty)
    actual = np.array([v[0] for v in verified], dtype=bool)
    predicted = np.array([v[1] for v in verified], dtype=bool)
    m = bootstrap_metrics(predicted, actual, np.random.default_rng(seed), resamples=resamples)

    def estimate(i: Interval) -> Estimate:
        if not np.isfinite(i.value):
            return Estimate(None)
        finite = np.isfinite(i.low) and np.isfinite(i.high)
        return Estimate(float(i.value), float(i.low) if finite else None, float(i.high) if finite else None)

    c = m.counts
    return CalibrationMetrics(
        len(verified),
        unverified,
        c.tp,
        c.fp,
        c.tn,
        c.fn,
        accuracy=estimate(m.accuracy),
        precision=estimate(m.precision),
        recall=estimate(m.recall),
        f1=estimate(m.f1),
    )


def agreement_counts(stored: Iterable[bool | None], judged: Iterable[bool | None]) -> dict[tuple[str, str], int]:
    """How often each (stored verdict, judge verdict) pair occurs, as ``yes``/``no``/``unverified``.

    >>> agreement_counts([True, None], [True, False])[("yes", "yes")]
    1
    """
    words = ("yes", "no", "unverified")
    out = {(a, b): 0 for a in words for b in words}
    for s, j in zip(stored, judged, strict=True):
        out[(_word(s), _word(j))] += 1
    return out


def _word(value: bool | None) -> str:
    return "unverified" if value is None else ("yes" if value else "no")


# --------------------------------------------------------------------------- judges from the command line


def build_judges(specs: Sequence[str], llm: Mapping[str, Any] | None = None, **options: Any) -> dict[str, LLMJudge]:
    """Judges named on the command line: each spec is a :data:`~darwin.verifiers.judge.llm_judge.PRESETS`
    name or a YAML/JSON file of :class:`~darwin.verifiers.judge.llm_judge.LLMJudgeConfig` fields
    (it may name a ``preset`` too). ``llm`` overrides the model settings and ``options`` the
    other fields (``None`` values are ignored), for every judge. Keys are named, never given.

    Raises :class:`~darwin.verifiers.judge.llm_judge.JudgeConfigError` naming the spec and the fix.
    """
    import yaml

    from darwin.verifiers.judge.llm_judge import PRESETS, JudgeConfigError

    llm_overrides = {k: v for k, v in (llm or {}).items() if v is not None}
    extra = {k: v for k, v in options.items() if v is not None}
    judges: dict[str, LLMJudge] = {}
    for spec in specs:
        path = Path(spec)
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise JudgeConfigError(
                    f"judge config file {spec!r} cannot be read ({type(exc).__name__}). Fix: write a YAML or JSON mapping of llm_judge fields"
                ) from None
            if not isinstance(data, dict):
                raise JudgeConfigError(
                    f"judge config file {spec!r} is not a mapping. Fix: write llm_judge fields, e.g. 'preset: marked' and 'llm: {{model: gpt-4o-mini}}'"
                )
            name = str(data.pop("name", path.stem))
            preset = data.pop("preset", None)
        elif spec in PRESETS:
            name, preset, data = spec, spec, {}
        else:
            close = difflib.get_close_matches(spec, list(PRESETS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise JudgeConfigError(
                f"--config {spec!r} is neither a file nor a preset{hint}. Fix: use one of {', '.join(PRESETS)}, or a YAML/JSON file of llm_judge fields"
            )
        base_llm = dict(data.pop("llm", None) or {"model": "gemini/gemini-2.5-flash", "max_tokens": 1024})
        data["llm"] = {**base_llm, **llm_overrides}
        data.update(extra)
        unique, n = name, 2
        while unique in judges:
            unique, n = f"{name}-{n}", n + 1
        try:
            judges[unique] = LLMJudge(data, preset=preset)
        except JudgeConfigError as exc:
            raise JudgeConfigError(f"--config {spec!r}: {exc}") from None
    return judges


def usage_totals(judged: Iterable[JudgedCase]) -> dict[str, Any]:
    """Requests, tokens and dollars over judged cases (``cost_usd`` ``None`` if none was priced)."""
    rows = list(judged)
    priced = [r.cost_usd for r in rows if r.cost_usd is not None]
    return {
        "requests": sum(r.requests for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
        "completion_tokens": sum(r.completion_tokens for r in rows),
        "cost_usd": sum(priced) if priced else None,
    }


def record_judge_verdicts(db: Path, judged: Iterable[JudgedCase], config: dict[str, Any]) -> int:
    """Store the judge's verdicts in the run database ``db`` (verifier kind ``llm_judge``, with
    tokens and cost), once per episode, phase and judge fingerprint (``config["fingerprint"]``);
    returns how many were new."""
    n = 0
    with RunStore(db, screenshot_dir=db.parent / SCREENSHOT_DIRNAME) as store:
        for r in judged:
            have = [
                v
                for v in store.verdicts(r.episode_id)
                if v.verifier_kind == "llm_judge"
                and v.phase.value == r.phase
                and isinstance(v.verifier_config, dict)
                and v.verifier_config.get("fingerprint") == config["fingerprint"]
            ]
            if have:
                continue
            store.record_verdict(
                r.episode_id,
                Phase(r.phase),
                "llm_judge",
                r.success,
                None if r.success is None else float(r.success),
                r.reason,
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
                cost_usd=r.cost_usd,
                requests=r.requests,
                verifier_config=config,
            )
            n += 1
    return n
