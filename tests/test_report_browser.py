"""report.html opened as its readers open it: in a real browser (Debian's Chromium, headless, driven by
Playwright), on a report of real recorded runs: grposcope's quickstart run (tests/fixtures/runs/quickstart), a
stock TRL run and a stock verl rollout dump (experiments/results/stock_report), and the quickstart run again
under a name full of HTML and math characters.

What is checked, at a laptop's width and at a phone's:
- no console error and no page error;
- no request leaves the page: every request but the page's own is aborted and recorded (the network is also
  switched off), and none may be made;
- every plot decodes to an image of its PNG's size, and its pixels are the PNG's (block means against the
  file decoded by Pillow), with alt text naming the metrics it shows;
- the summary table holds report.md's figures, cell for cell;
- the page fits the width (no horizontal scrolling of the whole page), the contents link to every section,
  plot and run, every alarm is listed in the alarms section and linked from its run's row, and the odd run
  name is shown as written, not parsed as HTML.
Screenshots go to test-artifacts/report_browser (or $GRPOSCOPE_TEST_ARTIFACTS/report_browser). The same checks
run on a copy of the page with one plot's bytes corrupted, and on one that asks for an outside image: both
must fail them.

scripts/test.sh installs Debian's chromium when it is missing; where it cannot, these tests are skipped with
the reason (pytest -ra prints it). $GRPOSCOPE_CHROMIUM names another Chromium binary.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grposcope.cli import app

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / "tests" / "fixtures" / "runs" / "quickstart",
        ROOT / "experiments" / "results" / "stock_report" / "trl_out",
        ROOT / "experiments" / "results" / "stock_report" / "verl_rollouts"]
# HTML that would run if parsed, an ampersand, a "less than", TeX and quotes (no "/": it is a folder's name)
ODD_NAME = "<img src=x onerror=alert(1)> & a<b $\\alpha_1$ ≥ 2 'q\""
CHROMIUM = os.environ.get("GRPOSCOPE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("GRPOSCOPE_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "report_browser"
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
# the metric names each plot's alt text must carry (docs/metrics.md's names), by the plot's file stem
PLOT_METRICS = {
    "acr": ("collapse/acr", "collapse/acr_post"),
    "collapse_split": ("collapse/acr_all_correct", "collapse/acr_all_wrong"),
    "entropy": ("entropy/mean",),
    "kl": ("kl/mean",),
    "reward": ("reward/mean",),
    "accuracy": ("eval/accuracy",),
    "sampler_cost": ("sampler/samples_generated", "sampler/tokens_generated"),
    "regression": ("eval/accuracy", "collapse/acr_100"),
}
BLOCKS = 8  # a plot's pixels are compared as BLOCKS x BLOCKS block means of R+G+B

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (scripts/setup.sh does)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine: scripts/test.sh installs "
                                "Debian's chromium package as root; it could not here, so the browser test is skipped")

FACTS_JS = """async (blocks) => {
  const images = [];
  for (const img of document.images) {
    let decoded = true, error = "";
    try { await img.decode(); } catch (e) { decoded = false; error = String(e); }
    const w = img.naturalWidth, h = img.naturalHeight;
    let means = null;
    if (decoded && w && h) {
      const canvas = document.createElement("canvas");
      canvas.width = w; canvas.height = h;
      const ctx = canvas.getContext("2d");
      ctx.drawImage(img, 0, 0);
      const d = ctx.getImageData(0, 0, w, h).data;
      means = [];
      for (let by = 0; by < blocks; by++) for (let bx = 0; bx < blocks; bx++) {
        const x0 = Math.floor(bx * w / blocks), x1 = Math.floor((bx + 1) * w / blocks);
        const y0 = Math.floor(by * h / blocks), y1 = Math.floor((by + 1) * h / blocks);
        let sum = 0, n = 0;
        for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) {
          const i = (y * w + x) * 4; sum += d[i] + d[i + 1] + d[i + 2]; n += 1;
        }
        means.push(sum / n);
      }
    }
    const figure = img.closest("figure");
    images.push({id: figure ? figure.id : "", alt: img.alt, decoded, error, width: w, height: h, means,
                 shown: img.getBoundingClientRect().width});
  }
  const cells = (row) => [...row.cells].map((c) => c.innerText.trim());
  const summary = document.querySelector("#summary table");
  const links = [...document.querySelectorAll("#contents a")].map((a) => ({href: a.getAttribute("href"),
    text: a.innerText.trim(), target: !!document.getElementById(a.getAttribute("href").slice(1))}));
  const alarmLinks = [...document.querySelectorAll("#summary a[href^='#alarm-']")].map((a) => {
    const row = document.getElementById(a.getAttribute("href").slice(1));
    return {text: a.innerText.trim(), row: row ? cells(row) : null,
            inAlarms: !!(row && row.closest("#alarms"))};
  });
  return {
    images, links, alarmLinks,
    header: summary ? cells(summary.tHead.rows[0]) : [],
    rows: summary ? [...summary.tBodies[0].rows].map(cells) : [],
    alarmRows: [...document.querySelectorAll("#alarms tbody tr")].map(cells),
    scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    fontSize: parseFloat(getComputedStyle(document.body).fontSize),
    strayImages: document.querySelectorAll("img:not([src^='data:'])").length,
  };
}"""


def open_page(html: Path, viewport: dict, mobile: bool, screenshots: dict[str, bool] | None = None) -> dict:
    """Loads `html` in headless Chromium with the network off and every outside request aborted; returns what
    the page showed (FACTS_JS), the console errors and the requests made. `screenshots`: file name -> full page."""
    console, requests = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            context = browser.new_context(viewport=viewport, is_mobile=mobile, has_touch=mobile,
                                          device_scale_factor=2 if mobile else 1, offline=True)
            page = context.new_page()
            page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: console.append(f"page error: {e}"))
            url = html.as_uri()

            def route(r):
                if r.request.url == url:
                    r.continue_()
                else:
                    requests.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto(url, wait_until="load")
            facts = page.evaluate(FACTS_JS, BLOCKS)
            for name, full in (screenshots or {}).items():
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / name), full_page=full)
        finally:
            browser.close()
    return facts | {"console": console, "requests": requests}


def png_blocks(path: Path) -> tuple[int, int, list[float]]:
    """(width, height, block means of R+G+B) of a PNG file, decoded by Pillow: what the browser must show."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        rgb = np.asarray(image.convert("RGBA"), dtype=np.float64)
    h, w = rgb.shape[:2]
    alpha = rgb[..., 3:] / 255.0  # the canvas is transparent: what it holds of a pixel is its colour, unblended
    total = (rgb[..., :3] * (alpha > 0)).sum(axis=2)
    means = []
    for by in range(BLOCKS):
        for bx in range(BLOCKS):
            block = total[by * h // BLOCKS:(by + 1) * h // BLOCKS, bx * w // BLOCKS:(bx + 1) * w // BLOCKS]
            means.append(float(block.mean()))
    return w, h, means


def page_problems(facts: dict, folder: Path, viewport: dict) -> list[str]:
    """Everything wrong with the page `facts` describes, against the report's own files in `folder`."""
    problems = [f"console: {text}" for text in facts["console"]]
    problems += [f"a request left the page: {url}" for url in facts["requests"]]
    if not facts["images"]:
        problems.append("the page shows no plot")
    for image in facts["images"]:
        stem = image["id"].removeprefix("plot-")
        path = folder / f"{stem}.png"
        if not image["decoded"] or not image["width"]:
            problems.append(f"{stem}: the image did not decode ({image['error'] or 'empty'})")
            continue
        if not path.is_file():
            problems.append(f"{image['id']!r}: no PNG of that name in the report folder")
            continue
        width, height, means = png_blocks(path)
        if (image["width"], image["height"]) != (width, height):
            problems.append(f"{stem}: decoded {image['width']}x{image['height']}, the PNG is {width}x{height}")
        elif max(abs(a - b) for a, b in zip(image["means"], means)) > 3.0:
            problems.append(f"{stem}: the pixels shown differ from the PNG's (largest block difference "
                            f"{max(abs(a - b) for a, b in zip(image['means'], means)):.1f} of 765)")
        if max(image["means"] or [0]) - min(image["means"] or [0]) < 1.0:
            problems.append(f"{stem}: the image is blank")
        if not 0 < image["shown"] <= viewport["width"]:
            problems.append(f"{stem}: shown {image['shown']:.0f} px wide in a {viewport['width']} px window")
        missing = [m for m in PLOT_METRICS.get(stem, ("?",)) if m not in image["alt"]]
        if missing:
            problems.append(f"{stem}: its alt text {image['alt']!r} does not name {', '.join(missing)}")
    if facts["scrollWidth"] > facts["clientWidth"] or facts["clientWidth"] != viewport["width"]:
        problems.append(f"the page is {facts['scrollWidth']} px wide, laid out at {facts['clientWidth']} px, in a "
                        f"{viewport['width']} px window")
    problems += [f"contents link {link['href']} ({link['text']!r}) leads nowhere" for link in facts["links"]
                 if not link["target"]]
    return problems


def markdown_rows(path: Path) -> list[list[str]]:
    """The cells of report.md's summary table (the first table), header first."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| run |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if not re.fullmatch(r"\|(-+\|)+", line):
            rows.append([cell.strip() for cell in line.strip()[1:-1].split(" | ")])
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """`grposcope report` of the real runs, and of the quickstart run under ODD_NAME."""
    base = tmp_path_factory.mktemp("browser")
    odd = base / ODD_NAME
    shutil.copytree(RUNS[0], odd)
    out = base / "report"
    result = CliRunner().invoke(app, ["report", *map(str, RUNS), str(odd), "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("width", ["laptop", "phone"])
def test_the_report_page_in_a_real_browser(report, width):
    viewport, mobile = (LAPTOP, False) if width == "laptop" else (PHONE, True)
    shots = {f"report_{width}.png": False, f"report_{width}_full.png": True}
    facts = open_page(report / "report.html", viewport, mobile, shots)
    assert page_problems(facts, report, viewport) == []
    assert len(facts["images"]) == 6 and facts["fontSize"] >= 14  # acr, split, entropy, reward, accuracy, cost
    # the summary table is report.md's, figure for figure (report.md writes a "|" in a name as "/")
    md = markdown_rows(report / "report.md")
    assert facts["header"] == md[0]
    assert [row[1:] for row in facts["rows"]] == [row[1:] for row in md[1:]]
    assert [row[0] for row in facts["rows"]] == ["quickstart", "trl_out", "verl_rollouts", ODD_NAME]
    # the odd name is shown as written everywhere, and made no element of its own
    assert facts["strayImages"] == 0
    run_links = [link["text"].removesuffix(" (alarm)") for link in facts["links"] if link["href"].startswith("#run-")]
    assert run_links == ["quickstart", "trl_out", "verl_rollouts", ODD_NAME]
    # contents: every section and every plot
    hrefs = {link["href"] for link in facts["links"]}
    assert {"#summary", "#alarms", "#plots", "#notes"} <= hrefs
    assert {f"#{image['id']}" for image in facts["images"]} <= hrefs
    # the stock TRL run's stagnation alarm: linked from its row to its line in the alarms section
    assert facts["alarmLinks"] == [{"text": "stagnation 5", "inAlarms": True,
                                    "row": ["trl_out", "stagnation", "5", facts["alarmRows"][0][3],
                                            facts["alarmRows"][0][4]]}]
    assert "identical rewards" in facts["alarmRows"][0][4]  # what the alarm means, as training prints it
    assert (ARTIFACTS / f"report_{width}.png").stat().st_size > 10_000


def test_a_corrupted_plot_fails_the_check(report, tmp_path):
    page = (report / "report.html").read_text(encoding="utf-8")
    match = re.search(r'<figure id="plot-acr"><img [^>]*src="data:image/png;base64,([^"]+)"', page)
    data = bytearray(base64.b64decode(match.group(1)))
    middle = len(data) // 2
    data[middle:middle + 256] = bytes(256)  # 256 zero bytes in the middle of the compressed pixels
    broken = page.replace(match.group(1), base64.b64encode(bytes(data)).decode("ascii"))
    for name in [p.name for p in report.glob("*.png")]:
        shutil.copy(report / name, tmp_path / name)
    (tmp_path / "report.html").write_text(broken, encoding="utf-8")
    problems = page_problems(open_page(tmp_path / "report.html", LAPTOP, False), tmp_path, LAPTOP)
    assert problems and all(p.startswith("acr:") for p in problems), problems


def test_a_page_that_asks_the_network_fails_the_check(report, tmp_path):
    page = (report / "report.html").read_text(encoding="utf-8")
    for name in [p.name for p in report.glob("*.png")]:
        shutil.copy(report / name, tmp_path / name)
    (tmp_path / "report.html").write_text(
        page.replace("</body>", "<img src='https://cdn.example.org/pixel.png' alt='x'></body>"), encoding="utf-8")
    problems = page_problems(open_page(tmp_path / "report.html", LAPTOP, False), tmp_path, LAPTOP)
    assert "a request left the page: https://cdn.example.org/pixel.png" in problems
