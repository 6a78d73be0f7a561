"""Bytes the verl learner ships to its workers per paper-shaped row (docs/benchmarks.md).

verl's dispatch pickles the batch into Ray's object store for every call (critic values, actor
log-probs, critic and actor training), so a row's pickled size times the rows is what each call
moves. Builds the rows of ``darwin bench learner --rows paper`` with the tiny model's processor
(the pixels are what a Qwen2.5-VL processor makes of a 504x1120 screenshot) and prints the bytes::

    python scripts/verl_row_bytes.py --rows 32
"""

from __future__ import annotations

import argparse
import pickle

from darwin.bench.learner import PAPER_SCREEN, SIZES, paper_shaped_trajectories
from darwin.learner.step_rows import collect_step_rows, preprocess_rows
from darwin.learner.verl_batch import to_verl_batch
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.policies.hf import HFPolicy, HFPolicyConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    args = parser.parse_args()
    width, height = PAPER_SCREEN
    vlm = build_tiny_vlm(
        TinyVLMConfig(family="qwen2_vl", screen_width=width, screen_height=height, **SIZES["tiny"]), seed=0
    )
    policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=48, seed=0))
    rows = collect_step_rows(paper_shaped_trajectories(policy, args.rows, 8, PAPER_SCREEN)).rows
    inputs = preprocess_rows(policy, rows, chunk=16)  # the verl learner's chunk
    data = to_verl_batch(rows, pad_token_id=0, pad_to_multiple=8, temperature=1.0, inputs=inputs, rope_model=vlm.model)
    tensors = sum(v.numel() * v.element_size() for v in data.batch.values())
    pickled = len(pickle.dumps(data.non_tensor_batch))
    pixels = sum(x.pixel_values.numel() * x.pixel_values.element_size() for x in inputs if x.pixel_values is not None)
    print(
        f"{len(rows)} rows: token tensors {tensors / 1e6:.1f} MB, pickled multimodal inputs {pickled / 1e6:.1f} MB "
        f"({pickled / len(rows) / 1e6:.2f} MB a row; the rows' own pixel values {pixels / len(rows) / 1e6:.2f} MB a row)"
    )


if __name__ == "__main__":
    main()
