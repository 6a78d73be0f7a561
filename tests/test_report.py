import json

import pytest
from PIL import Image

from darwin.report import MetricsLogger, plot_success, sliding_mean


def test_sliding_mean_by_hand():
    assert sliding_mean([1, 0, 0, 1, 1], window=3) == [1.0, 0.5, 1 / 3, 1 / 3, 2 / 3]
    with pytest.raises(ValueError):
        sliding_mean([1], window=0)


def test_plot_writes_a_png(tmp_path):
    pts = [(i * 10, float(i % 3 == 0)) for i in range(60)]
    out = plot_success(pts, tmp_path / "plots" / "s.png", curves={"seed 0": pts, "seed 1": pts[::2]})
    assert Image.open(out).format == "PNG"


def test_metrics_logger_writes_tensorboard_and_jsonl(tmp_path):
    log = MetricsLogger(tmp_path)
    log.log(3, "update", {"policy_loss": 0.25, "skip": "text", "nan": float("nan")})
    log.close()
    row = json.loads((tmp_path / "metrics.jsonl").read_text().strip())
    assert row == {"step": 3, "group": "update", "policy_loss": 0.25}
    assert any((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
