"""Screenshots of each `darwin view` page for docs/view.md, taken with headless Chromium.

    python scripts/view_screenshots.py RUN_DIR docs/images

RUN_DIR is any run directory (docs/view.md's come from a seed-3 run of the default). Needs
Debian's chromium and chromium-driver and selenium (the dev extra).
"""

from __future__ import annotations

import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from darwin.store import RunStore
from darwin.store_rows import EpisodeFilter
from darwin.view.app import create_app
from darwin.view.server import ViewServer
from darwin.view.source import open_sources


def main(run_dir: str, out: str) -> None:
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    with RunStore.for_run_dir(run_dir) as store:
        run = store.runs()[0]
        success = store.episode_page(run.run_id, EpisodeFilter(task_id="amazon_0", outcome="success"), limit=1).rows[0]
        failure = store.episode_page(run.run_id, EpisodeFilter(task_id="amazon_0", outcome="failure"), limit=1).rows[0]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1100"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService("/usr/bin/chromedriver"))
    pages = {
        "view-run.png": ("runs/0", "#chart-0 .main-svg"),
        "view-episodes.png": ("runs/0/episodes?task=amazon_0", "#episodes"),
        "view-episode.png": (f"runs/0/episodes/{success.episode_id}", "figure.step"),
        "view-compare.png": (f"runs/0/compare?a={success.episode_id}&b={failure.episode_id}", "figure.step"),
    }
    try:
        with ViewServer(create_app(open_sources([run_dir])), host="127.0.0.1", port=0) as server:
            for name, (path, ready) in pages.items():
                driver.get(server.url + path)
                WebDriverWait(driver, 30).until(
                    expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ready))
                )
                driver.execute_script("return document.fonts.ready")
                for image in driver.find_elements(By.CSS_SELECTOR, "img"):
                    driver.execute_script("arguments[0].loading = 'eager'", image)
                WebDriverWait(driver, 30).until(
                    lambda d: d.execute_script("return [...document.images].every(i => i.complete)")
                )
                driver.save_screenshot(str(target / name))
                print(target / name)
    finally:
        driver.quit()


if __name__ == "__main__":
    main(*sys.argv[1:3])
