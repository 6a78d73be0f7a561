"""``darwin bench sim``: SimPhone memory per instance, cold start and single-core step throughput.

Figures go to the SimPhone section of docs/benchmarks.md.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass

import psutil

from darwin.actions import Action, Click, OpenApp, PressBack, PressHome
from darwin.envs.sim.phone import SimPhone


@dataclass(frozen=True)
class SimBenchResult:
    """SimPhone figures measured in one run."""

    instances: int
    rss_per_instance_mb: float
    cold_start_ms: float
    full_res_png_steps_per_s: float
    agent_res_steps_per_s: float
    agent_size: tuple[int, int]

    def rows(self) -> list[tuple[str, str, str]]:
        """(metric, measured value, target) per figure, formatted for a table."""
        w, h = self.agent_size
        return [
            (f"RSS growth per SimPhone ({self.instances} instances)", f"{self.rss_per_instance_mb:.2f} MB", "<= 20 MB"),
            ("cold start (construct + first screenshot)", f"{self.cold_start_ms:.1f} ms", "<= 100 ms"),
            ("steps/s, 1080x2400 PNG screenshot", f"{self.full_res_png_steps_per_s:.1f}", ">= 25"),
            (f"steps/s, {w}x{h} array screenshot", f"{self.agent_res_steps_per_s:.1f}", "-"),
        ]


def _exploring_actions(phone: SimPhone, rng: random.Random) -> Action:
    """A plausible next action: mostly taps on what is on screen, sometimes navigation."""
    r = rng.random()
    if r < 0.05:
        return PressHome()
    if r < 0.15:
        return PressBack()
    if phone.foreground is None or r < 0.2:
        return OpenApp(app=rng.choice([a.label for a in phone.apps.values()]))
    widgets = [w for w in phone.interactive_widgets() if w.kind not in ("navbutton",)]
    if not widgets:
        return PressBack()
    x, y = rng.choice(widgets).center
    return Click(x=x, y=y)


def _throughput(phone: SimPhone, steps: int, png: bool, size: tuple[int, int] | None) -> float:
    rng = random.Random(1)
    start = time.perf_counter()
    for _ in range(steps):
        phone.execute(_exploring_actions(phone, rng))
        if png:
            phone.screenshot_png(size)
        else:
            phone.screenshot(size)
    return steps / (time.perf_counter() - start)


def bench_sim(
    instances: int = 64, steps: int = 200, agent_size: tuple[int, int] = (252, 560), locale: str = "en"
) -> SimBenchResult:
    """Memory per instance, cold start and single-core step throughput of SimPhone, its UI in
    ``locale`` (``"zh"``: Chinese screens, drawn with the CJK font)."""
    SimPhone(seed=0, locale=locale).screenshot(agent_size)  # warm imports, fonts and caches
    cold = []
    for seed in range(10):
        t = time.perf_counter()
        SimPhone(seed=1000 + seed, locale=locale).screenshot(agent_size)
        cold.append(time.perf_counter() - t)
    gc.collect()
    proc = psutil.Process()
    before = proc.memory_info().rss
    phones = []
    rng = random.Random(0)
    for seed in range(instances):
        phone = SimPhone(seed=seed, locale=locale)
        for _ in range(5):
            phone.execute(_exploring_actions(phone, rng))
        phone.screenshot(agent_size)
        phones.append(phone)
    gc.collect()
    per_instance = (proc.memory_info().rss - before) / instances / 2**20
    del phones
    full = _throughput(SimPhone(seed=7, locale=locale), steps, png=True, size=None)
    small = _throughput(SimPhone(seed=7, locale=locale), steps, png=False, size=agent_size)
    return SimBenchResult(instances, per_instance, 1000 * sorted(cold)[len(cold) // 2], full, small, agent_size)
