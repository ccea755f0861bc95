// Validation view: predicted vs measured for the shipped measurements (infercast validate, computed once
// per server start), filtered by engine, part, model and scenario; a point or a table row opens the
// row, its citation and the prediction's breakdown.
import { api, debounce, el, exportBox, fmt, typed, writeURL } from "./app.js";
import { COLORS, chartCard, draw, resizeAll, setLegend } from "./charts.js";

export const DEFAULTS = { engine_family: "", hardware: "", model: "", scenario: "", metric: "", row: "" };
const FILTERS = ["engine_family", "hardware", "model", "scenario", "metric"];
const FILTER_LABELS = { engine_family: "engine" };
const TABLE_ROWS = 200;
let state = null;

export async function mount(main, params) {
  state = Object.keys(params).length || !state ? typed(params, DEFAULTS) : state;
  const chart = chartCard("predicted vs measured (each metric in its SI unit)", 360);
  chart.card.id = "vchart";
  const status = el("span", { class: "status", id: "status", "aria-live": "polite" });
  const filters = el("div", { class: "filters", id: "filters" });
  const summary = el("div", { class: "words", id: "summary" });
  const table = el("table", { class: "rows", id: "vrows" });
  const detail = el("div", { class: "detail", id: "detail", "aria-live": "polite" }, el("p", { class: "muted", text: "Click a point or a row (or focus a row and press Enter) to see the measurement, its citation and how it was predicted." }));
  const exp = exportBox();
  main.append(el("section", { class: "results", "aria-label": "validation" },
    el("div", { class: "toolbar" }, el("h2", { text: "Validation: how far to trust a number" }), status), filters, summary,
    el("div", { class: "two" }, chart.card, detail), el("div", { class: "scroll", style: "margin-top:8px" }, table), exp.box));
  window.onresize = debounce(() => resizeAll([chart]), 100);

  let report = null, command = "infercast validate --json";
  for (;;) {
    const v = await api("/api/validation");
    if (v.state === "done") { report = v.report; command = v.command; status.textContent = `computed in ${v.wall_s.toFixed(0)} s at server start`; break; }
    if (v.state === "error") { status.textContent = `validation failed: ${v.error}`; return; }
    status.textContent = "computing every prediction (once per server start; about a minute on two cores)…";
    await new Promise((r) => setTimeout(r, 1000));
    if (!main.isConnected) return;
  }
  const rows = report.rows;
  let shown = [];

  function choices(name) { return [...new Set(rows.map((r) => r[name]).filter(Boolean))].sort(); }
  for (const name of FILTERS) {
    const sel = el("select", { id: `filter-${name}`, "aria-label": `filter by ${FILTER_LABELS[name] || name}` }, el("option", { value: "", text: "all" }),
      choices(name).map((c) => el("option", { value: c, text: c })));
    sel.value = state[name];
    sel.addEventListener("change", () => { state[name] = sel.value; state.row = ""; refresh(); });
    filters.append(el("label", {}, FILTER_LABELS[name] || name, sel));
  }

  function refresh() {
    writeURL("validation", state, DEFAULTS);
    shown = rows.filter((r) => FILTERS.every((k) => !state[k] || r[k] === state[k]));
    const predicted = shown.filter((r) => r.predicted !== null);
    const s = report.summary.overall;
    summary.replaceChildren(el("p", {}, el("strong", { text: `${fmt.num(shown.length)} rows shown` }),
      ` (${fmt.num(predicted.length)} predicted). All ${fmt.num(s.count)} rows: median |error| ${fmt.num(s.median_abs_error_pct, 1)} %, ${fmt.pct(s.within_25_pct)} within 25 %, coverage ${fmt.pct(s.coverage)} (profile ${report.profile}). Per scenario and metric: the downloaded JSON's summary, or infercast validate.`));
    drawScatter(predicted);
    const worst = [...predicted].sort((a, b) => b.abs_error_pct - a.abs_error_pct).slice(0, TABLE_ROWS);
    table.replaceChildren(
      el("thead", {}, el("tr", {}, ["id", "scenario", "metric", "model", "part", "engine", "measured", "predicted", "error %"].map((h, i) => el("th", { class: i < 6 ? "text" : undefined, text: h })))),
      el("tbody", {}, worst.map((r) => {
        const tr = el("tr", { tabindex: 0, "data-id": r.id }, [r.id, r.scenario, r.metric, r.model, r.hardware, r.engine].map((t) => el("td", { class: "text", text: t })),
          el("td", { text: +r.measured.toPrecision(4) }), el("td", { text: +r.predicted.toPrecision(4) }), el("td", { text: `${r.error_pct > 0 ? "+" : ""}${r.error_pct.toFixed(1)}` }));
        tr.addEventListener("click", () => select(r.id));
        tr.addEventListener("keydown", (e) => { if (e.key === "Enter") select(r.id); });
        return tr;
      })));
    exp.set(command, report, shown.map((r) => ({ ...r, notes: r.notes.join("; ") })), "infercast-validate");
    if (state.row) select(state.row);
  }

  function drawScatter(pred) {
    const sorted = [...pred].sort((a, b) => a.measured - b.measured);
    const xs = sorted.map((r) => r.measured);
    const near = sorted.map((r) => (r.abs_error_pct <= 25 ? r.predicted : null));
    const far = sorted.map((r) => (r.abs_error_pct > 25 ? r.predicted : null));
    const series = [{ label: "off by more than 25 %", color: COLORS[4], line: false, points: true, size: 6 },
      { label: "within 25 %", color: COLORS[2], line: false, points: true, size: 6 },
      { label: "predicted = measured", color: "#444", dash: true }];
    setLegend(chart, series.map((s) => [s.label, s.color, s.dash]));
    if (!xs.length) { draw(chart, { x: { label: "measured", log: 10 }, y: { label: "predicted", log: 10 }, series }, [[1], [null], [null], [1]]); return; }
    const plot = draw(chart, { x: { label: "measured (SI unit of the metric: tokens/s, s)", log: 10 }, y: { label: "predicted (same unit)", log: 10 }, series },
      [xs, far, near, xs]);
    plot.over.onclick = (e) => {  // nearest point in pixels, not just the nearest x
      const rect = plot.over.getBoundingClientRect(), cx = e.clientX - rect.left, cy = e.clientY - rect.top;
      let best = null, bd = Infinity;
      for (const r of sorted) {
        const dx = plot.valToPos(r.measured, "x") - cx, dy = plot.valToPos(r.predicted, "y") - cy, d = dx * dx + dy * dy;
        if (d < bd) { bd = d; best = r; }
      }
      if (best && bd < 400) select(best.id);
    };
  }

  async function select(id) {
    state.row = id;
    writeURL("validation", state, DEFAULTS);
    for (const tr of table.querySelectorAll("tr.sel")) tr.classList.remove("sel");
    const tr = table.querySelector(`tr[data-id="${CSS.escape(id)}"]`);
    if (tr) tr.classList.add("sel");
    let d;
    try { d = await api(`/api/validation/row/${encodeURIComponent(id)}`); } catch (e) { detail.replaceChildren(el("p", { class: "warn", text: e.message })); return; }
    const p = d.prediction, row = d.row, b = d.breakdown;
    const dl = (pairs) => el("dl", {}, pairs.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v === null || v === undefined || v === "" ? "-" : String(v) })]));
    const parts = [el("h3", { text: `${p.id}: ${p.metric}` }),
      dl([["measured", `${row.value} ${row.unit_si}`], ["predicted", p.predicted === null ? `not predicted: ${p.skipped_reason}` : `${+p.predicted.toPrecision(5)} ${row.unit_si}`],
        ["error", p.error_pct === null ? "-" : `${p.error_pct > 0 ? "+" : ""}${p.error_pct.toFixed(1)} %`], ["citation", row.citation], ["source", row.source],
        ["setup", `${row.model} on ${row.n_gpus || "?"} × ${row.hardware}, ${row.engine}; TP ${row.tp || "-"} PP ${row.pp || "-"} EP ${row.ep || "-"}; ${row.weights || "weights not stated"} / KV ${row.kv_cache || "-"}`],
        ["workload", `${row.scenario}; in ${row.input_tokens || "-"} / out ${row.output_tokens || "-"} tokens; batch ${row.batch || "-"}, concurrency ${row.concurrency || "-"}, rate ${row.request_rate || "-"}; ${row.dataset}`],
        ["notes", p.notes.join("; ")]])];
    if (b) {
      parts.push(el("h3", { text: `how it was predicted (${b.method}, profile group ${b.group})` }),
        dl([["replica setup", b.setup ? Object.entries(b.setup).map(([k, v]) => `${k}=${v}`).join(", ") : "-"],
          ["replicas × GPUs", b.setup ? `${b.replicas} replicas, ${b.num_gpus} GPUs` : "-"],
          ...b.steps.map((s, i) => [`step ${i + 1}`, `${s.runs.map((r) => `${r.count} × (${r.new_tokens} new, ${r.cached_tokens} cached)`).join(" + ")} → ${fmt.ms(s.expected_time_s)}`])]));
    }
    detail.replaceChildren(...parts);
  }

  refresh();
}

export function leave() { window.onresize = null; }
