"""`darwin judge calibrate` and `darwin judge review` on a small SimPhone run, labelled CSV
folders, resumability, the metrics, the run database's schema 3, and bad inputs."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from darwin.agents.scripted import OracleActor, RandomActor
from darwin.cli.main import main
from darwin.envs.sim.env import SimPhoneEnv
from darwin.evaluate import evaluate
from darwin.store import RunStore
from darwin.store_schema import SCHEMA_VERSION
from darwin.task_registry import get_task, goal_text
from darwin.types import Phase
from darwin.verifiers.judge.calibration import LabelSourceError, judge_metrics, load_cases
from darwin.verifiers.judge.llm_judge import LLMJudge
from darwin.workflows.step import LifecycleWorkflow, StepConfig

TASKS = ("amazon_0", "booking.com_0", "booking.com_3")
KEY = "sk-fake-test-key"
WIDE = {"COLUMNS": "200"}


def final_image(body: dict) -> np.ndarray:
    part = [p for p in body["messages"][-1]["content"] if p.get("type") == "image_url"][-1]
    with Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))) as im:
        return np.asarray(im.convert("RGB"))


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> tuple[Path, dict[tuple[str, bytes], bool]]:
    """Oracle (successes) and random-agent (failures) episodes of three tasks, and what the
    judge will see of each: (goal, final screen) -> the stored rule verdict."""
    run_dir = tmp_path_factory.mktemp("sim") / "run"
    store = RunStore.for_run_dir(run_dir)
    run_id = store.start_run("calibration data")
    tasks = [get_task(t) for t in TASKS]
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=(126, 280)))
    asyncio.run(evaluate(tasks, [SimPhoneEnv(seed=0)], lambda i: OracleActor(), 1, workflow, store, run_id))
    short = [t.model_copy(update={"step_budget": 4}) for t in tasks]
    asyncio.run(evaluate(short, [SimPhoneEnv(seed=1)], lambda i: RandomActor(seed=7), 1, workflow, store, run_id))
    truth: dict[tuple[str, bytes], bool] = {}
    for episode in store.episodes(run_id):
        (verdict,) = store.verdicts(episode.episode_id)
        assert verdict.verifier_kind == "rule"
        final = store.load_screenshot(episode.final_screenshot_path)
        truth[(goal_text(store.task(episode.task_id)), final.tobytes())] = verdict.success
    store.close()
    assert sorted(truth.values()) == [False] * 3 + [True] * 3  # every final screen tells its episode apart
    return run_dir, truth


def answer_from(truth):
    """The fake judge: right from the stored verdict, except on purpose (see the test)."""

    def reply(body: dict) -> str:
        text = body["messages"][-1]["content"][-1]["text"]
        goal = text.split("\n", 1)[0].removeprefix("Task: ")
        label = truth[(goal, final_image(body).tobytes())]
        task = next(t for t in TASKS if goal == goal_text(get_task(t)))
        marked = "Steps:" in text
        if marked and task == "amazon_0" and not label:
            label = True  # a false positive
        elif marked and task == "booking.com_0" and not label:
            return "It is hard to say."  # unverified
        elif not marked and label and task in ("amazon_0", "booking.com_3"):
            label = False  # two false negatives
        return json.dumps({"reason": f"judged {task}", "answer": "yes" if label else "no"})

    return reply


def judge_flags(server) -> list[str]:
    return [
        "--model",
        "openai/fake-llm",
        "--api-base",
        server.api_base,
        "--api-key-env",
        "DARWIN_FAKE_LLM_KEY",
        "--attempts",
        "2",
        "--timeout",
        "5",
        "--resamples",
        "200",
    ]


def table_row(output: str, name: str) -> list[str]:
    line = next(line for line in output.splitlines() if re.match(rf"^│ {re.escape(name)}\s+│", line))
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_calibrate_prints_table_3_with_intervals_from_a_run_database(openai_server, sim_run, tmp_path):
    run_dir, truth = sim_run
    openai_server.reply = answer_from(truth)
    out = tmp_path / "calibration.json"
    args = [
        "judge",
        "calibrate",
        str(run_dir),
        "--config",
        "final_state",
        "--config",
        "marked",
        *judge_flags(openai_server),
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(main, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert len(openai_server.requests) == 12
    # hand-computed: final_state TP 1, FN 2, TN 3, FP 0; marked TP 3, FP 1, TN 1, one unverified
    name, n, unverified, *metrics, paper = table_row(result.output, "final_state")
    assert (n, unverified, paper) == ("6", "0", "0.78")
    assert [m.split()[0] for m in metrics] == ["0.667", "1.000", "0.333", "0.500"]
    name, n, unverified, *metrics, paper = table_row(result.output, "marked")
    assert (n, unverified, paper) == ("5", "1", "0.91")
    assert [m.split()[0] for m in metrics] == ["0.800", "0.750", "1.000", "0.857"]
    assert all(re.fullmatch(r"\d\.\d{3} \(\d\.\d\d-\d\.\d\d\)", m) for m in metrics[:3])
    assert "judge calibration, English (6 episodes" in result.output
    assert "final_state: 2 disagreement(s)" in result.output and "marked: 1 disagreement(s)" in result.output
    assert "judge requests this time: 12, tokens 120 in / 60 out" in result.output
    report = json.loads(out.read_text())
    m = report["configs"]["final_state"]["metrics"]["ENG"]
    assert (m["tp"], m["fp"], m["tn"], m["fn"], m["unverified"]) == (1, 0, 3, 2, 0)
    for key in ("accuracy", "precision", "recall", "f1"):
        assert m[key]["low"] <= m[key]["value"] <= m[key]["high"]
    assert {d["task_id"] for d in report["configs"]["final_state"]["disagreements"]} == {"amazon_0", "booking.com_3"}
    assert KEY not in out.read_text()

    # resumable: a rerun judges nothing again and prints the same table
    again = CliRunner().invoke(main, args, env=WIDE)
    assert again.exit_code == 0, again.output
    assert len(openai_server.requests) == 12 and "resuming: 12 of 12" in again.output
    assert table_row(again.output, "marked") == table_row(result.output, "marked")
    # an interrupted file (5 verdicts kept, a torn last line) resumes with the other 7
    judged = out.with_suffix(".judged.jsonl")
    judged.write_text("\n".join(judged.read_text().splitlines()[:5]) + '\n{"fingerprint": "torn', encoding="utf-8")
    resumed = CliRunner().invoke(main, args, env=WIDE)
    assert resumed.exit_code == 0, resumed.output
    assert len(openai_server.requests) == 19
    assert table_row(resumed.output, "final_state") == table_row(result.output, "final_state")


def test_review_reports_agreement_and_records_the_judges_verdicts(openai_server, sim_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(sim_run[0], run_dir)
    openai_server.reply = lambda body: '{"reason": "done", "answer": "yes"}'
    args = ["judge", "review", str(run_dir), "--config", "final_state", *judge_flags(openai_server), "--record"]
    result = CliRunner().invoke(main, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert table_row(result.output, "yes")[1:] == ["3", "0", "0"]
    assert table_row(result.output, "no")[1:] == ["3", "0", "0"]
    assert "agreement on episodes both decided: 0.500" in result.output
    assert "recorded 6 judge verdict(s)" in result.output
    with RunStore.for_run_dir(run_dir) as store:
        (run,) = store.runs()
        for episode in store.episodes(run.run_id):
            kinds = {v.verifier_kind: v for v in store.verdicts(episode.episode_id)}
            judged = kinds["llm_judge"]
            assert (judged.success, judged.prompt_tokens, judged.completion_tokens, judged.requests) == (True, 10, 5, 1)
            assert judged.verifier_config["preset"] == "final_state" and "fingerprint" in judged.verifier_config
    report = json.loads((run_dir / "judge-review.json").read_text())
    assert report["agreement"]["no/yes"] == 3
    # a second review judges nothing again and records nothing twice
    again = CliRunner().invoke(main, args, env=WIDE)
    assert again.exit_code == 0 and "recorded 0 judge verdict(s)" in again.output
    assert len(openai_server.requests) == 6
    for path in run_dir.glob("run.db*"):
        assert KEY.encode() not in path.read_bytes()


# --------------------------------------------------------------------------- labelled folders


def write_labelled(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, shade in (("ep1", 10), ("ep2", 200)):
        traj = folder / "trajectories" / name
        traj.mkdir(parents=True)
        Image.fromarray(np.full((280, 126, 3), shade, np.uint8)).save(traj / "final.png")
        Image.fromarray(np.full((280, 126, 3), 90, np.uint8)).save(traj / "step_000.png")
        (traj / "actions.jsonl").write_text(
            '{"type": "click", "x": 540, "y": 1200}\n{"type": "finished", "content": "done"}\n'
        )
    (folder / "labels.csv").write_text(
        "episode_id,instruction,label,trajectory_dir,language,app\n"
        "ep1,Turn on dark theme.,yes,trajectories/ep1,ENG,Settings\n"
        "ep2,打开深色主题。,否,trajectories/ep2,CHN,设置\n",
        encoding="utf-8",
    )
    return folder


def test_calibrate_reads_a_labelled_folder_per_language(openai_server, tmp_path):
    folder = write_labelled(tmp_path / "labelled")
    openai_server.reply = lambda body: '{"reason": "r", "answer": "yes"}'
    result = CliRunner().invoke(
        main,
        [
            "judge",
            "calibrate",
            str(folder),
            "--config",
            "marked",
            *judge_flags(openai_server),
            "--out",
            str(tmp_path / "c.json"),
        ],
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    assert (
        "judge calibration, English (1 episodes" in result.output
        and "judge calibration, Chinese (1 episodes" in result.output
    )
    texts = sorted(openai_server.texts())
    assert any("任务:设置: 打开深色主题。" in t for t in texts) and any(
        "Task: Settings: Turn on dark theme." in t for t in texts
    )
    assert all(
        openai_server.request_images(b) == 2 for b in openai_server.requests
    )  # step 1 (step 2 has no screen) + final
    cases = load_cases(folder / "labels.csv")
    assert [(c.key, c.label, c.language) for c in cases] == [("ep1", True, "ENG"), ("ep2", False, "CHN")]
    case = cases[0].load()
    assert len(case.steps) == 2 and case.steps[1].screenshot is None and case.final_screenshot.shape == (280, 126, 3)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (
            lambda f: (f / "labels.csv").write_bytes(b"\xff\xfe\x00not utf-8"),
            "cannot read label file .*labels.csv.*UTF-8",
        ),
        (
            lambda f: (f / "labels.csv").write_text("episode_id,label\nx,1\n"),
            "lacks the column\\(s\\) instruction, trajectory_dir",
        ),
        (
            lambda f: (f / "labels.csv").write_text(
                "episode_id,instruction,label,trajectory_dir\na,b,1,trajectories/ep1\nc,d,maybe,trajectories/ep2\n"
            ),
            "labels.csv: line 3: label 'maybe' is not a yes/no label. Fix: write 1/0",
        ),
        (
            lambda f: (f / "trajectories/ep2/final.png").unlink(),
            "line 3: .*final.png does not exist. Fix: put the screen",
        ),
        (
            lambda f: (f / "trajectories/ep1/actions.jsonl").write_text('{"type": "tap"}\n'),
            "actions.jsonl line 1 is not a darwin action",
        ),
        (lambda f: (f / "labels.csv").write_text("episode_id,instruction,label,trajectory_dir\n"), "has no rows"),
    ],
)
def test_an_unreadable_label_file_gives_one_clear_error(tmp_path, breakage, message):
    folder = write_labelled(tmp_path / "labelled")
    breakage(folder)
    with pytest.raises(LabelSourceError, match=message):
        load_cases(folder)
    result = CliRunner().invoke(
        main,
        [
            "judge",
            "calibrate",
            str(folder),
            "--config",
            "marked",
            "--model",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:1/v1",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert re.search(message, " ".join(result.output.split())), result.output


def test_a_run_database_from_a_newer_darwin_gives_one_clear_error(sim_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(sim_run[0], run_dir)
    db = sqlite3.connect(run_dir / "run.db")
    db.execute("UPDATE store_meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    result = CliRunner().invoke(
        main,
        [
            "judge",
            "calibrate",
            str(run_dir),
            "--config",
            "marked",
            "--model",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:1/v1",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert (
        "run.db" in text
        and "schema version 99" in text
        and f"expects {SCHEMA_VERSION}" in text
        and "upgrade darwin" in text
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "gpt-4o-mni"], "not known to LiteLLM \\(did you mean 'gpt-4o-mini'"),
        (["--config", "markd", "--model", "openai/x", "--api-base", "http://h/v1"], "did you mean 'marked'"),
        (
            ["--model", "openai/x", "--api-base", "http://127.0.0.1:1/v1", "--api-key-env", "DARWIN_UNSET_JUDGE_KEY"],
            "environment variable DARWIN_UNSET_JUDGE_KEY is not set",
        ),
        (["--model", "openai/x", "--api-base", "http://h/v1", "--device-size", "big"], "is not a size"),
    ],
)
def test_bad_judge_settings_give_one_clear_error_before_any_request(openai_server, sim_run, args, message):
    result = CliRunner().invoke(main, ["judge", "calibrate", str(sim_run[0]), *args])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert re.search(message, " ".join(result.output.split())), result.output
    assert openai_server.requests == []


def test_a_source_that_is_no_label_source_is_named(tmp_path):
    with pytest.raises(LabelSourceError, match="does not exist"):
        load_cases(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LabelSourceError, match="is neither a run directory"):
        load_cases(tmp_path / "empty")
    result = CliRunner().invoke(
        main, ["judge", "review", str(tmp_path / "empty"), "--model", "openai/x", "--api-base", "http://h/v1"]
    )
    assert result.exit_code == 1 and "holds no run.db" in result.output


def test_a_missing_key_stops_the_command_at_once_mid_run(openai_server, sim_run, tmp_path):
    openai_server.reply = lambda body: 401
    result = CliRunner().invoke(
        main,
        [
            "judge",
            "calibrate",
            str(sim_run[0]),
            "--config",
            "final_state",
            *judge_flags(openai_server),
            "--concurrency",
            "1",
            "--out",
            str(tmp_path / "c.json"),
        ],
    )
    assert (
        result.exit_code == 1
        and "authentication failed (HTTP 401)" in result.output
        and "DARWIN_FAKE_LLM_KEY" in result.output
    )
    assert len(openai_server.requests) == 1  # nothing retried, no other episode tried
    assert KEY not in result.output


# --------------------------------------------------------------------------- metrics and store


def test_bootstrap_intervals_are_seeded_and_cover_the_estimate():
    labels = [True] * 30 + [False] * 30
    predictions = [True] * 25 + [False] * 5 + [False] * 27 + [True] * 3
    a = judge_metrics(labels, predictions, resamples=500, seed=3)
    b = judge_metrics(labels, predictions, resamples=500, seed=3)
    c = judge_metrics(labels, predictions, resamples=500, seed=4)
    assert a == b and a != c
    assert (a.tp, a.fn, a.tn, a.fp) == (25, 5, 27, 3)
    assert a.accuracy.value == pytest.approx(52 / 60) and a.f1.value == pytest.approx(50 / 58)
    for est in (a.accuracy, a.precision, a.recall, a.f1):
        assert est.low < est.value < est.high and est.high - est.low < 0.3
    nothing = judge_metrics([True, False], [None, None])
    assert (nothing.n, nothing.unverified, nothing.f1.value, nothing.f1.fmt()) == (0, 2, None, "-")
    no_positive_calls = judge_metrics([True, False], [False, False], resamples=100)
    assert no_positive_calls.precision.value is None and no_positive_calls.recall.value == 0.0


def test_a_version_2_run_database_is_migrated_to_3_and_still_reviewable(sim_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(sim_run[0], run_dir)
    db = sqlite3.connect(run_dir / "run.db")
    for table, column in (
        ("verdicts", "prompt_tokens"),
        ("verdicts", "completion_tokens"),
        ("verdicts", "cost_usd"),
        ("verdicts", "requests"),
        ("verdicts", "verifier_config"),
        ("episodes", "device_width"),
        ("episodes", "device_height"),
        ("episodes", "final_screenshot_path"),
    ):
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    db.execute("UPDATE store_meta SET value='2' WHERE key='schema_version'")
    db.commit()
    db.close()
    cases = load_cases(run_dir)  # opening migrates in place
    db = sqlite3.connect(run_dir / "run.db")
    assert db.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )  # 2 -> 3 -> ...
    db.close()
    assert len(cases) == 6 and {c.label for c in cases} == {True, False}
    loaded = [c.load() for c in cases]
    assert all(case.steps[0].device_size == (1080, 2400) for case in loaded)  # SimPhone's, assumed
    # before schema 3 the screen after the last action was not kept (these episodes ended on the
    # rule's success or the step budget, not on `finished`): the judge says unverified, asking nothing
    assert all(case.final_screenshot is None for case in loaded)
    verdict = asyncio.run(
        LLMJudge(preset="marked", llm={"model": "openai/x", "api_base": "http://127.0.0.1:1/v1"}).judge(loaded[0])
    )
    assert verdict.success is None and "no final screen" in verdict.reason
    with RunStore.for_run_dir(run_dir) as store:
        (run,) = store.runs()
        episode = store.episodes(run.run_id)[0]
        assert episode.device_size is None and episode.final_screenshot_path is None
        store.record_verdict(
            episode.episode_id, Phase.EXECUTION, "llm_judge", True, 1.0, "ok", prompt_tokens=3, cost_usd=0.5
        )
        assert store.verdicts(episode.episode_id)[-1].cost_usd == 0.5


def test_each_phase_is_judged_on_the_screen_after_its_last_action(tmp_path):
    """A lifecycle episode: the execution phase ends where the teardown starts; the teardown
    ends on the episode's final screen; a phase that ended on `finished` (which changes
    nothing) falls back to its last step's screen when no final screen was stored."""
    store = RunStore.for_run_dir(tmp_path / "run")
    run_id = store.start_run("cycle")
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=(126, 280)))
    asyncio.run(
        evaluate(
            [get_task("settings_dark_theme.cycle")],
            [SimPhoneEnv(seed=0)],
            lambda i: OracleActor(),
            1,
            workflow,
            store,
            run_id,
        )
    )
    (episode,) = store.episodes(run_id)
    steps = store.steps(episode.episode_id)
    first_teardown = next(s for s in steps if s.phase == Phase.TEARDOWN)
    execution = load_cases(tmp_path / "run", phase=Phase.EXECUTION)[0].load()
    teardown = load_cases(tmp_path / "run", phase=Phase.TEARDOWN)[0].load()
    assert np.array_equal(execution.final_screenshot, store.load_screenshot(first_teardown.screenshot_path))
    assert len(execution.steps) == sum(s.phase == Phase.EXECUTION for s in steps)
    assert np.array_equal(teardown.final_screenshot, store.load_screenshot(episode.final_screenshot_path))
    assert teardown.goal.endswith("Turn off Dark Theme.")
    store.close()

    # a judge-scored run (the oracle says `finished`); its final screen rows cleared as before schema 3
    from darwin.types import Verdict
    from darwin.verifiers.base import as_verifier

    store = RunStore.for_run_dir(tmp_path / "judged")
    run_id = store.start_run("finished")
    workflow = LifecycleWorkflow(
        verifier=as_verifier(lambda r: Verdict(success=True), kind="judge"),
        config=StepConfig(observation_size=(126, 280)),
    )
    asyncio.run(
        evaluate([get_task("amazon_0")], [SimPhoneEnv(seed=0)], lambda i: OracleActor(), 1, workflow, store, run_id)
    )
    (episode,) = store.episodes(run_id)
    last = store.steps(episode.episode_id)[-1]
    assert last.action.type == "finished"
    store.close()
    db = sqlite3.connect(tmp_path / "judged" / "run.db")
    db.execute("UPDATE episodes SET final_screenshot_path = NULL")
    db.commit()
    db.close()
    assert load_cases(tmp_path / "judged", labels="rule") == []  # no rule verdict: nothing to calibrate on
    (case,) = load_cases(tmp_path / "judged", labels="stored")
    assert (case.label, case.label_kind) == (True, "judge")
    with RunStore.for_run_dir(tmp_path / "judged") as store:
        assert np.array_equal(case.load().final_screenshot, store.load_screenshot(last.screenshot_path))


def test_a_runs_labelled_final_screens_become_learned_verifier_data(sim_run, tmp_path):
    from darwin.verifiers.learned.data import load_examples, load_image

    run_dir, truth = sim_run
    out = tmp_path / "data"
    result = CliRunner().invoke(
        main, ["verifier", "data", "--out", str(out), "--from-run", str(run_dir), "--verifier-kind", "rule"]
    )
    assert result.exit_code == 0, result.output
    examples = load_examples(out)
    assert len(examples) == len(truth) == 6
    for e in examples:
        assert truth[(e.goal, load_image(out, e).tobytes())] is e.label
        assert e.source == "run:rule"
    again = CliRunner().invoke(main, ["verifier", "data", "--out", str(out), "--from-run", str(run_dir)])
    assert again.exit_code == 0 and again.output.startswith("0 new examples")
    none = CliRunner().invoke(
        main,
        ["verifier", "data", "--out", str(tmp_path / "d2"), "--from-run", str(run_dir), "--verifier-kind", "llm_judge"],
    )
    assert none.exit_code == 1 and "no labelled final screen" in none.output and "'llm_judge'" in none.output
