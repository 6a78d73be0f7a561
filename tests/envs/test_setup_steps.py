"""Setup steps: validated at build time, applied by every phone kind that can, refused by the others."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import orjson
import pytest

from darwin.agents.scripted import OracleActor
from darwin.envs.adb import AdbPhoneEnv
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import PhoneEnv, SetupUnsupported
from darwin.envs.providers import SimFarm
from darwin.envs.sim.device import SimDeviceBackend
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.setups import apply_setup, resolve_setup
from darwin.templates import get_template
from darwin.types import StateSetup, TaskDefinitionError
from darwin.workflows.step import LifecycleWorkflow

ALARM = StateSetup(step="clock.alarms", params={"alarms": [{"hour": 5, "minute": 45, "days": [2, 0, 2]}]})
FAST = {"command_timeout_s": 5.0, "screenshot_timeout_s": 5.0, "connect_timeout_s": 5.0}


def test_steps_are_validated_with_the_task_and_field_named() -> None:
    with pytest.raises(
        TaskDefinitionError, match=r"task 't1': field 'setup.0.step' = 'clock.alarmz'.*did you mean 'clock.alarms'"
    ):
        resolve_setup(StateSetup(step="clock.alarmz"), "t1", "setup.0")
    with pytest.raises(
        TaskDefinitionError, match=r"setup step 'clock.alarms'.*alarms.0.hour.*Fix: give the parameters alarms"
    ):
        resolve_setup(StateSetup(step="clock.alarms", params={"alarms": [{"hour": 25}]}), "t1")


def test_apply_setup_edits_app_data_only() -> None:
    env = SimPhoneEnv(seed=4)
    before = env.probe_state()
    env.apply_setup([ALARM, StateSetup(step="settings.values", params={"dark_theme": True})])
    after = env.probe_state()
    added = after["apps"]["clock"]["data"]["alarms"][-1]
    assert added == {
        "id": max(a["id"] for a in before["apps"]["clock"]["data"]["alarms"]) + 1,
        "hour": 5,
        "minute": 45,
        "days": [0, 2],
        "enabled": True,
        "vibrate": True,
    }
    assert after["apps"]["settings"]["data"]["dark_theme"] is True
    assert (after["foreground"], after["apps"]["clock"]["stack"]) == (
        before["foreground"],
        before["apps"]["clock"]["stack"],
    )


def test_sim_device_command_applies_and_rejects_bad_input() -> None:
    dev = SimDeviceBackend(seed=0)
    payload = orjson.dumps([ALARM.model_dump()]).decode()
    assert dev.run(["darwin-setup", payload], "").exit_code == 0
    assert dev.phone.state["apps"]["clock"]["data"]["alarms"][-1]["hour"] == 5
    for bad in ("not json", '[{"step": "nope"}]', '[{"step": "clock.alarms", "params": {}}]'):
        result = dev.run(["darwin-setup", bad], "")
        assert result.exit_code != 0 and b"darwin-setup" in result.stdout + result.stderr
    assert dev.run(["darwin-setup"], "").exit_code != 0


@pytest.fixture(scope="module")
def farm(adb_server_port: int) -> Iterator[SimFarm]:
    with SimFarm(1, seed=31, config=AdbEnvConfig.for_sim(adb_port=adb_server_port, **FAST)) as f:
        yield f


def test_served_simphone_plays_a_setup_task_like_in_process(farm: SimFarm) -> None:
    task = get_template("clock.delete_alarm").instance(2)
    served = farm.acquire()
    try:
        remote = asyncio.run(LifecycleWorkflow().run(served, task, OracleActor()))
        local = asyncio.run(LifecycleWorkflow().run(SimPhoneEnv(seed=31), task, OracleActor()))
    finally:
        farm.release(served)
    assert remote.success is local.success is True
    assert [t.decision.action for t in remote.transitions] == [t.decision.action for t in local.transitions]


def test_real_phones_refuse_setup_with_the_steps_named(farm: SimFarm, adb_server_port: int) -> None:
    served = farm.acquire()
    try:
        # A phone configured without a setup command (as a real phone is) refuses, naming the steps.
        env = AdbPhoneEnv(served.serial, AdbEnvConfig.for_sim(adb_port=adb_server_port, setup_command=None, **FAST))
        with pytest.raises(SetupUnsupported, match=r"clock.alarms.*SimPhones"):
            env.apply_setup([ALARM])
        env.close()
    finally:
        farm.release(served)

    class Plain(PhoneEnv):
        device_size = (10, 10)

        def screenshot(self, size=None):
            return np.zeros((10, 10, 3), np.uint8)

        def execute(self, action):
            pass

        def go_home(self):
            pass

    task = get_template("clock.delete_alarm").instance(0)
    with pytest.raises(SetupUnsupported):
        asyncio.run(LifecycleWorkflow().run(Plain(), task, OracleActor()))


def test_apply_setup_is_pure_state_edit() -> None:
    state = SimPhoneEnv(seed=1).probe_state()
    edited = apply_setup(orjson.loads(orjson.dumps(state)), [ALARM])
    assert edited != state and apply_setup(state, []) == state
