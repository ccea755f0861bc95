// Compare view: two or more configurations -> /api/compare -> the same charts, a table, differences in words.
import { api, buildForm, debounce, el, exportBox, fmt, getOptions, typed, writeURL } from "./app.js";
import { chartCard, resizeAll } from "./charts.js";
import { DEFAULTS as EST, body, drawCurves, drawRoofline, fields } from "./estimate.js";

const PER_CONFIG = ["model", "hardware", "weights", "kv_cache", "tp"];
const SHARED = { prompt: 1024, context: 2048, batch: 32 };
const PRESETS = {
  "H100 vs H200": [{ hardware: "h100-sxm" }, { hardware: "h200-sxm" }],
  "BF16 vs FP8 KV": [{ kv_cache: "" }, { kv_cache: "fp8" }],
  "TP1 vs TP2": [{ tp: 1 }, { tp: 2 }],
};
const BASE = { model: EST.model, hardware: "h100-sxm", weights: "fp8", kv_cache: "fp8", tp: 1 };
export const DEFAULTS = { ...SHARED, cfgs: [{ ...BASE }, { ...BASE, hardware: "h200-sxm" }] };
const LETTERS = "ABCDEF";
let state = null;

export async function mount(main, params) {
  const opts = getOptions();
  state = Object.keys(params).length || !state ? typed(params, DEFAULTS) : state;
  if (!Array.isArray(state.cfgs) || state.cfgs.length < 2) state.cfgs = DEFAULTS.cfgs.map((c) => ({ ...c }));
  const charts = { roof: chartCard("rooflines and ops (per GPU; labels: A)"), tps: chartCard("decode throughput vs batch"),
    tpot: chartCard("TPOT vs batch") };
  const words = el("div", { class: "words", id: "differences", "aria-live": "polite" });
  const table = el("table", { class: "rows", id: "compare-table" });
  const cards = el("div", { class: "cfgs" });
  const status = el("span", { class: "status", "aria-live": "polite" });
  const exp = exportBox();
  let forms = [], inflight = null, seq = 0;

  const shared = buildForm(fields(opts).filter((f) => f.name in SHARED).map((f) => ({ ...f, range: undefined })), state, changed);
  function changed() { writeURL("compare", state, DEFAULTS); update(); }

  function renderCards() {
    cards.replaceChildren();
    forms = state.cfgs.map((cfg, i) => {
      const f = buildForm(fields(opts).filter((x) => PER_CONFIG.includes(x.name)).map((x) => ({ ...x, half: x.name !== "model" && x.name !== "hardware" })), cfg, changed, `c${i}-`);
      const remove = el("button", { type: "button", class: "small", text: "remove", disabled: state.cfgs.length <= 2,
        "aria-label": `remove configuration ${LETTERS[i]}`, onclick: () => { state.cfgs.splice(i, 1); renderCards(); changed(); } });
      cards.append(el("div", { class: "cfg", id: `cfg-${i}` }, el("h3", {}, `Configuration ${LETTERS[i]}`, remove), f.form));
      return f;
    });
  }

  const update = debounce(async () => {
    const my = ++seq;
    if (inflight) inflight.abort();
    inflight = new AbortController();
    status.textContent = "computing…";
    const sh = body({ ...EST, ...state });
    const configs = state.cfgs.map((c) => body({ ...EST, ...c, prompt: sh.prompt, context: sh.context, batch: sh.batch }));
    try {
      const data = await api("/api/compare", { configs }, inflight.signal);
      if (my !== seq) return;
      shared.setError(null, null); forms.forEach((f) => f.setError(null, null));
      render(data, configs);
      status.textContent = "";
      main.querySelector(".results").classList.remove("stale");
    } catch (e) {
      if (e.name === "AbortError" || my !== seq) return;
      const [idx, field] = (e.field || "").split(".");
      if (field && forms[Number(idx)]) forms[Number(idx)].setError(field, e.message);
      else if (e.field && e.field in SHARED) shared.setError(e.field, e.message);
      else shared.setError(null, e.message);
      status.textContent = "";
      main.querySelector(".results").classList.add("stale");
    }
  }, 15);

  function render(data, configs) {
    words.replaceChildren(...data.differences.map((w) => el("p", { text: w })));
    const rows = [
      ["TTFT", (r) => r.prefill.ttft_s, fmt.ms], ["TPOT at the batch", (r) => r.decode.at(-1).step_time_s, fmt.ms],
      ["TPOT floor", (r) => r.decode.at(-1).floor_step_time_s, fmt.ms],
      ["decode tok/s (replica)", (r) => r.decode.at(-1).tokens_per_s, (x) => fmt.num(x)],
      ["$ per M output tokens", (r) => r.decode.at(-1).cost_per_million_output_tokens, fmt.usd],
      ["memory at the batch (per GPU)", (r) => r.decode.at(-1).required_bytes, fmt.gb],
      ["fits", (r) => r.decode.at(-1).fits, (x) => (x ? "yes" : "no")],
      ["max batch at the context", (r) => r.memory.max_batch, (x) => fmt.num(x)],
      ["GPUs", (r) => r.parallel.num_gpus, (x) => fmt.num(x)],
    ];
    table.replaceChildren(
      el("thead", {}, el("tr", {}, el("th", { text: "at the shared batch and context" }), configs.map((c, i) => el("th", { text: `${LETTERS[i]}: ${c.hardware}, ${c.weights}/${c.kv_cache || "16-bit"} KV, TP${c.tp}` })))),
      el("tbody", {}, rows.map(([name, get, show]) => el("tr", {}, el("td", { text: name }),
        data.items.map((it, i) => el("td", { "data-config": LETTERS[i], "data-value": String(get(it.result)), text: show(get(it.result)) }))))));
    const extra = data.items.slice(1).map((it, i) => [it, ` (${LETTERS[i + 1]})`]);
    const first = [data.items[0], " (A)"];
    drawRoofline(charts.roof, first[0], extra);
    drawCurves(charts, first[0], extra);
    exp.set(data.items.map((it) => it.command).join("\n"), data, data.items.flatMap((it, i) => it.curve.map((p) => ({ config: LETTERS[i], ...p }))), "infercast-compare");
  }

  const presets = el("div", { class: "filters" }, el("span", { class: "muted", text: "try:" }),
    Object.entries(PRESETS).map(([name, pair]) => el("button", { type: "button", class: "small", text: name, onclick: () => {
      state.cfgs = pair.map((p) => ({ ...BASE, ...p })); renderCards(); changed();
    } })),
    el("button", { type: "button", class: "small", text: "add configuration", id: "add-config", onclick: () => {
      if (state.cfgs.length >= 6) return;
      state.cfgs.push({ ...state.cfgs.at(-1) }); renderCards(); changed();
    } }));
  const results = el("section", { class: "results", "aria-label": "results" },
    el("div", { class: "toolbar" }, el("h2", { text: "Compare" }), status), words, table,
    el("div", { class: "charts three" }, charts.roof.card, charts.tps.card, charts.tpot.card), exp.box);
  main.append(el("section", { class: "panel", "aria-label": "configurations" }, presets, cards,
    el("div", { class: "shared" }, el("h2", { text: "Shared by all" }), shared.form)), results);
  renderCards();
  window.onresize = debounce(() => resizeAll(Object.values(charts)), 100);
  changed();
}

export function leave() { window.onresize = null; }
