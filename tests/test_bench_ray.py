"""`darwin bench ray` pieces that need no cluster (the cluster run itself is in docs/benchmarks.md;
the Ray path it drives is tested in tests/envs/test_ray_phones.py)."""

from __future__ import annotations

import asyncio

import pytest

from darwin.bench.ray_phones import _hop_rows, _throughput, _two_node_config, bench_ray
from darwin.envs.ray_phones import HostedPhones, PhoneHost
from darwin.envs.sim.env import SimPhoneEnv


def test_two_node_config_splits_the_phones_and_their_seeds() -> None:
    config = _two_node_config("127.0.0.1:6379", 9, hosts_per_node=2)
    a, b = config.groups
    assert (a.labels, a.count, a.seed, a.actors) == ({"node": "a"}, 4, 0, 2)
    assert (b.labels, b.count, b.seed, b.actors) == ({"node": "b"}, 5, 4, 2)
    assert config.total_phones == 9


def test_each_phone_count_needs_two_phones() -> None:
    with pytest.raises(ValueError, match="each needs >= 2"):
        bench_ray([1, 8])


def test_hop_rows_time_every_call_on_both_sides() -> None:
    rows = asyncio.run(_hop_rows(SimPhoneEnv(seed=0), SimPhoneEnv(seed=0), calls=5))
    assert [r.call.split(" ")[0] for r in rows] == ["screenshot", "execute(wait)", "probe_state", "step"]
    assert all(r.calls == 5 and r.direct_ms > 0 and r.ray_ms > 0 for r in rows)


def test_throughput_counts_steps_and_driver_cpu() -> None:
    steps, elapsed, episodes, cpu = asyncio.run(
        _throughput([SimPhoneEnv(seed=i, reset_between_episodes=True) for i in range(2)], 1.0)
    )
    assert steps > 0 and elapsed >= 1.0 and episodes >= 0 and cpu > 0


def test_host_serves_calls_in_process() -> None:
    """The actor class is a plain object too: what the hop adds is Ray, not the host."""
    host = PhoneHost(HostedPhones(count=1, seed=3))
    info = asyncio.run(host.ready())
    assert info.phones == (("sim-3", (1080, 2400)),)
    assert asyncio.run(host.probe_state(0)) == SimPhoneEnv(seed=3).probe_state()
