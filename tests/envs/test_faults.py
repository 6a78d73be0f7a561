"""Fault injection: the spec and its string form, seeded draws, in-process and served faults."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from darwin.actions import Click, OpenApp, PressHome
from darwin.envs.adb_client import AdbServerClient
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import InfraError
from darwin.envs.faults import FaultSpec, FaultSpecError, FaultyEnv
from darwin.envs.providers import SimFarm
from darwin.envs.sim.env import SimPhoneEnv

pytestmark = pytest.mark.timeout(120)

FAST = {
    "command_timeout_s": 1.0,
    "screenshot_timeout_s": 2.0,
    "connect_timeout_s": 2.0,
    "reconnect_timeout_s": 3.0,
    "reconnect_backoff_s": 0.05,
    "reconnect_backoff_max_s": 0.3,
}


# --------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------


def test_parse_full_spec_and_round_trip() -> None:
    spec = FaultSpec.parse(
        "drop=0.01:after, hang=0.005:2.5,slow=lognormal:0.05:0.5,stall=0.01:3.0,crash=0.002:4,reboot=0.001:reset:9,seed=7,scale=0.1"
    )
    assert spec == FaultSpec(
        seed=7,
        drop=0.01,
        drop_when="after",
        hang=0.005,
        hang_s=2.5,
        slow_median_s=0.05,
        slow_sigma=0.5,
        stall=0.01,
        stall_s=3.0,
        crash=0.002,
        crash_down_s=4,
        reboot=0.001,
        reboot_mode="reset",
        reboot_down_s=9,
        time_scale=0.1,
    )
    assert FaultSpec.parse(str(spec)) == spec
    assert FaultSpec.parse("none") == FaultSpec.parse("") == FaultSpec()
    assert not FaultSpec().enabled and spec.enabled
    assert FaultSpec.parse("hang=0.1").hang_s is None  # forever by default
    assert FaultSpec.parse("hang=0.1:forever").hang_s is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("drop", "no '=VALUE'"),
        ("drop=2", "not within 0..1"),
        ("drop=0.1:sometimes", "drop timing"),
        ("slow=normal:1:2", "lognormal"),
        ("stall=0.1", "P:SECONDS"),
        ("explode=0.1", "unknown fault 'explode'"),
        ("crash=0.1:-1", ">= 0"),
        ("drop=0.6,hang=0.6", "> 1"),
        ("seed=abc", "seed=abc"),
    ],
)
def test_parse_errors_name_the_entry(text: str, fragment: str) -> None:
    with pytest.raises(FaultSpecError, match="fault") as info:
        FaultSpec.parse(text)
    assert fragment in str(info.value)


def test_draws_are_seeded_per_device_and_leave_the_global_rng_alone() -> None:
    spec = FaultSpec.parse("drop=0.2,hang=0.1,crash=0.05,reboot=0.05,slow=lognormal:0.01:1,stall=0.1:1,seed=3")
    before = random.getstate()
    a = [spec.injector("phone-1").draw() for _ in range(1)]
    one, again, other = spec.injector("phone-1"), spec.injector("phone-1"), spec.injector("phone-2")
    seq1 = [one.draw() for _ in range(500)]
    assert seq1 == [again.draw() for _ in range(500)]
    assert seq1 != [other.draw() for _ in range(500)]
    assert a[0] == seq1[0]
    assert random.getstate() == before
    kinds = one.counts
    assert 60 < kinds["drop"] < 140 and 25 < kinds["hang"] < 80 and kinds["crash"] > 5 and kinds["reboot"] > 5
    assert kinds["stall"] > 20
    assert all(d.delay_s > 0 for d in seq1 if not (d.crash or d.reboot))


def test_time_scale_scales_every_duration() -> None:
    spec = FaultSpec(hang=1.0, hang_s=10.0, stall=1.0, stall_s=4.0, time_scale=0.01)
    draw = spec.injector(0).draw()
    assert draw.hang and draw.hang_s == pytest.approx(0.1) and draw.delay_s == pytest.approx(0.04)


# --------------------------------------------------------------------------------------
# In process
# --------------------------------------------------------------------------------------


def test_faulty_env_causes() -> None:
    shot = (54, 120)
    drop_before = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(drop=1.0, drop_when="before"))
    with pytest.raises(InfraError, match="disconnect"):
        drop_before.execute(OpenApp(app="Clock"))
    assert drop_before.inner.phone.foreground is None  # never ran
    drop_after = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(drop=1.0, drop_when="after"))
    with pytest.raises(InfraError, match="disconnect"):
        drop_after.execute(OpenApp(app="Clock"))
    assert drop_after.inner.phone.foreground == "clock"  # ran, answer lost

    hang = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(hang=1.0), call_timeout_s=0.2)
    t = time.monotonic()
    with pytest.raises(InfraError) as info:
        hang.screenshot(shot)
    assert info.value.cause == "deadline" and 0.2 <= time.monotonic() - t < 0.4
    late = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(hang=1.0, hang_s=0.05), call_timeout_s=0.2)
    assert late.screenshot(shot).shape == (120, 54, 3)  # answered late, within the deadline

    crash = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(crash=1.0, crash_down_s=0.2))
    with pytest.raises(InfraError, match="crash"):
        crash.screenshot(shot)
    crash.spec = crash.injector.spec = FaultSpec()  # no more faults: the next call waits for the phone
    t = time.monotonic()
    crash.screenshot(shot)
    assert time.monotonic() - t >= 0.15

    inner = SimPhoneEnv(seed=4)
    inner.execute(OpenApp(app="Settings"))
    settings_data = inner.phone.state["apps"]["settings"]["data"]
    settings_data["dark_theme"] = not settings_data["dark_theme"]
    reboot = FaultyEnv(inner, FaultSpec(reboot=1.0, reboot_mode="keep", reboot_down_s=0))
    with pytest.raises(InfraError, match="reboot"):
        reboot.probe_state()
    assert inner.phone.foreground is None and inner.phone.state["apps"]["settings"]["data"] == settings_data
    reset = FaultyEnv(inner, FaultSpec(reboot=1.0, reboot_mode="reset", reboot_down_s=0))
    with pytest.raises(InfraError, match="reboot"):
        reset.execute(PressHome())
    assert inner.phone.state == SimPhoneEnv(seed=4).phone.state

    home = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(drop=1.0))
    home.go_home()  # best effort: never raises
    asyncio.run(home.ago_home())
    assert home.last_error is None  # attributes of the wrapped env show through


def test_faulty_env_async_is_the_same_plan() -> None:
    spec = FaultSpec(drop=0.3, hang=0.1, slow_median_s=0.001, slow_sigma=0.5, seed=5)
    sync_env = FaultyEnv(SimPhoneEnv(seed=0), spec, device="d", call_timeout_s=0.01)
    async_env = FaultyEnv(SimPhoneEnv(seed=0), spec, device="d", call_timeout_s=0.01)

    def outcome(call) -> str:
        try:
            call()
        except InfraError as exc:
            return exc.cause
        return "ok"

    sync_out = [outcome(lambda: sync_env.execute(Click(x=500, y=1000))) for _ in range(40)]

    async def run_async() -> list[str]:
        out = []
        for _ in range(40):
            try:
                await async_env.aexecute(Click(x=500, y=1000))
                out.append("ok")
            except InfraError as exc:
                out.append(exc.cause)
        return out

    assert asyncio.run(run_async()) == sync_out
    assert {"ok", "disconnect", "deadline"} <= set(sync_out)


# --------------------------------------------------------------------------------------
# Served over ADB
# --------------------------------------------------------------------------------------


def test_served_drop_before_and_after(adb_server_port: int) -> None:
    # The reconnect after each drop must work, not be fast: on a fresh-clone CI run (2 cores, two
    # test workers) it once took longer than FAST's 3 s budget. A dropped command fails at once
    # whatever the budget, so the longer one costs nothing when the machine is idle.
    config = AdbEnvConfig.for_sim(
        adb_port=adb_server_port, **{**FAST, "connect_timeout_s": 10.0, "reconnect_timeout_s": 30.0}
    )
    with SimFarm(2, seed=1, config=config) as farm:
        before, after = farm.acquire(), farm.acquire()
        farm.set_faults(FaultSpec(drop=1.0, drop_when="before"), 0)
        farm.set_faults("drop=1:after", 1)
        for env, index, applied in ((before, 0, None), (after, 1, "clock")):
            with pytest.raises(InfraError) as info:
                env.execute(OpenApp(app="Clock"))
            assert info.value.cause == "disconnect"
            assert farm.backends[index].phone.foreground == applied
            record = next(r for r in reversed(farm.servers[index].command_log) if r.argv[:2] == ("am", "start"))
            assert record.exit_code is None and "dropped" in (record.error or "")
            farm.set_faults("none", index)
            env.execute(PressHome())  # reconnects, works
            assert env.health().state == "ok"
        farm.release(before)
        farm.release(after)


def test_served_hang_forever_is_cut_by_the_deadline(adb_server_port: int) -> None:
    config = AdbEnvConfig.for_sim(adb_port=adb_server_port, **FAST)
    with SimFarm(1, seed=2, config=config) as farm:
        env = farm.acquire()
        farm.set_faults(FaultSpec(hang=1.0))
        t = time.monotonic()
        with pytest.raises(InfraError) as info:
            env.probe_state()
        assert info.value.cause == "deadline" and time.monotonic() - t < FAST["command_timeout_s"] + 0.3
        farm.set_faults(FaultSpec())
        assert env.probe_state()["foreground"] is None
        farm.release(env)


@pytest.mark.parametrize("mode", ["crash", "keep", "reset"])
def test_served_crash_and_reboot(adb_server_port: int, mode: str) -> None:
    config = AdbEnvConfig.for_sim(adb_port=adb_server_port, **FAST)
    spec = (
        FaultSpec(crash=1.0, crash_down_s=0.4)
        if mode == "crash"
        else FaultSpec(reboot=1.0, reboot_mode=mode, reboot_down_s=0.4)
    )
    with SimFarm(1, seed=8, config=config) as farm:
        env = farm.acquire()
        env.execute(OpenApp(app="Settings"))
        backend, served = farm.backends[0], farm.served[0]
        with backend.lock:
            backend.phone.state["apps"]["settings"]["data"]["dark_theme"] = True
            backend.phone.restore(backend.phone.state)
        farm.set_faults(spec)
        with pytest.raises(InfraError):
            env.execute(Click(x=540, y=1200))
        farm.set_faults(FaultSpec())
        time.sleep(0.05)
        assert served.down
        client = AdbServerClient(port=adb_server_port)
        t = time.monotonic()
        state = env.probe_state()  # waits out the outage through reconnects
        assert time.monotonic() - t < FAST["reconnect_timeout_s"] + 0.3
        assert not served.down and len(served.outages) == 1
        kind, start, end = served.outages[0]
        assert kind == ("crash" if mode == "crash" else "reboot") and end - start >= 0.4
        dark = state["apps"]["settings"]["data"]["dark_theme"]
        if mode == "crash":
            assert state["foreground"] == "settings" and dark is True
        elif mode == "keep":
            assert state["foreground"] is None and dark is True
        else:
            assert state["foreground"] is None and dark is False
        assert client.device_state(env.serial, time.monotonic() + 2) == "device"
        for call in env.calls:
            assert call.duration <= call.timeout + 0.25, call
        farm.release(env)
