"""The web console in a real browser: Debian's chromium, headless, driven by selenium through
chromium-driver, clicking through every page of a real kafkapy process with data (a topic of 1,000
partitions, JSON messages with headers, a group of 100 members, an Empty group with lag).

Set KAFKAPY_CONSOLE_SCREENSHOTS=<dir> to save a PNG of each page there
(scripts/console_screenshots.py does, for docs/console/).
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conformance.broker_process import free_port
from conformance.console_workload import (
    BIG, BIG_GROUP, BIG_MEMBERS, BIG_PARTITIONS, COMMITTED_P0, ORDERS, ORDERS_APP, ORDERS_P0_RECORDS,
    console_broker, load_workload, order_value,
)

pytestmark = pytest.mark.timeout(120)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREENSHOTS = os.environ.get("KAFKAPY_CONSOLE_SCREENSHOTS")
RENDER_BUDGET_MS = 300


def _driver(download_dir: Path):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/install-test-deps.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1360,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"download.default_directory": str(download_dir),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(download_dir)})
    driver.set_page_load_timeout(20)
    return driver


@pytest.fixture(scope="module")
def setup():
    broker, url = console_broker(writes=True, extra={"kafkapy.metrics.listener": f"http://127.0.0.1:{free_port()}"})
    download_dir = Path(tempfile.mkdtemp(prefix="kafkapy-console-dl-"))
    driver = None
    try:
        workload = load_workload(broker.bootstrap)
        driver = _driver(download_dir)
        yield broker, url, workload, driver, download_dir
    finally:
        if driver is not None:
            driver.quit()
        broker.close()
        shutil.rmtree(download_dir, ignore_errors=True)


def shot(driver, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 2000)")
        image = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": 1360, "height": height, "scale": 1}})
        (Path(SCREENSHOTS) / f"{name}.png").write_bytes(base64.b64decode(image["data"]))


def by_id(driver, element_id: str):
    return driver.find_element("id", element_id)


def click_and_load(driver, target) -> None:
    """Click something (an element, or an element's id) that loads a new page, and wait until the
    new page is there."""
    old = driver.find_element("tag name", "html")
    (by_id(driver, target) if isinstance(target, str) else target).click()
    wait_for(lambda: _stale(old), what=f"the page after clicking {target}")
    wait_for(lambda: driver.execute_script("return document.readyState") == "complete", what="page load")


def _stale(element) -> bool:
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.tag_name
        return False
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        # asked while the old document is being replaced, chromedriver may answer with an inspector
        # error instead of a stale reference: the old page is gone all the same
        if "does not belong to the document" in str(exc):
            return True
        raise


def table(driver, element_id: str) -> list[list[str]]:
    """The cells' text of a table's body, in one round trip to the browser."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), "
        "tr => Array.from(tr.cells, td => td.innerText.trim()))", f"#{element_id} tbody tr")


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def render_ms(url: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as response:
        response.read()
        return float(re.search(r"dur=([\d.]+)", response.headers["Server-Timing"]).group(1))


def test_overview(setup):
    _, url, _, driver, _ = setup
    driver.get(url + "/")
    assert by_id(driver, "topic-count").text == "3"  # orders, big, __consumer_offsets
    assert int(by_id(driver, "partition-count").text) >= BIG_PARTITIONS + 3
    assert table(driver, "brokers")[0][0] == "1"
    assert len(driver.find_elements("css selector", "svg.chart")) == 4
    shot(driver, "overview")


def test_topics_search_and_detail(setup):
    _, url, _, driver, _ = setup
    driver.get(url + "/topics")
    box = by_id(driver, "topic-search")
    box.send_keys("bi")
    click_and_load(driver, "topic-search-go")
    rows = table(driver, "topics")
    assert [r[0] for r in rows] == [BIG] and rows[0][1] == str(BIG_PARTITIONS)
    driver.get(url + "/topics")
    shot(driver, "topics")
    click_and_load(driver, driver.find_element("link text", ORDERS))
    partitions = table(driver, "partitions")
    assert [r[0] for r in partitions] == ["0", "1", "2"]
    assert partitions[0][5] == str(ORDERS_P0_RECORDS)  # log end
    configs = {r[0]: r for r in table(driver, "configs")}
    assert configs["retention.ms"][1:] == ["604800000", "DYNAMIC_TOPIC_CONFIG"]
    assert configs["cleanup.policy"][2] == "DEFAULT_CONFIG"
    assert [r[0] for r in table(driver, "topic-groups")] == [ORDERS_APP]
    shot(driver, "topic")


def test_big_topic_and_group_render_fast(setup):
    _, url, _, driver, _ = setup
    driver.get(url + f"/topics/{BIG}")
    assert len(table(driver, "partitions")) == 500  # first page of 1,000
    driver.get(url + f"/groups/{BIG_GROUP}")
    assert by_id(driver, "member-count").text == str(BIG_MEMBERS)
    assert len(table(driver, "members")) == BIG_MEMBERS
    shot(driver, "group-100-members")
    for path in (f"/topics/{BIG}", f"/topics/{BIG}?page=2", f"/groups/{BIG_GROUP}", "/topics", "/groups", "/"):
        best = min(render_ms(url + path) for _ in range(3))
        assert best < RENDER_BUDGET_MS, f"{path} took {best:.0f} ms on the server"


def test_message_browser(setup):
    _, url, workload, driver, download_dir = setup
    driver.get(url + f"/topics/{ORDERS}")
    click_and_load(driver, "browse-messages")
    rows = table(driver, "messages")
    assert rows[0][0] == "0" and json.loads(rows[0][3]) == json.loads(order_value(0))
    assert "trace-id: trace-0000" in rows[0][4]
    # start at an offset, JSON decoding
    offset = by_id(driver, "offset")
    offset.clear()
    offset.send_keys("5")
    click_and_load(driver, "browse-go")
    rows = table(driver, "messages")
    assert rows[0][0] == "5"
    assert driver.find_element("css selector", "#messages tbody tr td:nth-child(4) pre").get_attribute("class") == "json"
    shot(driver, "messages")
    # start at a time: the first record at or after it (offset 10, an hour later than 0-9)
    by_id(driver, "offset").clear()
    when = datetime.fromtimestamp((workload.old_ts + 1000) / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    by_id(driver, "timestamp").send_keys(when)
    click_and_load(driver, "browse-go")
    assert table(driver, "messages")[0][0] == "10"
    # hex decoding
    driver.get(url + f"/topics/{ORDERS}/messages?partition=1&format=hex")
    cell = driver.find_element("css selector", "#messages tbody tr td:nth-child(4) pre")
    assert cell.text == "00 01 62 69 6e 61 72 79 ff" and cell.get_attribute("class") == "hex"
    # a search hit in a header
    driver.get(url + f"/topics/{ORDERS}/messages")
    by_id(driver, "search").send_keys("trace-0017")
    click_and_load(driver, "browse-go")
    rows = table(driver, "messages")
    assert [r[0] for r in rows] == ["17"]
    shot(driver, "messages-search")
    # export the page as a JSON download
    by_id(driver, "export").click()
    records = wait_for(lambda: _downloaded_json(download_dir), what="the export download")
    assert [r["offset"] for r in records] == [17] and records[0]["key"] == "order-17"
    assert records[0]["headers"][0] == {"key": "trace-id", "value": "trace-0017"}


def test_live_tail(setup):
    broker, url, _, driver, _ = setup
    from kafka import KafkaProducer

    driver.get(url + f"/topics/{ORDERS}/messages?partition=2&from=latest")
    assert table(driver, "messages")[0][0].startswith("No messages")
    by_id(driver, "tail").click()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        for i in range(3):
            producer.send(ORDERS, key=b"tail", value=f'{{"tail": {i}}}'.encode(), partition=2)
        producer.flush(10)
    finally:
        producer.close()
    rows = wait_for(lambda: (r := table(driver, "messages")) and len(r) == 3 and r, what="tailed rows")
    assert [r[0] for r in rows] == ["5", "6", "7"]
    by_id(driver, "tail").click()


def test_groups_lag_and_offset_reset(setup):
    broker, url, _, driver, _ = setup
    driver.get(url + "/groups")
    groups = {r[0]: r for r in table(driver, "groups")}
    # columns: group, type, state, protocol, members, topics, lag
    assert groups[BIG_GROUP][1:3] == ["classic", "Stable"] and groups[BIG_GROUP][4] == str(BIG_MEMBERS)
    assert groups[ORDERS_APP][2] == "Empty"
    shot(driver, "groups")
    click_and_load(driver, driver.find_element("link text", ORDERS_APP))
    rows = {(r[0], r[1]): r for r in table(driver, "group-partitions")}
    # LAG = LOG-END-OFFSET - CURRENT-OFFSET, with the log end as a client sees it
    ends = _end_offsets(broker.bootstrap)
    assert rows[(ORDERS, "0")][2:5] == [str(COMMITTED_P0), str(ends[0]), str(ends[0] - COMMITTED_P0)]
    assert rows[(ORDERS, "1")][2:5] == ["2", str(ends[1]), str(ends[1] - 2)]
    assert by_id(driver, "group-lag").text == str(ends[0] - COMMITTED_P0 + ends[1] - 2)
    # dry run, then execute
    from selenium.webdriver.support.ui import Select

    Select(by_id(driver, "reset-topic")).select_by_value(ORDERS)
    Select(by_id(driver, "reset-strategy")).select_by_value("earliest")
    click_and_load(driver, "reset-preview")
    preview = table(driver, "reset-preview-table")
    assert [r[1:] for r in preview] == [["0", str(COMMITTED_P0), "0"], ["1", "2", "0"], ["2", "-", "0"]]
    assert _committed(broker.bootstrap)[0] == COMMITTED_P0  # a dry run changes nothing
    shot(driver, "group-reset-preview")
    click_and_load(driver, "reset-execute")
    assert "3 partitions" in by_id(driver, "reset-done").text
    assert _committed(broker.bootstrap) == {0: 0, 1: 0, 2: 0}
    shot(driver, "group")


def test_requests_page(setup):
    _, url, _, driver, _ = setup
    driver.get(url + "/requests")
    apis = {r[0]: r for r in table(driver, "apis")}
    assert apis["JoinGroup"][1] == str(BIG_MEMBERS) and apis["SyncGroup"][1] == str(BIG_MEMBERS)
    errors = table(driver, "recent-errors")
    assert ["Metadata", "typo-client", "UNKNOWN_TOPIC_OR_PARTITION"] in [r[1:] for r in errors]
    assert len(driver.find_elements("css selector", "svg.chart")) == 2
    shot(driver, "requests")


def _downloaded_json(directory: Path):
    """The downloaded JSON file's content, once it is complete."""
    for path in directory.glob("*.json"):
        try:
            return json.loads(path.read_text())
        except ValueError:  # still being written
            return None
    return None


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(ORDERS, p) for p in range(3)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def _committed(bootstrap: str) -> dict[int, int | None]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=ORDERS_APP, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(ORDERS, p)) for p in range(3)}
    finally:
        consumer.close()
