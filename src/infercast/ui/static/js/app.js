// The page shell: views, state in the URL, the API client and small shared widgets.
// Numbers are never computed here: every value shown is a field of an /api/* answer.
import * as estimate from "./estimate.js";
import * as compare from "./compare.js";
import * as simulate from "./simulate.js";
import * as plan from "./plan.js";
import * as validation from "./validation.js";

const VIEWS = { estimate, compare, simulate, plan, validation };
let current = null;
let options = null;

export async function api(path, body, signal) {
  const init = body === undefined ? { signal } : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal,
  };
  const res = await fetch(path, init);
  let data;
  try {
    data = await res.json();
  } catch {
    throw Object.assign(new Error(`the server answered ${res.status} without JSON`), { field: null });
  }
  if (!res.ok) throw Object.assign(new Error(data.error || `HTTP ${res.status}`), { field: data.field });
  return data;
}

export function getOptions() { return options; }

// ---- URL state: ?view=NAME&key=value... (only values that differ from the view's defaults)
export function readURL() {
  const q = new URLSearchParams(location.search);
  const out = {};
  for (const [k, v] of q) if (k !== "view") out[k] = v;
  return { view: q.get("view") || "estimate", params: out };
}

export function writeURL(view, state, defaults) {
  const q = new URLSearchParams({ view });
  for (const [k, v] of Object.entries(state)) {
    if (defaults && JSON.stringify(defaults[k]) === JSON.stringify(v)) continue;
    q.set(k, typeof v === "object" ? JSON.stringify(v) : String(v));
  }
  const url = `${location.pathname}?${q}`;
  if (url !== location.pathname + location.search) history.replaceState(null, "", url);
}

// Parse URL strings back into the types the defaults have.
export function typed(params, defaults) {
  const out = { ...defaults };
  for (const [k, v] of Object.entries(params)) {
    if (!(k in defaults)) continue;
    const d = defaults[k];
    if (typeof d === "number") out[k] = v === "" ? d : Number(v);
    else if (typeof d === "boolean") out[k] = v === "true";
    else if (typeof d === "object" && d !== null) { try { out[k] = JSON.parse(v); } catch { /* keep default */ } }
    else out[k] = v;
  }
  return out;
}

// ---- small DOM helpers
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c);
  return e;
}

export function debounce(fn, ms) {
  let t = null;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// A form from a field list. Each field: {name, label, type, options, min, max, step, unit, help, when}.
// Every field keeps a one-line error slot (fixed height: no layout jump when it fills).
export function buildForm(fields, state, onChange, prefix = "") {
  const form = el("form", { class: "form", novalidate: true, onsubmit: (e) => e.preventDefault() });
  const rows = {};
  for (const f of fields) {
    const id = `f-${prefix}${f.name}`;
    let input;
    if (f.type === "select") {
      input = el("select", { id, name: f.name });
      for (const o of f.options) {
        const [value, label] = Array.isArray(o) ? o : [o, o];
        input.append(el("option", { value, text: label }));
      }
    } else if (f.type === "textarea") {
      input = el("textarea", { id, name: f.name, rows: 5, spellcheck: "false", placeholder: f.placeholder || "" });
    } else if (f.type === "checkbox") {
      input = el("input", { id, name: f.name, type: "checkbox" });
    } else {
      input = el("input", { id, name: f.name, type: f.type || "text", min: f.min, max: f.max, step: f.step,
        inputmode: f.type === "number" ? "decimal" : undefined, placeholder: f.placeholder || "" });
    }
    const err = el("span", { class: "err", id: `err-${prefix}${f.name}`, role: "alert", "aria-live": "polite" });
    input.setAttribute("aria-describedby", err.id);
    const label = el("label", { for: id }, f.label, f.unit ? el("span", { class: "unit", text: ` (${f.unit})` }) : null);
    let extra = f.range ? f.range(input) : null;
    if (f.upload) {  // a file picker that fills the text box (the file never leaves the browser but as text)
      const file = el("input", { type: "file", accept: f.upload, id: `${id}-file`, "aria-label": `${f.label}: load a file` });
      file.addEventListener("change", async () => {
        if (!file.files.length) return;
        input.value = await file.files[0].text();
        input.dispatchEvent(new Event("input"));
      });
      extra = el("div", { class: "with-file" }, input, file);
    }
    const row = el("div", { class: `field field-${f.type || "text"}${f.half ? " half" : ""}`, "data-field": f.name },
      f.type === "checkbox" ? el("div", { class: "check" }, input, label) : [label, extra || input],
      f.help ? el("span", { class: "help", text: f.help }) : null, err);
    rows[f.name] = { row, input, field: f };
    form.append(row);
    const handler = () => {
      const v = f.type === "checkbox" ? input.checked : f.type === "number" ? input.value : input.value;
      state[f.name] = f.type === "number" ? (input.value === "" ? NaN : Number(v)) : v;
      refreshVisibility();
      onChange(f.name);
    };
    input.addEventListener(f.type === "select" || f.type === "checkbox" ? "change" : "input", handler);
  }
  function refreshVisibility() {
    for (const { row, field } of Object.values(rows)) row.hidden = field.when ? !field.when(state) : false;
  }
  function fill() {
    for (const { input, field } of Object.values(rows)) {
      const v = state[field.name];
      if (field.type === "checkbox") input.checked = !!v;
      else input.value = v === undefined || v === null || Number.isNaN(v) ? "" : v;
    }
    refreshVisibility();
  }
  fill();
  const formErr = el("div", { class: "form-error", role: "alert", "aria-live": "polite" });
  form.append(formErr);
  return {
    form, rows, fill,
    setError(field, message) {
      for (const { row } of Object.values(rows)) { row.classList.remove("bad"); row.querySelector(".err").textContent = ""; }
      formErr.textContent = "";
      if (!message) return;
      const r = field && rows[field];
      if (r && !r.row.hidden) { r.row.classList.add("bad"); r.row.querySelector(".err").textContent = message; }
      else formErr.textContent = message;
    },
  };
}

// A headline number: label, value (its raw API number in data-value, for tests), a sub line.
export function statCard(label, id) {
  return el("div", { class: "stat", id: `stat-${id}` }, el("span", { class: "label", text: label }),
    el("span", { class: "value", text: "-" }), el("span", { class: "sub", text: "" }));
}

export function setStat(root, id, value, sub, raw) {
  const c = root.querySelector(`#stat-${id}`);
  c.querySelector(".value").textContent = value;
  c.querySelector(".value").dataset.value = raw === undefined || raw === null ? "" : String(raw);
  c.querySelector(".sub").textContent = sub || "";
}

// A form's state as JSON can carry it: an empty number box (NaN) becomes null.
export function jsonSafe(state) {
  const out = { ...state };
  for (const [k, v] of Object.entries(out)) if (typeof v === "number" && !Number.isFinite(v)) out[k] = null;
  return out;
}

// Start a background job and poll it: ui = {form, status, button, progress(fraction, seconds)}.
// A bad input comes back at once and is shown beside its field; onDone gets the job's result.
export async function runJob(path, payload, ui, onDone) {
  ui.button.disabled = true;
  ui.form.setError(null, null);
  ui.status.textContent = "starting…";
  let job;
  try {
    job = await api(path, payload);
  } catch (e) {
    ui.form.setError(e.field, e.message); ui.status.textContent = ""; ui.button.disabled = false;
    return;
  }
  const t0 = performance.now();
  ui.progress(0, 0);
  while (job.state === "running") {
    await new Promise((r) => setTimeout(r, 150));
    try { job = await api(`/api/jobs/${job.id}`); } catch (e) { ui.status.textContent = e.message; ui.button.disabled = false; return; }
    ui.progress(job.progress, (performance.now() - t0) / 1e3);
  }
  ui.button.disabled = false;
  if (job.state === "error") { ui.form.setError(job.field, job.error); ui.status.textContent = ""; return; }
  ui.status.textContent = `done in ${job.wall_s.toFixed(1)} s`;
  onDone(job.result);
}

// Command line + downloads under a view.
export function exportBox() {
  const cmd = el("code", { class: "cmd" });
  const copy = el("button", { type: "button", class: "small", text: "copy",
    onclick: () => navigator.clipboard && navigator.clipboard.writeText(cmd.textContent) });
  const json = el("button", { type: "button", class: "small", text: "download JSON" });
  const csv = el("button", { type: "button", class: "small", text: "download CSV" });
  const box = el("div", { class: "export" }, el("span", { class: "muted", text: "same on the command line:" }), cmd, copy, json, csv);
  let data = null, rows = null, name = "infercast";
  json.onclick = () => data && save(`${name}.json`, JSON.stringify(data, null, 2), "application/json");
  csv.onclick = () => rows && save(`${name}.csv`, toCSV(rows), "text/csv");
  return {
    box,
    set(command, jsonData, csvRows, fileName) { cmd.textContent = command; data = jsonData; rows = csvRows; name = fileName; },
  };
}

function save(name, text, type) {
  const a = el("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

export function toCSV(rows) {
  if (!rows.length) return "";
  const cols = Object.keys(rows[0]).filter((k) => typeof rows[0][k] !== "object" || rows[0][k] === null);
  const esc = (v) => {
    const s = v === null || v === undefined ? "" : String(v);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [cols.join(","), ...rows.map((r) => cols.map((c) => esc(r[c])).join(","))].join("\n") + "\n";
}

// ---- formatting (display only)
export const fmt = {
  ms: (s) => (s === null || s === undefined ? "-" : `${(s * 1e3).toLocaleString("en-US", { maximumFractionDigits: s < 0.01 ? 3 : 2 })} ms`),
  s: (s) => (s === null || s === undefined ? "-" : `${s.toLocaleString("en-US", { maximumFractionDigits: 3 })} s`),
  num: (x, d = 0) => (x === null || x === undefined ? "-" : x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d })),
  usd: (x) => (x === null || x === undefined ? "-" : `$${x.toLocaleString("en-US", { maximumFractionDigits: 3, minimumFractionDigits: 3 })}`),
  gb: (b) => (b === null || b === undefined ? "-" : `${(b / 1e9).toLocaleString("en-US", { maximumFractionDigits: 1 })} GB`),
  // two times in one unit: "27.8 / 36.7 ms"
  ms2: (a, b) => (a === null || b === null || a === undefined || b === undefined ? "-" : `${+(a * 1e3).toPrecision(3)} / ${+(b * 1e3).toPrecision(3)} ms`),
  pct: (x) => (x === null || x === undefined ? "-" : `${(100 * x).toFixed(0)}%`),
};

// ---- views
async function show(name) {
  const view = VIEWS[name] ? name : "estimate";
  if (current && current.name === view) return;
  if (current && current.mod.leave) current.mod.leave();
  for (const b of document.querySelectorAll("nav button")) b.setAttribute("aria-current", b.dataset.view === view ? "page" : "false");
  const main = document.getElementById("main");
  main.replaceChildren();
  current = { name: view, mod: VIEWS[view] };
  document.title = `infercast: ${view}`;
  await VIEWS[view].mount(main, readURL().view === view ? readURL().params : {});
}

async function start() {
  performance.mark("app-start");
  options = await api("/api/options");
  for (const b of document.querySelectorAll("nav button")) {
    b.addEventListener("click", () => { history.replaceState(null, "", `?view=${b.dataset.view}`); show(b.dataset.view); });
  }
  await show(readURL().view);
}

window.addEventListener("popstate", () => { current = null; show(readURL().view); });
start().catch((e) => {
  document.getElementById("main").append(el("p", { class: "form-error", text: `cannot start: ${e.message}` }));
});
