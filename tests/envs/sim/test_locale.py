"""SimPhone's locale: Chinese UIs with real glyphs, English screens unchanged, the locale
following the task (phones.locale = auto), and the tiny tokenizer reading every label and goal."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

import darwin.envs.sim.phone as phone_module
from darwin.actions import Click, OpenApp, Type
from darwin.agents.scripted import OracleActor
from darwin.envs.sim.apps import default_apps
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.i18n import COMMON_ZH, locale_for_task, translate
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.render import CJK_FONT, EMOJI_FONT, Renderer, _font_file, _has_glyph
from darwin.envs.sim.setups import apply_setup
from darwin.envs.sim.ui import UI, Screen
from darwin.predicates import evaluate
from darwin.run.build import sim_phones
from darwin.templates import templates
from darwin.workflows.step import LifecycleWorkflow

ORIGINAL_APPS = (
    "amazon",
    "booking",
    "chrome",
    "clock",
    "settings",
    "dictionary",
    "play",
    "x",
    "contacts",
    "calendar",
    "messages",
    "notes",
)
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")

# sha256[:16] of English screens recorded before the locale existed (phones with the twelve
# original apps): root screens after a dismissed pop-up, at 1080x2400.
EN_ROOTS = {
    "launcher:0": "9502a6f624995727",
    "amazon:0": "8a96726677252f4e",
    "booking:0": "687abdebf8ff56d6",
    "chrome:0": "043a32390f12dfa8",
    "clock:0": "4cf5fbcccdbf0b9f",
    "settings:0": "69f83416c1c78146",
    "dictionary:0": "5303c2423ee585d1",
    "play:0": "7d0c24fc0bc8369a",
    "x:0": "0121d2edac9eb525",
    "contacts:0": "c206af1b6b36a9e8",
    "calendar:0": "ccd120d09a7339cb",
    "messages:0": "21166864b8f6e1e5",
    "notes:0": "5085b096ecf1b8af",
    "launcher:3": "ae22bb5705dade31",
    "amazon:3": "c8d0928136d6f65e",
    "booking:3": "4dd2c87f12a4bfc3",
    "chrome:3": "680fb140f15ff96e",
    "clock:3": "cbe175cf2c388aad",
    "settings:3": "d1f47143ff050da0",
    "dictionary:3": "3ce5d61cb305a98b",
    "play:3": "cffa46ea2139643e",
    "x:3": "c793c3918131688d",
    "contacts:3": "47921244ccda1cf7",
    "calendar:3": "a11457c6a6aa6612",
    "messages:3": "95aa16baeef306eb",
    "notes:3": "78634725870b2d30",
}
# Every screen of the oracle's plan for each template's English instance 7 (seed 7, no
# perturbation, 270x600), hashed together; recorded before the locale existed.
EN_PLANS = Path(__file__).resolve().parents[2] / "data" / "simphone_en_plans.json"


def _original_apps_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Phones with the twelve apps the hashes were recorded with (newer apps change the launcher)."""
    real = default_apps
    monkeypatch.setattr(phone_module, "default_apps", lambda: [a for a in real() if a.id in ORIGINAL_APPS])


def _digest(pixels: np.ndarray) -> str:
    return hashlib.sha256(pixels.tobytes()).hexdigest()[:16]


def test_english_screens_are_pixel_identical_to_before_the_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    _original_apps_only(monkeypatch)
    for seed in (0, 3):
        phone = SimPhone(seed=seed)
        assert phone.locale == "en"
        assert _digest(phone.screenshot()) == EN_ROOTS[f"launcher:{seed}"]
        for app in ORIGINAL_APPS:
            phone.press_home()
            phone.launch(app)
            phone.dismiss_popup_if_any()
            assert _digest(phone.screenshot()) == EN_ROOTS[f"{app}:{seed}"], app


def test_english_oracle_plans_show_the_same_pixels_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    _original_apps_only(monkeypatch)
    checked = 0
    for template_id, expected in sorted(json.loads(EN_PLANS.read_text()).items()):
        if template_id not in templates():
            continue
        task = templates()[template_id].instance(7)
        phone = SimPhone(seed=7, perturbation=PerturbationConfig(enabled=False))
        phone.restore(apply_setup(phone.snapshot(), task.setup))
        plan = shortest_plan(phone, task.verifier, apps=[task.app])
        h = hashlib.sha256(phone.screenshot((270, 600)).tobytes())
        for action in plan:
            phone.execute(action)
            h.update(phone.screenshot((270, 600)).tobytes())
        assert h.hexdigest()[:16] == expected, template_id
        checked += 1
    assert checked >= 80


def _draw(text: str, bold: bool = False) -> np.ndarray:
    """``text`` drawn as a label on a blank screen (the renderer's text path)."""
    ui = UI()
    ui.label("t", text, role="text")
    return Renderer().render(Screen(widgets=ui.screen.widgets), SimPhone(seed=0), (540, 1200))


def test_chinese_characters_have_real_distinct_glyphs() -> None:
    tofu = _draw("\U000f0000")  # a private-use code point: the missing-glyph box
    shots = {ch: _draw(ch) for ch in "你好设置時鐘"}
    blank = _draw(" ")
    for ch, pixels in shots.items():
        assert not np.array_equal(pixels, blank), f"{ch!r} draws nothing"
        assert not np.array_equal(pixels, tofu), f"{ch!r} draws the missing-glyph box"
    distinct = {_digest(p) for p in shots.values()}
    assert len(distinct) == len(shots), "two characters draw the same pixels"
    assert _has_glyph(CJK_FONT, "设") and not _has_glyph("DejaVuSans.ttf", "设")


def test_mixed_text_and_emoji_render_with_fallback() -> None:
    mixed = _draw("闹钟 7:00 AM")
    assert not np.array_equal(mixed, _draw("闹钟")) and not np.array_equal(mixed, _draw("7:00 AM"))
    assert not np.array_equal(_draw("闹钟", bold=True), _draw("\U000f0000\U000f0000"))
    for emoji in "😀🎉👍❤":
        assert any(_has_glyph(f, emoji) for f in ("DejaVuSans.ttf", EMOJI_FONT)), emoji
        assert not np.array_equal(_draw(emoji), _draw("\U000f0000")), emoji
    assert _font_file(EMOJI_FONT, 40).getlength("😀") > 0


def test_typed_chinese_renders_in_notes_and_messages() -> None:
    for app, content in (("Notes", "买牛奶 🥛"), ("Messages", "你好")):
        phone = SimPhone(seed=1, locale="zh", perturbation=PerturbationConfig(enabled=False))
        phone.execute(OpenApp(app=app))
        field = next(w for w in phone.layout().widgets if w.kind == "field")
        phone.execute(Click(x=field.center[0], y=field.center[1]))
        before = phone.screenshot().copy()
        phone.execute(Type(content=content))
        assert content in [w.text for w in phone.layout().widgets if w.kind == "field"]
        assert not np.array_equal(before, phone.screenshot())


def _shown(phone: SimPhone) -> list[str]:
    out = []
    for w in phone.layout().widgets:
        out += [w.subtitle, w.placeholder] + ([w.text] if w.kind != "field" else [])
    return [s for s in out if s]


@pytest.mark.parametrize("app_id", [a.id for a in default_apps()])
def test_every_root_screen_is_translated(app_id: str) -> None:
    phone = SimPhone(seed=0, locale="zh", perturbation=PerturbationConfig(enabled=False))
    app = phone.apps[app_id]
    assert app.label in app.zh, f"{app_id}: its launcher label needs a zh entry"
    phone.launch(app_id)
    phone.dismiss_popup_if_any()
    shown = _shown(phone)
    keys = {k for k, v in (*app.zh.items(), *COMMON_ZH.items()) if k != v and "{}" not in k and not k.startswith("#")}
    left = [s for s in shown if s in keys]
    assert not left, f"{app_id} shows untranslated dictionary strings: {left}"
    assert any(CJK.search(s) for s in shown), f"{app_id}: no Chinese on its root screen: {shown}"
    assert (
        phone.layout().find("appbar") is None
        or CJK.search(phone.layout().find("appbar").text)
        or app.zh.get(app.label) == app.label
    )


def test_every_app_with_a_dictionary_shows_chinese_and_keeps_ids() -> None:
    en = SimPhone(seed=2, perturbation=PerturbationConfig(enabled=False))
    zh = SimPhone(seed=2, locale="zh", perturbation=PerturbationConfig(enabled=False))
    assert en.state_key() == zh.state_key()
    assert [w.id for w in en.layout().widgets] == [w.id for w in zh.layout().widgets]
    for app in zh.apps.values():
        if not app.zh:
            continue
        for phone in (en, zh):
            phone.press_home()
            phone.launch(app.id)
            phone.dismiss_popup_if_any()
        assert [w.id for w in en.layout().widgets] == [w.id for w in zh.layout().widgets], app.id
        assert en.state_key() == zh.state_key()
    assert not np.array_equal(en.screenshot(), zh.screenshot())


def test_launcher_pop_ups_and_keyboard_are_chinese() -> None:
    phone = SimPhone(seed=0, locale="zh", perturbation=PerturbationConfig(popup_rate=1.0))
    labels = {w.text for w in phone.layout().widgets if w.kind == "app_icon"}
    assert {"时钟", "设置", "通讯录", "日历", "信息", "笔记"} <= labels
    assert CJK.search(phone.layout().find("launcher.date").text)
    phone.execute(OpenApp(app="Amazon"))
    dialog = phone.layout().find("popup")
    assert dialog is not None and dialog.text == "喜欢亚马逊吗？", dialog
    assert phone.layout().find("popup.dismiss").text == "以后再说"
    phone.dismiss_popup_if_any()
    field = next(w for w in phone.layout().widgets if w.kind == "field")
    phone.execute(Click(x=field.center[0], y=field.center[1]))
    assert phone.layout().find("key.space").text == "空格"


def test_open_app_accepts_english_and_chinese_labels() -> None:
    phone = SimPhone(seed=0, locale="zh")
    for name, app_id in (("Clock", "clock"), ("时钟", "clock"), ("设置", "settings"), ("notes", "notes")):
        phone.execute(OpenApp(app=name))
        assert phone.foreground == app_id
        phone.press_home()
    assert SimPhone(seed=0).resolve_app("日历").id == "calendar"


def test_unknown_locale_says_which_exist() -> None:
    with pytest.raises(ValueError, match="use one of en, zh"):
        SimPhone(seed=0, locale="fr")
    with pytest.raises(ValueError, match="use one of en, zh"):
        SimPhoneEnv(seed=0, locale="de")


def test_translation_rules() -> None:
    table = {"Repeat: {}": "重复：{}", "#w.1": "二"}
    assert translate("Repeat: Mon, Tue", table) == "重复：周一，周二"
    assert translate("Wed, Nov 21", {}) == "11月21日 周三"
    assert translate("7:00 AM", {}) == "上午7:00"
    assert translate("Grace Liu", table) == "Grace Liu"
    assert translate("Cancel", table, "en") == "Cancel"
    assert locale_for_task("CHN") == "zh" and locale_for_task("ENG", "zh") == "zh"


def test_auto_locale_follows_each_episodes_task() -> None:
    env = SimPhoneEnv(seed=4, locale="auto", reset_between_episodes=True)
    workflow = LifecycleWorkflow()
    tpl = templates()["clock.set_alarm"]
    for language, locale in (("CHN", "zh"), ("ENG", "en"), ("CHN", "zh")):
        task = tpl.instance(1, language)
        env.go_home()  # between episodes: back to the phone's initial state
        trajectory = asyncio.run(workflow.run(env, task, OracleActor()))
        assert env.phone.locale == locale and trajectory.success is True, (language, trajectory.termination)
    fixed = SimPhoneEnv(seed=4, locale="en")
    fixed.begin_task(tpl.instance(1, "CHN"))
    assert fixed.phone.locale == "en"


def test_experiment_phones_locale_reaches_the_sim_phones() -> None:
    from darwin.run.config import ExperimentConfig, PhonesConfig

    assert PhonesConfig().locale == "auto"
    config = ExperimentConfig(name="locale", phones=PhonesConfig(count=2, locale="zh"))
    envs = sim_phones(config, 0, 2, "sim")
    assert [e.locale for e in envs] == ["zh", "zh"] and envs[0].phone.locale == "zh"
    auto = sim_phones(ExperimentConfig(name="locale"), 0, 1, "eval")[0]
    assert auto.locale == "auto" and auto.phone.locale == "en"
    with pytest.raises(ValueError):
        PhonesConfig(locale="fr")


# Enough instances to cover every template of the twelve apps in Chinese, fast enough for CI.
@pytest.mark.parametrize("template_id", sorted(t for t, tpl in templates().items() if not t.startswith("cross.")))
def test_oracle_solves_chinese_instances_on_chinese_phones(template_id: str) -> None:
    task = templates()[template_id].instance(3, "CHN")
    phone = SimPhone(seed=3, locale="zh", perturbation=PerturbationConfig(enabled=False))
    phone.restore(apply_setup(phone.snapshot(), task.setup))
    plan = shortest_plan(phone, task.verifier, apps=[task.app])
    for action in plan:
        phone.execute(action)
    assert evaluate(task.verifier, phone.state).success, template_id


def _tokenizer():
    from darwin.models.config import TinyVLMConfig
    from darwin.models.tokenizer import build_tokenizer

    config = TinyVLMConfig()
    return build_tokenizer(config.family, config.vocab_size)


def test_tokenizer_round_trips_every_label_and_goal() -> None:
    """The tiny model's byte-level BPE has no unknown token: Chinese labels and goals round-trip."""
    tok = _tokenizer()
    texts = []
    for app in SimPhone(seed=0).apps.values():
        texts += [app.label, *app.zh.values()]
    texts += list(COMMON_ZH.values())
    for tpl in templates().values():
        for seed in range(3):
            texts += [tpl.instance(seed, "ENG").instruction, tpl.instance(seed, "CHN").instruction]
    unk = tok.unk_token_id
    zh_chars = zh_tokens = 0
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text, text
        assert unk is None or unk not in ids, text
        if CJK.search(text):
            zh_chars += len(text)
            zh_tokens += len(ids)
    # Byte-level BPE without Chinese merges: about 3 tokens a character (UTF-8 bytes), recorded in the docs.
    assert 1.0 <= zh_tokens / zh_chars <= 3.2, zh_tokens / zh_chars


def test_the_cjk_font_covers_every_dictionary_and_goal_character() -> None:
    """Run scripts/build_cjk_font.py after adding Chinese strings the font lacks."""
    texts = [*COMMON_ZH.values()]
    for app in SimPhone(seed=0).apps.values():
        texts += list(app.zh.values())
    for tpl in templates().values():
        texts += [tpl.instance(seed, "CHN").instruction for seed in range(4)]
    chars = {c for t in texts for c in t if CJK.match(c)}
    missing = sorted(c for c in chars if not _has_glyph("DejaVuSans.ttf", c) and not _has_glyph(CJK_FONT, c))
    assert not missing, f"{CJK_FONT} lacks {''.join(missing)}: rebuild it with scripts/build_cjk_font.py"
