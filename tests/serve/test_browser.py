"""End to end in a real browser: start ``transformer-lab serve``, translate on the page,
see the n-best list and the attention heat-map, draw the masks; and serve a toy task
without a pane of its own (``conftest.py``'s "echo", in this process, since it is
registered here) and use the form the page builds from its declared endpoint.

Chromium and chromedriver come from Debian; ``make browser`` installs them (``.ci/run``
calls it). Without them the test is skipped and says why: a test installs nothing.
Screenshots go to ``tests/artifacts/`` (ignored by git) and nowhere else. With
``TRANSFORMER_LAB_SERVE_CHECKPOINT=runs/NAME`` the page serves that checkpoint instead of
the tiny one trained for the tests; the README's picture is that screenshot, copied by
hand: ``cp tests/artifacts/serve-translation.png docs/figures/serve.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import transformer_lab
from transformer_lab.serve import create_app, load_served_models
from transformer_lab.serve.requests import MAX_TEXT_CHARACTERS
from transformer_lab.tasks.translation.predict import MAX_BEAM_SIZE
from transformer_lab.training import CONFIG_FILE, resolve_checkpoint

pytest.importorskip("selenium", reason="selenium is a dev dependency: pip install -e '.[dev]'")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[2]
ARTIFACTS = REPOSITORY / "tests" / "artifacts"
CHECKPOINT_VARIABLE = "TRANSFORMER_LAB_SERVE_CHECKPOINT"
NAME = "translation"
GREEDY_NAME = "translation-greedy"
SENTENCE = "Ein Hund spielt mit einem roten Ball im Park."
# Generous: on a loaded 2-core machine starting Python, torch and uvicorn can take minutes.
SERVER_START_SECONDS = 300
PAGE_WAIT_SECONDS = 120
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,1100",
]
# Matplotlib's viridis at the five stops app.js interpolates between.
VIRIDIS = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]


def find_chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def chromium() -> tuple[str, str]:
    found = find_chromium()
    if found is None:
        pytest.skip("Chromium or chromedriver is missing: run `make browser` (Debian's chromium and chromium-driver)")
    return found


@pytest.fixture(scope="module")
def server_url(
    request: pytest.FixtureRequest, find_unused_port: Callable[[], int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``transformer-lab serve`` in a subprocess on a free loopback port."""
    checkpoint = os.environ.get(CHECKPOINT_VARIABLE) or str(request.getfixturevalue("translation_run"))
    # The same weights under a greedy search: the page must preselect each checkpoint's own.
    greedy = tmp_path_factory.mktemp("greedy") / "checkpoint"
    shutil.copytree(resolve_checkpoint(checkpoint), greedy)
    config = json.loads((greedy / CONFIG_FILE).read_text(encoding="utf-8"))
    config["decode"]["strategy"] = "greedy"
    (greedy / CONFIG_FILE).write_text(json.dumps(config), encoding="utf-8")
    port = find_unused_port()
    source_root = str(Path(transformer_lab.__file__).resolve().parents[1])  # this checkout's src/
    environment = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source_root, os.environ.get("PYTHONPATH")]))
    )
    log_path = tmp_path_factory.mktemp("server") / "serve.log"
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "transformer_lab",
                "serve",
                "--checkpoint",
                f"{NAME}={checkpoint}",
                "--checkpoint",
                f"{GREEDY_NAME}={greedy}",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            assert process.poll() is None, f"the server exited early:\n{log_path.read_text(encoding='utf-8')}"
            assert (
                time.monotonic() < deadline
            ), f"the server did not answer within {SERVER_START_SECONDS} s:\n{log_path.read_text(encoding='utf-8')}"
            try:
                with urllib.request.urlopen(f"{url}/api/models", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def browser(chromium: tuple[str, str], tmp_path: Path) -> Iterator[WebDriver]:
    browser_path, driver_path = chromium
    options = Options()
    options.binary_location = browser_path
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    message = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(message, timeout=60) as response:
        return json.loads(response.read())


def viridis(value: float) -> tuple[int, int, int]:
    scaled = min(1.0, max(0.0, value)) * (len(VIRIDIS) - 1)
    low = min(int(scaled), len(VIRIDIS) - 2)
    fraction = scaled - low
    return tuple(
        round(VIRIDIS[low][channel] + fraction * (VIRIDIS[low + 1][channel] - VIRIDIS[low][channel]))
        for channel in range(3)
    )  # type: ignore[return-value]


# The colour at the centre of every heat-map cell, read back from the canvas.
CELL_COLOURS = """
const canvas = document.getElementById('attention-canvas'), map = canvas.heatmap;
const ratio = canvas.width / parseFloat(canvas.style.width);
const context = canvas.getContext('2d');
return map.weights.map((row, r) => row.map((_, c) => Array.from(context.getImageData(
  Math.floor((map.left + (c + 0.5) * map.cell) * ratio),
  Math.floor((map.top + (r + 0.5) * map.cell) * ratio), 1, 1).data.slice(0, 3))));
"""


def _type_a_sentence(browser: WebDriver, server_url: str) -> tuple[WebDriverWait, WebElement]:
    """The page loaded and SENTENCE typed into the translation pane; its wait and its text box."""
    wait = WebDriverWait(browser, PAGE_WAIT_SECONDS)
    browser.get(server_url)
    wait.until(lambda driver: driver.find_element(By.ID, "pane-translation").is_displayed())
    box = browser.find_element(By.ID, "translation-input")
    box.clear()
    box.send_keys(SENTENCE)
    return wait, box


def test_translate_on_the_page_shows_the_nbest_and_the_heatmap(browser: WebDriver, server_url: str) -> None:
    wait, box = _type_a_sentence(browser, server_url)
    beam = browser.find_element(By.ID, "beam-size")
    # The hand-written pane's inputs take the bounds that the translation task's request declares.
    assert (beam.get_attribute("min"), beam.get_attribute("max")) == ("1", str(MAX_BEAM_SIZE))
    assert box.get_attribute("maxlength") == str(MAX_TEXT_CHARACTERS)
    beam_size = int(beam.get_attribute("value"))
    browser.find_element(By.ID, "translate-button").click()
    wait.until(lambda driver: driver.find_element(By.ID, "attention-canvas").get_attribute("data-drawn") == "true")

    expected = post(
        f"{server_url}/api/translate", {"model": NAME, "text": SENTENCE, "strategy": "beam", "beam_size": beam_size}
    )
    shown = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#translation-nbest td.translation")]
    assert shown == [candidate["text"] or "(empty)" for candidate in expected["candidates"]]
    assert shown[0].strip(), "the best translation is on the page"

    # The heat-map: last layer, mean of heads, one cell per (output token, source token).
    attention = expected["attention"]
    canvas = browser.find_element(By.ID, "attention-canvas")
    assert int(canvas.get_attribute("data-rows")) == len(attention["target_tokens"])
    assert int(canvas.get_attribute("data-columns")) == len(attention["source_tokens"])
    heads = attention["weights"][-1]
    mean = [
        [sum(head[row][column] for head in heads) / len(heads) for column in range(len(heads[0][0]))]
        for row in range(len(heads[0]))
    ]
    colours = browser.execute_script(CELL_COLOURS)
    for row, (weights, drawn) in enumerate(zip(mean, colours)):
        for column, (weight, colour) in enumerate(zip(weights, drawn)):
            assert all(abs(a - b) <= 2 for a, b in zip(colour, viridis(weight))), (row, column, weight, colour)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "serve-translation.png"))


def test_greedy_search_on_the_page_shows_the_one_greedy_translation(browser: WebDriver, server_url: str) -> None:
    # The page sent its beam size with greedy search too, which the server refuses (it would ignore it).
    wait, _ = _type_a_sentence(browser, server_url)
    browser.find_element(By.CSS_SELECTOR, "input[name=strategy][value=greedy]").click()
    browser.find_element(By.ID, "translate-button").click()
    status = browser.find_element(By.ID, "translation-status")
    wait.until(lambda driver: "ms on the server" in status.text or "error" in (status.get_attribute("class") or ""))
    assert "ms on the server" in status.text, status.text

    expected = post(f"{server_url}/api/translate", {"model": NAME, "text": SENTENCE, "strategy": "greedy"})
    shown = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#translation-nbest td.translation")]
    assert shown == [candidate["text"] or "(empty)" for candidate in expected["candidates"]]
    assert len(shown) == 1


def test_the_page_preselects_each_checkpoints_own_search_and_answers_as_translate_does(
    browser: WebDriver, server_url: str
) -> None:
    # Was: beam search whatever the checkpoint, so a greedy checkpoint's page answered otherwise than `translate`.
    wait, _ = _type_a_sentence(browser, server_url)
    checked = "input[name=strategy]:checked"
    assert browser.find_element(By.CSS_SELECTOR, checked).get_attribute("value") == "beam"
    Select(browser.find_element(By.ID, "model-select")).select_by_value(GREEDY_NAME)
    assert browser.find_element(By.CSS_SELECTOR, checked).get_attribute("value") == "greedy"
    browser.find_element(By.ID, "translate-button").click()
    status = browser.find_element(By.ID, "translation-status")
    wait.until(lambda driver: "ms on the server" in status.text or "error" in (status.get_attribute("class") or ""))
    expected = post(f"{server_url}/api/translate", {"model": GREEDY_NAME, "text": SENTENCE, "strategy": "greedy"})
    shown = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#translation-nbest td.translation")]
    assert shown == [candidate["text"] or "(empty)" for candidate in expected["candidates"]]
    Select(browser.find_element(By.ID, "model-select")).select_by_value(NAME)
    assert browser.find_element(By.CSS_SELECTOR, checked).get_attribute("value") == "beam"


def test_masks_tab_draws_the_four_masks_of_each_sentence(browser: WebDriver, server_url: str) -> None:
    wait = WebDriverWait(browser, PAGE_WAIT_SECONDS)
    browser.get(server_url)
    wait.until(lambda driver: driver.find_element(By.ID, "pane-translation").is_displayed())
    browser.find_element(By.ID, "tab-masks").click()
    box = browser.find_element(By.ID, "masks-input")
    box.clear()
    box.send_keys("eins zwei drei vier\nfünf sechs")
    browser.find_element(By.ID, "masks-subwords").click()  # whitespace words: lengths 4 and 2
    browser.find_element(By.ID, "masks-button").click()
    wait.until(lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "#masks-output svg")) == 8)
    # Sentence 2 ("fünf sechs", padded to 4): causal hides the 6 cells above the diagonal, key
    # padding the 2 padded columns (8), the decoder both (8 + the one causal cell left of them).
    panels = browser.find_elements(By.CSS_SELECTOR, "#masks-output .mask-sentence")[1].find_elements(By.TAG_NAME, "svg")
    hidden = {
        panel.get_attribute("data-name"): len(panel.find_elements(By.CSS_SELECTOR, "rect.hidden")) for panel in panels
    }
    assert hidden == {"causal": 6, "key_padding": 8, "decoder": 9, "rows_and_columns": 12}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "serve-masks.png"))


@pytest.fixture(scope="module")
def echo_url(chromium: tuple[str, str], echo_checkpoint: Path, find_unused_port: Callable[[], int]) -> Iterator[str]:
    """The toy task served by uvicorn in a thread of this process, where the task is registered."""
    uvicorn = pytest.importorskip("uvicorn", reason="uvicorn is the [serve] extra: pip install -e '.[serve]'")
    app = create_app(load_served_models([f"echo={echo_checkpoint}"]))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=find_unused_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while not server.started:
            assert thread.is_alive(), "the echo server stopped before it started"
            assert time.monotonic() < deadline, f"the echo server did not start within {SERVER_START_SECONDS} s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_task_without_a_pane_gets_a_form_per_endpoint_that_shows_the_answer(
    browser: WebDriver, echo_url: str
) -> None:
    wait = WebDriverWait(browser, PAGE_WAIT_SECONDS)
    browser.get(echo_url)
    wait.until(lambda driver: driver.find_element(By.ID, "pane-generic").is_displayed())
    assert not any(
        browser.find_element(By.ID, f"pane-{task}").is_displayed()
        for task in ("translation", "classification", "couplet")
    )
    assert browser.find_element(By.ID, "generic-title").text == "echo"
    (form,) = browser.find_elements(By.CSS_SELECTOR, "#generic-forms form.endpoint")
    assert form.get_attribute("data-path") == "/api/echo"

    def field(name: str) -> Any:
        return form.find_element(By.NAME, name)

    # Each input as its field declares: type, default and bounds.
    assert field("text").tag_name == "textarea" and field("text").get_attribute("maxlength") == "1000"
    times = field("times")
    assert (times.get_attribute("type"), times.get_attribute("min"), times.get_attribute("max")) == ("number", "1", "3")
    assert times.get_attribute("value") == "2"
    separator = Select(field("separator"))
    assert [json.loads(option.get_attribute("value")) for option in separator.options] == [" ", " | "]
    assert json.loads(separator.first_selected_option.get_attribute("value")) == " "
    assert field("shout").get_attribute("type") == "checkbox" and not field("shout").is_selected()
    assert (field("scale").get_attribute("min"), field("scale").get_attribute("max")) == ("0", "10")
    assert "1 to 4 items" in form.text and "copies of the text" in form.text

    field("text").send_keys("hello")
    field("numbers").send_keys("[1, 2, 3]")
    times.clear()
    times.send_keys("3")
    separator.select_by_index(1)
    field("shout").click()
    field("scale").clear()
    field("scale").send_keys("2.5")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    answer = form.find_element(By.CSS_SELECTOR, "pre.answer-json")
    wait.until(lambda driver: answer.is_displayed())
    shown = json.loads(answer.text)
    assert shown["echo"] == "HELLO | HELLO | HELLO" and shown["total"] == 15.0 and shown["model"] == "echo"
    status = form.find_element(By.CSS_SELECTOR, ".status")
    assert status.text.endswith("ms on the server")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "serve-generic.png"))

    # What the page cannot read, and what the server refuses, is said on the status line.
    for numbers, message in (("[1, 2", "numbers: expected JSON"), ("[1, 2, 3, 4, 5]", "numbers: ")):
        field("numbers").clear()
        field("numbers").send_keys(numbers)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(lambda driver: "error" in (status.get_attribute("class") or "").split())
        assert status.text.startswith(message), status.text
