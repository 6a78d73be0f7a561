"""Task templates: parameterised goals with seeded instances, and generalisation splits.

A template is a goal pattern (AndroidWorld's task classes, MobileGym's templates): a typed
parameter schema, seeded parameter sampling, several phrasings in English and Chinese,
the phone state an instance needs (setup steps), a success predicate, the app data it may
change, and optional sub-goals for the progress rate. Templates live next to SimPhone's
apps in ``envs/sim/templates/`` and are registered by id::

    >>> from darwin.templates import get_template
    >>> tpl = get_template("clock.set_alarm")
    >>> task = tpl.instance(3)
    >>> task.id, task.template, task.verifier.predicate
    ('clock.set_alarm.s3', 'clock.set_alarm', 'clock.alarm')
    >>> tpl.instance(3) == task       # the same seed gives the same instance
    True

Instance ids are ``<template>.s<seed>`` (English) or ``<template>.zh.s<seed>`` (Chinese), so
:func:`darwin.task_registry.get_task` rebuilds any sampled instance from its id alone. Instances a
model proposes with explicit parameters (:meth:`TaskTemplate.task`) get
``<template>.p<hash>`` ids and are stored with their parameters.

:func:`split_templates` builds AndroidWorld-Generalization's three held-out regimes:
unseen instances (new parameters of training templates), unseen templates (held-out
templates of training apps) and unseen apps.
"""

from __future__ import annotations

import difflib
import hashlib
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import islice, zip_longest
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from darwin.problems import validation_summary
from darwin.types import StateSetup, Task, TaskDefinitionError, VerifierSpec

P = TypeVar("P", bound=BaseModel)
Language = Literal["ENG", "CHN"]

INSTANCE_ID = re.compile(r"^(?P<template>.+?)\.(?:(?P<zh>zh)\.)?s(?P<seed>\d+)$")


class TemplateParams(BaseModel):
    """Base of template parameter schemas (frozen; unknown fields are rejected)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class DistinctPair(TemplateParams):
    """Two different values of ``choices`` (``first``, ``second``): a subclass sets ``choices``
    and ``what`` (the noun errors use); :meth:`draw` samples one."""

    choices: ClassVar[tuple[str, ...]] = ()
    what: ClassVar[str] = "value"
    first: str
    second: str

    @field_validator("first", "second")
    @classmethod
    def _listed(cls, v: str) -> str:
        if v not in cls.choices:
            raise ValueError(f"{v!r} is not a known {cls.what}; known: {', '.join(cls.choices)}")
        return v

    @field_validator("second")
    @classmethod
    def _distinct(cls, v: str, info: ValidationInfo) -> str:
        if v == info.data.get("first"):
            raise ValueError("second must differ from first")
        return v

    @classmethod
    def draw(cls, rng: random.Random) -> Self:
        first, second = rng.sample(cls.choices, k=2)
        return cls(first=first, second=second)


def _no_setup(params: Any) -> Sequence[StateSetup]:
    return ()


def _no_subgoals(params: Any) -> Sequence[VerifierSpec]:
    return ()


@dataclass(frozen=True)
class TaskTemplate(Generic[P]):
    """A goal pattern whose instances are :class:`~darwin.types.Task` s.

    ``phrasings`` maps a language to instruction patterns formatted with the fields of
    ``wording(params)`` (default: the parameters themselves). ``allowed_changes`` are the
    dotted state paths (``*`` matches one key) the task may change; every other change of
    app data is an unexpected side effect.
    """

    id: str
    app: str
    """The app's launcher label (``"Clock"``)."""
    params: type[P]
    sample: Callable[[random.Random], P]
    phrasings: Mapping[Language, Sequence[str]]
    verifier: Callable[[P], VerifierSpec]
    allowed_changes: Callable[[P], Sequence[str]]
    setup: Callable[[P], Sequence[StateSetup]] = _no_setup
    subgoals: Callable[[P], Sequence[VerifierSpec]] = _no_subgoals
    wording: Callable[[P], Mapping[str, str]] | None = None
    difficulty: int = 1
    """1 easy, 2 medium, 3 hard (AndroidWorld-Generalization's staging)."""
    step_budget: int = 32
    description: str = ""
    apps: tuple[str, ...] = ()
    """Every app (launcher label) a cross-app template needs, ``app`` (where the goal starts) first;
    empty for a single-app template. Held-out-app splits hold it out when any of them is held out."""

    @property
    def needs(self) -> tuple[str, ...]:
        """The apps an instance needs: ``apps``, or ``(app,)`` for a single-app template."""
        return self.apps or (self.app,)

    @property
    def cross_app(self) -> bool:
        """Whether the template needs more than one app."""
        return len(self.needs) > 1

    @property
    def kind(self) -> Literal["action", "answer"]:
        """``answer``: an information task that ends with ``answer(text)``."""
        return "answer" if self.verifier(self.sample(random.Random(0))).predicate == "answer.matches" else "action"

    def words(self, params: P) -> Mapping[str, str]:
        return self.wording(params) if self.wording is not None else {k: str(v) for k, v in params.model_dump().items()}

    def instance(self, seed: int, language: Language = "ENG") -> Task:
        """The instance for ``seed``: seeded parameters and phrasing."""
        if seed < 0:
            raise ValueError(f"template {self.id!r}: seed must be >= 0, got {seed}")
        rng = random.Random(f"{self.id}/{seed}")
        params = self.sample(rng)
        phrasing = rng.randrange(len(self.phrasings[language]))
        suffix = f"zh.s{seed}" if language == "CHN" else f"s{seed}"
        return self._task(params, language, phrasing, f"{self.id}.{suffix}")

    def task(self, params: P | Mapping[str, Any], language: Language = "ENG", phrasing: int = 0) -> Task:
        """An instance with explicit parameters (validated against the schema; a proposer's path).

        Raises :class:`TaskDefinitionError` naming the template and every invalid field.
        """
        if not isinstance(params, self.params):
            try:
                params = self.params.model_validate(params)
            except ValidationError as exc:
                problems = validation_summary(exc, "(root)")
                raise TaskDefinitionError(
                    f"template {self.id!r}: invalid parameters: {problems}. Schema: {schema_line(self)}"
                ) from None
        if language not in self.phrasings:
            raise TaskDefinitionError(
                f"template {self.id!r} has no {language} phrasings; known: {', '.join(self.phrasings)}"
            )
        if not 0 <= phrasing < len(self.phrasings[language]):
            raise TaskDefinitionError(
                f"template {self.id!r}: phrasing {phrasing} out of range 0..{len(self.phrasings[language]) - 1}"
            )
        digest = hashlib.blake2b(
            orjson.dumps([params.model_dump(mode="json"), language, phrasing], option=orjson.OPT_SORT_KEYS),
            digest_size=4,
        )
        return self._task(params, language, phrasing, f"{self.id}.p{digest.hexdigest()}")

    def _task(self, params: P, language: Language, phrasing: int, task_id: str) -> Task:
        try:
            instruction = self.phrasings[language][phrasing].format(**self.words(params))
        except (KeyError, IndexError) as exc:
            raise TaskDefinitionError(
                f"template {self.id!r}: phrasing {phrasing} ({language}) names {exc} that wording() does not give"
            ) from None
        return Task(
            id=task_id,
            instruction=instruction,
            app=self.app,
            language=language,
            difficulty=self.difficulty,
            step_budget=self.step_budget,
            verifier=self.verifier(params),
            setup=tuple(self.setup(params)),
            template=self.id,
            params=params.model_dump(mode="json"),
            allowed_changes=tuple(self.allowed_changes(params)),
            subgoals=tuple(self.subgoals(params)),
            source="darwin-template",
        )


def schema_line(template: TaskTemplate) -> str:
    """The parameter schema in one line (``hour: integer 0..23, days: array of integer``) for messages and prompts."""
    schema = template.params.model_json_schema()
    parts = []
    for name, prop in schema.get("properties", {}).items():
        parts.append(f"{name}: {_describe(prop, schema.get('$defs', {}))}")
    return ", ".join(parts) or "(no parameters)"


def _describe(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    if "$ref" in prop:
        ref = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
        fields = ", ".join(f"{k}: {_describe(v, defs)}" for k, v in ref.get("properties", {}).items())
        return "{" + fields + "}"
    if "anyOf" in prop:
        return " | ".join(_describe(p, defs) for p in prop["anyOf"])
    if "enum" in prop:
        return "one of " + "/".join(map(str, prop["enum"]))
    kind = prop.get("type", "any")
    if kind == "array":
        kind = f"array of {_describe(prop.get('items', {}), defs)}"
    low, high = prop.get("minimum", prop.get("exclusiveMinimum")), prop.get("maximum", prop.get("exclusiveMaximum"))
    if low is not None or high is not None:
        kind += f" {'' if low is None else low}..{'' if high is None else high}"
    if "minLength" in prop:
        kind += " (non-empty)"
    if "description" in prop:
        kind += f" ({prop['description']})"
    return kind


TEMPLATES: dict[str, TaskTemplate] = {}


def register(template: TaskTemplate) -> TaskTemplate:
    """Add ``template`` to the registry (ids are unique); returns it."""
    if template.id in TEMPLATES:
        raise ValueError(f"template {template.id!r} is registered twice")
    if not re.fullmatch(r"[a-z0-9_]+\.[a-z0-9_]+", template.id):
        raise ValueError(f"template id {template.id!r} must be '<app>.<name>' in lower case (letters, digits, _)")
    TEMPLATES[template.id] = template
    return template


@cache
def _load() -> None:
    import darwin.envs.sim.templates  # noqa: F401  (templates live next to the apps)


def templates() -> dict[str, TaskTemplate]:
    """Every registered template by id."""
    _load()
    return TEMPLATES


def get_template(template_id: str) -> TaskTemplate:
    found = templates().get(template_id)
    if found is None:
        close = difflib.get_close_matches(template_id, TEMPLATES, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else "; run `darwin tasks list --templates`"
        raise KeyError(f"unknown template {template_id!r}{hint}")
    return found


def task_apps(task: Task) -> tuple[str, ...]:
    """The apps ``task`` needs (a cross-app template's every app; otherwise ``(task.app,)``): the oracle may open each."""
    tpl = templates().get(task.template) if task.template else None
    return tpl.needs if tpl is not None else (task.app,)


def instance_of(task_id: str) -> Task | None:
    """The sampled instance named by ``task_id`` (``clock.set_alarm.s3``), or ``None`` if it names none."""
    match = INSTANCE_ID.match(task_id)
    if match is None or match["template"] not in templates():
        return None
    return TEMPLATES[match["template"]].instance(int(match["seed"]), "CHN" if match["zh"] else "ENG")


LATER_APPS: tuple[str, ...] = ("Files", "Mail", "Calculator", "Tasks")
"""Apps added after the default split's results were recorded (docs/results.md,
``examples/generalization.py``). A split leaves their templates out unless asked
(``SplitConfig(exclude_apps=())``), so adding them changed no split."""


class SplitConfig(BaseModel):
    """How templates are split into training and the three held-out regimes (seeded)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(0, ge=0, description="seeds which apps and templates are held out")
    held_out_apps: tuple[str, ...] | None = Field(
        None, description="apps (labels) held out entirely; None: `unseen_apps` chosen by seed"
    )
    unseen_apps: int = Field(2, ge=1, description="how many apps to hold out when held_out_apps is None")
    unseen_template_share: float = Field(
        0.25, gt=0.0, lt=1.0, description="share of each training app's templates held out (apps with >= 2 templates)"
    )
    train_instances: int = Field(8, ge=1, description="training instances per training template")
    eval_instances: int = Field(3, ge=1, description="evaluation instances per template in each held-out regime")
    languages: tuple[Language, ...] = Field(("ENG",), min_length=1)
    cross_app: bool = Field(
        False,
        description="include cross-app templates: one that needs a held-out app is evaluated in "
        "`unseen_apps`, never trained on; the others split like a training app's templates. Off by "
        "default, so the recorded splits (gen.*, examples/generalization.py) stay as they were",
    )
    exclude_apps: tuple[str, ...] = Field(
        LATER_APPS,
        description="apps (labels) whose templates are left out, with every "
        "cross-app template that needs one; () splits every app's",
    )

    @model_validator(mode="after")
    def _check(self) -> SplitConfig:
        if self.held_out_apps is not None:
            known = {a for t in templates().values() for a in t.needs if a not in self.exclude_apps}
            unknown = [a for a in self.held_out_apps if a not in known]
            if unknown:
                raise ValueError(
                    f"held_out_apps {unknown} have no templates; apps with templates: {', '.join(sorted(known))}"
                )
        return self


@dataclass(frozen=True)
class TemplateSplit:
    """Training tasks and the three held-out regimes, with the templates behind each."""

    config: SplitConfig
    train_templates: tuple[str, ...]
    held_out_templates: tuple[str, ...]
    held_out_apps: tuple[str, ...]
    sets: dict[str, list[Task]] = field(default_factory=dict)
    """``train``, ``unseen_instances``, ``unseen_templates``, ``unseen_apps``."""


SPLIT_SETS = ("train", "unseen_instances", "unseen_templates", "unseen_apps")
EVAL_SEED_BASE = 100_000
"""Held-out instances use seeds from here on, apart from any training seed."""


def _param_key(task: Task) -> tuple[str | None, bytes]:
    return task.template, orjson.dumps(task.params, option=orjson.OPT_SORT_KEYS)


def _new_instances(
    tpl_id: str, language: Language, seeds: range, taken: set[tuple[str | None, bytes]]
) -> Iterator[Task]:
    """The instances of ``tpl_id`` over ``seeds`` whose parameters are not in ``taken``; each is
    added to ``taken`` as it is yielded, so no two share parameters."""
    for seed in seeds:
        task = TEMPLATES[tpl_id].instance(seed, language)
        if _param_key(task) not in taken:
            taken.add(_param_key(task))
            yield task


def split_templates(config: SplitConfig | None = None) -> TemplateSplit:
    """AndroidWorld-Generalization's splits over the registered templates (reproducible from ``config``).

    Unseen-instance tasks are new parameters of training templates: an instance whose
    parameters equal a training instance's is skipped, so none is a repeat.

    Apps are held out by their single-app templates. A cross-app template (``config.cross_app``)
    that needs a held-out app goes to ``unseen_apps`` with them, so no training task opens a
    held-out app; the other cross-app templates split among themselves like one training
    app's (a seeded share held out as unseen templates). They are drawn after, and from a
    stream apart from, the single-app templates, whose split they leave unchanged.
    """
    config = config or SplitConfig()
    rng = random.Random(f"split/{config.seed}")
    by_app: dict[str, list[str]] = {}
    cross: list[str] = []
    for tpl in sorted(templates().values(), key=lambda t: t.id):
        if set(tpl.needs) & set(config.exclude_apps):
            continue
        if tpl.cross_app:
            cross += [tpl.id] if config.cross_app else []
        else:
            by_app.setdefault(tpl.app, []).append(tpl.id)
    apps = sorted(by_app)
    if config.held_out_apps is not None:
        held_apps = tuple(sorted(config.held_out_apps))
    else:
        if config.unseen_apps >= len(apps):
            raise ValueError(
                f"unseen_apps={config.unseen_apps} leaves no training app ({len(apps)} apps have templates)"
            )
        held_apps = tuple(sorted(rng.sample(apps, config.unseen_apps)))
    train_tpls: list[str] = []
    held_tpls: list[str] = []
    for app in apps:
        if app in held_apps:
            continue
        ids = by_app[app]
        n_held = round(len(ids) * config.unseen_template_share) if len(ids) >= 2 else 0
        held = set(rng.sample(ids, max(n_held, 1 if len(ids) >= 2 else 0)))
        held_tpls += [t for t in ids if t in held]
        train_tpls += [t for t in ids if t not in held]
    held_app_tpls = [t for app in held_apps for t in by_app.get(app, [])]
    held_app_tpls += [t for t in cross if set(TEMPLATES[t].needs) & set(held_apps)]
    open_cross = [t for t in cross if t not in held_app_tpls]
    if open_cross:
        n_held = round(len(open_cross) * config.unseen_template_share) if len(open_cross) >= 2 else 0
        held = set(
            random.Random(f"split/{config.seed}/cross").sample(
                open_cross, max(n_held, 1 if len(open_cross) >= 2 else 0)
            )
        )
        held_tpls += [t for t in open_cross if t in held]
        train_tpls += [t for t in open_cross if t not in held]

    def instances(ids: Sequence[str], seeds: Sequence[int]) -> list[Task]:
        return [TEMPLATES[t].instance(s, lang) for t in ids for lang in config.languages for s in seeds]

    train = instances(train_tpls, range(config.train_instances))
    seen = {_param_key(t) for t in train}
    unseen_instances: list[Task] = []
    search = range(EVAL_SEED_BASE, EVAL_SEED_BASE + 50 * config.eval_instances)
    for tpl_id in train_tpls:
        for lang in config.languages:
            unseen_instances += islice(_new_instances(tpl_id, lang, search, seen), config.eval_instances)
    eval_seeds = range(EVAL_SEED_BASE, EVAL_SEED_BASE + config.eval_instances)
    return TemplateSplit(
        config=config,
        train_templates=tuple(train_tpls),
        held_out_templates=tuple(held_tpls),
        held_out_apps=held_apps,
        sets={
            "train": train,
            "unseen_instances": unseen_instances,
            "unseen_templates": instances(held_tpls, eval_seeds),
            "unseen_apps": instances(held_app_tpls, eval_seeds),
        },
    )


def few_shot_instances(split: TemplateSplit, per_app: int = 8) -> list[Task]:
    """``per_app`` human-written instances of each held-out app, to adapt on: the few-shot
    protocol of AndroidWorld-Generalization (8 instances per unseen app, fine-tuned with the rule
    reward), the baseline self-evolution must beat without them.

    Each app's templates take turns, with instance seeds counted from 0 (training seeds; the
    evaluation's start at ``EVAL_SEED_BASE``) in each of the split's languages. An instance whose
    parameters equal an ``unseen_apps`` evaluation instance's, or one already chosen, is skipped,
    so no adaptation task is also evaluated. A cross-app template counts for the first held-out
    app it needs. Deterministic.

    >>> split = split_templates(SplitConfig(seed=0, unseen_apps=2, eval_instances=2))
    >>> shots = few_shot_instances(split, per_app=8)
    >>> sorted({t.app for t in shots}) == sorted(split.held_out_apps), len(shots)
    (True, 16)

    Raises:
        ValueError: ``per_app < 1``, or an app whose templates cannot give ``per_app`` distinct
            instances apart from the evaluation's.
    """
    if per_app < 1:
        raise ValueError(f"per_app must be >= 1, got {per_app}")
    taken = {_param_key(t) for t in split.sets["unseen_apps"]}  # evaluated, then chosen
    by_app: dict[str, list[str]] = {app: [] for app in split.held_out_apps}
    for tpl_id in dict.fromkeys(t.template for t in split.sets["unseen_apps"] if t.template is not None):
        app = next(a for a in TEMPLATES[tpl_id].needs if a in by_app)
        by_app[app].append(tpl_id)
    chosen: list[Task] = []
    search = range(50 * per_app)
    for app, tpl_ids in by_app.items():
        # the app's templates (and languages) take turns; a template out of new instances drops out
        turns = zip_longest(
            *(_new_instances(t, lang, search, taken) for t in tpl_ids for lang in split.config.languages)
        )
        picked = list(islice((task for turn in turns for task in turn if task is not None), per_app))
        if len(picked) < per_app:
            raise ValueError(
                f"held-out app {app!r}: its templates {tpl_ids} give only {len(picked)} instances apart from the "
                f"evaluation's in {len(search)} seeds each; lower per_app below {len(picked) + 1}"
            )
        chosen += picked
    return chosen


@cache
def default_split() -> TemplateSplit:
    """The split behind the named task sets ``gen.train``, ``gen.unseen_instances`` ... (seed 0)."""
    return split_templates(SplitConfig())
