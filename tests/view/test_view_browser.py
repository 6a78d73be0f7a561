"""darwin view in a real browser (Debian's headless Chromium through Selenium) over a short
real training run of the embedded default: the run page's curves, the episode table filtered
to one task, an episode whose every step shows its action marker in pixels, a label given
through the form (then in the database, in the exported label file and read by `darwin judge
calibrate`), and the static export opened from disk. Over a handmade run with a value for
every chart: each chart screenshotted and read (its title clear of Plotly's toolbar, shares on
0..1, whole-number update ticks, a legend that covers no tick, costs split by unit); and the
token gone from the address bar once its cookie is set. No page may log a browser console error.

Skipped where Chromium or its driver is missing, except in CI (``CI=true``), where .ci/run
installs them and a skip would hide a broken viewer.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from darwin.cli.main import main
from darwin.store import RunStore
from darwin.verifiers.judge.calibration import load_cases
from darwin.view.app import create_app
from darwin.view.pages import COST_TITLES, CURVES, PER_TASK_TITLE, SHARE_RANGE
from darwin.view.server import ViewServer
from darwin.view.source import open_sources

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    if os.environ.get("CI") == "true":
        pytest.fail("CI needs chromium and chromium-driver (apt-get install chromium chromium-driver; .ci/run does)")
    pytest.skip("no chromium/chromedriver here (apt-get install chromium chromium-driver)", allow_module_level=True)

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver import Chrome  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MAGENTA = np.array([255, 0, 255])


@pytest.fixture(scope="module")
def browser() -> Iterator[Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def console_errors(driver: Chrome) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def magenta_share(png: bytes) -> tuple[float, tuple[float, float] | None]:
    """The share of marker-coloured pixels in a screenshot, and their centroid as a share of the width and height."""
    with Image.open(io.BytesIO(png)) as im:
        pixels = np.asarray(im.convert("RGB"), dtype=np.int16)
    near = np.abs(pixels - MAGENTA).sum(axis=2) < 90
    if not near.any():
        return 0.0, None
    ys, xs = np.nonzero(near)
    return float(near.mean()), (float(xs.mean()) / near.shape[1], float(ys.mean()) / near.shape[0])


def check_markers(driver: WebDriver) -> int:
    """Checks that every step of the open episode page shows its marker in pixels, each tap's
    centred where it tapped, and that every screen loaded; returns the taps checked."""
    steps = WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "figure.step[data-shape]"))
    assert steps
    taps = 0
    for figure in steps:
        shot = figure.find_element(By.CSS_SELECTOR, ".shot")
        driver.execute_script("arguments[0].scrollIntoView()", shot)
        share, centre = magenta_share(shot.screenshot_as_png)
        assert share > 0.001, f"step {figure.get_attribute('data-step')} shows no action marker"
        if figure.get_attribute("data-shape") == "point":
            label = figure.find_element(By.CSS_SELECTOR, "svg.marker").get_attribute("aria-label") or ""
            x, y = (int(v) for v in label.split("(")[1].rstrip(")").split(","))
            assert centre is not None
            assert abs(centre[0] - x / 1080) < 0.05 and abs(centre[1] - y / 2400) < 0.05, (label, centre)
            taps += 1
    for image in driver.find_elements(By.CSS_SELECTOR, "figure.step img"):

        def loaded(d: WebDriver, image: WebElement = image) -> bool:
            return bool(d.execute_script("return arguments[0].complete", image))

        WebDriverWait(driver, 30).until(loaded)
        assert driver.execute_script("return arguments[0].naturalWidth", image) > 0
    return taps


Box = dict[str, float]


def overlap(a: Box, b: Box) -> bool:
    """Whether two element rectangles (Selenium's ``rect``) share more than a pixel's edge."""
    return (
        min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"]) > 1
        and min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"]) > 1
    )


def check_charts(driver: WebDriver, out: Path) -> tuple[list[str], str]:
    """Reads every chart of the open run page as a person would and saves its screenshot under
    ``out``: its title drawn above Plotly's toolbar (shown, as on hover), whole-number update
    ticks, shares on 0..1, a legend that covers no tick label or axis title. Returns the charts'
    titles and the page's note of the charts it could not draw."""
    # Wait for the page's charts rather than reading at once: on a loaded machine (the full suite
    # in CI) the DOM was read empty once, before the page had arrived.
    try:
        figures = WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "figure.chart"))
    except TimeoutException:
        heading = driver.find_elements(By.TAG_NAME, "h1")
        raise AssertionError(
            f"no chart on {driver.current_url} after 60 s; the page's heading: "
            f"{heading[0].text if heading else driver.page_source[:300]!r}"
        ) from None
    WebDriverWait(driver, 30).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "figure.chart .plot .main-svg")) >= len(figures)
    )
    out.mkdir(parents=True, exist_ok=True)
    titles = []
    shares = {"success", PER_TASK_TITLE, COST_TITLES[1]}
    for i, figure in enumerate(figures):
        title = figure.get_attribute("data-title") or ""
        titles.append(title)
        driver.execute_script("arguments[0].scrollIntoView()", figure)
        plot = figure.find_element(By.CSS_SELECTOR, ".plot")
        ActionChains(driver).move_to_element(plot).perform()  # Plotly shows its toolbar on hover
        caption = figure.find_element(By.CSS_SELECTOR, "figcaption.chart-title")
        toolbar = figure.find_element(By.CSS_SELECTOR, ".modebar")
        assert caption.text == title and toolbar.rect["height"] > 0, title
        assert caption.rect["y"] + caption.rect["height"] <= toolbar.rect["y"] + 1, (title, "title under the toolbar")
        png = figure.screenshot_as_png
        (out / f"chart-{i:02d}.png").write_bytes(png)
        with Image.open(io.BytesIO(png)) as im:  # the title's letters are there, dark on the page
            band = np.asarray(im.convert("L"))[: int(caption.rect["height"]), :]
        assert (band < 100).mean() > 0.005, (title, "no title drawn")

        def labels(css: str, figure: WebElement = figure) -> list[WebElement]:
            return [e for e in figure.find_elements(By.CSS_SELECTOR, css) if e.text]

        x_ticks, y_ticks = labels(".xtick text"), labels(".ytick text")
        assert x_ticks and all(re.fullmatch(r"[−-]?\d+", t.text) for t in x_ticks), (title, [t.text for t in x_ticks])
        values = [float(t.text.replace("−", "-")) for t in y_ticks]
        if title in shares:
            assert (min(values), max(values)) == SHARE_RANGE, (title, values)
        if title == COST_TITLES[2]:
            assert all(v == int(v) for v in values), (title, values)
        legend = figure.find_element(By.CSS_SELECTOR, ".legend")
        legend_box = legend.rect
        for other in [*x_ticks, *y_ticks, *labels(".xtitle"), *labels(".ytitle")]:
            assert not overlap(legend_box, other.rect), (title, "the legend covers", other.text)
        inside = figure.rect
        assert legend_box["y"] + legend_box["height"] <= inside["y"] + inside["height"] + 1, (title, "legend cut off")
    undrawn = driver.find_elements(By.ID, "undrawn")
    return titles, undrawn[0].text if undrawn else ""


def documented_charts() -> list[str]:
    """The charts docs/view.md lists for a run page, in its order: the ``- **title**:`` items
    between the page's heading and the sentence after the list."""
    docs = (ROOT / "docs" / "view.md").read_text(encoding="utf-8")
    section = docs.split("**A run**", 1)[1].split("A chart whose values", 1)[0]
    return re.findall(r"^- \*\*(.+?)\*\*:", section, re.MULTILINE)


def wait_for(driver: WebDriver, css: str) -> WebElement:
    return WebDriverWait(driver, 30).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))


def test_a_person_reviews_and_labels_a_short_training_run(browser, small_run, tmp_path) -> None:
    driver = browser
    run_dir = tmp_path / "run"
    settings = {**small_run, "cache_dir": json.dumps(str(tmp_path / "cache"))}
    args = ["run", str(ROOT / "examples" / "spa_bench.py"), "--run-dir", str(run_dir)]
    result = CliRunner().invoke(main, args + [a for k, v in settings.items() for a in ("--set", f"{k}={v}")])
    assert result.exit_code == 0, result.output
    # Beside it, an evaluation of the oracle (the tiny model of a three-step warm start taps little).
    oracle_dir = tmp_path / "oracle"
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            "oracle",
            "--tasks",
            "amazon_0",
            "--phones",
            "1",
            "--samples",
            "0",
            "--run-dir",
            str(oracle_dir),
        ],
    )
    assert result.exit_code == 0, result.output

    with ViewServer(create_app(open_sources([str(run_dir), str(oracle_dir)])), host="127.0.0.1", port=0) as server:
        # The run page: its curves drawn by Plotly, readable; a chart it cannot draw is named.
        driver.get(server.url + "runs/0")
        wait_for(driver, "#chart-0 .main-svg")
        assert len(driver.find_elements(By.CSS_SELECTOR, ".chart .main-svg")) >= 3
        titles, undrawn = check_charts(driver, tmp_path / "charts")
        assert all(title in titles or title in undrawn for title, *_ in CURVES), (titles, undrawn)
        assert set(COST_TITLES) <= set(titles)
        assert console_errors(driver) == []

        # The episode table, filtered to one task.
        driver.find_element(By.ID, "episodes-link").click()
        Select(wait_for(driver, "select[name=task]")).select_by_value("amazon_0")
        driver.find_element(By.ID, "apply").click()
        WebDriverWait(driver, 30).until(expected_conditions.url_contains("task=amazon_0"))
        wait_for(driver, "#episodes tbody tr")
        tasks = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#episodes tbody td:nth-child(2)")]
        assert tasks and set(tasks) == {"amazon_0"}

        # An episode: each step's screen shows its action's marker.
        driver.find_element(By.CSS_SELECTOR, "#episodes tbody tr a").click()
        WebDriverWait(driver, 30).until(lambda d: "/episodes/" in d.current_url)
        assert check_markers(driver) >= 0
        episode_id = driver.find_element(By.CSS_SELECTOR, "section.episode").get_attribute("data-episode")

        # Label it through the form.
        driver.find_element(By.CSS_SELECTOR, "input[name=verdict][value=failure]").click()
        driver.find_element(By.CSS_SELECTOR, "input[name=note]").send_keys("tapped the wrong product")
        driver.find_element(By.ID, "label-submit").click()
        WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: "tapped the wrong product" in d.find_element(By.ID, "labels-a").text
        )
        assert console_errors(driver) == []

        # The oracle's episode: every tap's marker sits where it tapped.
        driver.get(server.url + "runs/1/episodes")
        driver.find_element(By.CSS_SELECTOR, "#episodes tbody tr a").click()
        WebDriverWait(driver, 30).until(lambda d: "/episodes/" in d.current_url)
        assert check_markers(driver) > 0
        assert console_errors(driver) == []

    with RunStore.for_run_dir(run_dir) as store:
        labels = store.labels(episode_id=episode_id)
        trained = json.loads((run_dir / "updates.jsonl").read_text().splitlines()[-1])["episode_ids"]
        scores = [s for e in trained for s in store.step_scores(e)]  # the run recorded the learner's numbers
    assert scores and {s.update for s in scores} == {2} and all(s.value is not None for s in scores)
    assert [(lab.success, lab.note) for lab in labels] == [(False, "tapped the wrong product")]
    labelled = tmp_path / "labelled"
    exported = CliRunner().invoke(main, ["view", str(run_dir), "--export-labels", str(labelled)])
    assert exported.exit_code == 0, exported.output
    assert [(c.episode_id, c.label, c.label_kind) for c in load_cases(labelled)] == [(episode_id, False, "human")]

    # The static export, opened from disk.
    site = tmp_path / "site"
    assert CliRunner().invoke(main, ["view", str(run_dir), "--export", str(site)]).exit_code == 0
    driver.get((site / "index.html").as_uri())
    driver.find_element(By.CSS_SELECTOR, "#runs a").click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("runs/0/index.html"))
    wait_for(driver, "#chart-0 .main-svg")
    driver.find_element(By.ID, "episodes-link").click()
    WebDriverWait(driver, 30).until(lambda d: "page-0.html" in d.current_url)
    driver.find_element(By.CSS_SELECTOR, "#episodes tbody tr a").click()
    WebDriverWait(driver, 30).until(lambda d: "page-0.html" not in d.current_url)
    figure = wait_for(driver, "figure.step[data-shape] .shot")
    driver.execute_script("arguments[0].scrollIntoView()", figure)
    assert magenta_share(figure.screenshot_as_png)[0] > 0.001
    image = driver.find_element(By.CSS_SELECTOR, "figure.step img")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return arguments[0].complete", image))
    assert driver.execute_script("return arguments[0].naturalWidth", image) > 0
    assert console_errors(driver) == []


def test_every_chart_the_docs_list_is_drawn_readably(browser, built_run, tmp_path) -> None:
    driver = browser
    with ViewServer(create_app(open_sources([str(built_run.run_dir)])), host="127.0.0.1", port=0) as server:
        driver.get(server.url + "runs/0")
        titles, undrawn = check_charts(driver, tmp_path / "charts")
        assert titles == documented_charts() and undrawn == ""
        y_titles = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "figure.chart .ytitle")]
        assert y_titles[-3:] == ["seconds", "share", "count"]  # one unit per cost chart
        assert console_errors(driver) == []


def test_the_token_leaves_the_address_bar_once_its_cookie_is_set(browser, built_run) -> None:
    driver = browser
    app = create_app(open_sources([str(built_run.run_dir)]), token="s3cret")
    with ViewServer(app, host="127.0.0.1", port=0) as server:
        driver.get(server.url + "runs/0/episodes?task=clock_1&token=s3cret")
        WebDriverWait(driver, 30).until(lambda d: "token" not in d.current_url)
        assert driver.current_url == server.url + "runs/0/episodes?task=clock_1"
        assert wait_for(driver, "#episodes tbody tr") is not None
        driver.get(server.url + "runs/0")  # the cookie carries the token now
        wait_for(driver, "#chart-0 .main-svg")
        assert console_errors(driver) == []


def test_the_console_check_sees_a_page_that_logs_an_error(browser) -> None:
    """The tests above pass only with no console error: that is worth something only if an
    error reaches the check (headless Chromium's log is read through the driver)."""
    browser.get("data:text/html,<script>console.error('a broken chart')</script>")
    # the driver hands the log on asynchronously: read until the entry arrives (a bounded wait;
    # read at once, a loaded machine gave an empty log in one full-suite run)
    errors: list[dict] = []
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        errors = console_errors(browser)
        if not errors:
            time.sleep(0.1)
    assert errors and "a broken chart" in errors[0]["message"]
    assert console_errors(browser) == []  # read once: the next page starts clean
