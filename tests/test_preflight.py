"""Pre-flight reads the actor's checkpoint before any phone or worker starts: a Hugging Face
directory of a Qwen2-VL-family model with its processor, in a layout the agent format can run."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.cli.main import main
from darwin.run.config import AgentConfig, ExperimentConfig
from darwin.run.load import load_experiment
from darwin.run.preflight import checkpoint_problems, preflight

ROOT = Path(__file__).resolve().parents[1]
SPA_BENCH = ROOT / "examples" / "spa_bench.py"
UITARS = AgentConfig(format="uitars-1.5", observation_size=(252, 560))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Model directories as they arrive from elsewhere (no darwin files):

    - ``uitars``: a tiny Qwen2-VL in Hugging Face layout (model + processor save_pretrained),
      standing in for UI-TARS-1.5-7B;
    - ``weights_only``: the same model without its processor files;
    - ``text_only``: a tiny transformers ``Qwen2ForCausalLM`` with the same tokenizer;
    - ``warm_start``: what ``darwin sft`` writes (the model, darwin's tiny and agent records).
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from darwin.agents.warm_start import AGENT_FILE
    from darwin.models.factory import build_tiny_vlm
    from darwin.sft.config import SFT_FORMAT_VERSION

    root = tmp_path_factory.mktemp("checkpoints")
    vlm = build_tiny_vlm(seed=0)
    dirs = {name: root / name for name in ("uitars", "weights_only", "text_only", "warm_start")}
    vlm.model.save_pretrained(dirs["uitars"])
    vlm.processor.save_pretrained(dirs["uitars"])
    vlm.model.save_pretrained(dirs["weights_only"])
    text = Qwen2Config(
        vocab_size=len(vlm.tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    Qwen2ForCausalLM(text).save_pretrained(dirs["text_only"])
    vlm.tokenizer.save_pretrained(dirs["text_only"])
    vlm.save_pretrained(dirs["warm_start"])
    record = {
        "format_version": SFT_FORMAT_VERSION,
        "kind": "tiny",
        "agent": {},
        "memory": {},
        "observation_size": [252, 560],
        "max_new_tokens": 64,
    }
    (dirs["warm_start"] / AGENT_FILE).write_text(json.dumps(record))
    return dirs


def test_the_checkpoints_have_the_layouts_the_checks_read(checkpoints):
    files = {name: {p.name for p in path.iterdir()} for name, path in checkpoints.items()}
    assert {"config.json", "processor_config.json", "tokenizer.json", "chat_template.jinja"} <= files["uitars"]
    assert "darwin_agent.json" not in files["uitars"] and "darwin_tiny_vlm.json" not in files["uitars"]
    assert "config.json" in files["weights_only"] and not files["weights_only"] & {
        "processor_config.json",
        "tokenizer.json",
    }
    assert json.loads((checkpoints["text_only"] / "config.json").read_text())["model_type"] == "qwen2"


def test_paper_preset_dry_run_reads_a_ui_tars_checkpoint(monkeypatch, checkpoints):
    """`darwin run --preset paper --dry-run` on a UI-TARS-layout checkpoint: no checkpoint or
    agent-format problem; the parts this machine cannot reach (server, GPU, judge) are still named."""
    for var in ("DARWIN_AGENT_FORMAT", "DARWIN_POLICY_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "DARWIN_RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DARWIN_CHECKPOINT", str(checkpoints["uitars"]))
    monkeypatch.setenv("DARWIN_DEVICES", "cloud-1:5555")
    monkeypatch.setenv("DARWIN_GPUS", "1")
    monkeypatch.setenv("DARWIN_POLICY_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    config = load_experiment(SPA_BENCH, "paper")
    assert config.agent.format is not None
    assert (config.agent.format.name, config.agent.observation_size) == ("uitars-1.5", (504, 1120))
    assert config.learner.verl is not None and config.learner.verl.model_path == config.checkpoint

    result = CliRunner().invoke(main, ["run", str(SPA_BENCH), "--dry-run", "--preset", "paper"])
    assert result.exit_code == 1, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    assert any(line.startswith("policy server:") for line in lines), result.output  # the rest is still checked
    assert any(line.startswith("verl learner:") for line in lines), result.output
    assert not [line for line in lines if line.startswith("checkpoint:") or "model_path" in line], result.output

    # The same directory as a 'checkpoint'-format warm start is named, with the fix.
    monkeypatch.setenv("DARWIN_AGENT_FORMAT", "checkpoint")
    problems = [p for p in preflight(load_experiment(SPA_BENCH, "paper"), timeout_s=0.5) if p.part == "checkpoint"]
    assert len(problems) == 1 and "not a darwin SFT warm start (no darwin_agent.json)" in problems[0].message
    assert "set agent.format" in problems[0].message and "'uitars-1.5'" in problems[0].message
    assert "$DARWIN_AGENT_FORMAT" in problems[0].message


def test_a_text_only_checkpoint_is_named_with_the_fix(checkpoints):
    config = ExperimentConfig(name="x", checkpoint=str(checkpoints["text_only"]), agent=UITARS)
    problems = preflight(config)
    assert {p.part for p in problems} == {"checkpoint"}, problems  # (and no image processor: a second problem)
    message = problems[0].message
    assert "holds a text-only model (model_type 'qwen2', Qwen2ForCausalLM: no vision_config)" in message
    assert "the agent reads screenshots" in message
    assert "give a vision-language checkpoint of the Qwen2-VL family (model_type qwen2_vl or qwen2_5_vl" in message
    # another vision-language family is named too
    other = checkpoints["text_only"].parent / "llava"
    other.mkdir(exist_ok=True)
    (other / "config.json").write_text(
        json.dumps({"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "vision_config": {}})
    )
    (found,) = [m for m in checkpoint_problems(other, check_format=False) if "model_type" in m]
    assert (
        "holds model_type 'llava' (LlavaForConditionalGeneration), which darwin's agents and policies do not run"
        in found
    )


def test_a_checkpoint_without_processor_files_is_named(checkpoints):
    problems = preflight(ExperimentConfig(name="x", checkpoint=str(checkpoints["weights_only"]), agent=UITARS))
    assert [p.part for p in problems] == ["checkpoint"], problems
    message = problems[0].message
    for part in (
        "no image processor (preprocessor_config.json, or processor_config.json with an image_processor entry)",
        "no tokenizer (tokenizer.json, or vocab.json and merges.txt)",
        "no chat template",
        "save it beside the weights, e.g. AutoProcessor.from_pretrained(",
    ):
        assert part in message, part
    # A Hub-style layout (preprocessor_config.json, vocab.json + merges.txt, chat_template.json) passes.
    hub = checkpoints["weights_only"].parent / "hub_layout"
    shutil.copytree(checkpoints["weights_only"], hub, dirs_exist_ok=True)
    for name in ("preprocessor_config.json", "vocab.json", "merges.txt", "chat_template.json"):
        (hub / name).write_text("{}")
    assert checkpoint_problems(hub, agent_format="uitars-1.5") == []


def test_a_missing_config_json_and_every_problem_at_once(tmp_path, checkpoints):
    config = ExperimentConfig(name="x", checkpoint=str(tmp_path))  # empty directory, agent.format unset
    messages = [p.message for p in preflight(config)]
    assert len(messages) == 2, messages
    assert "has no config.json, so it is not a Hugging Face model directory" in messages[0]
    assert "not a darwin SFT warm start" in messages[1]
    assert "is not a directory" in checkpoint_problems(tmp_path / "absent")[0]


def test_agent_format_checkpoint_needs_a_darwin_warm_start(checkpoints):
    ui_tars = preflight(ExperimentConfig(name="x", checkpoint=str(checkpoints["uitars"])))
    assert len(ui_tars) == 1 and "agent.format unset runs only those" in ui_tars[0].message
    assert preflight(ExperimentConfig(name="x", checkpoint=str(checkpoints["uitars"]), agent=UITARS)) == []
    assert preflight(ExperimentConfig(name="x", checkpoint=str(checkpoints["warm_start"]))) == []
    assert preflight(ExperimentConfig(name="x", checkpoint=str(checkpoints["warm_start"]), agent=UITARS)) == []


def test_verl_model_path_is_read_when_it_is_another_directory(monkeypatch, checkpoints):
    monkeypatch.setenv("DARWIN_CHECKPOINT", str(checkpoints["uitars"]))
    config = load_experiment(SPA_BENCH, "paper")
    assert config.learner.verl is not None
    verl = config.learner.verl.model_copy(update={"model_path": str(checkpoints["text_only"])})
    config = config.model_copy(update={"learner": config.learner.model_copy(update={"verl": verl})})
    found = [p for p in preflight(config, timeout_s=0.5) if p.part == "verl learner" and "model_path" in p.message]
    assert found and all(p.message.startswith("learner.verl.model_path ") for p in found)
    assert "holds a text-only model" in found[0].message
