"""The run database: runs, tasks, episodes, steps and verdicts, plus content-addressed screenshots.

One SQLite file per run by default (``<run_dir>/run.db`` with screenshots under
``<run_dir>/screenshots/``); any SQLAlchemy URL (e.g. ``postgresql://...``) for runs shared
between machines. Every write is one transaction (nothing half-written), every query
returns frozen dataclasses (no ORM objects or open sessions leak out), and the store is
safe to use from several threads at once (one engine, one session per call).

>>> import numpy as np
>>> from darwin.store import RunStore
>>> store = RunStore("sqlite://")  # in memory; RunStore.for_run_dir(run_dir) for a real run
>>> run_id = store.start_run("demo", config=None)
>>> [r.name for r in store.runs()]
['demo']
>>> store.close()

Secrets never reach the database: run configs pass through :func:`redact_secrets` first.
See ``docs/store.md`` for the schema and SQL examples.

The store is split by job: the tables and migrations (:mod:`darwin.store_schema`), the rows
queries return (:mod:`darwin.store_rows`), the queries (:mod:`darwin.store_queries`), secret
redaction (:mod:`darwin.store_secrets`); this module opens the database and writes to it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image
from pydantic import BaseModel, JsonValue
from sqlalchemy import exc as sa_exc
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import null, select
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from darwin.database import (
    DB_FILENAME,
    StoreError,
    StoreOpenError,
    describe_url,
    utcnow,
)
from darwin.png import encode_png
from darwin.predicates import State
from darwin.store_queries import RunQueries
from darwin.store_rows import (
    _clean_text,
)
from darwin.store_schema import (
    _ADD_COLUMN,
    _MIGRATIONS,
    SCHEMA_VERSION,
    Base,
    EpisodeModel,
    LabelModel,
    PhoneEventModel,
    RunModel,
    StepModel,
    StepScoreModel,
    StoreMeta,
    TaskModel,
    VerdictModel,
)
from darwin.store_secrets import _config_to_json, redact_secrets
from darwin.types import Phase, StepScore, Task, Trajectory, Transition

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

logger = logging.getLogger(__name__)


SCREENSHOT_DIRNAME = "screenshots"
MAX_TEXT_CHARS = 100_000
"""Longest model response stored per step; longer text is cut (and the cut is logged)."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- the store


_RUN_STORE_FIX = "open the run with RunStore.for_run_dir(run_dir), which creates the directory"


class RunStore(RunQueries):
    """The run database: SQLAlchemy tables plus a content-addressed screenshot directory.

    ``url_or_path`` is a filesystem path to a SQLite file (its directory must exist) or any
    SQLAlchemy URL (``sqlite:///abs/run.db``, ``sqlite://`` in memory,
    ``postgresql+psycopg://user@host/db``). Tables are created on open. Screenshots go to
    ``screenshot_dir``, by default ``screenshots/`` next to a SQLite file; in-memory and
    server databases need an explicit ``screenshot_dir`` to store screenshots.

    Thread-safe: one engine, one session per call; each write is one transaction. SQLite
    runs in WAL mode with a busy timeout, and writes take the write lock up front
    (``BEGIN IMMEDIATE``) so concurrent writers queue instead of failing.

    >>> store = RunStore("sqlite://")
    >>> rid = store.start_run("smoke", config=None)
    >>> store.episodes(rid)
    []
    >>> store.close()
    """

    what = "run database"
    fix = _RUN_STORE_FIX
    metadata = Base.metadata

    def __init__(
        self,
        url_or_path: str | os.PathLike[str],
        *,
        screenshot_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(url_or_path)
        if screenshot_dir is not None:
            self.screenshot_dir: Path | None = Path(screenshot_dir)
        elif self._is_sqlite and not self._in_memory:
            self.screenshot_dir = Path(str(self.url.database)).parent / SCREENSHOT_DIRNAME
        else:
            self.screenshot_dir = None
        logger.info("opened run store %s", describe_url(self.url))

    # ----------------------------------------------------------------- opening

    @classmethod
    def for_run_dir(cls, run_dir: str | os.PathLike[str]) -> RunStore:
        """Open (creating the directory if needed) ``<run_dir>/run.db`` + ``<run_dir>/screenshots/``."""
        root = Path(run_dir)
        root.mkdir(parents=True, exist_ok=True)
        return cls(root / DB_FILENAME, screenshot_dir=root / SCREENSHOT_DIRNAME)

    def _create_tables(self) -> None:
        """The tables (:meth:`Database._create_tables`), then the schema version: recorded in a
        new database, an older one migrated in place, a newer one refused."""
        super()._create_tables()
        try:
            with self._lock, self._write_sessions.begin() as s:
                row = s.get(StoreMeta, "schema_version")
                if row is None:
                    s.add(StoreMeta(key="schema_version", value=str(SCHEMA_VERSION)))
                else:
                    self._migrate(s, row, self.url_text)
                if row is not None and row.value != str(SCHEMA_VERSION):
                    raise StoreOpenError(
                        f"database {self.url_text} has schema version {row.value}, this darwin "
                        f"expects {SCHEMA_VERSION}. Open it with the darwin version that wrote "
                        "it, or start a new run directory."
                    )
        except sa_exc.DBAPIError as e:
            raise StoreOpenError(
                f"cannot open the {self.what} {self.url_text}: {e.orig or e}. {self._open_fix()}"
            ) from e

    @staticmethod
    def _migrate(s: Session, row: StoreMeta, url_text: str) -> None:
        """Bring an older database up to :data:`SCHEMA_VERSION` in place (nothing is lost)."""
        while row.value.isdigit() and int(row.value) < SCHEMA_VERSION and int(row.value) in _MIGRATIONS:
            version = int(row.value)
            for statement in _MIGRATIONS[version]:
                added = _ADD_COLUMN.match(statement)
                if added is not None:
                    table, column = added.groups()
                    if column in {c["name"] for c in sa_inspect(s.connection()).get_columns(table)}:
                        continue  # already there (a database created by a newer darwin and relabelled)
                s.execute(sql_text(statement))
            row.value = str(version + 1)
            logger.info("migrated %s from schema version %d to %d", url_text, version, version + 1)

    # ----------------------------------------------------------------- sessions

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """One write transaction: commits on success, rolls everything back on any error."""
        lock = self._lock if self._is_sqlite else None
        if lock is not None:
            lock.acquire()
        try:
            with self._write_sessions.begin() as s:
                yield s
        finally:
            if lock is not None:
                lock.release()

    # ----------------------------------------------------------------- screenshots

    def put_screenshot(self, image: bytes | np.ndarray) -> str:
        """Store a screenshot (PNG bytes or ``(H, W, 3)`` uint8 array) once; return its relative path.

        The file is ``<screenshot_dir>/<sha[:2]>/<sha>.png`` with ``sha`` the SHA-256 of the
        PNG bytes, written via a temporary file and an atomic rename; identical bytes map to
        the same file, which is written only once.
        """
        if self.screenshot_dir is None:
            raise StoreError(
                f"store {describe_url(self.url)} has no screenshot directory. Pass "
                "screenshot_dir=... to RunStore, or use RunStore.for_run_dir(run_dir)."
            )
        if isinstance(image, np.ndarray):
            png = encode_png(image)
        elif isinstance(image, bytes | bytearray | memoryview):
            png = bytes(image)
            if not png.startswith(_PNG_SIGNATURE):
                raise ValueError("screenshot bytes are not a PNG (missing the PNG signature)")
        else:
            raise TypeError(f"screenshot must be PNG bytes or a numpy array, got {type(image).__name__}")
        digest = hashlib.sha256(png).hexdigest()
        rel = f"{digest[:2]}/{digest}.png"
        final = self.screenshot_dir / rel
        if final.is_file() and final.stat().st_size == len(png):
            return rel
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=final.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(png)
            os.replace(tmp_name, final)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return rel

    def screenshot_file(self, rel_path: str) -> Path:
        """The absolute path of a stored screenshot given its relative path from a :class:`StoredStep`."""
        if self.screenshot_dir is None:
            raise StoreError(f"store {describe_url(self.url)} has no screenshot directory")
        return self.screenshot_dir / rel_path

    def load_screenshot(self, rel_path: str) -> np.ndarray:
        """Decode a stored screenshot back to an ``(H, W, 3)`` uint8 array."""
        with Image.open(self.screenshot_file(rel_path)) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)

    # ----------------------------------------------------------------- writes

    def start_run(
        self,
        name: str,
        config: BaseModel | DataclassInstance | None = None,
        *,
        run_id: str | None = None,
    ) -> str:
        """Record a new run and return its id; ``config`` (pydantic model or dataclass) is redacted.

        Passing the ``run_id`` of an existing run resumes it (nothing is changed).
        """
        config_json = None if config is None else redact_secrets(_config_to_json(config))
        rid = run_id or uuid.uuid4().hex
        with self._write() as s:
            existing = s.get(RunModel, rid)
            if existing is not None:
                logger.info("resuming run %s (%s)", rid, existing.name)
                return rid
            s.add(RunModel(id=rid, name=_clean_text(name) or "", created_at=utcnow(), config=config_json))
        logger.info("started run %s (%s)", rid, name)
        return rid

    def record_task(self, task: Task) -> None:
        """Insert or update a task (idempotent; the latest definition of an id wins)."""
        with self._write() as s:
            self._upsert_task(s, task)

    def _upsert_task(self, s: Session, task: Task) -> None:
        values = {
            "id": task.id,
            "instruction": _clean_text(task.instruction) or "",
            "app": task.app,
            "source": task.source,
            "task_json": task.model_dump_json(),
            "updated_at": utcnow(),
        }
        dialect = self._engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            ins = sqlite_insert(TaskModel) if dialect == "sqlite" else pg_insert(TaskModel)
            stmt = ins.values(**values)
            changed = stmt.excluded.task_json != TaskModel.task_json
            stmt = stmt.on_conflict_do_update(
                index_elements=[TaskModel.id],
                set_={k: stmt.excluded[k] for k in values if k != "id"},
                where=changed,
            )
            s.execute(stmt)
            return
        existing = s.get(TaskModel, task.id)
        if existing is None:
            s.add(TaskModel(**values))
        elif existing.task_json != values["task_json"]:
            for k, v in values.items():
                setattr(existing, k, v)

    def start_episode(
        self,
        run_id: str,
        episode_id: str,
        task: Task,
        phone: str,
        seed: int | None = None,
        device_size: tuple[int, int] | None = None,
        start_state: State | None = None,
    ) -> None:
        """Record the start of an episode (also records ``task``); episode ids are unique.

        ``device_size`` is the phone's ``(width, height)``: action coordinates are in its pixels.
        ``start_state`` is the phone's JSON state before the first action, where the writer has
        it (an exploration does; a rollout does not).
        """
        with self._write() as s:
            if s.get(RunModel, run_id) is None:
                raise StoreError(
                    f"cannot start episode {episode_id!r}: run {run_id!r} does not exist; call start_run first"
                )
            if s.get(EpisodeModel, episode_id) is not None:
                raise StoreError(
                    f"episode {episode_id!r} already exists; every episode needs a fresh id (e.g. uuid4().hex)"
                )
            self._upsert_task(s, task)
            s.add(
                EpisodeModel(
                    id=episode_id,
                    run_id=run_id,
                    task_id=task.id,
                    phone=_clean_text(phone) or "",
                    seed=seed,
                    started_at=utcnow(),
                    device_width=None if device_size is None else int(device_size[0]),
                    device_height=None if device_size is None else int(device_size[1]),
                    start_state=start_state,
                )
            )

    def record_step(
        self,
        transition: Transition,
        screenshot_png: bytes | np.ndarray | None = None,
        state_after: State | None = None,
    ) -> None:
        """Record one transition, with an optional screenshot (PNG bytes or the observation array).

        Pass ``transition.observation.screenshot`` to keep what the agent saw, or the device's
        raw PNG; ``state_after`` is the phone's JSON state right after the action, where the
        writer has it (an exploration does). Raises :class:`StoreError` if the episode was not
        started or the ``(phase, step)`` was already recorded (nothing is written then).
        """
        shot = None if screenshot_png is None else self.put_screenshot(screenshot_png)
        with self._write() as s:
            if s.get(EpisodeModel, transition.episode_id) is None:
                raise StoreError(
                    f"cannot record step {transition.step} of episode {transition.episode_id!r}: "
                    "the episode does not exist; call start_episode first"
                )
            s.add(self._step_model(transition, shot, state_after))
            try:
                s.flush()
            except sa_exc.IntegrityError as e:
                raise StoreError(
                    f"step {transition.step} ({transition.phase.value}) of episode "
                    f"{transition.episode_id!r} is already recorded; a transition is stored once"
                ) from e

    @staticmethod
    def _step_model(t: Transition, screenshot_path: str | None, state_after: State | None = None) -> StepModel:
        d = t.decision
        g = d.generation
        return StepModel(
            episode_id=t.episode_id,
            step=t.step,
            phase=t.phase.value,
            action_type=None if d.action is None else d.action.type,
            action_json=None if d.action is None else d.action.model_dump_json(),
            parse_error_reason=None if d.parse_error is None else _clean_text(d.parse_error.reason, MAX_TEXT_CHARS),
            parse_error_text=None if d.parse_error is None else _clean_text(d.parse_error.text),
            agent=t.agent,
            message=None if d.message is None else _clean_text(d.message, MAX_TEXT_CHARS),
            response_text=None if g is None else _clean_text(g.text, MAX_TEXT_CHARS),
            prompt_tokens=None if g is None else len(g.prompt_ids),
            response_tokens=None if g is None else len(g.response_ids),
            policy_version=None if g is None else g.policy_version,
            reward=float(t.reward),
            done=bool(t.done),
            termination_reason=None if t.termination is None else t.termination.reason.value,
            termination_cause="" if t.termination is None else _clean_text(t.termination.cause, MAX_TEXT_CHARS) or "",
            screenshot_path=screenshot_path,
            state_after=state_after,
            created_at=utcnow(),
        )

    def record_verdict(
        self,
        episode_id: str,
        phase: Phase,
        verifier_kind: str,
        success: bool | None,
        reward: float | None,
        reason: str = "",
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cost_usd: float | None = None,
        requests: int | None = None,
        verifier_config: JsonValue | None = None,
    ) -> None:
        """Record a verifier's verdict on one phase (``success=None``: unverified, never a 0 or 1).

        Model judges add what the verdict cost (tokens, dollars, requests) and their settings
        (``verifier_config``, passed through :func:`redact_secrets`).
        """
        with self._write() as s:
            if s.get(EpisodeModel, episode_id) is None:
                raise StoreError(
                    f"cannot record a verdict for episode {episode_id!r}: it does not exist; call start_episode first"
                )
            s.add(
                VerdictModel(
                    episode_id=episode_id,
                    phase=Phase(phase).value,
                    verifier_kind=verifier_kind,
                    success=success,
                    reward=None if reward is None else float(reward),
                    reason=_clean_text(reason, MAX_TEXT_CHARS) or "",
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    cost_usd=None if cost_usd is None else float(cost_usd),
                    requests=requests,
                    verifier_config=None if verifier_config is None else redact_secrets(verifier_config),
                    created_at=utcnow(),
                )
            )

    def finish_episode(self, trajectory: Trajectory, final_screenshot: bytes | np.ndarray | None = None) -> None:
        """Record how an episode ended: termination, success per phase, step count, and
        optionally the screen after the last action (``final_screenshot``).

        Transitions of ``trajectory`` not yet recorded with :meth:`record_step` are recorded
        here (without screenshots) in the same transaction, so nothing completed is lost.
        """
        term = trajectory.termination
        if term is None:
            raise StoreError(f"cannot finish episode {trajectory.episode_id!r}: the trajectory has no termination yet")
        final_path = None if final_screenshot is None else self.put_screenshot(final_screenshot)
        with self._write() as s:
            ep = s.get(EpisodeModel, trajectory.episode_id)
            if ep is None:
                raise StoreError(
                    f"cannot finish episode {trajectory.episode_id!r}: it does not exist; call start_episode first"
                )
            recorded = {
                (phase, step)
                for phase, step in s.execute(
                    select(StepModel.phase, StepModel.step).where(StepModel.episode_id == ep.id)
                )
            }
            missing = [t for t in trajectory.transitions if (t.phase.value, t.step) not in recorded]
            for t in missing:
                s.add(self._step_model(t, None))
            if missing:
                logger.debug("episode %s: recorded %d steps at finish", ep.id, len(missing))
            ep.ended_at = utcnow()
            ep.termination_reason = term.reason.value
            ep.termination_cause = _clean_text(term.cause, MAX_TEXT_CHARS) or ""
            ep.success = trajectory.success
            ep.num_steps = len(trajectory.transitions)
            ep.phase_success = {Phase(p).value: v for p, v in trajectory.phase_success.items()}
            if final_path is not None:
                ep.final_screenshot_path = final_path
            m = trajectory.metrics
            if m is not None:
                ep.progress_rate = m.progress_rate
                ep.side_effects = null() if m.side_effects is None else list(m.side_effects)  # SQL NULL, not JSON null
                ep.false_completion = m.false_completion
                ep.over_time_steps = m.over_time_steps
                ep.goal_first_met_step = m.goal_first_met_step

    def record_label(
        self, episode_id: str, *, success: bool, note: str = "", labeller: str = "", phase: Phase = Phase.EXECUTION
    ) -> None:
        """Record a person's verdict on a phase of an episode, replacing an earlier label of it."""
        with self._write() as s:
            if s.get(EpisodeModel, episode_id) is None:
                raise StoreError(f"cannot label episode {episode_id!r}: the database has no episode of that id")
            row = s.scalars(
                select(LabelModel).where(LabelModel.episode_id == episode_id, LabelModel.phase == phase.value)
            ).one_or_none()
            if row is None:
                row = LabelModel(episode_id=episode_id, phase=phase.value)
                s.add(row)
            row.success = success
            row.note = _clean_text(note, 10_000) or ""
            row.labeller = _clean_text(labeller, 128) or ""
            row.created_at = utcnow()

    def record_step_scores(self, scores: Sequence[StepScore]) -> None:
        """Record what the learner computed for the steps of an update, in one transaction.
        Scores of episodes this database does not hold (another run's) are left out."""
        if not scores:
            return
        with self._write() as s:
            ids = {sc.episode_id for sc in scores}
            known = set(s.scalars(select(EpisodeModel.id).where(EpisodeModel.id.in_(sorted(ids)))))
            s.add_all(
                StepScoreModel(
                    episode_id=sc.episode_id,
                    phase=sc.phase.value,
                    step=sc.step,
                    update=sc.update,
                    value=sc.value,
                    advantage=sc.advantage,
                    logprob=sc.logprob,
                )
                for sc in scores
                if sc.episode_id in known
            )

    def record_phone_event(
        self, run_id: str, phone: str, kind: str, reason: str, episodes: int, replacement: str | None = None
    ) -> None:
        """Record what the fleet did to a phone (a hard reset, a replacement, a retirement)."""
        with self._write() as s:
            if s.get(RunModel, run_id) is None:
                raise StoreError(
                    f"cannot record a phone event for run {run_id!r}: it does not exist; call start_run first"
                )
            s.add(
                PhoneEventModel(
                    run_id=run_id,
                    phone=phone,
                    kind=kind,
                    reason=_clean_text(reason, 2000) or "",
                    episodes=episodes,
                    replacement=replacement,
                    created_at=utcnow(),
                )
            )


__all__ = [
    "RunStore",
]
