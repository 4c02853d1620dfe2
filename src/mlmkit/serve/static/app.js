// mlmkit playground: plain JavaScript over the JSON API of `mlmkit serve` (no build step,
// no dependencies). Every request it sends is shown under "Copy as code" as the Python call
// and the curl command that reproduce it.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = { models: [], limits: {}, code: {}, steps: [], frame: 0, timer: null,
  putIn: new Set() };

// --- the API -------------------------------------------------------------------------------

function headers() {
  const h = { "content-type": "application/json" };
  const key = $("#api-key").value.trim();
  if (key) h.authorization = "Bearer " + key;
  return h;
}

async function api(path, body) {
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST", headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return data;
}

function showError(error) {
  const box = $("#error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
}

// A number field as the request sends it: empty is not sent (the API's default applies), a
// whole number is sent as a number, anything else as typed, so that the server refuses it
// with its own message (shown in the error box) instead of the page dropping it silently.
function numberField(selector) {
  const raw = $(selector).value.trim();
  if (raw === "") return undefined;
  return /^[+-]?\d+$/.test(raw) && Number.isSafeInteger(Number(raw)) ? Number(raw) : raw;
}

// A decimal field as numberField: a number as a number, anything else as typed.
function decimalField(selector) {
  const raw = $(selector).value.trim();
  if (raw === "") return undefined;
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : raw;
}

// The SamplerOptions field of each reveal policy's setting (count has none: a setting given
// with it is sent as a threshold, which the server refuses naming the policy it needs).
const REVEAL_SETTING = { threshold: "threshold", factor: "factor", "entropy-bound": "entropy_bound" };

function busy(button, on) {
  button.disabled = on;
  button.setAttribute("aria-busy", on ? "true" : "false");
}

// --- "Copy as code" ------------------------------------------------------------------------

function py(value) {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return "[" + value.map(py).join(", ") + "]";
  if (typeof value === "object") {
    return "{" + Object.entries(value).map(([k, v]) => JSON.stringify(k) + ": " + py(v)).join(", ") + "}";
  }
  return JSON.stringify(value);
}

function source(name) {
  const model = state.models.find((m) => m.name === name);
  return model ? model.source : name;
}

const CALLS = {
  "/v1/fill": ["fill_mask", "texts", ["top_k", "mode"]],
  "/v1/score": ["score", "texts", ["metric", "per_token", "per_word", "spans", "unk", "stride"]],
  "/v1/generate": ["generate", "prompt", ["length", "steps", "sampler", "reveal", "threshold", "factor", "entropy_bound", "min_gap", "temperature", "block_length", "seed"]],
  "/v1/infill": ["infill", "template", ["steps", "sampler", "reveal", "threshold", "factor", "entropy_bound", "min_gap", "temperature", "block_length", "seed"]],
};

function pythonCode(path, body) {
  const lines = ["import mlmkit", ""];
  if (path === "/v1/embeddings") {
    const [query, ...rest] = body.input;
    const options = ["pooling", "normalize"].filter((k) => body[k] !== undefined).map((k) => `, ${k}=${py(body[k])}`).join("");
    lines.splice(0, 0, "import numpy as np", "");
    lines.push(`mlm = mlmkit.load(${py(source(body.model))})`);
    lines.push(`text, lines = ${py(query)}, ${py(rest)}`);
    lines.push(`vectors = mlmkit.embed(mlm, [text] + lines${options})`);
    lines.push("cosine = vectors[1:] @ vectors[0] / (np.linalg.norm(vectors[1:], axis=1) * np.linalg.norm(vectors[0]))");
    lines.push("for k in np.argsort(-cosine, kind=\"stable\"):");
    lines.push("    print(f\"{cosine[k]:.4f}  {lines[k]}\")");
    return lines.join("\n");
  }
  if (path === "/v1/compare") {
    // A dict by model name: a name is not always a Python identifier ("2-bert"), and one
    // named "text" or "mlmkit" overwrote what the next line used. Printed, as the API's
    // "results" (one TextScore per model, in order).
    lines.push(`text = ${py(body.text)}`);
    // written pair by pair: an object would put integer-like names ("7") first
    lines.push(`models = {${body.models.map((name) => `${py(name)}: ${py(source(name))}`).join(", ")}}`);
    // mlmkit.score's keywords, each as the request set it (the API's defaults otherwise)
    const options = ["unk", "stride"].filter((k) => body[k] !== undefined).map((k) => `, ${k}=${py(body[k])}`).join("");
    lines.push(`scores = {name: mlmkit.score(mlmkit.load(path), text, metric=${py(body.metric)}, per_token=True, per_word=True${options})`);
    lines.push("          for name, path in models.items()}");
    lines.push("print([s.to_dict() for s in scores.values()])");
    return lines.join("\n");
  }
  const [fn, input, keys] = CALLS[path];
  const args = keys.filter((k) => body[k] !== undefined && body[k] !== null)
    .map((k) => `${k}=${py(body[k])}`);
  lines.push(`mlm = mlmkit.load(${py(source(body.model))})`);
  lines.push(`result = mlmkit.${fn}(mlm, ${py(body[input])}${args.length ? ", " + args.join(", ") : ""})`);
  lines.push(typeof body[input] === "string" ? "print(result.to_dict())" : "print([r.to_dict() for r in result])");
  return lines.join("\n");
}

function curlCode(path, body) {
  const sent = Object.assign({}, body);
  delete sent.stream;
  const json = JSON.stringify(sent).replace(/'/g, "'\\''");
  // Double quotes: the shell expands $MLMKIT_API_KEY there (not inside single quotes).
  const key = $("#api-key").value.trim() ? ' -H "Authorization: Bearer $MLMKIT_API_KEY"' : "";
  return `curl -s ${location.origin}${path} -H 'content-type: application/json'${key} \\\n  -d '${json}'`;
}

// The tab whose result each route's request shows.
const TAB_OF = { "/v1/fill": "tab-fill", "/v1/score": "tab-score", "/v1/generate": "tab-unmask",
  "/v1/infill": "tab-unmask", "/v1/compare": "tab-compare", "/v1/embeddings": "tab-embed" };

// Each tab keeps the code of its own last request: the code under a tab is what reproduces
// the result on it (not another tab's last request).
function showCode(path, body) {
  state.code[TAB_OF[path]] = { path, body };
  const selected = document.querySelector('[role="tab"][aria-selected="true"]');
  if (selected && selected.id === TAB_OF[path]) renderCode(selected.id);
}

function renderCode(tabId) {
  const last = state.code[tabId];
  $("#code-python").textContent = last ? pythonCode(last.path, last.body) : "";
  $("#code-curl").textContent = last ? curlCode(last.path, last.body) : "";
}

for (const button of document.querySelectorAll("button.copy")) {
  button.addEventListener("click", async () => {
    const text = document.getElementById(button.dataset.for).textContent;
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (e) {
      const range = document.createRange();
      range.selectNodeContents(document.getElementById(button.dataset.for));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      button.textContent = "Selected";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1200);
  });
}

// --- tabs, theme, models -------------------------------------------------------------------

const tabs = Array.from(document.querySelectorAll('[role="tab"]'));

function selectTab(tab, focus) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", on ? "true" : "false");
    t.tabIndex = on ? 0 : -1;
    document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
  }
  if (focus) tab.focus();
  $("#model").disabled = tab.id === "tab-compare";
  renderCode(tab.id);
}

tabs.forEach((tab, i) => {
  tab.addEventListener("click", () => selectTab(tab, false));
  tab.addEventListener("keydown", (event) => {
    const moves = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      selectTab(tabs[(moves[event.key] + tabs.length) % tabs.length], true);
    }
  });
});

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}
applyTheme(localStorage.getItem("mlmkit-theme"));
$("#theme").addEventListener("click", () => {
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  const now = document.documentElement.dataset.theme || (dark ? "dark" : "light");
  const next = now === "dark" ? "light" : "dark";
  localStorage.setItem("mlmkit-theme", next);
  applyTheme(next);
});

async function loadModels() {
  try {
    const info = await api("/v1/models");
    state.models = info.models;
    state.limits = info.limits;
    $("#model").innerHTML = "";
    $("#compare-models").querySelectorAll("label").forEach((l) => l.remove());
    for (const m of info.models) {
      const option = document.createElement("option");
      option.value = m.name;
      option.textContent = `${m.name} (${m.model_type}, ${(m.parameters / 1e6).toFixed(1)}M)`;
      $("#model").append(option);
      const label = document.createElement("label");
      label.innerHTML = `<input type="checkbox" value="" checked> <span></span>`;
      label.querySelector("input").value = m.name;
      label.querySelector("span").textContent = m.name;
      $("#compare-models").append(label);
    }
    showError(null);
  } catch (error) {
    if (String(error.message).startsWith("401")) $("#key-label").hidden = false;
    showError(error);
  }
}
$("#api-key").addEventListener("change", loadModels);

// A form sent before the model list arrived (the key typed, then Run clicked at once: the
// key's change event and the click come together) waits for it, instead of asking for
// model "" (a 404). False when the list cannot be had (the error box says why).
async function ready() {
  if (!state.models.length) await loadModels();
  return state.models.length > 0;
}

const model = () => $("#model").value;

// --- token pieces and colours --------------------------------------------------------------

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// Surprisal (nats) to a background: green (expected) to red (surprising).
// The scale runs from the text's least to its most surprising token (at least 1 nat wide).
function heat(surprisal, low, high) {
  const t = Math.max(0, Math.min(1, (surprisal - low) / Math.max(high - low, 1)));
  return `hsl(${Math.round(130 * (1 - t))}, 70%, ${Math.round(78 - 10 * t)}%)`;
}

// A probability to a background: red (low) to green (high).
function confidenceColour(p) {
  const t = Math.max(0, Math.min(1, p));
  return `hsl(${Math.round(130 * t)}, 65%, 72%)`;
}

// The text of each token of a canvas: WordPiece "##" joins the word before; BPE "Ġ" and
// SentencePiece "▁" mark a space.
function pieces(tokens) {
  const marked = tokens.some((t) => /^[Ġ▁]/.test(t));
  return tokens.map((t, i) => {
    if (t.startsWith("##")) return { text: t.slice(2), space: false };
    if (marked) return /^[Ġ▁]/.test(t) ? { text: t.slice(1), space: i > 0 } : { text: t, space: false };
    return { text: t, space: i > 0 };
  });
}

// --- Fill ----------------------------------------------------------------------------------

// Put a candidate of mask `index` (of the last result) in. The masks put in already are no
// longer in the text, so mask `index` is the text's mask `index` minus those before it
// (counting from the text's masks, a second put-in replaced the wrong mask, or none).
function putIn(index, token, card) {
  if (state.putIn.has(index)) return;
  const input = $("#fill-input");
  const at = index - Array.from(state.putIn).filter((i) => i < index).length;
  // As the result's "filled" text (README): the token without the spaces around it, a
  // WordPiece "##s" as "s" where the mask stood, never glued onto the word before it.
  let word = token.trim().replace(/^[Ġ▁]/, "");
  if (word.startsWith("##") && word.length > 2) word = word.slice(2);
  let n = -1;
  input.value = input.value.replace(/\[MASK\]|<mask>/g, (m) => (++n === at ? word : m));
  state.putIn.add(index);
  card.querySelectorAll("button.candidate").forEach((b) => { b.disabled = true; });
  input.focus();
}

$("#fill-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!(await ready())) return;
  const body = { texts: [$("#fill-input").value], model: model(), top_k: Number($("#fill-k").value), mode: $("#fill-mode").value };
  const button = $("#fill-run");
  busy(button, true);
  try {
    const data = await api("/v1/fill", body);
    showCode("/v1/fill", body);
    renderFill(data.results[0]);
    showError(null);
  } catch (error) { showError(error); } finally { busy(button, false); }
});

function renderFill(result) {
  state.putIn = new Set();
  const out = $("#fill-out");
  out.innerHTML = "";
  const filled = document.createElement("p");
  filled.className = "card";
  filled.id = "fill-filled";
  filled.textContent = result.filled;
  out.append(filled);
  for (const mask of result.masks) {
    const card = document.createElement("div");
    card.className = "card mask";
    card.innerHTML = `<h3>mask ${mask.index + 1}${result.mode === "joint" ? ` · filled at step ${mask.step + 1}` : ""}</h3>`;
    const best = mask.candidates[0] ? mask.candidates[0].score : 1;
    for (const c of mask.candidates) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "candidate";
      button.dataset.score = c.score;
      button.title = `Put "${c.token}" in mask ${mask.index + 1}`;
      button.innerHTML = `<span class="t"></span><span class="bar"></span><span class="p"></span>`;
      button.querySelector(".t").textContent = c.token;
      button.querySelector(".bar").style.width = `${(100 * c.score / Math.max(best, 1e-12)).toFixed(1)}%`;
      button.querySelector(".p").textContent = (100 * c.score).toFixed(2) + "%";
      button.addEventListener("click", () => putIn(mask.index, c.token, card));
      card.append(button);
    }
    out.append(card);
  }
}

// --- Score and Compare ---------------------------------------------------------------------

function heatmap(result, alternatives, onPick) {
  const box = document.createElement("div");
  box.className = "heat";
  // The API's offsets count code points (Python's str); a JavaScript string counts UTF-16
  // units, so text.slice() split an emoji and shifted every token after it.
  const chars = Array.from(result.text);
  const text = { length: chars.length, slice: (a, b) => chars.slice(a, b).join("") };
  const tokens = (result.tokens || []).map((t, i) => Object.assign({ i }, t));
  const low = Math.min(...tokens.map((t) => -t.logprob));
  const high = Math.max(...tokens.map((t) => -t.logprob));
  const wordOf = {};
  for (const w of result.words || []) wordOf[`${w.start}`] = w;
  const words = result.words || [];
  let cursor = 0;
  for (const t of tokens.filter((t) => t.start >= 0).sort((a, b) => a.start - b.start)) {
    if (t.start > cursor) box.append(document.createTextNode(text.slice(cursor, t.start)));
    const span = document.createElement("span");
    span.className = "tok";
    span.tabIndex = 0;
    span.dataset.i = t.i;
    span.dataset.logprob = t.logprob;
    span.textContent = text.slice(t.start, t.end) || t.token;
    span.style.background = heat(-t.logprob, low, high);
    const word = words.find((w) => w.start <= t.start && t.end <= w.end);
    span.title = `${t.token}: log p = ${t.logprob.toFixed(3)}` +
      (word ? `\nword "${word.word}": log p = ${word.logprob.toFixed(3)} (${word.n_tokens} token${word.n_tokens > 1 ? "s" : ""})` : "");
    const pick = () => onPick(t, alternatives ? alternatives[t.i] : null, span);
    span.addEventListener("click", pick);
    span.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
    box.append(span);
    cursor = Math.max(cursor, t.end);
  }
  if (cursor < text.length) box.append(document.createTextNode(text.slice(cursor)));
  return box;
}

function stats(result) {
  const p = document.createElement("div");
  p.className = "stats";
  const f = (x, d) => (x === null || x === undefined ? "—" : Number(x).toFixed(d));
  p.innerHTML = `<span>PLL <b class="pll"></b></span><span>PPPL <b class="pppl"></b></span>` +
    `<span>PPPL per word <b class="pppl-word"></b></span><span>tokens <b class="n"></b></span>`;
  p.querySelector(".pll").textContent = f(result.pll, 4);
  p.querySelector(".pppl").textContent = f(result.pppl, 3);
  p.querySelector(".pppl-word").textContent = f(result.pppl_word, 3);
  p.querySelector(".n").textContent = result.n_tokens;
  return p;
}

function showToken(token, alternatives, span) {
  document.querySelectorAll("#score-out .tok.selected").forEach((s) => s.classList.remove("selected"));
  span.classList.add("selected");
  const detail = $("#score-detail");
  detail.innerHTML = `<h3></h3><p class="lp"></p>`;
  detail.querySelector("h3").textContent = `“${token.token}” (id ${token.token_id}, characters ${token.start}–${token.end})`;
  detail.querySelector(".lp").textContent = `log p = ${token.logprob.toFixed(4)}  ·  p = ${Math.exp(token.logprob).toExponential(3)}  ·  surprisal ${(-token.logprob).toFixed(3)} nats`;
  if (alternatives) {
    const table = document.createElement("table");
    table.innerHTML = "<tr><th>alternative when masked</th><th>p</th></tr>";
    for (const a of alternatives) {
      const row = document.createElement("tr");
      row.innerHTML = "<td></td><td></td>";
      row.cells[0].textContent = a.token + (a.token_id === token.token_id ? "  ← this token" : "");
      row.cells[1].textContent = a.prob.toFixed(4);
      table.append(row);
    }
    detail.append(table);
  }
}

// The score request of the form: unk, stride and the span only when set (the API's defaults
// otherwise). A span with one end given runs from the text's start or to its end; offsets
// count code points, as the API's (Python's) do.
function scoreBody() {
  const text = $("#score-input").value;
  const body = { texts: [text], model: model(), metric: $("#score-metric").value, per_token: true, per_word: true };
  if ($("#score-unk").value !== "score") body.unk = $("#score-unk").value;
  const stride = numberField("#score-stride");
  if (stride !== undefined) body.stride = stride;
  const start = numberField("#score-span-start");
  const end = numberField("#score-span-end");
  if (start !== undefined || end !== undefined) {
    body.spans = [[start === undefined ? 0 : start, end === undefined ? Array.from(text).length : end]];
  }
  body.alternatives = 5;
  return body;
}

$("#score-span-selection").addEventListener("click", () => {
  const input = $("#score-input");
  if (input.selectionStart === input.selectionEnd) {
    showError(new Error("Select the part of the text to score first (the rest is its context)."));
    return;
  }
  const at = (i) => Array.from(input.value.slice(0, i)).length;  // UTF-16 units to code points
  $("#score-span-start").value = at(input.selectionStart);
  $("#score-span-end").value = at(input.selectionEnd);
  showError(null);
});

$("#score-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!(await ready())) return;
  const button = $("#score-run");
  const body = scoreBody();
  busy(button, true);
  try {
    const data = await api("/v1/score", body);
    showCode("/v1/score", body);
    const result = data.results[0];
    const out = $("#score-out");
    out.innerHTML = "";
    const card = document.createElement("div");
    card.className = "card";
    card.append(stats(result), heatmap(result, data.alternatives[0], showToken));
    const detail = document.createElement("div");
    detail.id = "score-detail";
    detail.className = "card detail";
    detail.textContent = "Click a token (or focus it and press Enter) for its details.";
    out.append(card, detail);
    showError(null);
  } catch (error) { showError(error); } finally { busy(button, false); }
});

$("#compare-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!(await ready())) return;
  const models = Array.from(document.querySelectorAll("#compare-models input:checked")).map((i) => i.value);
  const body = { text: $("#compare-input").value, models, metric: "pll" };
  if ($("#compare-unk").value !== "score") body.unk = $("#compare-unk").value;
  const stride = numberField("#compare-stride");
  if (stride !== undefined) body.stride = stride;
  const button = $("#compare-run");
  busy(button, true);
  try {
    const data = await api("/v1/compare", body);
    showCode("/v1/compare", body);
    renderCompare(data);
    showError(null);
  } catch (error) { showError(error); } finally { busy(button, false); }
});

function renderCompare(data) {
  const out = $("#compare-out");
  out.innerHTML = "";
  const columns = document.createElement("div");
  columns.className = "columns";
  data.results.forEach((result, k) => {
    const card = document.createElement("div");
    card.className = "card compare-col";
    card.dataset.model = data.models[k];
    const title = document.createElement("h3");
    title.textContent = data.models[k];
    card.append(title, stats(result), heatmap(result, null, () => {}));
    columns.append(card);
  });
  out.append(columns);
  const [first, ...rest] = data.models;
  const table = document.createElement("table");
  table.className = "diff";
  table.innerHTML = `<tr><th>word</th>${data.models.map((m) => "<th></th>").join("")}${rest.map(() => "<th></th>").join("")}</tr>`;
  const head = table.rows[0].cells;
  data.models.forEach((m, k) => { head[1 + k].textContent = `log p (${m})`; });
  rest.forEach((m, k) => { head[1 + data.models.length + k].textContent = `${m} − ${first}`; });
  const top = Math.max(1e-9, ...data.words.flatMap((w) => Object.values(w.difference).map(Math.abs)));
  for (const w of data.words) {
    const row = table.insertRow();
    row.insertCell().textContent = w.word;
    for (const m of data.models) row.insertCell().textContent = w.logprobs[m].toFixed(3);
    for (const m of rest) {
      const d = w.difference[m];
      const cell = row.insertCell();
      const bar = document.createElement("span");
      bar.className = "diffbar";
      bar.style.width = `${(3 * Math.abs(d) / top).toFixed(2)}rem`;
      bar.style.background = d >= 0 ? "hsl(130, 55%, 55%)" : "hsl(0, 70%, 60%)";
      cell.append(bar, document.createTextNode(` ${d >= 0 ? "+" : ""}${d.toFixed(3)}`));
    }
  }
  const card = document.createElement("div");
  card.className = "card";
  card.innerHTML = "<h3>Word differences (positive: the model is more sure of the word than the first)</h3>";
  card.append(table);
  out.append(card);
}

// --- Embed: the nearest lines to a text ----------------------------------------------------

// Cosine similarity in float64 (the vectors come as float32 numbers).
function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

$("#embed-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!(await ready())) return;
  const lines = $("#embed-lines").value.split("\n").filter((line) => line.trim() !== "");
  if (!lines.length) { showError("Write at least one line to compare the text with."); return; }
  const body = { input: [$("#embed-query").value, ...lines], model: $("#model").value,
    normalize: true };
  if ($("#embed-pooling").value) body.pooling = $("#embed-pooling").value;
  const button = $("#embed-run");
  busy(button, true);
  try {
    const data = await api("/v1/embeddings", body);
    showCode("/v1/embeddings", body);
    renderNeighbours(lines, data.data.map((d) => d.embedding));
    showError(null);
  } catch (error) { showError(error); } finally { busy(button, false); }
});

function renderNeighbours(lines, vectors) {
  const [query, ...rest] = vectors;
  const ranked = rest.map((v, k) => ({ line: lines[k], k, cos: cosine(query, v) }))
    .sort((a, b) => b.cos - a.cos || a.k - b.k);
  const table = document.createElement("table");
  table.className = "diff neighbours";
  table.innerHTML = "<tr><th>#</th><th>cosine</th><th>line</th></tr>";
  ranked.forEach((r, rank) => {
    const row = table.insertRow();
    row.dataset.cosine = r.cos;
    row.insertCell().textContent = String(rank + 1);
    const cell = row.insertCell();
    const bar = document.createElement("span");
    bar.className = "diffbar";
    bar.style.width = `${(3 * Math.max(0, r.cos)).toFixed(2)}rem`;
    bar.style.background = "hsl(210, 60%, 55%)";
    cell.append(bar, document.createTextNode(` ${r.cos.toFixed(4)}`));
    row.insertCell().textContent = r.line;
  });
  const card = document.createElement("div");
  card.className = "card";
  card.innerHTML = `<h3>Nearest lines (${query.length} dimensions)</h3>`;
  card.append(table);
  const out = $("#embed-out");
  out.innerHTML = "";
  out.append(card);
}

// --- Unmask: generate / infill, streamed step by step ---------------------------------------

$("#unmask-task").addEventListener("change", () => {
  const infill = $("#unmask-task").value === "infill";
  $("#unmask-input").value = infill ? "Open the [MASK:3] and return its [MASK]." : "Return the";
  $("#unmask-length").disabled = infill;
});

function unmaskBody() {
  const task = $("#unmask-task").value;
  const body = { model: model(), stream: true };
  body[task === "infill" ? "template" : "prompt"] = $("#unmask-input").value;
  if (task === "generate") body.length = Number($("#unmask-length").value);
  const steps = $("#unmask-steps").value;
  if (steps) body.steps = Number(steps);
  body.sampler = $("#unmask-sampler").value;
  const reveal = $("#unmask-reveal").value;
  if (reveal !== "count") body.reveal = reveal;
  const setting = decimalField("#unmask-setting");
  if (setting !== undefined) body[REVEAL_SETTING[reveal] || "threshold"] = setting;
  const gap = numberField("#unmask-gap");
  if (gap !== undefined) body.min_gap = gap;
  body.temperature = Number($("#unmask-temperature").value);
  const block = $("#unmask-block").value;
  if (block) body.block_length = Number(block);
  body.seed = Number($("#unmask-seed").value);
  return [task, body];
}

// The result's cost as the API returns it (`cost`: mlmkit.generation.cost.Cost), each number in
// its own <b> (class: the field).
function resultCost(cost) {
  const parts = [
    ["nfe", cost.nfe, ` model call${cost.nfe === 1 ? "" : "s"} (NFE)`],
    ["tokens", cost.tokens, " tokens"],
    ["tokens-per-call", cost.tokens_per_call.toFixed(2), " tokens/call"],
    ["seconds", cost.seconds.toFixed(3), " s"],
    ["steps", cost.steps, " steps"],
  ];
  if (cost.scoring_calls) {
    parts.push(["scoring-calls", cost.scoring_calls, " scoring calls to rank the candidates"],
      ["scoring-seconds", cost.scoring_seconds.toFixed(3), " s of scoring"]);
  }
  return parts.flatMap(([name, value, unit], i) => {
    const b = document.createElement("b");
    b.className = name;
    b.textContent = value;
    return [b, document.createTextNode(unit + (i < parts.length - 1 ? " · " : ""))];
  });
}

// Parse a text/event-stream body into events, handing each to `onEvent(name, data)`.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      onEvent(name, JSON.parse(data));
    }
  }
}

function initialFrame(step) {
  // The canvas before the first step: every position masked now or revealed at step 1.
  return { step: 0, block: 0, cost: { calls: 0, filled: 0, seconds: 0 }, rows: step.rows.map((r) => ({
    row: r.row, tokens: r.tokens, masked: r.masked.map((m, i) => m || r.revealed[i]),
    revealed: r.revealed.map(() => false), confidence: null })) };
}

// The cost of the run up to a step, as the CLI's live view shows it: model calls (NFE), masks
// filled per call and wall time, as the step event carries them.
function stepCost(step) {
  return { calls: step.model_calls, filled: step.filled, seconds: step.seconds };
}

function costText(cost) {
  const perCall = cost.calls ? cost.filled / cost.calls : 0;
  return `${cost.calls} model call${cost.calls === 1 ? "" : "s"} · ${perCall.toFixed(2)} tokens/call · ${cost.seconds.toFixed(2)} s`;
}

function renderFrame(index) {
  state.frame = index;
  const frames = state.steps;
  $("#unmask-scrubber").value = index;
  $("#unmask-step").textContent = `step ${index} / ${Math.max(0, frames.length - 1)}`;
  $("#unmask-cost").textContent = frames.length ? costText(frames[index].cost) : "";
  const canvas = $("#unmask-canvas");
  canvas.innerHTML = "";
  if (!frames.length) return;
  const frame = frames[index];
  frame.rows.forEach((row, r) => {
    // The confidence of each position when it was revealed, up to this frame.
    const conf = row.tokens.map(() => null);
    for (let s = 1; s <= index; s++) {
      const past = frames[s].rows[r];
      past.revealed.forEach((on, i) => { if (on && past.confidence) conf[i] = past.confidence[i]; });
    }
    const line = document.createElement("div");
    line.className = "canvas-row";
    if (frame.rows.length > 1) {
      const label = document.createElement("span");
      label.className = "row-label";
      label.textContent = `#${row.row + 1}`;
      line.append(label);
    }
    pieces(row.tokens).forEach((piece, i) => {
      if (piece.space) line.append(document.createTextNode(" "));
      const span = document.createElement("span");
      span.className = "ct";
      if (row.masked[i]) {
        span.classList.add("mask");
        span.textContent = "▢";
      } else {
        span.textContent = piece.text;
        if (conf[i] !== null && conf[i] !== undefined) {
          span.style.background = confidenceColour(conf[i]);
          span.title = `p = ${conf[i].toFixed(4)} when revealed`;
        }
        if (row.revealed[i]) span.classList.add("new");
      }
      line.append(span);
    });
    canvas.append(line);
  });
}

function stopPlaying() {
  clearInterval(state.timer);
  state.timer = null;
  $("#unmask-play").textContent = "▶ Play";
}

$("#unmask-play").addEventListener("click", () => {
  if (state.timer) { stopPlaying(); return; }
  const last = state.steps.length - 1;
  if (state.frame >= last) renderFrame(0);
  $("#unmask-play").textContent = "⏸ Pause";
  state.timer = setInterval(() => {
    if (state.frame >= last) { stopPlaying(); return; }
    renderFrame(state.frame + 1);
  }, 250);
});

$("#unmask-scrubber").addEventListener("input", (event) => {
  stopPlaying();
  renderFrame(Number(event.target.value));
});

$("#unmask-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!(await ready())) return;
  stopPlaying();
  const [task, body] = unmaskBody();
  const path = `/v1/${task}`;
  const button = $("#unmask-run");
  busy(button, true);
  state.steps = [];
  renderFrame(0);
  $("#unmask-out").innerHTML = "";
  $("#unmask-play").disabled = true;
  $("#unmask-scrubber").disabled = true;
  try {
    const response = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!response.ok) {
      const data = await response.json().catch(() => null);
      throw new Error(`${response.status}: ${data && data.error ? data.error.message : response.statusText}`);
    }
    showCode(path, body);
    let failure = null;
    await readEvents(response, (name, data) => {
      if (name === "step") {
        if (!state.steps.length) state.steps.push(initialFrame(data));
        data.cost = stepCost(data);
        state.steps.push(data);
        $("#unmask-scrubber").max = state.steps.length - 1;
        renderFrame(state.steps.length - 1);
      } else if (name === "result") {
        const result = data.results[0];
        const card = document.createElement("div");
        card.className = "card";
        card.id = "unmask-result";
        card.innerHTML = "<h3>Result</h3><p class='text'></p><p class='hint meta'></p>";
        card.querySelector(".text").textContent = task === "generate" ? result.full_text : result.text;
        card.querySelector(".meta").append(...resultCost(result.cost));
        $("#unmask-out").append(card);
      } else if (name === "error") {
        failure = new Error(data.error.message);
      }
    });
    if (failure) throw failure;
    $("#unmask-play").disabled = state.steps.length < 2;
    $("#unmask-scrubber").disabled = state.steps.length < 2;
    showError(null);
  } catch (error) { showError(error); } finally { busy(button, false); }
});

loadModels();
