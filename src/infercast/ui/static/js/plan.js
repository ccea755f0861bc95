// Plan view: SLO + rate -> /api/plan (a background job) -> the cheapest configuration, why the
// runner-up lost, the Pareto of throughput/GPU vs tokens/s per user, and cost vs latency.
import { buildForm, debounce, el, exportBox, fmt, getOptions, jsonSafe as clean, runJob, typed, writeURL } from "./app.js";
import { COLORS, chartCard, draw, labels, resizeAll, setLegend, vline } from "./charts.js";

export const DEFAULTS = {
  model: "llama-3.1-8b", hardware: "h100-sxm,h200-sxm", rate: 5, slo_ttft_p99: 1, slo_tpot_p99: 0.05,
  lengths: "fixed", trace: "azure-conv", input_tokens: 1024, output_tokens: 256, tp: "1,2",
  precision: "bf16/bf16,fp8/fp8", speculative: false, disaggregation: false, num_requests: 200, seed: 0,
};
let state = null;
let last = null;

function fields(opts) {
  return [
    { name: "model", label: "model", type: "select", options: opts.models },
    { name: "hardware", label: "candidate parts", type: "text", help: "comma-separated preset keys (see the Estimate view's list)" },
    { name: "rate", label: "rate", type: "number", min: 0, step: 0.5, unit: "req/s" },
    { name: "num_requests", label: "requests / simulation", type: "number", min: 10, step: 10 },
    { name: "slo_ttft_p99", label: "SLO TTFT p99", type: "number", min: 0, step: 0.1, unit: "s" },
    { name: "slo_tpot_p99", label: "SLO TPOT p99", type: "number", min: 0, step: 0.005, unit: "s" },
    { name: "lengths", half: true, label: "lengths", type: "select", options: [["fixed", "fixed"], ["trace", "from a trace"]] },
    { name: "trace", half: true, label: "trace", type: "select", options: opts.traces, when: (s) => s.lengths === "trace" },
    { name: "input_tokens", label: "prompt", type: "number", min: 1, step: 1, unit: "tokens", when: (s) => s.lengths === "fixed" },
    { name: "output_tokens", label: "output", type: "number", min: 1, step: 1, unit: "tokens", when: (s) => s.lengths === "fixed" },
    { name: "tp", half: true, label: "TP sizes", type: "text", placeholder: "1,2,4" },
    { name: "seed", label: "seed", type: "number", min: 0, step: 1 },
    { name: "precision", label: "weights/KV pairs", type: "text", placeholder: "bf16/bf16,fp8/fp8" },
    { name: "speculative", half: true, label: "try EAGLE", type: "checkbox" },
    { name: "disaggregation", half: true, label: "try disaggregation", type: "checkbox" },
  ];
}

export async function mount(main, params) {
  const opts = getOptions();
  const fromURL = Object.keys(params).length > 0;
  state = fromURL || !state ? typed(params, DEFAULTS) : state;
  const charts = { pareto: chartCard("Pareto: throughput per GPU vs tokens/s per user"), cost: chartCard("cost vs latency of the listed options") };
  const best = el("div", { class: "words", id: "best", "aria-live": "polite" });
  const table = el("table", { class: "rows", id: "options" });
  const status = el("span", { class: "status", id: "status", "aria-live": "polite" });
  const run = el("button", { type: "button", class: "primary", id: "run", text: "Find the cheapest" });
  const exp = exportBox();
  const f = buildForm(fields(opts), state, () => writeURL("plan", clean(state), DEFAULTS));
  const start = () => runJob("/api/plan", clean(state), { form: f, status, button: run,
    progress: (_, seconds) => { status.textContent = `simulating candidates… ${seconds.toFixed(0)} s`; } },
  (result) => { last = result; render(result); });

  function render(data) {
    const d = data.result, b = d.best, top = b || d.closest_miss;
    const alts = d.alternatives || [];
    best.replaceChildren(
      b ? el("p", {}, el("strong", { text: "Cheapest meeting the SLO: " }), el("span", { id: "best-label", text: b.label }),
        ` — ${b.num_gpus} GPU, $${b.cost_per_hour.toFixed(2)}/h, ${fmt.usd(b.cost_per_million_output_tokens)} per M output tokens, TTFT p99 ${fmt.s(b.ttft_p99_s)}, TPOT p99 ${fmt.ms(b.tpot_p99_s)}.`)
        : el("p", { class: "warn", text: `Nothing meets the SLO. Closest miss: ${top ? `${top.label}: ${top.why_not}` : "none"}` }),
      alts.length ? el("p", {}, el("strong", { text: "Runner-up: " }), `${alts[0].label} — ${alts[0].why_not}.`) : null,
      el("p", { class: "muted", text: `${d.num_candidates} candidates (${d.num_feasible} meet the SLO), ${d.num_simulations} simulations in ${d.wall_s.toFixed(1)} s on the ${d.executor} executor.` }));
    const rows = [...(top ? [{ ...top, why_not: b ? "best" : top.why_not }] : []), ...alts];
    table.replaceChildren(
      el("thead", {}, el("tr", {}, ["configuration", "GPUs", "$/h", "$/M out tok", "TTFT p99", "TPOT p99", "meets SLO", "why not"].map((h, i) => el("th", { class: i === 0 || i === 7 ? "text" : undefined, text: h })))),
      el("tbody", {}, rows.map((r) => el("tr", {}, el("td", { text: r.label }), el("td", { text: r.num_gpus }), el("td", { text: r.cost_per_hour.toFixed(2) }),
        el("td", { "data-value": r.cost_per_million_output_tokens, text: fmt.usd(r.cost_per_million_output_tokens) }), el("td", { text: fmt.s(r.ttft_p99_s) }),
        el("td", { text: fmt.ms(r.tpot_p99_s) }), el("td", { text: r.meets_slo ? "yes" : "no" }), el("td", { class: "text", text: r.why_not })))));
    drawPareto(charts.pareto, data.points, d.pareto_frontier);
    drawCost(charts.cost, rows, d.slo);
    exp.set(data.command, d, rows, `infercast-plan-${state.model}`);
  }

  const form = el("section", { class: "panel form-panel", "aria-label": "inputs" },
    el("div", { class: "form-head" }, el("h2", { text: "SLO and workload" }), run), f.form);
  const results = el("section", { class: "results", "aria-label": "results" },
    el("div", { class: "toolbar" }, el("h2", { text: "Plan" }), status), best,
    el("div", { class: "charts" }, charts.pareto.card, charts.cost.card), el("div", { class: "scroll", style: "margin-top:8px" }, table), exp.box);
  main.append(el("div", { class: "layout" }, form, results));
  run.addEventListener("click", start);
  window.onresize = debounce(() => resizeAll(Object.values(charts)), 100);
  writeURL("plan", clean(state), DEFAULTS);
  if (last && !fromURL) render(last);
  else start();
}

export function leave() { window.onresize = null; }

function drawPareto(c, points, frontier) {
  const xs = [...new Set(points.map((p) => p.tokens_per_s_per_user))].sort((a, b) => a - b);
  const col = (pred) => xs.map((x) => { const p = points.find((q) => q.tokens_per_s_per_user === x && pred(q)); return p ? p.throughput_per_gpu : null; });
  const fr = new Map(frontier.map((p) => [p.tokens_per_s_per_user, p.throughput_per_gpu]));
  const series = [{ label: "meets the SLO", color: COLORS[2], line: false, points: true },
    { label: "misses", color: COLORS[4], line: false, points: true, fill: "#fff" },
    { label: "Pareto frontier", color: "#222", spanGaps: true }];
  setLegend(c, series.map((s) => [s.label, s.color]));
  draw(c, { x: { label: "tokens/s per user (1 / mean TPOT)" }, y: { label: "output tokens/s per GPU" }, series,
    hooks: { draw: [(u) => labels(u, frontier.map((p) => ({ x: p.tokens_per_s_per_user, y: p.throughput_per_gpu, text: p.label })), "#333")] } },
  [xs, col((p) => p.meets_slo), col((p) => !p.meets_slo), xs.map((x) => (fr.has(x) ? fr.get(x) : null))]);
}

function drawCost(c, rows, slo) {
  const pts = rows.map((r) => ({ x: r.tpot_p99_s * 1e3, y: r.cost_per_million_output_tokens, text: r.label, ok: r.meets_slo }));
  const xs = [...new Set(pts.map((p) => p.x))].sort((a, b) => a - b);
  const col = (ok) => xs.map((x) => { const p = pts.find((q) => q.x === x && q.ok === ok); return p ? p.y : null; });
  const series = [{ label: "meets the SLO", color: COLORS[2], line: false, points: true }, { label: "misses", color: COLORS[4], line: false, points: true, fill: "#fff" }];
  setLegend(c, [...series.map((s) => [s.label, s.color]), ["TPOT SLO", "#b22222", true]]);
  draw(c, { x: { label: "TPOT p99 (ms)", range: [0, Math.max(slo.tpot_p99_s * 1e3 * 1.15, ...xs) * 1.05] }, y: { label: "$ per M output tokens" }, series,
    hooks: { draw: [(u) => { vline(u, slo.tpot_p99_s * 1e3, "#b22222", `SLO ${+(slo.tpot_p99_s * 1e3).toPrecision(3)} ms`); labels(u, pts.slice(0, 4), "#333"); }] } },
  [xs, col(true), col(false)]);
}
