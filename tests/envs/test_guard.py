"""The action guard: purchases, posts, messages and deletions are blocked before they reach the
phone, on SimPhones (the exact state check) and on phones known only through ADB (the rules)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from darwin.actions import Action, Click, OpenApp, Type
from darwin.agents.base import Actor
from darwin.components import ComponentSpec
from darwin.curricula.static import StaticCurriculum
from darwin.envs.adb import AdbPhoneEnv
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import PhoneEnv
from darwin.envs.guard import (
    ActionBlocked,
    ActionGuard,
    GuardedPhone,
    GuardError,
    RuleGuard,
    load_guard_rules,
)
from darwin.envs.guard_targets import action_targets
from darwin.envs.providers import SimFarm
from darwin.envs.screen_elements import parse_uiautomator_dump
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.problems import ExperimentError
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import EpisodeRequest, RolloutEngine
from darwin.run.build import build_guard, guard_notice
from darwin.run.config import ExperimentConfig
from darwin.task_registry import get_task
from darwin.types import Decision, Outcome, Task, TerminationReason, Trajectory
from darwin.workflows.step import StepWorkflow

CALM = PerturbationConfig(enabled=False)


def _tap(phone: SimPhone, widget_id: str) -> Click:
    widget = phone.layout().find(widget_id)
    assert widget is not None, f"{widget_id} is not on screen"
    x, y = widget.center
    return Click(x=x, y=y)


def _go(phone: SimPhone, *steps: str | Action) -> None:
    for step in steps:
        phone.execute(_tap(phone, step) if isinstance(step, str) else step)


# Each irreversible action: how to reach the screen, the widget the policy presses, the data it changes.
SCENARIOS: dict[str, tuple[tuple[str | Action, ...], str, str, str]] = {
    "order": ((OpenApp(app="Amazon"), "amazon.deal.0", "amazon.buy_now"), "amazon.place_order", "amazon", "orders"),
    "post": ((OpenApp(app="X"), "x.compose", Type(content="hello world")), "x.post_button", "x", "posts"),
    "send": (
        (OpenApp(app="Messages"), "messages.thread.6", "messages.compose", Type(content="see you")),
        "messages.send",
        "messages",
        "threads",
    ),
    "delete": (
        (OpenApp(app="Files"), "files.folder.2", "files.file.4", "files.delete"),
        "files.delete.confirm",
        "files",
        "files",
    ),
}


class PressWidget(Actor):
    """A policy that presses one widget of the SimPhone behind its phone, then says finished."""

    def __init__(self, widget_id: str) -> None:
        self.widget_id = widget_id
        self.env: PhoneEnv | None = None

    async def start_phase(self, env, task, phase, instruction, spec) -> None:  # noqa: ANN001 - Actor's signature
        self.env = env

    async def act(self, observation, history) -> Decision:  # noqa: ANN001 - Actor's signature
        assert self.env is not None
        phone = self.env.phone  # a GuardedPhone hands on its SimPhone's attributes
        return Decision(action=_tap(phone, self.widget_id))


def _phone_at(scenario: str) -> SimPhoneEnv:
    steps, *_ = SCENARIOS[scenario]
    env = SimPhoneEnv(seed=0, perturbation=CALM)
    _go(env.phone, *steps)
    return env


def _app_data(env: SimPhoneEnv, app: str) -> object:
    return env.phone.snapshot()["apps"][app]["data"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_default_guard_blocks_it_in_training_before_it_reaches_the_phone(scenario: str) -> None:
    steps, widget, app, key = SCENARIOS[scenario]
    task = get_task("clock_1")  # a task about something else: none of these is part of it
    env = _phone_at(scenario)
    before = _app_data(env, app)
    trajectory = asyncio.run(_episode(env, task, PressWidget(widget), RuleGuard()))
    assert trajectory.termination is not None and trajectory.termination.reason == TerminationReason.BLOCKED
    assert trajectory.outcome == Outcome.FAILURE
    assert trajectory.transitions[-1].reward == -1.0 and trajectory.transitions[-1].done
    assert len(trajectory.transitions) == 1  # the first action ended the episode
    assert _app_data(env, app) == before  # never reached the phone
    assert trajectory.termination.cause.split(":")[0] in ("payment", "post", "send", "delete")

    unguarded = _phone_at(scenario)  # the same press without a guard changes the phone: the test can fail
    asyncio.run(_episode(unguarded, task, PressWidget(widget), None))
    assert _app_data(unguarded, app) != before


async def _episode(env: PhoneEnv, task: Task, actor: Actor, guard: ActionGuard | None) -> Trajectory:
    """One training episode: the rollout engine's training loop (curriculum, replay buffer)."""
    buffer = ReplayBuffer(rollout_steps=1)
    done: list[Trajectory] = []
    engine = RolloutEngine(
        [env],
        lambda i: actor,
        StaticCurriculum([task], seed=0),
        buffer,
        workflow=StepWorkflow(),
        guard=guard,
        on_episode=done.append,
    )
    await engine.run(until=lambda: bool(done))
    return done[0]


def test_a_task_that_allows_the_change_is_not_blocked_and_the_state_decides_over_the_text() -> None:
    post_task = get_task("x.post.s0")
    assert post_task.allowed_changes == ("apps.x.data.posts",)
    env = _phone_at("post")
    trajectory = asyncio.run(_episode(env, post_task, PressWidget("x.post_button"), RuleGuard()))
    assert trajectory.termination is not None and trajectory.termination.reason != TerminationReason.BLOCKED
    assert _app_data(env, "x")["posts"][0]["text"] == "hello world"  # type: ignore[index]  # the app's JSON data
    # A task that declares what it may change: anything else is a side effect, whatever the text says.
    env = _phone_at("order")
    block = asyncio.run(RuleGuard().check(env, post_task, _tap(env.phone, "amazon.place_order")))
    assert block is not None and block.cause == "payment: click on 'Place your order'"
    # Pressing "Buy Now" itself changes no data: only the press that places the order is blocked.
    env = SimPhoneEnv(seed=0, perturbation=CALM)
    _go(env.phone, OpenApp(app="Amazon"), "amazon.deal.0")
    assert asyncio.run(RuleGuard().check(env, get_task("clock_1"), _tap(env.phone, "amazon.buy_now"))) is None


def test_a_rule_on_changes_blocks_even_what_the_task_allows(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: never_post\n    changes: ['apps.x.data.posts']\n")
    guard = RuleGuard(rules=str(rules), penalty=0.5)
    env = _phone_at("post")
    post_task = get_task("x.post.s0")
    block = asyncio.run(guard.check(env, post_task, _tap(env.phone, "x.post_button")))
    assert block is not None and block.cause == "never_post: click would change apps.x.data.posts"
    with pytest.raises(ActionBlocked) as info:
        asyncio.run(GuardedPhone(env, guard, post_task).aexecute(_tap(env.phone, "x.post_button")))
    assert info.value.reward == -0.5 and _app_data(env, "x")["posts"] == []  # type: ignore[index]  # the app's JSON data


RULE_FILE_ERRORS = [
    ("rules:\n  - name: x\n    text: ['(']\n", "rule 1 ('x'): text: '(' is not a regular expression"),
    (
        "rules:\n  - name: x\n    text: [pay]\n    actions: [tap]\n",
        "rule 1 ('x'): actions: unknown action types ['tap']",
    ),
    ("rules:\n  - name: x\n", "rule 1 ('x'): it names no apps, text or changes"),
    (
        "rules:\n  - name: x\n    text: [pay]\n    colour: red\n",
        "rule 1 ('x'): unknown key 'colour' (a rule's keys: name,",
    ),
    ("rules:\n  - name: x\n    text: ['']\n", "rule 1 ('x'): text: '' matches an empty label"),
    (
        "rules:\n  - name: x\n    text: 5\n",
        "rule 1 ('x'): text should be a list of strings (or one string), not the number 5",
    ),
    ("rules:\n  - name: x\n    text: [[a]]\n", "rule 1 ('x'): text item 1 should be a string, not a list"),
    ("rules:\n  - name: x\n    text: [pay]\n    unless_allowed: maybe\n", "unless_allowed should be true or false"),
    ("rules:\n  - text: [pay]\n", "rule 1: the key 'name' is missing"),
    ("rules:\n  - name: ''\n    text: [pay]\n", "rule 1: name is empty"),
    ("rules:\n  - pay\n", "rule 1: should be a mapping of keys (name, why,"),
    (
        "rules:\n  - name: x\n    text: [pay]\n  - name: y\n    text: ['a*']\n",
        "rule 2 ('y'): text: 'a*' matches an empty",
    ),
    ("rules: []\n", "rules should be a list of at least one rule, not an empty list"),
    ("rules: pay\n", "rules should be a list of at least one rule, not the string 'pay'"),
    ("- name: x\n", "should be a mapping with one key, rules, not a list"),
    ("", "should be a mapping with one key, rules, not nothing (null)"),
    ("rules: [", "is not valid YAML"),
]


@pytest.mark.parametrize(("text", "message"), RULE_FILE_ERRORS)
def test_a_rules_file_error_says_one_thing_in_yaml_terms(text: str, message: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(GuardError) as info:
        load_guard_rules(bad)
    said = str(info.value)
    assert said.startswith(f"guard rules file {bad}") and message in said, said
    # One problem, in the YAML's words: no second, misleading error about the list, no pydantic jargon.
    assert ";" not in said.replace("; use some of", "") and said.count("rule ") <= 1, said
    for jargon in ("Tuple", "tuple", "Input should", "validation error", "dict", "NoneType"):
        assert jargon not in said, said


def test_rules_files_take_one_string_for_a_list_and_report_every_bad_rule(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: x\n    text: pay\n    apps: com.bank\n")
    (rule,) = load_guard_rules(rules)
    assert rule.text == ("pay",) and rule.apps == ("com.bank",)
    rules.write_text("rules:\n  - name: x\n    text: ['(']\n  - name: y\n    colour: red\n    text: [pay]\n")
    with pytest.raises(GuardError) as info:
        load_guard_rules(rules)
    assert "rule 1 ('x'): text: '(' is not" in str(info.value) and "rule 2 ('y'): unknown key 'colour'" in str(
        info.value
    )
    with pytest.raises(GuardError, match="cannot read it"):
        load_guard_rules(tmp_path / "missing.yaml")
    with pytest.raises(GuardError, match="penalty must be >= 0"):
        RuleGuard(penalty=-1)


def test_the_target_of_a_tap_is_the_clickable_element_and_the_text_inside_it() -> None:
    dump = (
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"
        '<node text="" content-desc="" package="com.shop" clickable="false" focused="false" bounds="[0,0][1080,2400]">'
        '<node text="" content-desc="" package="com.shop" clickable="true" focused="false" bounds="[100,2000][980,2200]">'
        '<node text="Place your order" content-desc="" package="com.shop" clickable="false" focused="false" '
        'bounds="[300,2050][780,2150]"/></node>'
        '<node text="" content-desc="Search" package="com.shop" clickable="true" focused="true" bounds="[0,100][1080,250]"/>'
        "</node></hierarchy>UI hierchary dumped to: /dev/tty"
    )
    elements = parse_uiautomator_dump(dump)
    (target,) = action_targets(elements, Click(x=120, y=2010))  # the button's edge: its label is inside it
    assert target.text == "Place your order" and target.package == "com.shop"
    (submit,) = action_targets(elements, Type(content="shoes\n"))  # Enter in the focused field submits it
    assert submit.text == "Search" and submit.how == "Enter submits"
    assert action_targets(elements, Type(content="shoes")) == []  # typing alone presses nothing
    assert action_targets(elements, OpenApp(app="Shop")) == []
    with pytest.raises(ValueError, match="not a uiautomator dump"):
        parse_uiautomator_dump("ERROR: null root node returned by UiTestAutomationBridge.")


# ------------------------------------------------------------------- phones known only through ADB


@pytest.fixture(scope="module")
def served(adb_server_port: int):  # noqa: ANN201 - a SimFarm
    fast = {"command_timeout_s": 3.0, "screenshot_timeout_s": 5.0, "connect_timeout_s": 3.0}
    with SimFarm(1, seed=40, config=AdbEnvConfig.for_sim(adb_port=adb_server_port, **fast)) as farm:
        farm.backends[0].phone.__init__(seed=40, perturbation=CALM)  # a calm screen: no pop-ups in the way
        # The same device as a real phone: no state probe, only adb's own commands.
        plain = AdbPhoneEnv(farm.addresses[0], AdbEnvConfig(adb_port=adb_server_port, **fast))
        try:
            yield farm, plain
        finally:
            plain.close()


def test_on_a_phone_without_a_state_the_rules_read_its_view_hierarchy(served) -> None:  # noqa: ANN001 - fixture
    farm, plain = served
    device = farm.backends[0]
    with device.lock:
        _go(device.phone, OpenApp(app="Amazon"), "amazon.deal.0", "amazon.buy_now")
        press = _tap(device.phone, "amazon.place_order")
        orders_before = device.phone.snapshot()["apps"]["amazon"]["data"].get("orders")
    elements = plain.screen_elements()
    assert elements is not None and any(e.text == "Place your order" for e in elements)
    task = get_task("amazon_0")
    guarded = GuardedPhone(plain, RuleGuard(), task)
    with pytest.raises(ActionBlocked) as info:
        guarded.execute(press)
    assert info.value.block.cause == "payment: click on 'Place your order'"
    with device.lock:
        assert device.phone.snapshot()["apps"]["amazon"]["data"].get("orders") == orders_before
    # Actions no rule names pass, and reach the phone.
    guarded.execute(OpenApp(app="Clock"))
    with device.lock:
        assert device.phone.foreground == "clock"
    # Served with its state probe, the same device is judged by its state (a replica plays the press).
    farm_env = farm.acquire()
    try:
        with device.lock:
            device.phone.reset()
            _go(device.phone, OpenApp(app="Amazon"), "amazon.deal.0", "amazon.buy_now")
        block = asyncio.run(RuleGuard().check(farm_env, get_task("x.post.s0"), press))
        assert block is not None and block.rule == "payment"
    finally:
        farm.release(farm_env)


# ------------------------------------------------------------------- configuration


def test_the_guard_is_on_by_default_for_phones_that_are_not_simphones_and_off_only_explicitly() -> None:
    sim = ExperimentConfig(name="guarded")
    assert sim.phones.guard_spec() is None and build_guard(sim) is None
    assert "none (SimPhones" in guard_notice(sim, None)
    adb = ExperimentConfig.model_validate(
        {"name": "guarded", "phones": {"provider": "adb", "devices": ["emulator-5554"], "count": 1}}
    )
    guard = build_guard(adb)
    assert isinstance(guard, RuleGuard)
    notice = guard_notice(adb, guard)
    assert (
        "action guard: rules from" in notice and "payment (pays, buys, orders, subscribes, books or donates)" in notice
    )
    served = adb.model_copy(update={"phones": adb.phones.model_copy(update={"sim_state_probe": True})})
    assert served.phones.simulated and build_guard(served) is None
    off = ExperimentConfig.model_validate(
        {"name": "guarded", "phones": {"provider": "adb", "devices": ["emulator-5554"], "count": 1, "guard": "off"}}
    )
    assert build_guard(off) is None and "WARNING: action guard OFF" in guard_notice(off, None)
    on_sim = ExperimentConfig.model_validate({"name": "guarded", "phones": {"guard": "rules"}})
    assert isinstance(build_guard(on_sim), RuleGuard)
    with pytest.raises(ValueError, match="did you mean 'rules'"):
        ExperimentConfig.model_validate({"name": "guarded", "phones": {"guard": "rule"}})
    missing = ExperimentConfig.model_validate(
        {"name": "guarded", "phones": {"guard": {"name": "rules", "kwargs": {"rules": "/nonexistent/rules.yaml"}}}}
    )
    with pytest.raises(ExperimentError, match="cannot read it"):
        build_guard(missing)
    assert ComponentSpec(name="rules") == on_sim.phones.guard


def test_an_evaluation_records_a_blocked_episode_as_a_failure_with_its_cause() -> None:
    env = _phone_at("delete")
    engine = RolloutEngine([env], lambda i: PressWidget("files.delete.confirm"), guard=RuleGuard())
    (trajectory,) = asyncio.run(engine.run_episodes([EpisodeRequest(get_task("clock_1"))]))
    assert trajectory.termination is not None and trajectory.termination.reason == TerminationReason.BLOCKED
    assert trajectory.termination.cause == "delete: click on 'Delete'"
    assert (
        trajectory.success is False
        and "the action guard blocked it" in trajectory.verdicts[trajectory.transitions[-1].phase].reason
    )


EVAL_CAUSES = {
    "order": "payment: click on 'Place your order'",
    "post": "post: click on 'Post'",
    "send": "send: click on 'Send'",
    "delete": "delete: click on 'Delete'",
}


def _uitars(action: Action, planner: SimPhone) -> str:
    """``action`` as a UI-TARS-1.0 model writes it ([0, 1000) relative coordinates)."""
    if isinstance(action, OpenApp):
        return f"Thought: open it\nAction: open_app(app_name='{action.app}')"
    if isinstance(action, Type):
        return f"Thought: write\nAction: type(content='{action.content}')"
    assert isinstance(action, Click)
    x, y = action.x * 1000 // planner.width, action.y * 1000 // planner.height
    return f"Thought: press\nAction: click(start_box='<|box_start|>({x},{y})<|box_end|>')"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_darwin_eval_blocks_a_model_that_does_it(scenario: str, tmp_path: Path, openai_server) -> None:  # noqa: ANN001 - fixture
    """`darwin eval --guard rules` with a model (LiteLLM against a local OpenAI-compatible
    server) that goes to the screen and presses the button: blocked, counted as a failure,
    and the cause is in the run database."""
    from click.testing import CliRunner

    from darwin.cli.main import main
    from darwin.store import RunStore

    steps, widget, *_ = SCENARIOS[scenario]
    planner = SimPhone(seed=0, perturbation=CALM)  # the evaluation phone, replayed to find where to tap
    replies = []
    for step in (*steps, widget):
        action = _tap(planner, step) if isinstance(step, str) else step
        replies.append(_uitars(action, planner))
        planner.execute(action)
    openai_server.reply = lambda body: replies[min(len(openai_server.requests), len(replies)) - 1]
    args = ["eval", "--agent", "litellm:openai/fake-llm", "--agent-format", "uitars-1.0"]
    args += ["--api-base", openai_server.api_base, "--api-key-env", "DARWIN_FAKE_LLM_KEY", "--tasks", "clock_1"]
    args += ["--phones", "1", "--samples", "0", "--no-perturb", "--guard", "rules", "--run-dir", str(tmp_path / "run")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "action guard: rules from" in result.output
    assert "blocked by the action guard (counted as failures): 1 episode(s): clock_1 1" in result.output
    store = RunStore.for_run_dir(tmp_path / "run")
    (run,) = store.runs()
    (episode,) = store.episodes(run.run_id)
    assert episode.termination_reason == TerminationReason.BLOCKED
    assert episode.termination_cause == EVAL_CAUSES[scenario]
    assert len(openai_server.requests) == len(replies)  # the blocked press was the model's last step
