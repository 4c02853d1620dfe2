"""The playground in a real browser: headless Debian Chromium driven by Playwright.

One server (tiny models, an ephemeral port) and one Chromium for the module. Each tab is
typed into and what it shows is checked against the API's own numbers; the unmasking
animation is played to its end. Screenshots go to $MLMKIT_ARTIFACTS (default: a pytest
temporary directory) for CI to keep.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.uvicorn_thread import uvicorn_in_thread

CHROMIUM = os.environ.get("MLMKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server(tiny_mlm):
    from mlmkit.serve import ServeConfig, create_app

    app = create_app({"bert": tiny_mlm("bert"), "roberta": tiny_mlm("roberta")},
                     ServeConfig(threads=1))
    with uvicorn_in_thread(app, log_level="warning", lifespan="on") as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    folder = os.environ.get("MLMKIT_ARTIFACTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM}: install the Debian package "
                    "(sudo apt-get install -y chromium; `make install` does it) or set "
                    "MLMKIT_CHROMIUM to a Chromium binary")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:  # launch() gives Chromium an empty profile dir
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def page(browser, server):
    context = browser.new_context(viewport={"width": 1100, "height": 820})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    page.goto(server + "/")
    page.wait_for_selector("#compare-models input", state="attached")
    page.problems = problems
    yield page
    context.close()


def api(server, path, body):
    response = httpx.post(server + path, json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_fill_tab_shows_the_api_probabilities_and_puts_a_candidate_in(page, server, artifacts):
    text = "Open the [MASK] and return its [MASK]."
    page.fill("#fill-input", text)
    page.fill("#fill-k", "4")
    page.click("#fill-run")
    page.wait_for_selector("#fill-out .candidate")
    expected = api(server, "/v1/fill", {"texts": [text], "model": "bert", "top_k": 4})
    masks = expected["results"][0]["masks"]
    shown = page.eval_on_selector_all("#fill-out .mask", "cards => cards.map(c => "
                                      "Array.from(c.querySelectorAll('.candidate')).map("
                                      "b => [b.querySelector('.t').textContent, "
                                      "Number(b.dataset.score)]))")
    assert shown == [[[c["token"], c["score"]] for c in m["candidates"]] for m in masks]
    assert page.inner_text("#fill-filled") == expected["results"][0]["filled"]
    page.screenshot(path=str(artifacts / "serve-fill.png"), full_page=True)
    page.locator("#fill-out .mask").nth(1).locator(".candidate").first.click()
    token = masks[1]["candidates"][0]["token"].strip()  # "##s" as "s", as in `filled`
    put = token[2:] if token.startswith("##") and len(token) > 2 else token
    assert page.input_value("#fill-input") == f"Open the [MASK] and return its {put}."
    assert "mlmkit.fill_mask(mlm," in page.inner_text("#code-python")
    assert "/v1/fill" in page.inner_text("#code-curl")


def test_score_tab_heatmap_matches_the_api(page, server, artifacts):
    text = "Open the file for reading and return its lines."
    page.click("#tab-score")
    page.fill("#score-input", text)
    page.click("#score-run")
    page.wait_for_selector("#score-out .tok")
    expected = api(server, "/v1/score", {"texts": [text], "model": "bert", "per_token": True,
                                         "per_word": True, "alternatives": 5})
    result = expected["results"][0]
    assert page.inner_text("#score-out .pll") == f"{result['pll']:.4f}"
    assert page.inner_text("#score-out .pppl") == f"{result['pppl']:.3f}"
    tokens = page.locator("#score-out .tok")
    assert tokens.count() == result["n_tokens"] == len(result["tokens"])
    logprobs = [float(x) for x in tokens.evaluate_all("s => s.map(t => t.dataset.logprob)")]
    assert logprobs == [t["logprob"] for t in result["tokens"]]
    third = result["tokens"][2]
    tokens.nth(2).focus()
    page.keyboard.press("Enter")  # the keyboard opens a token's details too
    detail = page.inner_text("#score-detail")
    assert f"log p = {third['logprob']:.4f}" in detail
    assert expected["alternatives"][0][2][0]["token"] in detail
    assert "word" in tokens.nth(2).get_attribute("title")
    page.screenshot(path=str(artifacts / "serve-score.png"), full_page=True)


def test_unmask_tab_streams_then_plays_to_the_end(page, server, artifacts):
    page.click("#tab-unmask")
    page.fill("#unmask-input", "Return the")
    page.fill("#unmask-length", "8")
    page.fill("#unmask-steps", "4")
    page.fill("#unmask-seed", "3")
    page.click("#unmask-run")
    page.wait_for_selector("#unmask-result")
    expected = api(server, "/v1/generate", {"prompt": "Return the", "model": "bert",
                                            "length": 8, "steps": 4, "seed": 3,
                                            "sampler": "confidence", "temperature": 1.0})
    assert page.inner_text("#unmask-result .text") == expected["results"][0]["full_text"]
    assert page.inner_text("#unmask-step") == "step 4 / 4"
    cost = expected["results"][0]["cost"]  # the run's cost as the API returns it
    assert page.inner_text("#unmask-result .nfe") == str(cost["nfe"])
    assert page.inner_text("#unmask-result .tokens-per-call") == f"{cost['tokens_per_call']:.2f}"
    assert page.inner_text("#unmask-result .steps") == str(cost["steps"])
    assert float(page.inner_text("#unmask-result .seconds")) >= 0
    live = page.inner_text("#unmask-cost")  # live: the cost so far at the step shown
    assert live.startswith(f"{cost['nfe']} model calls · {cost['tokens_per_call']:.2f} tokens/call")
    assert live.endswith(" s")
    page.fill("#unmask-scrubber", "0")
    assert page.inner_text("#unmask-cost") == "0 model calls · 0.00 tokens/call · 0.00 s"
    assert page.locator("#unmask-canvas .ct.mask").count() == 8
    page.click("#unmask-play")
    page.wait_for_function("document.querySelector('#unmask-step').textContent === 'step 4 / 4'"
                           " && document.querySelector('#unmask-play').textContent.includes"
                           "('Play')", timeout=15_000)
    assert page.locator("#unmask-canvas .ct.mask").count() == 0
    coloured = page.locator("#unmask-canvas .ct[title]")
    assert coloured.count() == 8  # every generated token carries its reveal confidence
    page.screenshot(path=str(artifacts / "serve-unmask.png"), full_page=True)
    # Infill with an adaptive reveal policy: the same text as the API's.
    page.select_option("#unmask-task", "infill")
    page.fill("#unmask-input", "Open the [MASK:2] file.")
    page.select_option("#unmask-reveal", "threshold")
    page.fill("#unmask-steps", "2")
    page.click("#unmask-run")
    page.wait_for_selector("#unmask-result")
    expected = api(server, "/v1/infill", {"template": "Open the [MASK:2] file.", "model": "bert",
                                          "steps": 2, "seed": 3, "reveal": "threshold"})
    assert page.inner_text("#unmask-result .text") == expected["results"][0]["text"]
    assert 'reveal="threshold"' in page.inner_text("#code-python")
    # A span of unknown length: its candidates are ranked by PLL, calls shown apart from NFE
    page.fill("#unmask-input", "Open the [MASK:1-2] file.")
    page.click("#unmask-run")
    page.wait_for_selector("#unmask-result .scoring-calls")
    expected = api(server, "/v1/infill", {"template": "Open the [MASK:1-2] file.", "model": "bert",
                                          "steps": 2, "seed": 3, "reveal": "threshold"})
    cost = expected["results"][0]["cost"]
    assert cost["scoring_calls"] > 0
    assert page.inner_text("#unmask-result .scoring-calls") == str(cost["scoring_calls"])
    assert page.inner_text("#unmask-result .nfe") == str(cost["nfe"])
    page.select_option("#unmask-reveal", "count")
    page.select_option("#unmask-task", "generate")


def test_unmask_tab_takes_a_reveal_setting_and_a_min_gap(page, server):
    """The policy's setting and --min-gap go into the request (and the copied code) only
    when set; a bad value shows the server's own 4xx message."""
    page.click("#tab-unmask")
    page.select_option("#unmask-task", "generate")
    page.fill("#unmask-input", "Return the")
    page.fill("#unmask-length", "9")
    page.fill("#unmask-steps", "")
    page.fill("#unmask-seed", "2")
    page.select_option("#unmask-reveal", "entropy-bound")
    try:
        page.fill("#unmask-setting", "64")
        page.fill("#unmask-gap", "3")
        page.click("#unmask-run")
        page.wait_for_selector("#unmask-result")
        body = {"prompt": "Return the", "model": "bert", "length": 9, "seed": 2,
                "sampler": "confidence", "temperature": 1.0, "reveal": "entropy-bound",
                "entropy_bound": 64, "min_gap": 3}
        expected = api(server, "/v1/generate", body)["results"][0]
        assert page.inner_text("#unmask-result .text") == expected["full_text"]
        assert page.inner_text("#unmask-result .nfe") == str(expected["cost"]["nfe"])
        assert expected["cost"]["nfe"] >= 3  # at most 3 of 9 masks, 3 apart, per call
        assert 'reveal="entropy-bound", entropy_bound=64, min_gap=3' in page.inner_text(
            "#code-python")
        assert '"entropy_bound":64,"min_gap":3' in page.inner_text("#code-curl")
        for field, bad, sent in (("#unmask-gap", "0", {"min_gap": 0}),
                                 ("#unmask-setting", "-1", {"entropy_bound": -1})):
            page.fill(field, bad)
            page.click("#unmask-run")
            message = error_message(server, "/v1/generate", {**body, "stream": True, **sent})
            page.wait_for_function("m => document.querySelector('#error').textContent === m",
                                   arg=message)
            page.fill("#unmask-gap", "3")
            page.fill("#unmask-setting", "64")
    finally:
        page.fill("#unmask-setting", "")
        page.fill("#unmask-gap", "")
        page.select_option("#unmask-reveal", "count")


def test_compare_tab_side_by_side(page, server, artifacts):
    text = "Open the file for reading."
    page.click("#tab-compare")
    page.fill("#compare-input", text)
    page.click("#compare-run")
    page.wait_for_selector("#compare-out .compare-col")
    expected = api(server, "/v1/compare", {"text": text, "models": ["bert", "roberta"]})
    columns = page.locator("#compare-out .compare-col")
    assert columns.count() == 2
    for k, result in enumerate(expected["results"]):
        assert columns.nth(k).locator(".pll").inner_text() == f"{result['pll']:.4f}"
    assert page.locator("table.diff tr").count() == 1 + len(expected["words"])
    page.screenshot(path=str(artifacts / "serve-compare.png"), full_page=True)
    assert not page.problems, page.problems


def test_keyboard_phone_width_and_dark(page, artifacts):
    page.focus("#tab-compare")
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("#tab-unmask", "aria-selected") == "true"
    page.keyboard.press("Home")
    assert page.get_attribute("#tab-fill", "aria-selected") == "true"
    assert page.is_visible("#panel-fill") and not page.is_visible("#panel-score")
    page.set_viewport_size({"width": 390, "height": 800})
    for tab in ("score", "unmask", "compare", "fill"):  # every form fits a phone's width
        page.click(f"#tab-{tab}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 391, tab
        page.screenshot(path=str(artifacts / f"serve-phone-{tab}.png"), full_page=True)
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.click("#theme")
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert light != dark
    page.screenshot(path=str(artifacts / "serve-phone-dark.png"), full_page=True)
    page.click("#theme")
    page.set_viewport_size({"width": 1100, "height": 820})


def test_score_heatmap_keeps_emoji_whole(page, server):
    """The API's character offsets count code points; the heatmap sliced the UTF-16 string
    with them, splitting an emoji and shifting every token after it."""
    page.click("#tab-score")
    text = "\U0001F600 Open the file."
    page.fill("#score-input", text)
    page.click("#score-run")
    # (the tab may still show an earlier test's sentence: wait for this one)
    page.wait_for_function("t => document.querySelector('#score-out .heat')?.textContent === t",
                           arg=text)
    shown = page.eval_on_selector_all("#score-out .tok", "o => o.map(x => x.textContent)")
    expected = api(server, "/v1/score", {"texts": [text], "model": "bert", "per_token": True})
    assert shown == [text[t["start"]:t["end"]] for t in expected["results"][0]["tokens"]]
    assert shown[0] == "\U0001F600"
    assert page.eval_on_selector("#score-out .heat", "e => e.textContent") == text


def test_unmask_infill_example_runs_with_the_default_steps(page, server):
    """Switching to infill puts a 4-mask example in; the default steps (6) were refused."""
    page.click("#tab-unmask")
    page.select_option("#unmask-task", "infill")
    page.click("#unmask-run")
    page.wait_for_selector("#unmask-result")
    assert not page.is_visible("#error")
    page.select_option("#unmask-task", "generate")


LONG = " ".join(["Open the file for reading and return its lines."] * 20)  # > 128 tokens


def error_message(server, path, body):
    """The status and message of the API's JSON error for `body` (a refused request)."""
    response = httpx.post(server + path, json=body, timeout=60)
    assert 400 <= response.status_code < 500, response.text
    return f"{response.status_code}: {response.json()['error']['message']}"


def score_shown(page, text):
    page.evaluate("() => { document.querySelector('#score-out').innerHTML = ''; }")
    page.click("#score-run")
    page.wait_for_function("t => document.querySelector('#score-out .heat')?.textContent === t",
                           arg=text)


def test_score_tab_stride_on_a_long_text_matches_the_api(page, server):
    """The Score tab had no stride: a text longer than the model takes was always scored at
    the API's default stride. Set, it is sent, shown and copied (as `mlmkit.score`'s
    keyword); a bad one shows the server's message."""
    page.click("#tab-score")
    page.fill("#score-input", LONG)
    page.fill("#score-stride", "16")
    try:
        score_shown(page, LONG)
        body = {"texts": [LONG], "model": "bert", "per_token": True, "per_word": True}
        expected = api(server, "/v1/score", {**body, "stride": 16})["results"][0]
        assert expected["pll"] != api(server, "/v1/score", body)["results"][0]["pll"]
        assert page.inner_text("#score-out .pll") == f"{expected['pll']:.4f}"
        logprobs = page.locator("#score-out .tok").evaluate_all(
            "s => s.map(t => Number(t.dataset.logprob))")
        assert logprobs == [t["logprob"] for t in expected["tokens"]]
        assert ", stride=16)" in page.inner_text("#code-python")
        assert '"stride":16' in page.inner_text("#code-curl")
        # the library's 400, the schema's 422 (sent as typed), windows leaving a gap (400)
        for bad, sent in (("0", 0), ("2.5", "2.5"), ("200", 200)):
            page.fill("#score-stride", bad)
            page.click("#score-run")
            message = error_message(server, "/v1/score", {**body, "stride": sent})
            page.wait_for_function("m => document.querySelector('#error').textContent === m",
                                   arg=message)
            assert page.is_visible("#error")
    finally:
        page.fill("#score-stride", "")
    score_shown(page, LONG)
    assert "stride" not in page.inner_text("#code-python") + page.inner_text("#code-curl")
    assert not page.is_visible("#error")


def test_score_tab_span_from_the_selection(page, server):
    """`spans` (conditional scoring): the span typed or taken from the selected text, in
    code points as the API counts them (an emoji before it is one character)."""
    text = "\U0001F600 Open the file for reading and return its lines."
    page.click("#tab-score")
    page.fill("#score-input", text)
    start = text.index("file")
    page.eval_on_selector("#score-input", "(e, [a, b]) => e.setSelectionRange(a, b)",
                          [start + 1, start + 1 + len("file for reading")])  # +1: UTF-16
    page.click("#score-span-selection")
    assert page.input_value("#score-span-start") == str(start)
    assert page.input_value("#score-span-end") == str(start + len("file for reading"))
    page.select_option("#score-unk", "skip")
    try:
        score_shown(page, text)
        span = [start, start + len("file for reading")]
        expected = api(server, "/v1/score", {"texts": [text], "model": "bert", "per_token": True,
                                             "spans": [span], "unk": "skip"})["results"][0]
        assert page.inner_text("#score-out .pll") == f"{expected['pll']:.4f}"
        shown = page.eval_on_selector_all("#score-out .tok", "o => o.map(x => x.textContent)")
        assert shown == [text[t["start"]:t["end"]] for t in expected["tokens"]]
        assert "".join(shown) == "fileforreading"
        code = page.inner_text("#code-python")
        assert f'spans=[[{span[0]}, {span[1]}]], unk="skip")' in code
        page.fill("#score-span-end", "")  # one end: the span runs to the text's end
        score_shown(page, text)
        assert f"spans=[[{start}, {len(text)}]]" in page.inner_text("#code-python")
        page.fill("#score-span-start", "-1")
        page.click("#score-run")
        message = error_message(server, "/v1/score", {"texts": [text], "spans": [[-1, len(text)]]})
        page.wait_for_function("m => document.querySelector('#error').textContent === m",
                               arg=message)
    finally:
        page.fill("#score-span-start", "")
        page.fill("#score-span-end", "")
        page.select_option("#score-unk", "score")


def test_compare_tab_stride_and_unk(page, server):
    page.click("#tab-compare")
    page.fill("#compare-input", LONG)
    page.fill("#compare-stride", "16")
    page.select_option("#compare-unk", "skip")
    try:
        page.click("#compare-run")
        page.wait_for_function("t => document.querySelector('#compare-out .heat')?.textContent "
                               "=== t", arg=LONG)
        expected = api(server, "/v1/compare", {"text": LONG, "stride": 16, "unk": "skip"})
        columns = page.locator("#compare-out .compare-col")
        for k, result in enumerate(expected["results"]):
            assert columns.nth(k).locator(".pll").inner_text() == f"{result['pll']:.4f}"
        assert 'per_word=True, unk="skip", stride=16)' in page.inner_text("#code-python")
        assert '"unk":"skip","stride":16}' in page.inner_text("#code-curl")
        page.fill("#compare-stride", "x")
        page.click("#compare-run")
        message = error_message(server, "/v1/compare", {"text": LONG, "stride": "x"})
        page.wait_for_function("m => document.querySelector('#error').textContent === m",
                               arg=message)
    finally:
        page.fill("#compare-stride", "")
        page.select_option("#compare-unk", "score")


def test_copy_as_code_follows_the_tab_shown(page):
    """Each tab's code is its own last request: the Score tab showed the Compare tab's code
    (the last request sent anywhere) next to its own, different, result."""
    expected = {"fill": ("mlmkit.fill_mask(mlm,", "/v1/fill"),
                "score": ("mlmkit.score(mlm,", "/v1/score"),
                "unmask": ("mlmkit.infill(mlm,", "/v1/infill"),  # the tab's last run
                "compare": ("scores = {name: mlmkit.score(", "/v1/compare")}
    # each tab runs its own request first: the test holds alone, not only after the others
    inputs = {"fill": "Return the [MASK] of items.", "score": "Open the file for reading.",
              "unmask": "Open the [MASK:2] file.", "compare": "Open the file for reading."}
    for tab, text in inputs.items():
        page.click(f"#tab-{tab}")
        if tab == "unmask":
            page.select_option("#unmask-task", "infill")
        page.fill(f"#{tab}-input", text)
        page.click(f"#{tab}-run")
        page.wait_for_function("s => document.querySelector('#code-python').innerText"
                               ".includes(s)", arg=expected[tab][0])
        page.wait_for_function("() => !document.querySelector('#error')?.textContent")
    for tab in ("score", "fill", "compare", "unmask", "score"):
        page.click(f"#tab-{tab}")
        python, route = expected[tab]
        assert python in page.inner_text("#code-python"), tab
        assert f"{route} -H" in page.inner_text("#code-curl"), tab
    page.click("#tab-unmask")
    page.select_option("#unmask-task", "generate")


def test_embed_tab_ranks_lines_by_the_apis_cosine(page, server, artifacts):
    page.click("#tab-embed")
    query, lines = "How do I open a file?", ["Raise an error.", "Open the file.", "a b c"]
    page.fill("#embed-query", query)
    page.fill("#embed-lines", "\n".join(lines) + "\n\n")  # blank lines are left out
    page.select_option("#embed-pooling", "cls")
    page.click("#embed-run")
    page.wait_for_selector("#embed-out table.neighbours")
    data = api(server, "/v1/embeddings", {"input": [query, *lines], "model": "bert",
                                          "pooling": "cls"})["data"]
    vectors = [np.array(d["embedding"], dtype=np.float64) for d in data]
    cosines = [float(v @ vectors[0] / np.linalg.norm(v) / np.linalg.norm(vectors[0]))
               for v in vectors[1:]]
    order = sorted(range(len(lines)), key=lambda k: (-cosines[k], k))
    rows = page.locator("#embed-out table.neighbours tr")
    shown = rows.evaluate_all("rs => rs.slice(1).map(r => [r.cells[2].textContent, "
                              "Number(r.dataset.cosine)])")
    assert [line for line, _ in shown] == [lines[k] for k in order]
    assert [c for _, c in shown] == pytest.approx([cosines[k] for k in order], abs=1e-6)
    assert 'pooling="cls"' in page.inner_text("#code-python")
    assert "/v1/embeddings" in page.inner_text("#code-curl")
    page.screenshot(path=str(artifacts / "serve-embed.png"), full_page=True)
    page.select_option("#embed-pooling", "")
    assert not page.problems, page.problems
