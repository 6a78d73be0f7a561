"""Tiny Qwen2-VL / Qwen2.5-VL factory: build, forward, generate, save/load, tokenizer, config."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from pydantic import ValidationError

from darwin.models.config import TinyVLMConfig
from darwin.models.factory import (
    TINY_CONFIG_FILE,
    VLM,
    build_tiny_vlm,
    forbidden_token_ids,
    load_tiny_vlm,
    load_vlm,
    mm_token_type_ids,
)
from darwin.models.tokenizer import _train_bpe, build_tokenizer
from darwin.models.tokens import CHAT_TEMPLATE, MAX_BASE_VOCAB, VISION_SPECIAL_TOKENS, special_tokens_for

FAMILIES = ["qwen2_vl", "qwen2_5_vl"]


@pytest.fixture(scope="module", params=FAMILIES)
def vlm(request: pytest.FixtureRequest) -> VLM:
    return build_tiny_vlm(TinyVLMConfig(family=request.param), seed=0)


def screenshot(width: int = 252, height: int = 560, seed: int = 0) -> Image.Image:
    """A random phone screenshot: numpy uint8 (H, W, 3) -> PIL, as an env hands it over."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def conversation(image: object, goal: str = "Open Settings and turn on dark theme.") -> list[dict]:
    return [
        {"role": "system", "content": "You are a GUI agent."},
        {
            "role": "user",
            "content": [{"type": "image", "image": image}, {"type": "text", "text": goal}],
        },
    ]


# --- building, forward, generate ------------------------------------------------------
def test_default_is_config_a() -> None:
    cfg = TinyVLMConfig()
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size) == (128, 2, 2000)
    assert cfg.resolved_mrope_section == (4, 6, 6)
    assert cfg.grid_thw == (1, 40, 18)
    assert cfg.visual_tokens == 180


def test_parameter_counts(vlm: VLM) -> None:
    expected = {"qwen2_vl": 826_112, "qwen2_5_vl": 859_072}[vlm.family]
    assert vlm.num_parameters() == expected
    assert vlm.vocab_size == len(vlm.tokenizer) == 2000


def test_forward_and_generate_on_screenshot(vlm: VLM) -> None:
    image = screenshot()
    batch = vlm.processor.apply_chat_template(
        [conversation(image), conversation(image, "Open Chrome.")],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
        processor_kwargs={"padding": True},
    )
    assert batch["image_grid_thw"].tolist() == [[1, 40, 18]] * 2
    assert batch["mm_token_type_ids"].sum(dim=1).tolist() == [180, 180]
    with torch.no_grad():
        logits = vlm.model(**batch).logits
    assert logits.shape == (2, batch["input_ids"].shape[1], vlm.vocab_size)
    assert torch.isfinite(logits).all()

    out = vlm.model.generate(**batch, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert out.shape == (2, batch["input_ids"].shape[1] + 4)
    text = vlm.processor.post_process_image_text_to_text(out[:, batch["input_ids"].shape[1] :])
    assert len(text) == 2 and all(isinstance(t, str) for t in text)


def test_default_sampling_is_full_distribution_minus_forbidden(vlm: VLM) -> None:
    batch = vlm.build_inputs([conversation(screenshot(seed=s)) for s in range(2)])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out = vlm.model.generate(
            **batch,
            max_new_tokens=25,
            min_new_tokens=24,
            output_scores=True,
            return_dict_in_generate=True,
        )
    new = out.sequences[:, batch["input_ids"].shape[1] :][:, :24]  # no EOS (nor padding) yet
    forbidden = vlm.forbidden_token_ids()
    assert not set(new.flatten().tolist()) & forbidden
    # No hidden top_k=50: every token but the forbidden ones keeps a finite score (step 25:
    # min_new_tokens no longer masks EOS).
    finite = torch.isfinite(out.scores[-1]).sum(dim=-1)
    assert finite.tolist() == [vlm.vocab_size - len(forbidden)] * 2


def test_build_inputs_accepts_numpy_and_left_pads(vlm: VLM) -> None:
    arr = np.asarray(screenshot())
    single = vlm.build_inputs(conversation(arr, "Go."))
    batch = vlm.build_inputs([conversation(arr, "Go."), conversation(arr, "Open the clock app now.")])
    assert batch["attention_mask"][0, 0] == 0 and batch["attention_mask"][:, -1].all()
    assert torch.equal(
        batch["mm_token_type_ids"],
        mm_token_type_ids(batch["input_ids"], vlm.model.config.image_token_id, vlm.model.config.video_token_id),
    )
    with torch.no_grad():
        a = vlm.model(**single).logits[0, -1]
        b = vlm.model(**batch).logits[0, -1]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_image_token_check_counts_like_transformers_and_refuses_truncation(vlm: VLM) -> None:
    """The processors' vectorised image-token check accepts what transformers' accepts and
    refuses a prompt whose image tokens truncation cut, with transformers' message."""
    from transformers.processing_utils import ProcessorMixin

    processor = vlm.processor
    pad = processor.image_token
    expanded = [
        f"<|vision_start|>{pad * 3}<|vision_end|>Go.",
        f"Open the clock.<|vision_start|>{pad * 5}<|vision_end|>",
    ]
    for tensors in ("pt", None):
        whole = processor.tokenizer(expanded, padding=True, return_tensors=tensors)
        processor._check_special_mm_tokens(expanded, whole, ["image", "video"])
        ProcessorMixin._check_special_mm_tokens(processor, expanded, whole, ["image", "video"])
        cut = processor.tokenizer(expanded, truncation=True, max_length=4, padding=True, return_tensors=tensors)
        with pytest.raises(ValueError, match="Mismatch in `image` token count") as ours:
            processor._check_special_mm_tokens(expanded, cut, ["image", "video"])
        with pytest.raises(ValueError) as theirs:
            ProcessorMixin._check_special_mm_tokens(processor, expanded, cut, ["image", "video"])
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(("size", "grid"), [((252, 560), [1, 40, 18]), ((1080, 2400), [1, 40, 18])])
def test_screen_sizes_map_to_the_configured_grid(vlm: VLM, size: tuple[int, int], grid: list[int]) -> None:
    out = vlm.image_processor(images=[screenshot(*size)], return_tensors="pt")
    assert out["image_grid_thw"].tolist() == [grid]


# --- token ids and chat template ------------------------------------------------------
def test_special_token_ids_match_model_config(vlm: VLM) -> None:
    tok, cfg = vlm.tokenizer, vlm.model.config
    specials = special_tokens_for(vlm.family)
    first = len(tok) - len(specials)
    assert tok.convert_tokens_to_ids(list(specials)) == list(range(first, len(tok)))
    assert cfg.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert cfg.video_token_id == tok.convert_tokens_to_ids("<|video_pad|>")
    assert cfg.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    assert cfg.vision_end_token_id == tok.convert_tokens_to_ids("<|vision_end|>")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert cfg.text_config.eos_token_id == tok.eos_token_id
    assert cfg.text_config.pad_token_id == tok.pad_token_id


def test_chat_template_renders_like_qwen2_vl(vlm: VLM) -> None:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]}]
    text = vlm.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert vlm.processor.chat_template == vlm.tokenizer.chat_template == CHAT_TEMPLATE


ACTION_STRINGS = [
    "click(start_box='<|box_start|>(123,456)<|box_end|>')",
    "type(content='héllo 你好')",
    "Thought: The Settings app is on the home screen.\nAction: open_app(app_name='Settings')",
    "scroll(start_box='<|box_start|>(500,700)<|box_end|>', direction='down')",
    "finished(content='It\\'s 25°C — done ✅ 🎉')",
    "type(content='a\\tb\\nc %s $(rm -rf /) `x` \"q\" \\\\')\n",
    "\x00\x1b[31m control bytes",
]


@pytest.mark.parametrize("text", ACTION_STRINGS)
def test_tokenizer_round_trips_action_strings(vlm: VLM, text: str) -> None:
    ids = vlm.tokenizer.encode(text, add_special_tokens=False)
    assert vlm.tokenizer.decode(ids, skip_special_tokens=False) == text
    assert not set(ids) & vlm.forbidden_token_ids()


def test_box_tokens_are_single_special_tokens(vlm: VLM) -> None:
    tok = vlm.tokenizer
    ids = tok.encode(ACTION_STRINGS[0], add_special_tokens=False)
    assert tok.convert_tokens_to_ids("<|box_start|>") in ids
    assert tok.convert_tokens_to_ids("<|box_end|>") in ids
    # Like the real Qwen2-VL tokenizer, box markers are special: skip_special_tokens drops them.
    assert tok.decode(ids, skip_special_tokens=True) == "click(start_box='(123,456)')"


def test_non_ascii_uses_byte_level_pieces(vlm: VLM) -> None:
    tok = vlm.tokenizer
    ids = tok.encode("你好吗", add_special_tokens=False)
    assert tok.unk_token_id is None or tok.unk_token_id not in ids
    assert tok.decode(ids) == "你好吗"


def test_tokenizer_is_deterministic_and_bounded() -> None:
    a = build_tokenizer("qwen2_vl", 600)
    b = build_tokenizer("qwen2_vl", 600)
    assert a.get_vocab() == b.get_vocab() and len(a) == 600
    vocab, _ = _train_bpe(MAX_BASE_VOCAB)
    assert len(vocab) == MAX_BASE_VOCAB
    with pytest.raises(ValueError, match="lower vocab_size"):
        _train_bpe(MAX_BASE_VOCAB + 1)


# --- forbidden tokens -----------------------------------------------------------------
def test_forbidden_token_ids(vlm: VLM) -> None:
    tok = vlm.tokenizer
    forbidden = forbidden_token_ids(tok)
    assert {tok.convert_tokens_to_ids(t) for t in VISION_SPECIAL_TOKENS} <= forbidden
    assert tok.pad_token_id in forbidden
    assert tok.eos_token_id not in forbidden
    assert tok.convert_tokens_to_ids("<|box_start|>") not in forbidden
    padded = forbidden_token_ids(tok, vocab_size=len(tok) + 3)
    assert padded - forbidden == {len(tok), len(tok) + 1, len(tok) + 2}


def test_pad_equal_to_eos_stays_sampleable() -> None:
    tok = build_tokenizer("qwen2_vl", 600)
    tok.pad_token = tok.eos_token
    assert tok.eos_token_id not in forbidden_token_ids(tok)


# --- save / load ----------------------------------------------------------------------
def test_save_load_round_trip(vlm: VLM, tmp_path: Path) -> None:
    path = vlm.save_pretrained(tmp_path / "ckpt")
    on_disk = json.loads((path / "processor_config.json").read_text())
    standard = {"qwen2_vl": "Qwen2VLProcessor", "qwen2_5_vl": "Qwen2_5_VLProcessor"}[vlm.family]
    assert on_disk["processor_class"] == standard
    assert json.loads((path / "tokenizer_config.json").read_text())["processor_class"] == standard

    loaded = load_tiny_vlm(path)
    assert loaded.tiny_config == vlm.tiny_config and loaded.seed == vlm.seed
    assert type(loaded.model) is type(vlm.model)
    assert loaded.processor.chat_template == vlm.processor.chat_template
    assert loaded.tokenizer.get_vocab() == vlm.tokenizer.get_vocab()
    assert loaded.forbidden_token_ids() == vlm.forbidden_token_ids()
    assert loaded.model.generation_config.suppress_tokens == vlm.model.generation_config.suppress_tokens

    conv = conversation(screenshot())
    a, b = vlm.build_inputs(conv), loaded.build_inputs(conv)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    with torch.no_grad():
        assert torch.equal(vlm.model(**a).logits, loaded.model(**b).logits)

    for text in ACTION_STRINGS:
        assert loaded.tokenizer.encode(text) == vlm.tokenizer.encode(text)


def test_load_vlm_without_tiny_record(vlm: VLM, tmp_path: Path) -> None:
    path = vlm.save_pretrained(tmp_path / "ckpt")
    (path / TINY_CONFIG_FILE).unlink()
    plain = load_vlm(path)  # what a real UI-TARS / Qwen checkpoint goes through
    assert plain.tiny_config is None and plain.family == vlm.family
    with pytest.raises(FileNotFoundError, match="load_vlm"):
        load_tiny_vlm(path)


def test_load_vlm_processor_overrides(vlm: VLM, tmp_path: Path) -> None:
    path = vlm.save_pretrained(tmp_path / "ckpt")
    small = load_vlm(path, processor_kwargs={"max_pixels": 28 * 28 * 45})
    out = small.image_processor(images=[screenshot(1080, 2400)], return_tensors="pt")
    assert out["image_grid_thw"].tolist() == [[1, 20, 8]]  # 40 visual tokens


# --- config validation ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mrope_section": (4, 4, 4)}, "mrope_section"),
        ({"hidden_size": 100}, "hidden_size"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"vision_embed_dim": 66}, "vision_embed_dim"),
        ({"vision_embed_dim": 40, "vision_num_heads": 4}, "vision_embed_dim"),
        ({"screen_width": 250}, "screen_width=250"),
        ({"screen_height": 570}, "screen_height=570"),
        ({"max_pixels": 1000}, "max_pixels"),
        ({"min_pixels": 10**7}, "min_pixels"),
        ({"vocab_size": 100}, "vocab_size"),
        ({"vocab_size": 10**5}, "vocab_size"),
        ({"family": "qwen2_5_vl", "fullatt_block_indexes": (5,)}, "fullatt_block_indexes"),
        ({"family": "qwen2_5_vl", "window_size": 100}, "window_size"),
        ({"family": "llava"}, "family"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"unknown_field": 1}, "unknown_field"),
    ],
)
def test_bad_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        TinyVLMConfig(**kwargs)


def test_every_problem_in_one_error() -> None:
    with pytest.raises(ValidationError) as err:
        TinyVLMConfig(screen_width=250, num_key_value_heads=3, vocab_size=100)
    message = str(err.value)
    assert "3 problem(s)" in message
    assert "use 224 or 252" in message  # the fix, not only the complaint


def test_build_rechecks_unvalidated_config() -> None:
    bad = TinyVLMConfig.model_construct(**{**TinyVLMConfig().model_dump(), "mrope_section": (1, 1, 1)})
    with pytest.raises(ValueError, match="mrope_section"):
        build_tiny_vlm(bad)


def test_preset_b_is_larger() -> None:
    b = TinyVLMConfig.preset("B")
    assert (b.num_hidden_layers, b.intermediate_size, b.vision_embed_dim) == (4, 512, 128)
    with pytest.raises(ValueError, match="preset"):
        TinyVLMConfig.preset("C")  # type: ignore[arg-type]


# --- randomness -----------------------------------------------------------------------
def test_build_leaves_global_rng_untouched_and_is_deterministic() -> None:
    torch.manual_seed(1234)
    random.seed(1234)
    np.random.seed(1234)
    before = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    cfg = TinyVLMConfig(vocab_size=600)
    a = build_tiny_vlm(cfg, seed=7)
    b = build_tiny_vlm(cfg, seed=7)
    c = build_tiny_vlm(cfg, seed=8)
    after = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1])
    assert torch.equal(before[0], after[0])
    assert before[1] == after[1]
    assert np.array_equal(before[2], after[2])
    sa, sb, sc = a.model.state_dict(), b.model.state_dict(), c.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
