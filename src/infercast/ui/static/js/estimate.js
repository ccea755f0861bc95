// Estimate view: one configuration -> /api/estimate -> roofline, tok/s and TPOT vs batch, TTFT, $/M, fit.
import { api, buildForm, debounce, el, exportBox, fmt, getOptions, jsonSafe, setStat, statCard as card, typed, writeURL } from "./app.js";
import { COLORS, bands, chartCard, draw, labels, resizeAll, setLegend, si, vline } from "./charts.js";

export const DEFAULTS = {
  model: "llama-3.1-70b", model_config_json: "", hardware: "h100-sxm", hardware_spec: "", weights: "fp8",
  compute: "", kv_cache: "fp8", tp: 1, pp: 1, ep: 1, prompt: 1024, context: 2048, batch: 32,
  profile: "shipped", engine: "", price: NaN,
};
const REGIME_COLORS = { weights: "rgba(31,111,178,0.10)", KV: "rgba(210,105,30,0.13)",
  compute: "rgba(46,139,87,0.13)", link: "rgba(138,43,226,0.12)" };
const REGIME_WORDS = { weights: "memory-bound: reading weights", KV: "memory-bound: reading the KV cache",
  compute: "compute-bound", link: "link-bound (TP/PP traffic)" };

let state = null;
window.__perf = window.__perf || { updates: [] };

export function fields(opts, prefix = "") {
  const dt = opts.dtypes;
  return [
    { name: "model", label: `${prefix}model`, type: "select", options: [...opts.models, ["custom", "custom: paste a config.json"]] },
    { name: "model_config_json", label: "config.json (Hugging Face)", type: "textarea", placeholder: '{"architectures": ["LlamaForCausalLM"], ...}', upload: ".json,application/json", when: (s) => s.model === "custom" },
    { name: "hardware", label: "hardware", type: "select", options: [...opts.hardware.map((h) => [h.key, `${h.key} (${h.name})`]), ["custom", "custom: paste a part (TOML/JSON)"]] },
    { name: "hardware_spec", label: "part spec (TOML or JSON)", type: "textarea", placeholder: 'name = "my part"\nmemory_bytes = 80e9\nmemory_bandwidth_bytes_per_s = 3.35e12\n[flops_per_s]\nbf16 = 989e12', upload: ".toml,.json", when: (s) => s.hardware === "custom" },
    { name: "weights", half: true, label: "weights", type: "select", options: [["checkpoint", "checkpoint (as shipped)"], ...dt] },
    { name: "compute", half: true, label: "compute", type: "select", options: [["", "default"], ...dt] },
    { name: "kv_cache", half: true, label: "KV cache", type: "select", options: [["", "16-bit (default)"], ...dt] },
    { name: "tp", label: "TP", type: "number", min: 1, step: 1, unit: "GPUs" },
    { name: "pp", label: "PP", type: "number", min: 1, step: 1, unit: "stages" },
    { name: "ep", label: "EP", type: "number", min: 1, step: 1, unit: "GPUs" },
    { name: "engine", half: true, label: "engine preset", type: "select", options: [["", "none"], ...opts.engines] },
    { name: "profile", half: true, label: "efficiency profile", type: "select", options: [["shipped", "shipped (fitted, validated)"], ["builtin", "built-in (code values)"]] },
    { name: "prompt", label: "prompt", type: "number", min: 1, step: 1, unit: "tokens" },
    { name: "context", label: "decode context", type: "number", min: 1, step: 1, unit: "tokens" },
    { name: "batch", label: "batch", type: "number", min: 1, step: 1, unit: "sequences", range: batchSlider },
    { name: "price", label: "price", type: "number", min: 0, step: 0.01, unit: "$/GPU-hour, empty = median quote", placeholder: "default" },
  ];
}

// A number box with a log2 slider beside it (the slider moves the box; both fire "input").
function batchSlider(input) {
  const slider = el("input", { type: "range", min: 0, max: 14, step: 0.25, "aria-label": "batch (log scale)", id: "batch-slider" });
  const sync = () => { const v = Number(input.value); if (v > 0) slider.value = Math.log2(v); };
  slider.addEventListener("input", () => {
    window.__perf.inputAt = performance.now();
    input.value = Math.max(1, Math.round(2 ** Number(slider.value)));
    input.dispatchEvent(new Event("input"));
  });
  input.addEventListener("input", sync);
  setTimeout(sync);
  return el("div", { class: "with-slider" }, input, slider);
}

export const body = jsonSafe;

export async function mount(main, params) {
  const opts = getOptions();
  state = Object.keys(params).length || !state ? typed(params, DEFAULTS) : state;
  const charts = { roof: chartCard("roofline: this step's ops (per GPU)"), tps: chartCard("decode throughput vs batch"),
    tpot: chartCard("TPOT (time per output token) vs batch"), kinds: chartCard("decode step time by op kind vs batch") };
  const stats = el("div", { class: "stats" },
    card("TTFT (prefill of the prompt)", "ttft"), card("TPOT at the batch", "tpot"), card("decode tok/s at the batch", "tps"),
    card("$ per M output tokens", "cost"), card("memory at the batch", "mem"), card("max batch at the context", "maxb"),
    card("bound at the batch", "bound"), card("$ per M input tokens", "costin"));
  const fit = el("div", { class: "fit", id: "fit", "aria-live": "polite" });
  const notes = el("ul", { class: "notes", id: "notes" });
  const exp = exportBox();
  const status = el("span", { class: "status", id: "status", "aria-live": "polite", text: "" });
  let inflight = null, seq = 0;

  const f = buildForm(fields(opts), state, (name) => {
    if (window.__perf.inputAt === undefined || name !== "batch") window.__perf.inputAt = performance.now();
    writeURL("estimate", body(state), body(DEFAULTS));
    update();
  });
  const update = debounce(async () => {
    const my = ++seq;
    if (inflight) inflight.abort();
    inflight = new AbortController();
    status.textContent = "computing…";
    try {
      const t0 = performance.now();
      const data = await api("/api/estimate", body(state), inflight.signal);
      if (my !== seq) return;
      (window.__perf.fetch = window.__perf.fetch || []).push(performance.now() - t0);  // API round trip
      f.setError(null, null);
      render(data);
      status.textContent = "";
      main.querySelector(".results").classList.remove("stale");
    } catch (e) {
      if (e.name === "AbortError" || my !== seq) return;
      f.setError(e.field, e.message);
      status.textContent = "";
      main.querySelector(".results").classList.add("stale");
    }
  }, 0);  // no wait: a newer change aborts the request in flight, and one call is ~10-40 ms

  function render(data) {
    const r = data.result, d = r.decode[r.decode.length - 1], p = r.prefill;
    setStat(main, "ttft", fmt.ms(p.ttft_s), `floor ${fmt.ms(p.floor_time_s)} · ${p.bound}-bound`, p.ttft_s);
    setStat(main, "tpot", fmt.ms(d.step_time_s), `floor ${fmt.ms(d.floor_step_time_s)} · batch ${d.batch}, context ${d.context}`, d.step_time_s);
    setStat(main, "tps", fmt.num(d.tokens_per_s), `tok/s per replica · ${fmt.num(d.tokens_per_s_per_user, 1)} per user`, d.tokens_per_s);
    setStat(main, "cost", fmt.usd(d.cost_per_million_output_tokens), r.cost.price_per_hour ? `at $${r.cost.price_per_hour}/GPU-h × ${r.cost.num_gpus} GPU` : "no price for this part", d.cost_per_million_output_tokens);
    setStat(main, "costin", fmt.usd(r.cost.per_million_input_tokens), "prefill at the prompt length", r.cost.per_million_input_tokens);
    setStat(main, "mem", `${fmt.gb(d.required_bytes)} of ${fmt.gb(r.memory.available_bytes)}`, d.fits ? "fits (per GPU)" : "DOES NOT FIT (per GPU)", d.required_bytes);
    setStat(main, "maxb", fmt.num(r.memory.max_batch), `KV holds ${fmt.num(r.memory.kv_capacity_tokens)} tokens`, r.memory.max_batch);
    setStat(main, "bound", data.regime, REGIME_WORDS[data.regime] || "", data.regime);
    main.querySelector("#stat-mem").classList.toggle("bad", !d.fits);
    fit.replaceChildren(d.fits
      ? el("p", { text: `Batch ${d.batch} at context ${d.context} fits: it needs ${fmt.gb(d.required_bytes)} per GPU of ${fmt.gb(r.memory.available_bytes)} usable.` })
      : el("div", {}, el("p", { class: "warn", text: `Batch ${d.batch} at context ${d.context} does not fit: it needs ${fmt.gb(d.required_bytes)} per GPU, ${fmt.gb(r.memory.available_bytes)} usable. What would make it fit:` }),
        el("ul", {}, r.memory.suggestions.map((s) => el("li", { text: s })))));
    notes.replaceChildren(...r.notes.map((n) => el("li", { text: n })));
    drawRoofline(charts.roof, data);
    drawCurves(charts, data);
    drawKinds(charts.kinds, data);
    exp.set(data.command, r, data.curve, `infercast-estimate-${state.model}-${state.hardware}`);
  }

  const form = el("section", { class: "panel form-panel", "aria-label": "inputs" }, el("h2", { text: "Configuration" }), f.form);
  const results = el("section", { class: "results", "aria-label": "results" },
    el("div", { class: "toolbar" }, el("h2", { text: "Estimate" }), status), stats, fit,
    el("div", { class: "charts" }, charts.roof.card, charts.tps.card, charts.tpot.card, charts.kinds.card), notes, exp.box);
  main.append(el("div", { class: "layout" }, form, results));
  window.onresize = debounce(() => resizeAll(Object.values(charts)), 100);
  writeURL("estimate", body(state), body(DEFAULTS));
  update();
}

export function leave() { window.onresize = null; }

export function drawRoofline(c, data, extra = []) {
  const rf = data.roofline;
  const sets = [[data, ""], ...extra];
  const xs = new Set();
  for (let e = -1; e <= 4.5; e += 0.25) xs.add(10 ** e);
  for (const [d] of sets) for (const o of [...d.roofline.prefill_ops, ...d.roofline.decode_ops]) xs.add(o.intensity);
  const x = [...xs].filter((v) => v > 0 && Number.isFinite(v)).sort((a, b) => a - b);
  const series = [], ys = [], pts = [];
  sets.forEach(([d, tag], i) => {
    const r = d.roofline;
    series.push({ label: `roofline${tag} (${r.compute_dtype} peak ${si(r.peak_flops_per_s)}FLOP/s, ${si(r.bandwidth_bytes_per_s)}B/s)`, color: i ? COLORS[(2 * i) % 6] : "#222", dash: i > 0 });
    ys.push(x.map((v) => Math.min(r.peak_flops_per_s, v * r.bandwidth_bytes_per_s)));
    for (const [kind, marker] of [["prefill_ops", 0], ["decode_ops", 1]]) {
      const m = new Map(r[kind].map((o) => [o.intensity, o]));
      series.push({ label: `${kind === "prefill_ops" ? "prefill" : "decode"} ops${tag}`, color: COLORS[(2 * i + marker) % 6], line: false, points: true, fill: marker ? "#fff" : undefined });
      ys.push(x.map((v) => (m.has(v) ? m.get(v).flops_per_s : null)));
      if (i === 0) for (const o of r[kind]) pts.push({ x: o.intensity, y: o.flops_per_s, text: `${o.name}` });
    }
  });
  setLegend(c, series.map((s) => [s.label, s.color, s.dash]));
  draw(c, {
    x: { label: "arithmetic intensity (FLOP/byte)", log: 10 }, y: { label: "achieved FLOP/s (expected)", log: 10 }, series,
    hooks: { draw: [(u) => { vline(u, rf.ridge_flop_per_byte, "#999", `ridge ${si(rf.ridge_flop_per_byte)} FLOP/B`); labels(u, pts, "#333"); }] },
  }, [x, ...ys]);
}

function regimeBands(curve) {
  const out = [];
  curve.forEach((p, i) => {
    const x0 = i ? Math.sqrt(curve[i - 1].batch * p.batch) : p.batch / 1.5;
    const x1 = i < curve.length - 1 ? Math.sqrt(curve[i + 1].batch * p.batch) : p.batch * 1.5;
    const last = out[out.length - 1];
    if (last && last.regime === p.regime) last.x1 = x1;
    else out.push({ x0, x1, regime: p.regime, color: REGIME_COLORS[p.regime] || "rgba(0,0,0,0.05)", label: p.regime === "KV" ? "KV-bound" : `${p.regime}-bound` });
  });
  return out;
}

export function drawCurves(c, data, extra = []) {
  const sets = [[data, ""], ...extra];
  const xs = [...new Set(sets.flatMap(([d]) => d.curve.map((p) => p.batch)))].sort((a, b) => a - b);
  const tps = [], tpot = [], s1 = [], s2 = [];
  sets.forEach(([d, tag], i) => {
    const by = new Map(d.curve.map((p) => [p.batch, p]));
    const col = COLORS[i % 6];
    s1.push({ label: `tok/s expected${tag}`, color: col, points: true, spanGaps: true }, { label: `tok/s floor${tag}`, color: col, dash: true, spanGaps: true });
    tps.push(xs.map((b) => (by.has(b) ? by.get(b).tokens_per_s : null)), xs.map((b) => (by.has(b) ? by.get(b).floor_tokens_per_s : null)));
    s2.push({ label: `TPOT expected${tag}`, color: col, points: true, spanGaps: true }, { label: `TPOT floor${tag}`, color: col, dash: true, spanGaps: true });
    tpot.push(xs.map((b) => (by.has(b) ? by.get(b).step_time_s * 1e3 : null)), xs.map((b) => (by.has(b) ? by.get(b).floor_step_time_s * 1e3 : null)));
  });
  const batch = data.result.decode[data.result.decode.length - 1].batch;
  const hooks = (primary) => (u) => {
    if (!extra.length) {
      bands(u, regimeBands(data.curve));
      const mb = data.result.memory.max_batch;
      bands(u, [{ x0: Math.max(mb, 0.5), x1: 1e12, color: "rgba(178,34,34,0.08)" }]);
    }
    sets.forEach(([d, tag], i) => {
      const mb = d.result.memory.max_batch;
      vline(u, mb > 0 ? mb : null, i ? COLORS[i % 6] : "#b22222", `memory wall${tag}: max batch ${mb}`, false, i);
      if (i === 0) vline(u, batch, "#555", `batch ${batch}`, true, 1 + extra.length);
    });
    if (primary && window.__perf.inputAt !== undefined) {
      window.__perf.updates.push(performance.now() - window.__perf.inputAt);
      window.__perf.inputAt = undefined;
      performance.mark("estimate-chart-updated");
    }
    if (primary && !window.__perf.firstChart) { window.__perf.firstChart = performance.now(); performance.mark("first-chart"); }
  };
  const legend = (s) => [...s.map((x) => [x.label, x.color, x.dash]), ["memory wall (does not fit right of it)", "#b22222"]];
  setLegend(c.tps, legend(s1));
  setLegend(c.tpot, legend(s2));
  draw(c.tps, { x: { label: "batch (sequences)", log: 2 }, y: { label: "output tokens/s per replica", log: 10 }, series: s1, hooks: { draw: [hooks(!extra.length)] } }, [xs, ...tps]);
  draw(c.tpot, { x: { label: "batch (sequences)", log: 2 }, y: { label: "TPOT (ms)", log: 10 }, series: s2, hooks: { draw: [hooks(false)] } }, [xs, ...tpot]);
}

const KIND_WORDS = { gemm: "GEMMs (weights)", attention: "attention (KV cache)", comm: "communication", elementwise: "elementwise", gather: "embedding gather" };

export function drawKinds(c, data) {
  const xs = data.curve.map((p) => p.batch);
  const kinds = [...new Set(data.curve.flatMap((p) => Object.keys(p.time_by_kind_s)))];
  const series = kinds.map((k, i) => ({ label: `${KIND_WORDS[k] || k}`, color: COLORS[i % 6], points: true, spanGaps: true }));
  setLegend(c, series.map((s) => [s.label, s.color]));
  const mb = data.result.memory.max_batch;
  draw(c, { x: { label: "batch (sequences)", log: 2 }, y: { label: "expected time per step (ms)", log: 10 }, series,
    hooks: { draw: [(u) => { bands(u, regimeBands(data.curve)); vline(u, mb > 0 ? mb : null, "#b22222", `memory wall: max batch ${mb}`, false); }] } },
  [xs, ...kinds.map((k) => data.curve.map((p) => (p.time_by_kind_s[k] ? p.time_by_kind_s[k] * 1e3 : null)))]);
}
