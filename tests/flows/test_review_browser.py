"""The reviewer web page end to end: `thresher review serve` as a real process, driven by
Debian's headless chromium through Selenium: log in, filter the queue, approve one item and
reject another, each with a note, and find both decisions in the catalog."""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from credential_factory import secret_sample
from helpers import SMS_SOURCE, queue_for_review, write_project
from process_guard import ProcessGuard
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from data_catalog import review_queue
from data_catalog.catalog import Catalog

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="needs Debian's chromium and chromium-driver (`make test-services` installs them)",
    ),
]


def queued_project(root: Path, token: str) -> tuple[Path, dict[str, str]]:
    """A run config with reviewer ana (her token's sha256) over a work folder whose queue the
    governance stage filled from records with planted credentials; returns the config and the
    planted secrets."""
    rng = random.Random(5)
    github, stripe = secret_sample("github_token", rng), secret_sample("stripe_key", rng)
    rows = {
        "chat": [{"id": "c1", "text": f"deploy notes\n{github.text}", "user": "u1"}],
        "mail": [
            {"id": "m1", "text": "config attached", "user": "u4", "note": stripe.text},
            {"id": "m2", "text": "terms?", "user": "u5", "license": "LicenseRef-mystery"},
        ],
    }
    catalog, queued = queue_for_review(root, rows)
    assert queued == 3
    reviewers = {"ana": f"sha256:{hashlib.sha256(token.encode()).hexdigest()}"}
    config = write_project(root, [SMS_SOURCE], review={"reviewers": reviewers})
    return config, {"github_token": github.value, "stripe_key": stripe.value}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """`thresher review serve` in its own process; yields (base URL, work folder, ana's token,
    the planted secrets)."""
    token = secrets.token_urlsafe(32)
    config, planted = queued_project(tmp_path, token)
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    env = {
        k: v for k, v in os.environ.items() if k not in ("THRESHER_REVIEW_TOKEN", "PREFECT_API_URL")
    }
    command = [sys.executable, "-c", "from flows.cli import main; main()", "review", "serve"]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--config", str(config)],
        env=env, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    guard = ProcessGuard(process.pid)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=1, trust_env=False).text == "ok":
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not answer /healthz in 20 s"
                time.sleep(0.1)
        yield base, tmp_path / "work", token, planted
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        guard.release()
        log.close()


@pytest.fixture
def browser(monkeypatch):
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not download anything
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--window-size=1280,1000",
    ):  # fmt: skip
        options.add_argument(argument)
    # chromedriver leads a process group of its own, which Chromium's processes join
    service = Service(str(CHROMEDRIVER), popen_kw={"start_new_session": True})
    driver = webdriver.Chrome(options=options, service=service)
    guard = ProcessGuard(service.process.pid)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()
        guard.release()


def artifacts() -> Path:
    folder = Path(os.environ.get("THRESHER_TEST_ARTIFACTS") or REPO / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def listed(driver) -> list[int]:
    return [int(link.text) for link in driver.find_elements(By.CLASS_NAME, "item-link")]


def filter_queue(driver, **choices: str) -> None:
    for field, value in choices.items():
        Select(driver.find_element(By.ID, field)).select_by_value(value)
    driver.find_element(By.ID, "filter").click()
    WebDriverWait(driver, 5).until(
        lambda d: all(f"{field}={value}" in d.current_url for field, value in choices.items())
    )


def decide(driver, button: str, note: str) -> str:
    driver.find_element(By.ID, "note").send_keys(note)
    driver.find_element(By.ID, button).click()
    return driver.find_element(By.ID, "flash").text


def test_a_reviewer_approves_and_rejects_in_the_browser(server, browser):
    base, workdir, token, planted = server
    browser.get(f"{base}/")
    assert "/login?next=%2F" in browser.current_url
    browser.find_element(By.ID, "name").send_keys("ana")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "login").click()
    WebDriverWait(browser, 5).until(lambda d: d.current_url == f"{base}/")
    assert "signed in as ana" in browser.find_element(By.TAG_NAME, "header").text
    assert listed(browser) == [1, 2, 3]
    assert browser.find_element(By.ID, "count-pending").text == "3"

    filter_queue(browser, reason="secret_detected")
    assert listed(browser) == [1, 2]
    browser.find_element(By.LINK_TEXT, "1").click()
    text = browser.find_element(By.ID, "text").text
    assert text == "deploy notes\ngit clone https://<SECRET:github_token>@github.com/o/r"
    assert not any(value in browser.page_source for value in planted.values())
    flash = decide(browser, "approve", "a test fixture, not a live key")
    assert flash == "Approved by ana: the next run lets this record through."
    assert browser.find_element(By.ID, "status").text == "approved"
    browser.save_screenshot(str(artifacts() / "review-approved-item.png"))

    browser.find_element(By.LINK_TEXT, "Back to the queue").click()
    filter_queue(browser, status="pending", reason="", source="mail")
    assert listed(browser) == [2, 3]
    browser.find_element(By.LINK_TEXT, "2").click()
    assert "stripe.api_key = '<SECRET:stripe_key>'" in browser.find_element(By.ID, "metadata").text
    flash = decide(browser, "reject", "a live key; rotated")
    assert flash == "Rejected by ana: every later run drops this content."

    # the next pending item, then every pending item of its source and reason at once
    browser.find_element(By.ID, "next-pending").click()
    WebDriverWait(browser, 5).until(lambda d: d.current_url == f"{base}/items/3")
    third = review_queue.item(Catalog.open(workdir), 3)
    browser.save_screenshot(str(artifacts() / "review-next-item.png"))
    browser.find_element(By.LINK_TEXT, "Back to the queue").click()
    filter_queue(browser, status="pending", reason=third["reason"], source=third["source"])
    browser.find_element(By.ID, "bulk-note").send_keys("checked as a batch")
    browser.find_element(By.ID, "bulk-approve").click()
    assert browser.find_element(By.ID, "flash").text == (
        "1 item(s) decided with your note; 0 were already decided."
    )

    filter_queue(browser, status="all", reason="", source="")
    assert listed(browser) == [1, 2, 3]
    assert browser.find_element(By.ID, "count-pending").text == "0"
    browser.save_screenshot(str(artifacts() / "review-queue.png"))
    decided = {
        entry["id"]: (entry["status"], entry["reviewer"], entry["note"])
        for entry in review_queue.items(Catalog.open(workdir))
    }
    assert decided == {
        1: ("approved", "ana", "a test fixture, not a live key"),
        2: ("rejected", "ana", "a live key; rotated"),
        3: ("approved", "ana", "checked as a batch"),
    }
    assert [len(review_queue.history(Catalog.open(workdir), i)) for i in (1, 2, 3)] == [1, 1, 1]
