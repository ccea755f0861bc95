// Simulate view: workload + scheduler + levers -> /api/simulate (a background job, polled) ->
// TTFT/TPOT/ITL CDFs with the SLO lines, the timeline (batch, KV use, queue), goodput and $/M.
import { buildForm, debounce, el, exportBox, fmt, getOptions, jsonSafe as clean, runJob, setStat, statCard as stat, typed, writeURL } from "./app.js";
import { COLORS, chartCard, draw, resizeAll, setLegend, vline } from "./charts.js";

export const DEFAULTS = {
  model: "llama-3.1-8b", hardware: "h100-sxm", weights: "checkpoint", kv_cache: "", tp: 1, replicas: 1,
  load: "rate", rate: 10, concurrency: 32, lengths: "fixed", trace: "azure-conv", input_tokens: 1024,
  output_tokens: 256, num_requests: 500, seed: 0, scheduler: "chunked", max_num_seqs: 256,
  max_num_batched_tokens: 8192, prefix_caching: false, prefix_groups: 0, prefix_tokens: 0, speculative: false, acceptance: 0.8,
  num_speculative_tokens: 3, disaggregated: false, prefill_replicas: 1, decode_replicas: 1,
  slo_ttft_s: 2, slo_tpot_s: 0.05, profile: "shipped", engine: "",
};
let state = null;
let last = null;  // the last finished run, kept across view switches

function fields(opts) {
  const dt = opts.dtypes;
  return [
    { name: "model", label: "model", type: "select", options: opts.models },
    { name: "hardware", label: "hardware", type: "select", options: opts.hardware.map((h) => [h.key, `${h.key} (${h.name})`]) },
    { name: "weights", half: true, label: "weights", type: "select", options: [["checkpoint", "checkpoint"], ...dt] },
    { name: "kv_cache", half: true, label: "KV cache", type: "select", options: [["", "16-bit"], ...dt] },
    { name: "tp", label: "TP", type: "number", min: 1, step: 1, unit: "GPUs" },
    { name: "replicas", label: "replicas", type: "number", min: 1, step: 1 },
    { name: "load", half: true, label: "load", type: "select", options: [["rate", "Poisson rate"], ["concurrency", "fixed concurrency"], ["trace", "trace arrivals"]] },
    { name: "rate", label: "rate", type: "number", min: 0, step: 0.5, unit: "req/s", when: (s) => s.load === "rate" },
    { name: "concurrency", label: "concurrency", type: "number", min: 1, step: 1, unit: "requests", when: (s) => s.load === "concurrency" },
    { name: "lengths", half: true, label: "lengths", type: "select", options: [["fixed", "fixed"], ["trace", "from a trace"]] },
    { name: "trace", half: true, label: "trace", type: "select", options: opts.traces, when: (s) => s.lengths === "trace" || s.load === "trace" },
    { name: "input_tokens", label: "prompt", type: "number", min: 1, step: 1, unit: "tokens", when: (s) => s.lengths === "fixed" },
    { name: "output_tokens", label: "output", type: "number", min: 1, step: 1, unit: "tokens", when: (s) => s.lengths === "fixed" },
    { name: "num_requests", label: "requests", type: "number", min: 1, step: 1 },
    { name: "seed", label: "seed", type: "number", min: 0, step: 1 },
    { name: "scheduler", half: true, label: "scheduler", type: "select", options: opts.schedulers },
    { name: "engine", half: true, label: "engine preset", type: "select", options: [["", "none"], ...opts.engines] },
    { name: "max_num_seqs", label: "max batch", type: "number", min: 1, step: 1, unit: "seqs" },
    { name: "max_num_batched_tokens", label: "chunk", type: "number", min: 1, step: 1, unit: "tokens/step" },
    { name: "prefix_caching", label: "prefix caching", type: "checkbox", half: true },
    { name: "speculative", label: "speculative (EAGLE)", type: "checkbox", half: true },
    { name: "prefix_groups", label: "shared prefixes", type: "number", min: 0, step: 1, unit: "groups", when: (s) => s.prefix_caching },
    { name: "prefix_tokens", label: "prefix length", type: "number", min: 0, step: 64, unit: "tokens", when: (s) => s.prefix_caching },
    { name: "acceptance", label: "acceptance", type: "number", min: 0, max: 1, step: 0.05, when: (s) => s.speculative },
    { name: "num_speculative_tokens", label: "draft tokens", type: "number", min: 1, max: 16, step: 1, when: (s) => s.speculative },
    { name: "disaggregated", label: "disaggregated prefill/decode", type: "checkbox" },
    { name: "prefill_replicas", label: "prefill replicas", type: "number", min: 1, step: 1, when: (s) => s.disaggregated },
    { name: "decode_replicas", label: "decode replicas", type: "number", min: 1, step: 1, when: (s) => s.disaggregated },
    { name: "slo_ttft_s", label: "SLO TTFT", type: "number", min: 0, step: 0.1, unit: "s" },
    { name: "slo_tpot_s", label: "SLO TPOT", type: "number", min: 0, step: 0.005, unit: "s" },
  ];
}

export async function mount(main, params) {
  const opts = getOptions();
  const fromURL = Object.keys(params).length > 0;
  state = fromURL || !state ? typed(params, DEFAULTS) : state;
  const charts = { ttft: chartCard("TTFT distribution (CDF)", 220), tpot: chartCard("TPOT distribution (CDF)", 220),
    itl: chartCard("inter-token latency (CDF)", 220), batch: chartCard("timeline: running batch and queue", 220),
    kv: chartCard("timeline: KV-cache use", 220) };
  const stats = el("div", { class: "stats" }, stat("completed / rejected", "done"), stat("output tokens/s", "tps"),
    stat("goodput (req/s within SLO)", "goodput"), stat("$ per M output tokens", "cost"), stat("TTFT p50 / p99", "ttft"),
    stat("TPOT p50 / p99", "tpot"), stat("ITL p99", "itl"), stat("mean batch · peak KV", "batch"));
  const bar = el("div", { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-label": "simulation progress" }, el("div"));
  const status = el("span", { class: "status", id: "status", "aria-live": "polite" });
  const run = el("button", { type: "button", class: "primary", id: "run", text: "Run simulation" });
  const exp = exportBox();
  const f = buildForm(fields(opts), state, () => { writeURL("simulate", clean(state), DEFAULTS); });
  const start = () => runJob("/api/simulate", clean(state), { form: f, status, button: run, progress: (p) => {
    bar.firstChild.style.width = `${(100 * p).toFixed(0)}%`;
    bar.setAttribute("aria-valuenow", (100 * p).toFixed(0));
    status.textContent = `simulating… ${(100 * p).toFixed(0)}%`;
  } }, (result) => { last = result; render(result); });

  function render(data) {
    const r = data.result;
    setStat(main, "done", `${fmt.num(r.num_completed)} / ${fmt.num(r.num_rejected)}`, `of ${fmt.num(r.num_requests)} requests · ${fmt.num(r.duration_s, 1)} s simulated`, r.num_completed);
    setStat(main, "tps", fmt.num(r.output_throughput_tokens_per_s), `${fmt.num(r.request_throughput_per_s, 2)} req/s · ${data.num_gpus} GPU`, r.output_throughput_tokens_per_s);
    setStat(main, "goodput", fmt.num(r.goodput_per_s, 2), `${fmt.pct(r.slo_attainment)} of requests within both SLOs`, r.goodput_per_s);
    setStat(main, "cost", fmt.usd(data.cost_per_million_output_tokens), data.price_per_gpu_hour ? `at $${data.price_per_gpu_hour}/GPU-h × ${data.num_gpus}` : "no price for this part", data.cost_per_million_output_tokens);
    setStat(main, "ttft", fmt.ms2(r.ttft_s.p50, r.ttft_s.p99), `mean ${fmt.ms(r.ttft_s.mean)} · SLO ${fmt.s(data.slo.ttft_s)}`, r.ttft_s.p99);
    setStat(main, "tpot", fmt.ms2(r.tpot_s.p50, r.tpot_s.p99), `mean ${fmt.ms(r.tpot_s.mean)} · SLO ${fmt.ms(data.slo.tpot_s)}`, r.tpot_s.p99);
    setStat(main, "itl", fmt.ms(r.itl_s.p99), `p50 ${fmt.ms(r.itl_s.p50)}`, r.itl_s.p99);
    setStat(main, "batch", `${fmt.num(r.mean_batch_size, 1)} · ${fmt.pct(r.peak_kv_usage)}`, `${fmt.num(r.num_preemptions)} preemptions · ${fmt.num(r.num_kv_blocks)} KV blocks`, r.mean_batch_size);
    cdf(charts.ttft, data.cdf.ttft_s, "TTFT (s)", data.slo.ttft_s, 1);
    cdf(charts.tpot, data.cdf.tpot_s, "TPOT (ms)", data.slo.tpot_s, 1e3);
    cdf(charts.itl, data.cdf.itl_s, "ITL (ms)", data.slo.tpot_s, 1e3);
    timeline(charts, data.timeline);
    const csv = data.timeline.time_s.map((t, i) => Object.fromEntries(Object.keys(data.timeline).map((k) => [k, data.timeline[k][i]])));
    exp.set(data.command, data, csv, `infercast-simulate-${state.model}-${state.hardware}`);
  }

  const form = el("section", { class: "panel form-panel", "aria-label": "inputs" },
    el("div", { class: "form-head" }, el("h2", { text: "Workload and engine" }), run), f.form);
  const results = el("section", { class: "results", "aria-label": "results" },
    el("div", { class: "toolbar" }, el("h2", { text: "Simulate" }), bar, status), stats,
    el("div", { class: "charts three" }, charts.ttft.card, charts.tpot.card, charts.itl.card),
    el("div", { class: "charts", style: "margin-top:8px" }, charts.batch.card, charts.kv.card), exp.box);
  main.append(el("div", { class: "layout" }, form, results));
  run.addEventListener("click", start);
  window.onresize = debounce(() => resizeAll(Object.values(charts)), 100);
  writeURL("simulate", clean(state), DEFAULTS);
  if (last && !fromURL) render(last);
  else start();
}

export function leave() { window.onresize = null; }

function cdf(c, d, label, slo, scale) {
  setLegend(c, [["share of requests at or below", COLORS[0]], ["SLO", "#b22222"]]);
  // the x range always reaches the SLO line, so a run far inside (or outside) the SLO shows it
  const xs = d.x.map((v) => v * scale), hi = Math.max(xs.length ? xs[xs.length - 1] : 0, slo * scale * 1.08);
  const lo = Math.min(xs.length ? xs[0] : slo * scale, slo * scale) * 0.9;
  draw(c, { x: { label, range: [lo, hi], log: 10 }, y: { label: "cumulative fraction", range: [0, 1] },
    series: [{ label: "CDF", color: COLORS[0] }],
    hooks: { draw: [(u) => vline(u, slo * scale, "#b22222", `SLO ${+(slo * scale).toPrecision(3)}`, true)] } },
  [xs, d.p]);
}

function timeline(charts, t) {
  const reps = [...new Set(t.replica)].slice(0, 4);
  const xs = [...new Set(t.time_s)].sort((a, b) => a - b);
  const idx = new Map(xs.map((x, i) => [x, i]));
  const col = (field, rep) => {
    const out = new Array(xs.length).fill(null);
    t.time_s.forEach((x, i) => { if (t.replica[i] === rep) out[idx.get(x)] = t[field][i]; });
    return out;
  };
  const tag = (r) => (reps.length > 1 ? ` (replica ${r})` : "");
  const s1 = reps.flatMap((r, i) => [{ label: `running batch${tag(r)}`, color: COLORS[(2 * i) % 6], spanGaps: true },
    { label: `waiting${tag(r)}`, color: COLORS[(2 * i + 1) % 6], dash: true, spanGaps: true }]);
  setLegend(charts.batch, s1.map((s) => [s.label, s.color, s.dash]));
  draw(charts.batch, { x: { label: "time (s)" }, y: { label: "requests" }, series: s1 },
    [xs, ...reps.flatMap((r) => [col("batch_size", r), col("num_waiting", r)])]);
  const s2 = reps.map((r, i) => ({ label: `KV blocks in use${tag(r)}`, color: COLORS[(2 * i) % 6], spanGaps: true }));
  setLegend(charts.kv, s2.map((s) => [s.label, s.color]));
  draw(charts.kv, { x: { label: "time (s)" }, y: { label: "KV-cache use (%)", range: [0, 100] }, series: s2 },
    [xs, ...reps.map((r) => col("kv_usage", r).map((v) => (v === null ? null : 100 * v)))]);
}
