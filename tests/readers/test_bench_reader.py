"""``darwin bench reader`` (issue 72): its measures on hand-computed cases, a perfect and a
blind reader, and the command's refusals."""

from __future__ import annotations

from click.testing import CliRunner

from darwin.bench.reader import bench_reader, iou, visible_texts, words
from darwin.cli.main import main as cli
from darwin.envs.sim.env import SimPhoneEnv
from darwin.readers.base import Reader
from darwin.types import Mark


def test_words_and_iou_by_hand():
    assert words("Place  your\u00a0ORDER") == ["place", "your", "order"]
    assert words("前往柏林") == ["前", "往", "柏", "林"]
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == 50 / 150
    assert iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0


def test_truth_leaves_out_a_lists_scroll_position_and_what_a_dialog_covers():
    env = SimPhoneEnv(seed=0)
    env.phone.launch("play")  # a rating dialog over the list on this seed
    texts = [t for t, _ in visible_texts(env)]
    assert "0" not in texts
    assert any(t.startswith("Enjoying Google Play?") for t in texts) and "Not now" in texts
    assert not any(t.startswith("Facebook") for t in texts)  # under the dialog
    assert "Recommended for you" in texts


class Perfect(Reader):
    """Reads exactly what the phone shows (it peeks at a phone it is handed at construction)."""

    def __init__(self) -> None:
        self.env: SimPhoneEnv | None = None

    @property
    def cache_key(self) -> str:
        return f"perfect-{id(self)}"

    def read(self, screenshot, device_size, env=None):
        assert self.env is not None
        return tuple(Mark(t, b) for t, b in visible_texts(self.env))


class Blind(Reader):
    @property
    def cache_key(self) -> str:
        return "blind"

    def read(self, screenshot, device_size, env=None):
        return ()


def test_a_perfect_reader_scores_one_and_a_blind_one_zero(monkeypatch):
    import darwin.bench.reader as bench

    perfect = Perfect()
    made = []

    def phone(seed: int, locale: str) -> SimPhoneEnv:
        env = SimPhoneEnv(seed=seed, locale=locale)
        perfect.env = env
        made.append(env)
        return env

    monkeypatch.setattr(bench, "SimPhoneEnv", phone)
    (en,) = bench_reader(perfect, (126, 280), ("en",))
    assert en.screens == 17 and en.words > 100
    assert en.recall == 1.0 and en.iou_median == 1.0 and en.centre_hits == 1.0 and not en.missed
    (zh,) = bench_reader(Blind(), (126, 280), ("zh",))
    assert zh.recall == 0.0 and zh.matched == 0 and zh.missed


def test_the_command_refuses_what_it_cannot_measure():
    runner = CliRunner()
    for args, message in (
        (["--reader", "elements"], "does not read pixels"),
        (["--reader", "ocrr"], "ocr"),
        (["--size", "big"], "WxH"),
        (["--size", "10x10"], "between 16 and 4096"),
        (["--locales", "fr"], "unknown locale"),
    ):
        result = runner.invoke(cli, ["bench", "reader", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
