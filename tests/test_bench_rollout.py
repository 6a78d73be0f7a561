from click.testing import CliRunner

from darwin.bench.rollout import LatencyModel, bench_rollout
from darwin.cli.main import main


def test_bench_rollout_measures_both_modes_with_real_batching():
    rows = bench_rollout(phones=(4,), scaling=(2,), seconds=1.5, latency=LatencyModel(scale=0.05))
    assert [(r.phones, r.mode) for r in rows] == [(4, "async"), (4, "sync"), (2, "async")]
    sync = rows[1]
    assert sync.mean_batch == 4.0  # lockstep: every step's inference is one full batch
    assert all(r.steps > 0 and r.ideal_steps_per_s > 0 and 0.0 <= r.idle_fraction <= 1.0 for r in rows)


def test_bench_rollout_cli():
    result = CliRunner().invoke(
        main, ["bench", "rollout", "--phones", "2", "--scaling", "", "--seconds", "1", "--time-scale", "0.05"]
    )
    assert result.exit_code == 0, result.output
    assert "async / sync" in result.output
