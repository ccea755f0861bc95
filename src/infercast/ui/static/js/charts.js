// Thin helpers over the vendored uPlot (window.uPlot): fixed-size charts, log axes with units,
// a static legend, labelled points, vertical markers and shaded bands. Drawing only.
import { el } from "./app.js";

export const COLORS = ["#1f6fb2", "#d2691e", "#2e8b57", "#8a2be2", "#b22222", "#708090"];

const SI = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
export function si(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "";
  const a = Math.abs(v);
  for (const [f, p] of SI) if (a >= f) return `${+(v / f).toPrecision(4)}${p}`;
  if (a > 0 && a < 0.01) return v.toExponential(0);
  return `${+v.toPrecision(4)}`;
}

// A chart card: title, legend line, a fixed-height box (no layout jump while data changes).
export function chartCard(title, height = 260) {
  const legend = el("div", { class: "legend" });
  const box = el("div", { class: "chart-box", style: `height:${height + 32}px` });
  const card = el("figure", { class: "chart" }, el("figcaption", { text: title }), legend, box);
  return { card, box, legend, height, plot: null, sig: null };
}

export function setLegend(card, items) {
  const sig = JSON.stringify(items);
  if (card.legendSig === sig) return;  // unchanged: no DOM work, no relayout
  card.legendSig = sig;
  card.legend.replaceChildren(...items.map(([label, color, dash]) => el("span", { class: "key" },
    el("i", { style: `border-top:3px ${dash ? "dashed" : "solid"} ${color}` }), label)));
}

function width(card) { return Math.max(280, Math.floor(card.box.clientWidth || card.box.getBoundingClientRect().width || 400)); }

// log10 axes: 1-2-5 ticks over up to 2 decades, powers of ten up to 5, every other power beyond
// (uPlot's nine ticks per decade crowd a laptop-sized chart).
function logTicks(u, splits) {
  const ok = splits.filter((v) => v > 0);
  const decades = ok.length ? Math.log10(Math.max(...ok) / Math.min(...ok)) : 0;
  return splits.map((v) => {
    if (!(v > 0)) return null;
    const e = Math.floor(Math.log10(v) + 1e-9), m = Math.round(v / 10 ** e);
    if (decades <= 2) return [1, 2, 5].includes(m) ? v : null;
    if (decades <= 5) return m === 1 ? v : null;
    return m === 1 && e % 2 === 0 ? v : null;
  });
}

// opts: {x: {label, log, fmt}, y: {label, log, fmt}, series: [{label, color, dash, points, line}],
//        hooks: {draw: [fn(u)]}}; data: uPlot aligned data [xs, ys...]
export function draw(card, opts, data) {
  const sig = JSON.stringify([opts.x.label, opts.y.label, opts.series.map((s) => s.label), !!opts.y2]);
  const series = [{}, ...opts.series.map((s) => ({
    label: s.label, stroke: s.line === false ? "transparent" : s.color, width: s.line === false ? 0 : 2,
    dash: s.dash ? [6, 4] : undefined, spanGaps: !!s.spanGaps, scale: s.scale || "y",
    points: s.points ? { show: true, size: s.size || 7, stroke: s.color, fill: s.fill || s.color, width: 1 } : { show: false },
  }))];
  const scale = (a) => (a.log ? { distr: 3, log: a.log, ...(a.range ? { range: a.range } : {}) } : { auto: true, range: a.range });
  const axis = (a, side) => ({
    label: a.label, scale: side === 1 ? "y2" : side === 2 ? "x" : "y", side,
    values: (u, vals) => vals.map((v) => (a.fmt ? a.fmt(v) : si(v))), size: side === 1 || side === 3 ? 64 : 46,
    grid: { show: side !== 1, ...(a.log === 10 ? { filter: logTicks } : {}) }, labelSize: 20,
    ...(a.log === 10 ? { filter: logTicks, ticks: { filter: logTicks } } : {}),
  });
  const uopts = {
    width: width(card), height: card.height, legend: { show: false }, cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false, ...scale(opts.x) }, y: scale(opts.y), ...(opts.y2 ? { y2: scale(opts.y2) } : {}) },
    axes: [axis(opts.x, 2), axis(opts.y, 3), ...(opts.y2 ? [axis(opts.y2, 1)] : [])],
    series,
  };
  card.hooks = opts.hooks || {};  // read at draw time, so an update swaps them without a rebuild
  if (card.plot && card.sig === sig) {
    card.plot.setData(data);
    return card.plot;
  }
  if (card.plot) card.plot.destroy();
  card.box.replaceChildren();
  uopts.hooks = { draw: [(u) => (card.hooks.draw || []).forEach((f) => f(u))] };
  card.plot = new window.uPlot(uopts, data, card.box);
  card.box.uplot = card.plot;  // reachable from tests and the console
  card.sig = sig;
  return card.plot;
}

export function resizeAll(cards) {
  for (const c of cards) if (c.plot) c.plot.setSize({ width: width(c), height: c.height });
}

// Draw-hook helpers (canvas coordinates are in device pixels).
export function vline(u, x, color, label, dash = true, row = 0) {
  if (x === null || x === undefined || !Number.isFinite(x)) return;
  const ctx = u.ctx, px = u.valToPos(x, "x", true), { top, height } = u.bbox;
  if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
  ctx.save();
  ctx.strokeStyle = color; ctx.lineWidth = 2 * devicePixelRatio; ctx.setLineDash(dash ? [5 * devicePixelRatio, 4 * devicePixelRatio] : []);
  ctx.beginPath(); ctx.moveTo(px, top); ctx.lineTo(px, top + height); ctx.stroke();
  if (label) {
    ctx.fillStyle = color; ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
    const w = ctx.measureText(label).width;
    const right = px + w + 6 * devicePixelRatio < u.bbox.left + u.bbox.width;
    ctx.textAlign = right ? "left" : "right";
    ctx.fillText(label, px + (right ? 4 : -4) * devicePixelRatio, top + (12 + 14 * row) * devicePixelRatio);
  }
  ctx.restore();
}

export function hline(u, y, color, label, scaleKey = "y") {
  if (y === null || y === undefined || !Number.isFinite(y)) return;
  const ctx = u.ctx, py = u.valToPos(y, scaleKey, true), { left, width } = u.bbox;
  if (py < u.bbox.top || py > u.bbox.top + u.bbox.height) return;
  ctx.save();
  ctx.strokeStyle = color; ctx.lineWidth = 2 * devicePixelRatio; ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
  ctx.beginPath(); ctx.moveTo(left, py); ctx.lineTo(left + width, py); ctx.stroke();
  if (label) {
    ctx.fillStyle = color; ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`; ctx.textAlign = "right";
    ctx.fillText(label, left + width - 4 * devicePixelRatio, py - 4 * devicePixelRatio);
  }
  ctx.restore();
}

// Shade x-intervals [x0, x1) with a colour each: bands = [{x0, x1, color, label}]
export function bands(u, list) {
  const ctx = u.ctx, { top, height, left, width } = u.bbox;
  ctx.save();
  for (const b of list) {
    const a = Math.max(left, u.valToPos(b.x0, "x", true)), z = Math.min(left + width, u.valToPos(b.x1, "x", true));
    if (z <= a) continue;
    ctx.fillStyle = b.color; ctx.fillRect(a, top, z - a, height);
    if (b.label && z - a > 40 * devicePixelRatio) {
      ctx.fillStyle = "#555"; ctx.font = `${10 * devicePixelRatio}px system-ui, sans-serif`; ctx.textAlign = "center";
      ctx.fillText(b.label, (a + z) / 2, top + height - 6 * devicePixelRatio);
    }
  }
  ctx.restore();
}

// Labels beside points, skipping any that would overlap one already placed.
export function labels(u, points, color) {
  const ctx = u.ctx, placed = [], dpr = devicePixelRatio;
  ctx.save();
  ctx.font = `${10 * dpr}px system-ui, sans-serif`; ctx.fillStyle = color; ctx.textAlign = "left";
  for (const p of points) {
    const x = u.valToPos(p.x, "x", true), y = u.valToPos(p.y, "y", true);
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    const w = ctx.measureText(p.text).width, h = 11 * dpr;
    for (const dy of [-6, 12, -18, 24]) {
      const box = [x + 6 * dpr, y + dy * dpr - h, w, h];
      const fits = box[0] + w < u.bbox.left + u.bbox.width && box[1] > u.bbox.top;
      if (fits && !placed.some((b) => box[0] < b[0] + b[2] && b[0] < box[0] + box[2] && box[1] < b[1] + b[3] && b[1] < box[1] + box[3])) {
        placed.push(box); ctx.fillText(p.text, box[0], box[1] + h - 2 * dpr); break;
      }
    }
  }
  ctx.restore();
}
