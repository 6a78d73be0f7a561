import asyncio

import pytest

from darwin.agents.scripted import OracleActor, RandomActor
from darwin.curricula.static import StaticCurriculum
from darwin.envs.sim.env import SimPhoneEnv
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine
from darwin.store import RunStore
from darwin.task_registry import task_set
from darwin.workflows.step import LifecycleWorkflow


class SlowPhone(SimPhoneEnv):
    """A SimPhone whose actions take ``delay`` seconds (awaited, like network I/O)."""

    def __init__(self, delay: float, log: list, **kw):
        super().__init__(**kw)
        self.delay = delay
        self.log = log
        self.actions = 0

    async def aexecute(self, action):
        await asyncio.sleep(self.delay)
        self.execute(action)
        self.actions += 1
        self.log.append((self.name, self.actions))


def engine(
    envs, mode="async", rollout_steps=30, store=None, run_id=None, group_size=None, actor=None, max_backlog_steps=None
):
    buffer = ReplayBuffer(rollout_steps=rollout_steps, group_size=group_size)
    eng = RolloutEngine(
        envs,
        actor or (lambda i: RandomActor(seed=i)),
        StaticCurriculum(task_set("base8"), mode="uniform", seed=1),
        buffer,
        workflow=LifecycleWorkflow(),
        store=store,
        run_id=run_id,
        mode=mode,
        group_size=group_size,
        max_backlog_steps=max_backlog_steps,
    )
    return eng, buffer


async def wait_until(condition, timeout=60.0):
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


def test_async_workers_fill_the_buffer_and_stop_cleanly(tmp_path):
    store = RunStore.for_run_dir(tmp_path)
    run_id = store.start_run("rollout", None)
    eng, buffer = engine(
        [SimPhoneEnv(seed=i) for i in range(3)], store=store, run_id=run_id, actor=lambda i: OracleActor()
    )
    stats = asyncio.run(eng.run(until=lambda: buffer.completed_steps >= 60))
    assert stats.episodes >= 1 and stats.env_steps >= 60
    taken = buffer.take_completed()
    assert taken and all(t.completed for t in taken)
    assert buffer.active_episodes == 0  # unfinished episodes were abandoned at the stop
    stored = store.episodes(run_id)
    assert sum(1 for e in stored if e.finished) == stats.episodes
    assert (
        stats.successes == stats.episodes - stats.terminations["already_done"]
    )  # the oracle; leftovers are not scored


def test_async_phones_never_wait_for_slow_ones():
    log = []
    envs = [SlowPhone(0.001, log, seed=0, name="fast"), SlowPhone(0.05, log, seed=1, name="slow")]
    eng, buffer = engine(envs)
    asyncio.run(eng.run(until=lambda: envs[0].actions >= 100))
    assert envs[1].actions < 50  # the fast phone did not wait


def test_backpressure_bounds_the_backlog_and_resumes_when_the_learner_takes():
    horizon = max(t.step_budget for t in task_set("base8"))
    eng, buffer = engine(
        [SimPhoneEnv(seed=i) for i in range(3)], rollout_steps=30, max_backlog_steps=40, actor=lambda i: OracleActor()
    )

    async def main():
        done = asyncio.Event()
        run = asyncio.create_task(eng.run(until=done.is_set))
        await wait_until(lambda: eng.stats.phones_waiting == 3)  # nobody takes: every phone stops
        backlog, episodes = buffer.completed_steps, eng.stats.episodes
        assert 40 <= backlog < 40 + 3 * horizon  # only episodes already running finished after the cap
        assert buffer.active_episodes == 0
        await asyncio.sleep(0.3)
        assert (buffer.completed_steps, eng.stats.episodes) == (backlog, episodes)  # no new episode started
        while buffer.backlog_steps() >= 40:
            assert buffer.take_completed()
        await wait_until(lambda: eng.stats.episodes > episodes)  # the learner took data: phones go on
        done.set()
        await run

    asyncio.run(main())
    assert eng.stats.backpressure_s > 0.3 * 3


def test_backlog_below_rollout_steps_is_rejected():
    with pytest.raises(ValueError, match="max_backlog_steps=10 is below the buffer's rollout_steps=30"):
        engine([SimPhoneEnv(seed=0)], rollout_steps=30, max_backlog_steps=10)


def test_sync_mode_steps_all_phones_together():
    log = []
    envs = [
        SlowPhone(0.001, log, seed=0, name="a"),
        SlowPhone(0.01, log, seed=1, name="b"),
        SlowPhone(0.003, log, seed=2, name="c"),
    ]
    eng, buffer = engine(envs, mode="sync")
    asyncio.run(eng.run(until=lambda: envs[0].actions >= 40))
    counts = {"a": 0, "b": 0, "c": 0}
    for name, n in log:
        counts[name] = n
        assert max(counts.values()) - min(counts.values()) <= 1  # lockstep


def test_group_mode_runs_each_task_k_times():
    eng, buffer = engine(
        [SimPhoneEnv(seed=i) for i in range(2)], group_size=3, rollout_steps=1, actor=lambda i: OracleActor()
    )
    asyncio.run(eng.run(until=lambda: buffer.completed_steps >= 30))
    got = buffer.take_completed()
    assert len(got) % 3 == 0 and len({t.task.id for t in got[:3]}) == 1


def test_group_members_start_from_the_same_phone_state():
    """Group mode: the k rollouts of a group run on one phone, each from its reset state, so
    they see the same first screen (GiGPO's anchor states repeat across the group)."""
    from darwin.learner.step_rows import observation_anchor

    eng, buffer = engine(
        [SimPhoneEnv(seed=i, reset_between_episodes=True) for i in range(3)],
        group_size=3,
        rollout_steps=1,
        actor=lambda i: RandomActor(seed=i),
        max_backlog_steps=60,
    )
    asyncio.run(eng.run(until=lambda: buffer.completed_steps >= 60))
    got = buffer.take_completed()
    groups: dict[str, list] = {}
    for t in got:
        groups.setdefault(t.group, []).append(t)
    assert groups and all(len(ts) == 3 for ts in groups.values()) and None not in groups
    for ts in groups.values():
        assert len({t.phone for t in ts}) == 1 and len({t.task.id for t in ts}) == 1
        first = {
            observation_anchor(t.transitions[0].observation.screenshot, t.transitions[0].observation.goal)
            for t in ts
            if t.transitions
        }
        assert len(first) == 1


def test_worker_crash_is_surfaced():
    eng, buffer = engine([SimPhoneEnv(seed=0)])
    eng.workflow = None  # any bug inside a worker must reach the caller, not vanish
    with pytest.raises(AttributeError):
        asyncio.run(eng.run(until=lambda: False))


class QuarantinedAfter(SimPhoneEnv):
    def __init__(self, n, **kw):
        super().__init__(**kw)
        self.n = n

    @property
    def quarantined(self):
        return self.n <= 0

    @property
    def quarantine_reason(self):
        return "its action budget ran out" if self.quarantined else None

    def execute(self, action):
        self.n -= 1
        super().execute(action)


def test_quarantined_phones_stop_taking_work():
    from darwin.evaluate import evaluate

    envs = [QuarantinedAfter(3, seed=0), SimPhoneEnv(seed=1)]
    report = asyncio.run(evaluate(task_set("base8"), envs, lambda i: OracleActor()))
    assert len(report.trajectories) == 8
    with pytest.raises(RuntimeError, match="every phone is quarantined"):
        asyncio.run(evaluate(task_set("base8"), [QuarantinedAfter(3, seed=0)], lambda i: OracleActor()))
    eng, buffer = engine([QuarantinedAfter(5, seed=2)])
    with pytest.raises(RuntimeError, match=r"every phone is quarantined.*Why: its action budget ran out \(1 phone\)"):
        asyncio.run(eng.run(until=lambda: False))


class RecoversAfter(SimPhoneEnv):
    """Quarantined after ``n`` actions until ``back`` is set (a Ray phone whose node died and returns)."""

    recovers = True

    def __init__(self, n, **kw):
        super().__init__(**kw)
        self.n = n
        self.back = False

    @property
    def quarantined(self):
        return self.n <= 0 and not self.back

    def execute(self, action):
        self.n -= 1
        super().execute(action)


def test_a_recovering_phone_rejoins_a_running_engine():
    phone = RecoversAfter(4, seed=3)
    eng, buffer = engine([phone], actor=lambda i: OracleActor())

    async def scenario():
        run = asyncio.create_task(eng.run(until=lambda: eng.stats.episodes >= 6))
        await wait_until(lambda: phone.quarantined)
        episodes_while_gone = eng.stats.episodes
        await asyncio.sleep(0.3)
        assert not run.done() and eng.stats.episodes == episodes_while_gone  # waiting, not stopped
        phone.back = True
        await run
        return episodes_while_gone

    gone_at = asyncio.run(scenario())
    assert eng.stats.episodes >= 6 > gone_at
