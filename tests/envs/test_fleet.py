"""PhoneFleet: hard resets on a schedule, spares for phones that do not heal, lost groups."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from darwin.agents.scripted import OracleActor
from darwin.curricula.static import StaticCurriculum
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import InfraError
from darwin.envs.faults import FaultSpec, FaultyEnv
from darwin.envs.fleet import PhoneFleet, ResetSchedule
from darwin.envs.providers import SimFarm
from darwin.envs.sim.env import SimPhoneEnv
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine
from darwin.run.build import build_eval_phones, build_fleet
from darwin.store import RunStore
from darwin.task_registry import task_set
from darwin.types import Termination, TerminationReason, Trajectory

TASK = task_set("base8")[0]
FAST = {
    "command_timeout_s": 0.5,
    "screenshot_timeout_s": 0.5,
    "connect_timeout_s": 1.0,
    "reconnect_timeout_s": 1.0,
    "reconnect_backoff_s": 0.05,
    "reconnect_backoff_max_s": 0.2,
    "quarantine_after": 2,
}


def _ended(reason: TerminationReason, cause: str = "") -> Trajectory:
    return Trajectory("e", TASK, termination=Termination(reason, cause))


def test_every_n_episodes_is_a_factory_reset() -> None:
    env = SimPhoneEnv(seed=3)
    fleet = PhoneFleet([env], schedule=ResetSchedule(every_episodes=3))
    factory = env.probe_state()
    env.phone.state["clock"]["minutes"] += 77  # state that persists between episodes
    for n in range(1, 7):
        assert asyncio.run(fleet.after_episode(0, _ended(TerminationReason.STEP_BUDGET))) is env
        if n == 2:
            assert env.probe_state() != factory  # not yet
    assert env.probe_state() == factory
    assert [(e.kind, e.episodes, e.reason) for e in fleet.events] == [
        ("hard_reset", 3, "every 3 episodes"),
        ("hard_reset", 6, "every 3 episodes"),
    ]


def test_consecutive_infrastructure_truncations_reset_and_a_success_clears_the_streak() -> None:
    env = SimPhoneEnv(seed=4)
    fleet = PhoneFleet([env], schedule=ResetSchedule(after_infra_failures=2))
    infra = _ended(TerminationReason.INFRA_TRUNCATED, "deadline")
    for trajectory in (infra, _ended(TerminationReason.SUCCESS), infra):
        asyncio.run(fleet.after_episode(0, trajectory))
    assert fleet.events == []  # never two in a row
    asyncio.run(fleet.after_episode(0, infra))
    assert [(e.kind, e.reason) for e in fleet.events] == [("hard_reset", "2 infrastructure truncations in a row")]


def test_a_phone_that_cannot_reset_itself_records_the_failed_reset() -> None:
    from darwin.envs.base import PhoneEnv

    class Remote(SimPhoneEnv):
        hard_reset = PhoneEnv.hard_reset  # like an adb phone without a provider

    fleet = PhoneFleet([Remote(seed=0)], schedule=ResetSchedule(every_episodes=1))
    asyncio.run(fleet.after_episode(0, _ended(TerminationReason.STEP_BUDGET)))
    (event,) = fleet.events
    assert event.kind == "hard_reset" and not event.ok and "cannot hard-reset itself" in event.reason


def test_an_inactive_fleet_is_left_out_and_bad_settings_are_refused() -> None:
    assert not PhoneFleet([SimPhoneEnv()]).active
    assert PhoneFleet([SimPhoneEnv()], schedule=ResetSchedule()).active
    with pytest.raises(ValueError, match="every_episodes must be >= 1"):
        ResetSchedule(every_episodes=0)
    env = SimPhoneEnv()
    fleet = PhoneFleet([env], schedule=ResetSchedule(every_episodes=1))
    with pytest.raises(ValueError, match="needs mode='async'"):
        RolloutEngine([env], lambda i: OracleActor(), fleet=fleet, mode="sync")
    with pytest.raises(ValueError, match="fleet's own phones"):
        RolloutEngine([SimPhoneEnv()], lambda i: OracleActor(), fleet=fleet)


# ------------------------------------------------------------------ provider phones over adb


@pytest.fixture
def farm(adb_server_port: int) -> Iterator[SimFarm]:
    with SimFarm(3, seed=40, config=AdbEnvConfig.for_sim(adb_port=adb_server_port, **FAST)) as f:
        yield f


def test_a_phone_that_does_not_heal_is_replaced_by_a_spare(farm: SimFarm, tmp_path) -> None:
    store = RunStore.for_run_dir(tmp_path)
    run_id = store.start_run("fleet")
    envs = farm.acquire_many(2)  # the third phone is the spare
    fleet = PhoneFleet(
        envs,
        provider=farm,
        schedule=ResetSchedule(),
        replace_after_s=1.0,
        on_event=lambda e: store.record_phone_event(run_id, e.phone, e.kind, e.reason, e.episodes, e.replacement),
    )
    farm.set_faults("hang=1.0", index=0)  # sim-0 never answers again, resets or not
    for _ in range(3):
        with pytest.raises(InfraError):
            envs[0].screenshot()
    assert envs[0].quarantined
    spare = asyncio.run(fleet.after_episode(0, _ended(TerminationReason.INFRA_TRUNCATED, "deadline")))
    assert spare is not None and spare.name == "sim-2" and fleet.envs == [spare, envs[1]]
    assert spare.screenshot((54, 120)).shape == (120, 54, 3)
    kinds = [e.kind for e in fleet.events]
    assert kinds[-1] == "replaced" and kinds[:-1] and set(kinds[:-1]) == {"hard_reset"}  # reset, still hanging
    stored = store.phone_events(run_id)
    assert [(r.phone, r.kind, r.replacement) for r in stored][-1] == ("sim-0", "replaced", "sim-2")
    assert len(stored) == len(fleet.events)
    # No spare left: the next phone that does not heal retires its slot.
    farm.set_faults("hang=1.0", index=1)
    for _ in range(3):
        with pytest.raises(InfraError):
            envs[1].screenshot()
    assert asyncio.run(fleet.recover(1)) is None
    assert fleet.events[-1].kind == "retired" and "no spare left" in fleet.events[-1].reason
    fleet.close()
    store.close()


def test_a_quarantined_phone_that_heals_keeps_its_slot(farm: SimFarm) -> None:
    envs = farm.acquire_many(1)
    fleet = PhoneFleet(envs, provider=farm, schedule=ResetSchedule(), replace_after_s=5.0)
    farm.set_faults("hang=1.0", index=0)
    for _ in range(3):
        with pytest.raises(InfraError):
            envs[0].screenshot()
    farm.set_faults("none", index=0)  # the reset will work
    assert asyncio.run(fleet.recover(0)) is envs[0]
    events = [(e.kind, e.ok) for e in fleet.events]
    # one reset heals it; a loaded machine may fail the health check after it once, and reset again
    assert events and set(events) == {("hard_reset", True)}
    assert not envs[0].quarantined
    fleet.close()


# ------------------------------------------------------------------ lost group members


@pytest.mark.parametrize("policy", ["drop", "train"])
def test_a_group_whose_member_is_lost_never_waits(policy: str) -> None:
    """Every call of phone 0 fails: each group's first member is an infrastructure truncation.
    'drop' leaves those groups out; 'train' keeps the members it has. Phone 1 is healthy."""
    envs = [FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(drop=1.0, drop_when="before")), SimPhoneEnv(seed=1)]
    fleet = PhoneFleet(envs, schedule=ResetSchedule(every_episodes=50))
    buffer = ReplayBuffer(rollout_steps=8, group_size=3)
    engine = RolloutEngine(
        envs,
        lambda i: OracleActor(),
        StaticCurriculum(task_set("base8")),
        buffer,
        group_size=3,
        fleet=fleet,
        group_lost=policy,
    )  # type: ignore[arg-type]
    finished: list[Trajectory] = []
    engine.on_episode = finished.append
    asyncio.run(engine.run(until=lambda: sum(t.phone == "sim-1" for t in finished) >= 6))
    lost = [t for t in finished if t.phone == "sim-0"]
    assert lost and all(t.termination.reason == TerminationReason.INFRA_TRUNCATED for t in lost)
    held = buffer.completed_trajectories()
    if policy == "drop":
        assert buffer.dropped_groups >= 1 and not any(t.phone == "sim-0" for t in held)
    else:
        assert buffer.dropped_groups == 0 and any(t.phone == "sim-0" for t in held)
    batch = buffer.take_completed()
    assert batch is not None  # the healthy phone's groups reach the learner either way


# ------------------------------------------------------------------ the experiment's builder


def test_the_adb_provider_builds_the_fleet_from_devices(farm: SimFarm, adb_server_port: int) -> None:
    from darwin.run.load import apply_overrides, load_experiment

    config = apply_overrides(
        load_experiment(Path(__file__).resolve().parents[2] / "examples" / "spa_bench.py"),
        [
            "phones.provider=adb",
            "phones.count=2",
            "phones.spares=1",
            f"phones.devices={json.dumps(farm.addresses)}",
            f"phones.adb_server=127.0.0.1:{adb_server_port}",
            "phones.sim_state_probe=true",
            "phones.hard_reset_every=4",
        ],
    )
    fleet = build_fleet(config)
    try:
        assert fleet.active and [e.name for e in fleet.envs] == farm.addresses[:2]
        assert fleet.envs[0].probe_state() is not None  # served SimPhones: the state probe is on
        assert fleet.schedule.every_episodes == 4
    finally:
        fleet.close()
    with pytest.raises(Exception, match="could not hand out 4 phones"):
        build_fleet(apply_overrides(config, ["phones.count=4", "phones.spares=0"]))


def test_in_process_simphones_as_a_provider_with_a_schedule() -> None:
    from darwin.run.load import apply_overrides, load_experiment

    config = apply_overrides(
        load_experiment(Path(__file__).resolve().parents[2] / "examples" / "spa_bench.py"),
        ["phones.provider=sim", "phones.count=2", "phones.spares=1", "phones.hard_reset_every=2"],
    )
    fleet = build_fleet(config)
    try:
        assert [type(e).__name__ for e in fleet.envs] == ["SimPhoneEnv", "SimPhoneEnv"]
        first = config.phones.seed
        assert [e.name for e in fleet.envs] == [f"sim-{first}", f"sim-{first + 1}"]
        env = fleet.envs[0]
        factory = env.probe_state()
        env.phone.state["clock"]["minutes"] += 5
        for _ in range(2):
            asyncio.run(fleet.after_episode(0, _ended(TerminationReason.STEP_BUDGET)))
        assert env.probe_state() == factory and [(e.kind, e.phone) for e in fleet.events] == [
            ("hard_reset", f"sim-{first}")
        ]
        assert fleet.provider is not None and fleet.provider.acquire().name == f"sim-{first + 2}"  # the spare
    finally:
        fleet.close()
    assert (
        len(build_eval_phones(config, fleet.envs)) == config.evaluation.phones
    )  # fresh evaluation phones, as without a provider
