"""Phones on a Ray cluster: a real multi-node Ray cluster started on this machine (a head and a
worker raylet, each its own processes), SimPhones served over ADB and in process on its nodes,
episodes through the real rollout engine and workflow, and the worker node killed mid-episode.

The cluster is shared by the module (starting one costs ~10 s on 2 cores). It is skipped with
the reason when Ray is not installed or cannot start here; it is never faked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import psutil
import pytest
from click.testing import CliRunner

from darwin.actions import Click
from darwin.agents.base import Actor
from darwin.agents.scripted import OracleActor
from darwin.components import ComponentSpec
from darwin.curricula.static import StaticCurriculum
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import InfraError, PhoneEnv, SetupUnsupported
from darwin.envs.providers import SimFarm
from darwin.envs.ray_phones import (
    NODE_LOST,
    HostedPhones,
    PhoneHost,
    RayPhoneEnv,
    RayPhoneGroup,
    RayPhonesConfig,
    RayPhonesError,
    _unwrap,
    build_ray_phones,
    check_ray_address,
    decode_screenshot,
    encode_screenshot,
    hosted_phones,
)
from darwin.envs.sim.env import SimPhoneEnv
from darwin.evaluate import evaluate
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine
from darwin.run.build import build_fleet
from darwin.task_registry import task_set
from darwin.types import (
    Decision,
    Observation,
    Phase,
    StateSetup,
    Task,
    TerminationReason,
    Transition,
    VerifierSpec,
)

ray = pytest.importorskip("ray", reason="phones on a Ray cluster need Ray: pip install 'ray[default]'")

MB = 1024 * 1024
# Small nodes for a 2-core machine; fast failure detection so a killed node is noticed in
# about a second (the defaults take ~30 s: docs/scale.md).
HEAD = {
    "num_cpus": 1,
    "object_store_memory": 80 * MB,
    "include_dashboard": False,
    "_system_config": {
        "health_check_period_ms": 500,
        "health_check_failure_threshold": 3,
        "health_check_initial_delay_ms": 0,
    },
}
WORKER = {"num_cpus": 1, "object_store_memory": 80 * MB, "labels": {"phones": "eu"}, "resources": {"phones-eu": 1}}
LAB_PHONES = '''"""A lab's own phone provider: SimPhones named after the process that built them."""
import os

from darwin.envs.providers import PhoneInfo, PhoneProvider, ProviderError
from darwin.envs.sim.env import SimPhoneEnv


class LabPhones(PhoneProvider):
    over_adb = False

    def __init__(self, count, seed=0, prefix="lab"):
        super().__init__()
        self.seeds = {f"{prefix}-{os.getpid()}-{seed + i}": seed + i for i in range(count)}

    def list_phones(self):
        return [PhoneInfo(id=name, serial=name) for name in self.seeds]

    def connect(self, phone):
        return SimPhoneEnv(seed=self.seeds[phone.id], name=phone.id)

    def hard_reset(self, phone):
        raise ProviderError("lab phones have no reset")
'''
"""A module of the lab's, importable on every node (on PYTHONPATH when the nodes start)."""
SERVED_DEADLINES = {
    "command_timeout_s": 5.0,
    "screenshot_timeout_s": 5.0,
    "connect_timeout_s": 10.0,
    "reconnect_timeout_s": 10.0,
}


@dataclass
class LocalCluster:
    cluster: object
    worker: object
    head_node_id: str
    worker_node_id: str

    def kill_worker(self) -> list[int]:
        """The worker machine loses power: SIGKILL to all its Ray processes at once, the
        raylet and the worker processes it started (the phone hosts), then the cluster's
        bookkeeping. (``remove_node`` alone kills the raylet; its workers would notice a
        moment later and could still answer calls meanwhile.) Returns the pids killed."""
        roots = [psutil.Process(info.process.pid) for infos in self.worker.all_processes.values() for info in infos]  # type: ignore[attr-defined]
        victims = {p.pid: p for root in roots for p in (root, *root.children(recursive=True))}
        for process in victims.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        self.cluster.remove_node(self.worker, allow_graceful=False)  # type: ignore[attr-defined]
        return sorted(victims)

    def add_worker(self) -> str:
        """A new worker raylet with the same labels and resources (a restarted machine)."""
        self.worker = self.cluster.add_node(**WORKER)  # type: ignore[attr-defined]
        self.worker_node_id = self.worker.node_id  # type: ignore[attr-defined]
        return self.worker_node_id


@pytest.fixture(scope="module")
def lab_phones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The module ``lab_phones`` on PYTHONPATH (the nodes' processes inherit it) and on the
    driver's path (a group's provider is checked there); yields its directory."""
    lab = tmp_path_factory.mktemp("lab")
    (lab / "lab_phones.py").write_text(LAB_PHONES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(lab), os.environ.get("PYTHONPATH")) if p))
        patch.syspath_prepend(str(lab))
        yield str(lab)


@pytest.fixture(scope="module")
def cluster(lab_phones: str) -> Iterator[LocalCluster]:
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    started = time.monotonic()
    try:
        local = Cluster(initialize_head=True, head_node_args=HEAD)
        worker = local.add_node(**WORKER)
        ray.init(address=local.address, namespace="darwin-test", log_to_driver=False)
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"Ray cannot start a local cluster on this machine: {exc}")
    print(f"\nray: head + worker node up in {time.monotonic() - started:.1f} s")
    try:
        yield LocalCluster(local, worker, local.head_node.node_id, worker.node_id)
    finally:
        ray.shutdown()
        local.shutdown()


@dataclass
class Phones:
    farm: SimFarm
    envs: list[RayPhoneEnv]
    eu: list[RayPhoneEnv]
    """On the worker node: two served SimPhones over ADB (placed by label), one in-process SimPhone (by resource)."""
    head: RayPhoneEnv
    """On the head node (by node id)."""
    config: RayPhonesConfig


@pytest.fixture(scope="module")
def phones(cluster: LocalCluster, adb_server_port: int) -> Iterator[Phones]:
    with SimFarm(2, seed=30, adb_port=adb_server_port) as farm:
        config = RayPhonesConfig(
            address=str(cluster.cluster.address),  # type: ignore[attr-defined]
            groups=(
                RayPhoneGroup(
                    labels={"phones": "eu"},
                    provider=ComponentSpec(name="adb"),
                    devices=tuple(farm.addresses),
                    adb=AdbEnvConfig.for_sim(adb_port=adb_server_port, **SERVED_DEADLINES),
                ),
                RayPhoneGroup(resource="phones-eu", count=1, seed=50),
                RayPhoneGroup(node_id=cluster.head_node_id, count=1, seed=60),
            ),
            call_timeout_s=30.0,
            start_timeout_s=90.0,
            recovery_backoff_s=0.2,
            recovery_backoff_max_s=1.0,
        )
        started = time.monotonic()
        envs = build_ray_phones(config, reset_between_episodes=True)
        print(f"\nray: 3 phone hosts (4 phones) started in {time.monotonic() - started:.1f} s")
        try:
            yield Phones(farm, envs, envs[:3], envs[3], config)
        finally:
            for env in envs:
                env.close()


# ------------------------------------------------------------------------------------ no cluster
def test_screenshots_round_trip_both_codecs() -> None:
    frame = SimPhoneEnv(seed=4).screenshot((252, 560))
    for codec in ("zlib", "raw"):
        back = decode_screenshot(encode_screenshot(frame, codec))
        assert back.dtype == np.uint8 and back.flags.writeable and np.array_equal(back, frame)
    assert len(encode_screenshot(frame, "zlib").payload) < frame.nbytes // 10  # UI frames compress well


def test_host_returns_phone_failures_as_values() -> None:
    host = PhoneHost(HostedPhones(count=1))

    class Broken(SimPhoneEnv):
        def execute(self, action):  # noqa: ANN001, ANN202
            raise InfraError("disconnect", "cable pulled")

    host.envs[0] = Broken(seed=0)
    failure = asyncio.run(host.execute(0, Click(x=1, y=1)))
    assert (failure.cause, failure.detail) == ("disconnect", "cable pulled")


def test_a_phone_without_state_writes_refuses_setup_through_the_host() -> None:
    class Plain(SimPhoneEnv):
        def apply_setup(self, setup):  # noqa: ANN001, ANN202 - the PhoneEnv default: no state writes
            PhoneEnv.apply_setup(self, setup)

    host = PhoneHost(HostedPhones(count=1))
    host.envs[0] = Plain(seed=0)
    reply = asyncio.run(host.apply_setup(0, [StateSetup(step="settings.values", params={"dark_theme": True})]))
    with pytest.raises(SetupUnsupported, match="cannot apply setup steps"):
        _unwrap(reply)


def test_each_host_gets_its_share_of_the_groups_phones() -> None:
    sims = hosted_phones(RayPhoneGroup(count=5, seed=10, actors=2), locale="zh")
    assert [(h.provider.name, h.count, h.seed, h.locale) for h in sims] == [("sim", 3, 10, "zh"), ("sim", 2, 13, "zh")]
    adb = RayPhoneGroup(provider=ComponentSpec(name="adb"), devices=("a:1", "b:2", "c:3"), actors=2)
    assert [h.devices for h in hosted_phones(adb)] == [("a:1", "b:2"), ("c:3",)]
    # Built as before: SimPhone i named sim-<seed + i>, with the experiment's settings.
    provider, envs = sims[1].build()
    assert [(e.name, e.locale) for e in envs] == [("sim-13", "zh"), ("sim-14", "zh")]  # type: ignore[attr-defined]
    assert np.array_equal(envs[1].screenshot((54, 120)), SimPhoneEnv(seed=14, locale="zh").screenshot((54, 120)))
    provider.stop()


def test_a_group_names_its_phones_by_a_provider(lab_phones: str) -> None:
    assert RayPhoneGroup(count=2).in_process and RayPhoneGroup(count=2).what == "2 SimPhones"
    adb = RayPhoneGroup(provider=ComponentSpec(name="adb"), devices=("a:1",))
    assert (adb.in_process, adb.phones, adb.what) == (False, 1, "1 ADB devices")
    lab = RayPhoneGroup(provider=ComponentSpec(name="lab_phones:LabPhones"), count=3)
    assert (lab.in_process, lab.phones, lab.what) == (False, 3, "3 phones from provider 'lab_phones:LabPhones'")
    # Only SimPhones in every group count as simulated: other phones get the action guard by default.
    from darwin.run.config import PhonesConfig

    def on_ray(*groups: RayPhoneGroup) -> PhonesConfig:
        config = RayPhonesConfig(groups=groups)
        return PhonesConfig(provider=ComponentSpec(name="ray"), count=config.total_phones, ray=config)

    assert on_ray(RayPhoneGroup(count=2)).simulated and on_ray(RayPhoneGroup(count=2)).guard_spec() is None
    mixed = on_ray(RayPhoneGroup(count=2), lab)
    assert not mixed.simulated and mixed.guard_spec() == ComponentSpec(name="rules")
    with pytest.raises(ValueError, match=r"provider 'ray' runs phone groups on a Ray cluster.*name 'adb', 'sim'"):
        RayPhoneGroup(provider=ComponentSpec(name="ray"), count=1)
    with pytest.raises(ValueError, match=r"provider 'smi' is not built in \(did you mean 'sim'\?\)"):
        RayPhoneGroup(provider=ComponentSpec(name="smi"), count=1)
    with pytest.raises(ValueError, match="is not a PhoneProvider"):
        RayPhoneGroup(provider=ComponentSpec(name="darwin.envs.ray_phones:RayPhonesConfig"), count=1)
    with pytest.raises(ValueError, match="provider.kwargs sets count, seed, which the group gives each host"):
        RayPhoneGroup(provider=ComponentSpec(name="sim", kwargs={"seed": 3, "count": 2}), count=2)
    with pytest.raises(ValueError, match="unexpected keyword argument 'prefx'"):
        RayPhoneGroup(provider=ComponentSpec(name="lab_phones:LabPhones", kwargs={"prefx": "x"}), count=1)
    with pytest.raises(ValueError, match="provider 'lab_phones:LabPhones' needs count >= 1"):
        RayPhoneGroup(provider=ComponentSpec(name="lab_phones:LabPhones"))
    with pytest.raises(ValueError, match="kind\n  Extra inputs are not permitted"):
        RayPhoneGroup.model_validate({"kind": "adb", "devices": ["a:1"]})


def test_group_and_config_validation() -> None:
    with pytest.raises(ValueError, match="at most one of node_id, node_ip, labels, resource"):
        RayPhoneGroup(node_id="ab", resource="phones", count=1)
    with pytest.raises(ValueError, match="provider 'sim' needs count >= 1"):
        RayPhoneGroup(labels={"phones": "eu"})
    with pytest.raises(ValueError, match="provider 'adb' needs devices"):
        RayPhoneGroup(provider=ComponentSpec(name="adb"))
    with pytest.raises(ValueError, match="not plain names"):
        RayPhoneGroup(labels={"phones": "!eu"}, count=1)
    with pytest.raises(ValueError, match="actors=3 is more than the group's 2 phones"):
        RayPhoneGroup(count=2, actors=3)
    with pytest.raises(ValueError, match="recovery_backoff_max_s"):
        RayPhonesConfig(groups=(RayPhoneGroup(count=1),), recovery_backoff_s=5, recovery_backoff_max_s=1)


def test_unreachable_address_names_it_and_how_to_start_a_cluster() -> None:
    with pytest.raises(RayPhonesError, match=r"no Ray cluster answers at 127\.0\.0\.1:9 .*ray start --head"):
        check_ray_address("127.0.0.1:9")
    with pytest.raises(RayPhonesError, match="not HOST:PORT"):
        check_ray_address("headnode")


# ------------------------------------------------------------------------------------ on the cluster
def test_phones_run_on_their_nodes(cluster: LocalCluster, phones: Phones) -> None:
    assert [e.node_id for e in phones.eu] == [cluster.worker_node_id] * 3
    assert phones.head.node_id == cluster.head_node_id
    assert [e.name for e in phones.envs] == [*phones.farm.addresses, "sim-50", "sim-60"]
    assert all(e.device_size == (1080, 2400) and not e.quarantined for e in phones.envs)
    # The same pixels as the phone in process (the hop only moves them), sync and async.
    local = SimPhoneEnv(seed=60)
    assert np.array_equal(phones.head.screenshot((252, 560)), local.screenshot((252, 560)))
    assert np.array_equal(asyncio.run(phones.head.ascreenshot((168, 364))), local.screenshot((168, 364)))
    assert phones.head.probe_state() == local.probe_state()
    # Task setup steps reach the phone (in process on the head, over adbd on the worker).
    dark = [StateSetup(step="settings.values", params={"dark_theme": True})]
    asyncio.run(phones.head.aapply_setup(dark))
    phones.eu[1].apply_setup(dark)
    for env in (phones.head, phones.eu[1]):
        assert env.probe_state()["apps"]["settings"]["data"]["dark_theme"] is True
    # A served SimPhone answers through the worker node's actor and the adb server.
    served = phones.eu[0]
    served.execute(Click(x=540, y=1200))
    assert served.probe_state() == phones.farm.backends[0].phone.snapshot()
    assert phones.farm.servers[0].command_log[-1].command  # the command reached the served phone


def test_a_group_builds_its_providers_phones_on_the_node(cluster: LocalCluster) -> None:
    """A provider of the lab's own, by import path: each host builds it on the group's node with
    its share of the phones (count, seed) and the spec's kwargs."""
    lab = ComponentSpec(name="lab_phones:LabPhones", kwargs={"prefix": "bench"})
    config = RayPhonesConfig(
        address=str(cluster.cluster.address),  # type: ignore[attr-defined]
        groups=(RayPhoneGroup(resource="phones-eu", provider=lab, count=3, seed=5, actors=2),),
    )
    envs = build_ray_phones(config)
    try:
        pids = [e.host.info.pid for e in envs]  # type: ignore[union-attr]
        assert [e.name for e in envs] == [f"bench-{pids[0]}-5", f"bench-{pids[1]}-6", f"bench-{pids[2]}-7"]
        assert pids[0] == pids[1] != pids[2] and os.getpid() not in pids
        assert {e.node_id for e in envs} == {cluster.worker_node_id}
        assert np.array_equal(envs[2].screenshot((168, 364)), SimPhoneEnv(seed=7).screenshot((168, 364)))
    finally:
        for env in envs:
            env.close()


def test_no_matching_node_is_a_clear_error(cluster: LocalCluster) -> None:
    config = RayPhonesConfig(
        address=str(cluster.cluster.address), groups=(RayPhoneGroup(labels={"phones": "mars"}, count=1),)
    )  # type: ignore[attr-defined]
    with pytest.raises(RayPhonesError, match=r"no live Ray node is among nodes labelled phones=mars.*ray start"):
        build_ray_phones(config)


def test_a_host_that_cannot_reach_its_phones_fails_with_their_error(
    cluster: LocalCluster, adb_server_port: int
) -> None:
    unreachable = AdbEnvConfig.for_sim(
        adb_port=adb_server_port, connect_timeout_s=1.0, reconnect_timeout_s=1.0, reconnect_attempts=1
    )
    config = RayPhonesConfig(
        address=str(cluster.cluster.address),
        start_timeout_s=60,  # type: ignore[attr-defined]
        groups=(
            RayPhoneGroup(
                labels={"phones": "eu"},
                provider=ComponentSpec(name="adb"),
                devices=("127.0.0.1:9",),
                adb=unreachable,
            ),
        ),
    )
    with pytest.raises(
        RayPhonesError, match=r"phone host g0\.0 on nodes labelled phones=eu did not start.*127\.0\.0\.1:9"
    ) as failed:
        build_ray_phones(config)
    print(f"\nray: {failed.value}")


def test_dry_run_checks_the_ray_address(cluster: LocalCluster) -> None:
    from darwin.cli.main import main

    spa = "examples/spa_bench.py"
    bad = CliRunner().invoke(main, ["run", spa, "--dry-run", "--ray-address", "127.0.0.1:9"])
    assert bad.exit_code != 0
    assert "127.0.0.1:9" in bad.output and "ray start --head" in bad.output, bad.output
    good = CliRunner().invoke(main, ["run", spa, "--dry-run", "--ray-address", str(cluster.cluster.address)])  # type: ignore[attr-defined]
    assert good.exit_code == 0, good.output
    assert "Ray cluster" in good.output


def test_experiment_phones_on_the_cluster(cluster: LocalCluster) -> None:
    """`darwin run --ray-address`: the experiment's SimPhones (same seeds) built as Ray phones."""
    from darwin.problems import ExperimentError
    from darwin.run.config import ExperimentConfig, PhonesConfig
    from darwin.run.load import use_ray_cluster

    base = ExperimentConfig(name="t", phones=PhonesConfig(count=2, seed=7))
    config = use_ray_cluster(base, str(cluster.cluster.address))  # type: ignore[attr-defined]
    assert config.phones.provider.name == "ray" and config.phones.ray.total_phones == 2
    fleet = build_fleet(config)
    envs = fleet.envs
    try:
        assert [e.name for e in envs] == ["sim-7", "sim-8"] and all(isinstance(e, RayPhoneEnv) for e in envs)
        assert np.array_equal(envs[1].screenshot((168, 364)), SimPhoneEnv(seed=8).screenshot((168, 364)))
    finally:
        fleet.close()
    with pytest.raises(ExperimentError, match="phones.provider = 'adb' lists devices"):
        use_ray_cluster(
            ExperimentConfig(name="t", phones=PhonesConfig(provider="adb", count=1, devices=("x:1",))), "auto"
        )
    with pytest.raises(ValueError, match="phones.count = 3 but phones.ray's groups hold 2 phones"):
        ExperimentConfig(name="t", phones=PhonesConfig(provider="ray", count=3, ray=config.phones.ray))
    with pytest.raises(ValueError, match="phones.provider = 'ray' needs phones.ray"):
        ExperimentConfig(name="t", phones=PhonesConfig(provider="ray"))


@dataclass
class Gate:
    """Holds the worker node's phones in the middle of an episode until the node is killed."""

    phones: set[str]
    holding: set[str] = field(default_factory=set)
    all_holding: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    completed: Counter[str] = field(default_factory=Counter)


class GatedOracle(Actor):
    """The oracle; on a gated phone that has completed an episode, the next episode waits at
    its second step (one action done) until the gate opens."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.oracle = OracleActor()
        self.env: PhoneEnv | None = None

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        self.env = env
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        assert self.env is not None
        name = self.env.name
        if (
            name in self.gate.phones
            and name not in self.gate.holding
            and self.gate.completed[name] >= 1
            and observation.step >= 1
        ):
            self.gate.holding.add(name)
            if self.gate.holding == self.gate.phones:
                self.gate.all_holding.set()
            await self.gate.release.wait()
        return await self.oracle.act(observation, history)


def test_killed_node_truncates_running_episodes_and_its_phones_come_back(cluster: LocalCluster, phones: Phones) -> None:
    eu_names = {e.name for e in phones.eu}
    gate = Gate(phones=eu_names)
    finished = []
    buffer = ReplayBuffer(rollout_steps=10**9)
    killed_at: list[float] = []
    killed_pids: list[int] = []
    host_pids = {e.host.info.pid for e in phones.eu}

    def on_episode(trajectory) -> None:  # noqa: ANN001
        finished.append((time.monotonic(), trajectory))
        if trajectory.termination.reason == TerminationReason.SUCCESS:
            gate.completed[trajectory.phone] += 1

    def head_episodes_since_kill() -> int:
        return sum(1 for t, tr in finished if killed_at and t > killed_at[0] and tr.phone == phones.head.name)

    async def scenario() -> None:
        engine = RolloutEngine(
            phones.envs,
            lambda i: GatedOracle(gate),
            curriculum=StaticCurriculum(task_set("base8")),
            buffer=buffer,
            on_episode=on_episode,
        )

        async def kill_when_held() -> None:
            await gate.all_holding.wait()
            killed_pids.extend(await asyncio.to_thread(cluster.kill_worker))
            killed_at.append(time.monotonic())
            gate.release.set()

        killer = asyncio.create_task(kill_when_held())
        stats = await asyncio.wait_for(
            engine.run(until=lambda: head_episodes_since_kill() >= 2 and all(e.quarantined for e in phones.eu)), 240
        )
        await killer
        assert stats.truncation_causes == Counter({NODE_LOST: 3}), stats.truncation_causes

    started = time.monotonic()
    asyncio.run(scenario())
    assert host_pids <= set(killed_pids)  # the phone hosts died with their node
    print(f"\nray: kill scenario {time.monotonic() - started:.1f} s, {len(finished)} episodes")

    # Each phone of the killed node: the episode it was playing ended as an infrastructure
    # truncation with cause node_lost, after the steps it had played; every earlier one succeeded.
    for name in eu_names:
        mine = [tr for _, tr in finished if tr.phone == name]
        truncated = [tr for tr in mine if tr.termination.reason == TerminationReason.INFRA_TRUNCATED]
        assert len(truncated) == 1 and truncated[0] is mine[-1], [
            (tr.termination.reason, tr.termination.cause) for tr in mine
        ]
        cut = truncated[0]
        assert cut.termination.cause == NODE_LOST and len(cut) >= 1 and cut.success is None, (
            name,
            cut.termination,
            len(cut),
            cut.phase_success,
        )
        # (Served phones keep their state: a goal reached earlier on one is ALREADY_DONE, unscored.)
        done = {TerminationReason.SUCCESS, TerminationReason.ALREADY_DONE}
        assert all(tr.termination.reason in done for tr in mine[:-1]) and len(mine) >= 2, [
            (tr.task.id, tr.termination) for tr in mine
        ]
    # Nothing completed is lost: every finished episode (the truncated ones with their steps) is in the buffer.
    assert {tr.episode_id for _, tr in finished} == {tr.episode_id for tr in buffer.completed_trajectories()}
    assert buffer.completed_steps == sum(len(tr) for _, tr in finished)
    # The head node's phone kept playing, and succeeding.
    after = [tr for t, tr in finished if t > killed_at[0] and tr.phone == phones.head.name]
    assert len(after) >= 2 and all(tr.success is True for tr in after), [(tr.task.id, tr.termination) for tr in after]
    # While the node is gone its phones are quarantined and fail at once with the cause.
    assert all(e.quarantined for e in phones.eu) and not phones.head.quarantined, [e.host for e in phones.envs]
    for env, where in ((phones.eu[0], "nodes labelled phones=eu"), (phones.eu[2], "nodes with resource 'phones-eu'")):
        with pytest.raises(InfraError) as lost:
            env.screenshot((252, 560))
        # Ray says it either way: the connection to the host was reset, or the GCS declared the node dead.
        assert lost.value.cause == NODE_LOST and where in lost.value.detail, lost.value.detail
        assert "ActorUnavailableError" in lost.value.detail or "ActorDiedError" in lost.value.detail, lost.value.detail

    # The node comes back (same labels and resources, a new raylet): the phones follow.
    old_node = phones.eu[0].node_id
    new_node = cluster.add_worker()
    deadline = time.monotonic() + 90
    while any(e.quarantined for e in phones.eu) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(e.quarantined for e in phones.eu), [e.host.lost for e in phones.eu]
    print(f"ray: phones back {time.monotonic() - deadline + 90:.1f} s after the node")
    assert {e.node_id for e in phones.eu} == {new_node} and new_node != old_node
    assert all(e.host.losses == 1 and e.host.recoveries == 1 for e in phones.eu), [
        (e.host.losses, e.host.recoveries) for e in phones.eu
    ]
    report = asyncio.run(evaluate(task_set("base8")[:3], phones.eu, lambda i: OracleActor()))
    reasons = Counter(tr.termination.reason for tr in report.trajectories)
    assert len(report.trajectories) == 3 and set(reasons) <= {
        TerminationReason.SUCCESS,
        TerminationReason.ALREADY_DONE,
    }, reasons
    assert reasons[TerminationReason.SUCCESS] >= 1


def test_a_call_past_its_deadline_loses_the_host_and_a_new_one_starts(
    cluster: LocalCluster, adb_server_port: int
) -> None:
    """A node cut off without dying (here: a host stuck on a phone that never answers, past
    call_timeout_s): the call ends as node_lost, the stuck host is killed, and a new one
    starts on a matching live node at once."""
    with SimFarm(1, seed=70, adb_port=adb_server_port) as farm:
        config = RayPhonesConfig(
            address=str(cluster.cluster.address),
            call_timeout_s=1.0,
            recovery_backoff_s=0.2,
            recovery_backoff_max_s=0.5,  # type: ignore[attr-defined]
            groups=(
                RayPhoneGroup(
                    labels={"phones": "eu"},
                    provider=ComponentSpec(name="adb"),
                    devices=tuple(farm.addresses),
                    adb=AdbEnvConfig.for_sim(adb_port=adb_server_port, command_timeout_s=30.0),
                ),
            ),
        )
        (env,) = build_ray_phones(config)
        try:
            first_pid = env.host.info.pid
            farm.set_faults("hang=1")  # the served phone never answers a command again
            with pytest.raises(InfraError) as cut:
                asyncio.run(env.aexecute(Click(x=540, y=1200)))
            assert cut.value.cause == NODE_LOST and "did not answer within call_timeout_s=1" in cut.value.detail, (
                cut.value.detail
            )
            assert env.quarantined
            farm.set_faults("none")
            deadline = time.monotonic() + 90
            while env.quarantined and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not env.quarantined and env.host.info.pid != first_pid
            assert (env.host.losses, env.host.recoveries) == (1, 1)
            env.execute(Click(x=540, y=1200))
            assert env.probe_state() == farm.backends[0].phone.snapshot()
        finally:
            env.close()
