// The page of `transformer-lab serve`: talks to the JSON API, draws heat-maps on <canvas>
// and masks as SVG. No libraries: everything here is plain DOM.
"use strict";

const state = { models: [], model: null, tab: "try", attention: null, translateText: "" };

function $(id) { return document.getElementById(id); }

function element(tag, attributes = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

function svgElement(tag, attributes = {}, text = null) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

// POST a JSON body; an error answer ({"error": ...}) becomes a thrown Error with its message.
async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
  return answer;
}

// Run `work` with its button disabled and its status line telling what happened.
async function withStatus(button, status, work) {
  button.disabled = true;
  status.classList.remove("error");
  status.textContent = "working…";
  try {
    const answer = await work();
    status.textContent = answer && answer.elapsed_ms !== undefined ? `${answer.elapsed_ms} ms on the server` : "";
  } catch (error) {
    status.textContent = error.message;
    status.classList.add("error");
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------- models and tabs

async function loadModels() {
  const response = await fetch("/api/models");
  state.models = (await response.json()).models;
  const select = $("model-select");
  select.replaceChildren(...state.models.map((model) => element("option", { value: model.name }, `${model.name} (${model.task})`)));
  $("no-models").hidden = state.models.length > 0;
  chooseModel(state.models.length ? state.models[0].name : null);
}

function chooseModel(name) {
  state.model = state.models.find((model) => model.name === name) || null;
  const model = state.model;
  $("model-facts").textContent = model
    ? Object.entries(model).filter(([key]) => !["name", "task", "labels", "endpoints"].includes(key)).map(([key, value]) => `${key} ${value}`).join(" · ")
    : "";
  if (model && paneTask(model) === "") showGenericPane(model);
  // A hand-written pane's inputs (data-field) take the bounds and defaults their task declares.
  for (const field of model ? model.endpoints.flatMap((endpoint) => endpoint.fields) : []) {
    for (const input of document.querySelectorAll(`.pane[data-task="${paneTask(model)}"] [data-field="${field.name}"]`)) declare(input, field);
  }
  if (model && model.task === "translation") {
    // The checkpoint's own search, so that the page answers as `translate` does.
    document.querySelector(`input[name=strategy][value=${model.strategy}]`).checked = true;
    $("beam-size").value = model.beam_size;
  }
  showTab(state.tab);
}

// The data-task of the pane that shows `model`: its task's own, else "" (the generic pane).
function paneTask(model) {
  return Array.from(document.querySelectorAll(".pane[data-task]")).some((pane) => pane.dataset.task === model.task) ? model.task : "";
}

function showTab(tab) {
  state.tab = tab;
  for (const button of document.querySelectorAll(".tab")) button.classList.toggle("active", button.dataset.pane === tab);
  for (const pane of document.querySelectorAll(".pane")) {
    pane.hidden = tab === "masks" ? pane.id !== "pane-masks" : !(state.model && pane.dataset.task === paneTask(state.model));
  }
}

// ---------------------------------------------------------------- heat-map on <canvas>

// Matplotlib's viridis at five stops, interpolated: dark = little attention, yellow = much.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

function viridis(value) {
  const clamped = Math.min(1, Math.max(0, value)) * (VIRIDIS.length - 1);
  const low = Math.min(Math.floor(clamped), VIRIDIS.length - 2);
  const fraction = clamped - low;
  const channel = (index) => Math.round(VIRIDIS[low][index] + fraction * (VIRIDIS[low + 1][index] - VIRIDIS[low][index]));
  return `rgb(${channel(0)}, ${channel(1)}, ${channel(2)})`;
}

// Draw `weights` (rows x columns, values in [0, 1]) with the row labels on the left and the
// column labels on top; remember the geometry for the hover read-out.
function drawHeatmap(canvas, weights, rowLabels, columnLabels) {
  const context = canvas.getContext("2d");
  const font = "12px system-ui, sans-serif";
  context.font = font;
  const widest = (labels) => Math.max(...labels.map((label) => context.measureText(label).width), 10);
  const rows = weights.length, columns = weights[0].length;
  const cell = Math.max(14, Math.min(34, Math.floor(620 / Math.max(rows, columns))));
  const left = Math.ceil(widest(rowLabels)) + 12, top = Math.ceil(widest(columnLabels)) + 12;
  const ratio = window.devicePixelRatio || 1;
  const width = left + columns * cell + 60, height = top + rows * cell + 10;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.fillStyle = "#fff";
  context.fillRect(0, 0, width, height);
  for (let row = 0; row < rows; row++) {
    for (let column = 0; column < columns; column++) {
      context.fillStyle = viridis(weights[row][column]);
      context.fillRect(left + column * cell, top + row * cell, cell, cell);
    }
  }
  context.font = font;
  context.fillStyle = "#1d2330";
  context.textBaseline = "middle";
  context.textAlign = "right";
  rowLabels.forEach((label, row) => context.fillText(label, left - 6, top + row * cell + cell / 2));
  context.save();
  context.rotate(-Math.PI / 2);
  context.textAlign = "left";
  columnLabels.forEach((label, column) => context.fillText(label, -(top - 6), left + column * cell + cell / 2));
  context.restore();
  // Colour scale: 0 at the bottom, 1 at the top.
  const scaleLeft = left + columns * cell + 16, scaleHeight = rows * cell;
  for (let y = 0; y < scaleHeight; y++) {
    context.fillStyle = viridis(1 - y / Math.max(scaleHeight - 1, 1));
    context.fillRect(scaleLeft, top + y, 12, 1);
  }
  context.textAlign = "left";
  context.fillStyle = "#5b6475";
  context.fillText("1", scaleLeft + 16, top + 5);
  context.fillText("0", scaleLeft + 16, top + scaleHeight - 5);
  canvas.dataset.rows = rows;
  canvas.dataset.columns = columns;
  canvas.dataset.drawn = "true";
  canvas.heatmap = { weights, rowLabels, columnLabels, left, top, cell };
}

function hoverHeatmap(event) {
  const canvas = event.currentTarget, map = canvas.heatmap, out = $("attention-hover");
  if (!map) return;
  const bounds = canvas.getBoundingClientRect();
  const column = Math.floor((event.clientX - bounds.left - map.left) / map.cell);
  const row = Math.floor((event.clientY - bounds.top - map.top) / map.cell);
  const inside = row >= 0 && column >= 0 && row < map.weights.length && column < map.weights[0].length;
  out.textContent = inside ? `“${map.rowLabels[row]}” → “${map.columnLabels[column]}”: ${map.weights[row][column].toFixed(3)}` : "";
}

// ---------------------------------------------------------------- translation

function meanOfHeads(heads) {
  return heads[0].map((row, rowIndex) => row.map((_, column) => heads.reduce((sum, head) => sum + head[rowIndex][column], 0) / heads.length));
}

function showAttention(attention) {
  state.attention = attention;
  const layers = attention.weights.length, heads = attention.weights[0].length;
  const layerSelect = $("attention-layer"), headSelect = $("attention-head");
  const keepLayer = Math.min(Number(layerSelect.value || layers - 1), layers - 1);
  const keepHead = headSelect.value || "mean";
  layerSelect.replaceChildren(...Array.from({ length: layers }, (_, layer) => element("option", { value: layer }, `${layer}`)));
  headSelect.replaceChildren(
    element("option", { value: "mean" }, "mean of heads"),
    ...Array.from({ length: heads }, (_, head) => element("option", { value: head }, `${head}`)),
  );
  layerSelect.value = keepLayer;
  headSelect.value = keepHead === "mean" || Number(keepHead) < heads ? keepHead : "mean";
  $("attention-block").hidden = false;
  redrawAttention();
}

function redrawAttention() {
  const attention = state.attention;
  if (!attention) return;
  const layer = attention.weights[Number($("attention-layer").value)];
  const head = $("attention-head").value;
  const weights = head === "mean" ? meanOfHeads(layer) : layer[Number(head)];
  drawHeatmap($("attention-canvas"), weights, attention.target_tokens, attention.source_tokens);
}

function showCandidates(candidates) {
  const body = $("translation-nbest").querySelector("tbody");
  body.replaceChildren(...candidates.map((candidate, index) => {
    const row = element("tr", { "data-index": index });
    row.append(
      element("td", { class: "number" }, `${index + 1}`),
      element("td", { class: "translation" }, candidate.text || "(empty)"),
      element("td", { class: "number" }, candidate.score.toFixed(3)),
      element("td", { class: "number" }, candidate.log_prob.toFixed(3)),
    );
    row.addEventListener("click", () => chooseCandidate(candidates, index));
    return row;
  }));
  body.firstChild.classList.add("chosen");
  $("translation-nbest").hidden = false;
}

async function chooseCandidate(candidates, index) {
  for (const row of $("translation-nbest").querySelectorAll("tbody tr")) row.classList.toggle("chosen", Number(row.dataset.index) === index);
  await withStatus($("translate-button"), $("translation-status"), async () => {
    const answer = await post("/api/translation/attention", { model: state.model.name, text: state.translateText, target_ids: candidates[index].ids });
    showAttention(answer);
    return answer;
  });
}

async function translate() {
  const strategy = document.querySelector("input[name=strategy]:checked").value;
  const text = $("translation-input").value;
  await withStatus($("translate-button"), $("translation-status"), async () => {
    // The server refuses a beam size with greedy search, which would ignore it.
    const body = { model: state.model.name, text, strategy };
    if (strategy === "beam") body.beam_size = Number($("beam-size").value);
    const answer = await post("/api/translate", body);
    state.translateText = text;
    showCandidates(answer.candidates);
    showAttention(answer.attention);
    return answer;
  });
}

// ---------------------------------------------------------------- classification

async function classify() {
  await withStatus($("classify-button"), $("classification-status"), async () => {
    const answer = await post("/api/classify", { model: state.model.name, text: $("classification-input").value });
    $("classification-label").textContent = answer.label;
    const best = Math.max(...answer.classes.map((entry) => entry.probability));
    $("classification-bars").replaceChildren(...answer.classes.map((entry) => {
      const row = element("div", { class: entry.probability === best ? "bar-row best" : "bar-row" });
      const track = element("div", { class: "bar-track" });
      const fill = element("div", { class: "bar-fill" });
      fill.style.width = `${(100 * entry.probability).toFixed(1)}%`;
      track.append(fill);
      row.append(element("span", { class: "bar-label" }, entry.label), track, element("span", { class: "bar-value" }, `${(100 * entry.probability).toFixed(1)}%`));
      return row;
    }));
    return answer;
  });
}

// ---------------------------------------------------------------- couplet

const PUNCTUATION = /[\p{P}\p{S}]/u;

// One row per line, one cell per character, so that lengths and punctuation line up; a
// cell whose punctuation disagrees with the upper line's is marked.
async function writeCouplet() {
  await withStatus($("couplet-button"), $("couplet-status"), async () => {
    const answer = await post("/api/couplet", { model: state.model.name, text: $("couplet-input").value, count: Number($("couplet-count").value) });
    const upper = Array.from(answer.upper);
    const lines = answer.candidates.map((candidate) => Array.from(candidate.text));
    const width = Math.max(upper.length, ...lines.map((line) => line.length));
    const table = element("table", { class: "couplet-grid" });
    const addRow = (characters, label, className, reference) => {
      const row = element("tr", { class: className });
      for (let index = 0; index < width; index++) {
        const character = characters[index] || "";
        const punctuation = PUNCTUATION.test(character);
        const mismatch = reference && (index >= reference.length || index >= characters.length || punctuation !== PUNCTUATION.test(reference[index]));
        row.append(element("td", { class: mismatch ? "mismatch" : punctuation ? "punctuation" : "" }, character));
      }
      row.append(element("th", {}, label));
      table.append(row);
    };
    addRow(upper, "upper line", "upper", null);
    answer.candidates.forEach((candidate, index) => {
      const facts = [`score ${candidate.score.toFixed(3)}`, candidate.length_matches ? "length ✓" : "length ✗", candidate.punctuation_matches ? "punctuation ✓" : "punctuation ✗"];
      addRow(lines[index], `${index + 1}. ${facts.join(" · ")}`, "lower", upper);
    });
    $("couplet-lines").replaceChildren(table);
    return answer;
  });
}

// ---------------------------------------------------------------- any other task: a form per declared endpoint

// Give `input` the bounds and the default that `field` (of GET /api/models) declares.
function declare(input, field) {
  if (field.minimum !== undefined) input.min = field.minimum;
  if (field.maximum !== undefined) input.max = field.maximum;
  if (field.type === "text" && field.max_length !== undefined) input.maxLength = field.max_length;
  if (field.default !== undefined) input.value = ["text", "integer", "number"].includes(field.type) ? field.default : JSON.stringify(field.default);
  return input;
}

// The input of a field, as its type asks.
function fieldInput(field) {
  let input;
  if (field.type === "choice") {
    input = element("select");
    input.append(...field.choices.map((choice) => element("option", { value: JSON.stringify(choice) }, `${choice}`)));
  } else if (field.type === "boolean") {
    input = element("input", { type: "checkbox" });
    input.checked = Boolean(field.default);
  } else if (field.type === "integer" || field.type === "number") {
    input = element("input", { type: "number", step: field.type === "integer" ? "1" : "any" });
  } else {
    input = element("textarea", { rows: field.type === "text" ? 3 : 1 });  // a text, or JSON for a list or any other value
  }
  input.name = field.name;
  input.required = field.required && field.type !== "boolean";
  return field.type === "boolean" ? input : declare(input, field);
}

function fieldHint(field) {
  const range = (low, high, unit) =>
    low !== undefined && high !== undefined ? `${low} to ${high}${unit}` : low !== undefined ? `at least ${low}${unit}` : high !== undefined ? `at most ${high}${unit}` : "";
  const unit = field.type === "text" ? " characters" : " items";
  return [field.type === "json" ? "JSON" : "", field.description, range(field.minimum, field.maximum, ""), range(field.min_length, field.max_length, unit)]
    .filter(Boolean).join("; ");
}

// A field's JSON value; undefined (left out, the server's default) for an optional field left empty.
function fieldValue(field, input) {
  if (field.type === "boolean") return input.checked;
  if (input.value === "" && !field.required) return undefined;
  if (field.type === "integer" || field.type === "number") return Number(input.value);
  if (field.type === "text") return input.value;
  try {
    return JSON.parse(input.value);
  } catch (error) {
    throw new Error(`${field.name}: expected JSON, got ${JSON.stringify(input.value)} (${error.message})`);
  }
}

function endpointForm(model, endpoint) {
  const form = element("form", { class: "endpoint", "data-path": endpoint.path });
  form.append(element("h3", {}, `POST ${endpoint.path}`));
  const inputs = endpoint.fields.map((field) => {
    const input = fieldInput(field);
    const label = element("label", { class: "field" });
    label.append(element("span", { class: "field-name" }, field.name), input, element("span", { class: "hint" }, fieldHint(field)));
    form.append(label);
    return input;
  });
  const controls = element("div", { class: "controls" });
  const button = element("button", { type: "submit" }, "Send"), status = element("span", { class: "status" });
  const answer = element("pre", { class: "answer-json", hidden: "" });
  controls.append(button, status);
  form.append(controls, answer);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    withStatus(button, status, async () => {
      const body = { model: model.name };
      endpoint.fields.forEach((field, index) => {
        const value = fieldValue(field, inputs[index]);
        if (value !== undefined) body[field.name] = value;
      });
      const result = await post(endpoint.path, body);
      answer.textContent = JSON.stringify(result, null, 2);
      answer.hidden = false;
      return result;
    });
  });
  return form;
}

function showGenericPane(model) {
  $("generic-title").textContent = model.task;
  $("generic-forms").replaceChildren(...model.endpoints.map((endpoint) => endpointForm(model, endpoint)));
}

// ---------------------------------------------------------------- masks

// Where each mask is used, as the lab explains it.
const MASK_USES = {
  causal: "the decoder may not look ahead",
  key_padding: "encoder self-attention and cross-attention",
  decoder: "decoder self-attention",
  rows_and_columns: "never needed: the loss ignores padded rows",
};

function maskPanel(panel, tokens) {
  const cell = Math.max(10, Math.min(22, Math.floor(260 / tokens.length)));
  const labelWidth = 70, size = tokens.length * cell;
  const svg = svgElement("svg", { width: labelWidth + size + 4, height: labelWidth + size + 4, "data-name": panel.name });
  panel.hidden.forEach((row, query) => row.forEach((hidden, key) => {
    const rect = svgElement("rect", { x: labelWidth + key * cell, y: labelWidth + query * cell, width: cell - 1, height: cell - 1, class: hidden ? "hidden" : "visible" });
    rect.append(svgElement("title", {}, `query ${query} “${tokens[query]}”, key ${key} “${tokens[key]}”: ${hidden ? "True (hidden)" : "False (may attend)"}`));
    svg.append(rect);
  }));
  tokens.forEach((token, index) => {
    const short = token.length > 10 ? `${token.slice(0, 9)}…` : token;
    svg.append(svgElement("text", { x: labelWidth - 4, y: labelWidth + index * cell + cell / 2 + 3, "text-anchor": "end" }, short));
    const x = labelWidth + index * cell + cell / 2 + 3;
    svg.append(svgElement("text", { x, y: labelWidth - 4, transform: `rotate(-90 ${x} ${labelWidth - 4})` }, short));
  });
  const figure = element("figure", { class: "mask-panel" });
  const caption = element("figcaption", {}, panel.title);
  caption.append(element("br"), element("i", {}, MASK_USES[panel.name] || ""));
  figure.append(svg, caption);
  return figure;
}

async function drawMasks() {
  const sentences = $("masks-input").value.split("\n").filter((line) => line.trim());
  const body = { sentences };
  if ($("masks-subwords").checked && state.model) body.model = state.model.name;
  await withStatus($("masks-button"), $("masks-status"), async () => {
    const answer = await post("/api/masks", body);
    $("masks-output").replaceChildren(...answer.sentences.map((sentence, index) => {
      const block = element("div", { class: "mask-sentence" });
      block.append(element("h3", {}, `sentence ${index + 1}: ${sentence.real_length} ${answer.tokenizer}, padded to ${answer.length}`));
      const panels = element("div", { class: "mask-panels" });
      panels.append(...sentence.panels.map((panel) => maskPanel(panel, sentence.tokens)));
      block.append(panels);
      return block;
    }));
    return answer;
  });
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll(".tab")) button.addEventListener("click", () => showTab(button.dataset.pane));
  $("model-select").addEventListener("change", (event) => chooseModel(event.target.value));
  $("translate-button").addEventListener("click", translate);
  $("attention-layer").addEventListener("change", redrawAttention);
  $("attention-head").addEventListener("change", redrawAttention);
  $("attention-canvas").addEventListener("mousemove", hoverHeatmap);
  $("classify-button").addEventListener("click", classify);
  $("couplet-button").addEventListener("click", writeCouplet);
  $("masks-button").addEventListener("click", drawMasks);
  loadModels().catch((error) => { $("no-models").hidden = false; $("no-models").textContent = `Could not list the models: ${error.message}`; });
});
