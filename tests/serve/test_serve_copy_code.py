"""The playground's "Copy as code" Python runs and prints what the page shows (Chromium).

The models are saved directories, so the copied `mlmkit.load(...)` calls load them; they
are named "text", "2-bert" and "7": names that are not Python identifiers, or that the copied
code itself uses, once broke it (a SyntaxError, and a `text` overwritten by a score)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import subprocess

import httpx
import pytest

from tests.serve.test_serve_browser import browser  # noqa: F401  (the module's Chromium fixture)
from tests.uvicorn_thread import uvicorn_in_thread


@pytest.fixture(scope="module")
def server(saved_tiny_mlm):
    from mlmkit.serve import ServeConfig, create_app

    # "7" last: JavaScript orders an object's integer-like keys first, so a dict built
    # through one printed its score before the others (not the API's order)
    app = create_app({"text": str(saved_tiny_mlm("bert")),
                      "2-bert": str(saved_tiny_mlm("roberta")),
                      "7": str(saved_tiny_mlm("bert"))}, ServeConfig())
    with uvicorn_in_thread(app, log_level="warning", lifespan="on") as port:
        yield f"http://127.0.0.1:{port}"


def open_page(browser, server):  # noqa: F811
    """A fresh page of the playground, its model list loaded; (context, page, page errors)."""
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(server + "/")
    page.wait_for_selector("#compare-models input", state="attached")
    return context, page, problems


def test_copied_compare_code_runs_and_prints_the_api_results(browser, server):  # noqa: F811
    context, page, problems = open_page(browser, server)
    text = "Open the file for reading."
    page.click("#tab-compare")
    page.fill("#compare-input", text)
    page.click("#compare-run")
    page.wait_for_selector("#compare-out table.diff")
    code = page.inner_text("#code-python")
    context.close()
    assert not problems, problems
    expected = httpx.post(server + "/v1/compare", json={"text": text}, timeout=60).json()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "copied.py", "exec"), {})  # noqa: S102 (the page's own code)
    assert ast.literal_eval(printed.getvalue().strip()) == expected["results"]


def run_python(code: str):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "copied.py", "exec"), {})  # noqa: S102 (the page's own code)
    return ast.literal_eval(printed.getvalue().strip())


def test_copied_score_and_compare_code_keep_stride_span_and_unk(browser, server):  # noqa: F811
    """The options the API takes beyond the page's first ones (stride, spans, unk): the
    copied Python (`mlmkit.score`'s keywords) and curl give the numbers on screen."""
    long = " ".join(["Open the file for reading and return its lines."] * 12)  # 158 tokens > 128
    context, page, problems = open_page(browser, server)
    page.click("#tab-score")
    page.fill("#score-input", long)
    page.fill("#score-stride", "16")
    page.fill("#score-span-start", "49")
    page.select_option("#score-unk", "skip")
    page.click("#score-run")
    page.wait_for_selector("#score-out .tok")
    shown = page.inner_text("#score-out .pll")
    score = page.inner_text("#code-python"), page.inner_text("#code-curl")
    page.click("#tab-compare")
    page.fill("#compare-input", long)
    page.fill("#compare-stride", "16")
    page.select_option("#compare-unk", "skip")
    page.click("#compare-run")
    page.wait_for_selector("#compare-out table.diff")
    compare = page.inner_text("#code-python")
    context.close()
    assert not problems, problems
    body = {"texts": [long], "model": "text", "per_token": True, "per_word": True,
            "spans": [[49, len(long)]], "unk": "skip", "stride": 16}
    expected = httpx.post(server + "/v1/score", json=body, timeout=60).json()["results"]
    assert shown == f"{expected[0]['pll']:.4f}"
    assert run_python(score[0]) == expected
    curl = subprocess.run(["bash", "-c", score[1]], capture_output=True, text=True, timeout=60,
                          check=True)
    assert json.loads(curl.stdout)["results"] == expected
    expected = httpx.post(server + "/v1/compare", json={"text": long, "unk": "skip",
                                                        "stride": 16}, timeout=60).json()
    assert run_python(compare) == expected["results"]


def test_a_wordpiece_piece_is_put_in_where_the_mask_stood(browser, server):  # noqa: F811
    """docs/fill-mask.md: in `filled` a WordPiece piece such as `##s` is shown as `s` where the mask
    stood, never glued onto the word before it; the Fill tab's put-in glued it on ("the" +
    "##ime" gave "theime") while the result card above showed "the ime". Putting in each
    mask's best candidate gives the result's filled text, for both tokenizer kinds."""
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    page = context.new_page()
    page.goto(server + "/")
    page.wait_for_selector("#compare-models input", state="attached")
    page.fill("#fill-input", "Open the [MASK] now, [MASK] it.")
    page.fill("#fill-k", "100")
    page.click("#fill-run")
    page.wait_for_selector("#fill-out .candidate")
    first = page.locator("#fill-out .mask >> nth=0").locator(".candidate .t")
    pieces = [t for t in first.all_inner_texts() if t.startswith("##") and len(t) > 2]
    assert pieces, "no WordPiece continuation among the first mask's 100 candidates"
    page.locator("#fill-out .mask >> nth=0").get_by_text(pieces[0], exact=True).click()
    one = page.input_value("#fill-input")
    second = page.locator("#fill-out .mask >> nth=1").locator(".candidate .t").all_inner_texts()
    whole = next(t for t in second if not t.startswith("##"))
    page.locator("#fill-out .mask >> nth=1").get_by_text(whole, exact=True).click()
    both = page.input_value("#fill-input")
    filled = {}
    for name in ("text", "2-bert"):
        page.select_option("#model", name)
        page.fill("#fill-input", "Open the [MASK] now, <mask> it.")
        page.fill("#fill-k", "5")
        page.evaluate("() => { document.querySelector('#fill-out').innerHTML = ''; }")
        page.click("#fill-run")
        page.wait_for_selector("#fill-out .candidate")
        for card in (1, 0):  # the second mask first: each card puts its own mask in
            page.locator(f"#fill-out .mask >> nth={card}").locator(".candidate").first.click()
        filled[name] = (page.input_value("#fill-input"), page.inner_text("#fill-filled"))
    context.close()
    assert one == f"Open the {pieces[0][2:]} now, [MASK] it."
    assert both == f"Open the {pieces[0][2:]} now, {whole} it."
    for name, (put, shown) in filled.items():
        assert put == shown, name


def test_copied_embed_code_prints_the_ranking_on_screen(browser, server):  # noqa: F811
    context, page, problems = open_page(browser, server)
    page.click("#tab-embed")
    page.fill("#embed-query", "Open the file.")
    page.fill("#embed-lines", "Read the file.\nRaise an error.\nClose it.")
    page.click("#embed-run")
    page.wait_for_selector("#embed-out table.neighbours")
    shown = page.locator("#embed-out table.neighbours tr").evaluate_all(
        "rs => rs.slice(1).map(r => [Number(r.dataset.cosine), r.cells[2].textContent])")
    code = page.inner_text("#code-python")
    context.close()
    assert not problems, problems
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "copied.py", "exec"), {})  # noqa: S102 (the page's own code)
    rows = [line.split("  ", 1) for line in printed.getvalue().splitlines()]
    assert [text for _, text in rows] == [text for _, text in shown]
    assert [float(c) for c, _ in rows] == pytest.approx([c for c, _ in shown], abs=1e-4)
