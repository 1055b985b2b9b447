/**
 * The script of report.html (inline, allowed by its hash in the page's Content-Security-Policy). It reads
 * the rows of src/report/html-data.ts and shows one page of cards at a time (PAGE cards in the DOM, however
 * many jobs), with search (id, prompt, variables, any input value, where, task id), filters (state, model,
 * kind of result, review mark) and sort, also set from the page's hash (`#q=harbour&state=done&model=M&kind=image&mark=rejected&sort=newest`).
 * A card shows its images first (full card width; the size control `#gb-size`, or `#size=s|m|l`, sets the
 * column width: medium is 4 across at 1400 px), then id, state and mark, prompt; model, task, input and files
 * are folded under "metadata". A mark is shown as a badge, its note below, and as the card's class
 * (`marked-approved`, `marked-rejected`: border, label, a rejected image dimmed). When the page has `window.gbView` (the view's script, run
 * first), each card is handed to gbView.card(article, row, state) and gbView.ready(api) gets update/render/move.
 * A chat job's messages are searched but not listed on its card (its prompt is the last user message).
 * Every text goes in with textContent, never as HTML. It also shows every
 * <time datetime> of the page in the reader's local time (the ISO text stays when a date does not parse).
 * Layout "grid" (offered when the shown jobs have a matrix variable; `#layout=grid&across=mood&down=size`):
 * the filtered jobs in a table, one variable's values across and another's down (from the row's variables),
 * each cell the job's first image (or its state badge) and id; a click opens its card, or in the view
 * gbView.href(id) (the job's page). It scrolls inside its own box; at most GRID_MAX jobs are placed.
 * Music cards: each audio player is labelled with its track's title (from track-N.json), the track fields
 * are shown as a line, and lyrics as text.
 */
export const APP_SCRIPT = `(() => {
"use strict";
const PAGE = 48;
const $ = (id) => document.getElementById(id);
const h = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const local = (iso) => { const d = new Date(iso); return isNaN(d.getTime()) ? iso : d.toLocaleString(); };
for (const t of document.querySelectorAll("time[datetime]")) { t.title = t.dateTime; t.textContent = local(t.dateTime); }
const jobsEl = $("gb-jobs"), metaEl = $("gb-meta");
if (!jobsEl || !metaEl) return;
const rows = JSON.parse(jobsEl.textContent);
const meta = JSON.parse(metaEl.textContent);
const KIND = { i: "image", v: "video", a: "audio", t: "text", o: "other" };
const q = $("gb-q"), fState = $("gb-state"), fModel = $("gb-model"), fKind = $("gb-kind"), fMark = $("gb-mark"), sortBy = $("gb-sort");
const hook = window.gbView || null;
const markOf = (r) => (r[13] ? r[13][0] : "-");
const gallery = $("gb-gallery"), info = $("gb-info"), prev = $("gb-prev"), next = $("gb-next"), pageInfo = $("gb-page");
const bytes = (n) => { const u = ["B", "KB", "MB", "GB", "TB"]; let v = n, i = 0; while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; } return i === 0 ? v + " B" : v.toFixed(1) + " " + u[i]; };
const kindsOf = (r) => { const s = new Set(); for (const f of r[11]) s.add(f[2]); if (r[12].length > 0) s.add("t"); if (s.size === 0) s.add("-"); return s; };
function fill(sel, counts, label) {
  const keep = sel.value;
  while (sel.options.length > 1) sel.remove(1);
  for (const [v, n] of [...counts].sort((a, b) => b[1] - a[1])) { const o = h("option", null, label(v) + " (" + n + ")"); o.value = String(v); sel.append(o); }
  sel.value = keep;
  if (sel.value !== keep) { const o = h("option", null, label(keep) + " (0)"); o.value = keep; sel.append(o); sel.value = keep; }
}
function filters() {
  const byState = new Map(), byModel = new Map(), byKind = new Map(), byMark = new Map();
  for (const r of rows) {
    byState.set(r[1], (byState.get(r[1]) || 0) + 1);
    byModel.set(r[2], (byModel.get(r[2]) || 0) + 1);
    for (const k of kindsOf(r)) byKind.set(k, (byKind.get(k) || 0) + 1);
    byMark.set(markOf(r), (byMark.get(markOf(r)) || 0) + 1);
  }
  fill(fState, byState, (i) => meta.states[i]);
  fill(fModel, byModel, (i) => meta.models[i]);
  fill(fKind, byKind, (k) => (k === "-" ? "no result" : KIND[k]));
  fill(fMark, byMark, (k) => (k === "-" ? "no mark" : k));
}
filters();
const hay = new Array(rows.length);
const haystack = (r) => [r[0], r[4] || "", r[5], r[3], r[7] || "", ...Object.values(r[6])].join("\\n").toLowerCase();
const SORTS = {
  order: null,
  id: (a, b) => (rows[a][0] < rows[b][0] ? -1 : rows[a][0] > rows[b][0] ? 1 : a - b),
  state: (a, b) => meta.states[rows[a][1]].localeCompare(meta.states[rows[b][1]]) || a - b,
  model: (a, b) => meta.models[rows[a][2]].localeCompare(meta.models[rows[b][2]]) || a - b,
  newest: (a, b) => (rows[b][9] || "").localeCompare(rows[a][9] || "") || a - b,
  oldest: (a, b) => (rows[a][9] || "~").localeCompare(rows[b][9] || "~") || a - b,
};
let view = [], page = 0;
function apply(keepPage) {
  const terms = q.value.toLowerCase().split(/\\s+/).filter(Boolean);
  const st = fState.value, mo = fModel.value, ki = fKind.value, mk = fMark.value;
  view = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (st !== "" && String(r[1]) !== st) continue;
    if (mo !== "" && String(r[2]) !== mo) continue;
    if (ki !== "" && !kindsOf(r).has(ki)) continue;
    if (mk !== "" && markOf(r) !== mk) continue;
    if (terms.length > 0) { const x = hay[i] || (hay[i] = haystack(r)); if (!terms.every((t) => x.includes(t))) continue; }
    view.push(i);
  }
  const cmp = SORTS[sortBy.value];
  if (cmp) view.sort(cmp);
  if (keepPage !== true) page = 0;
  render();
}
// The grid layout: the filtered jobs placed by two of their variables (one across, one down; "row" too, for a rows job).
const layout = $("gb-layout"), axes = $("gb-axes"), across = $("gb-across"), down = $("gb-down"), gridBox = $("gb-grid"), pager = $("gb-pager");
const GRID_MAX = 2000, NONE = "\\u2014";
let pickAcross = null, pickDown = null;
const varCache = new Array(rows.length);
function varsAt(i) {
  if (varCache[i]) return varCache[i];
  const o = new Map(), text = rows[i][5];
  if (text) for (const p of text.split(/, (?=[A-Za-z_][A-Za-z0-9_]*=)/)) { const e = p.indexOf("="); if (e > 0) o.set(p.slice(0, e), p.slice(e + 1)); }
  return (varCache[i] = o);
}
function fillAxis(sel, keys, none, chosen, dflt) {
  sel.replaceChildren();
  if (none) { const o = h("option", null, "(none)"); o.value = ""; sel.append(o); }
  for (const k of keys) { const o = h("option", null, k); o.value = k; sel.append(o); }
  sel.value = chosen !== null && (chosen === "" ? none : keys.includes(chosen)) ? chosen : dflt;
}
function gridItem(i) {
  const r = rows[i];
  const a = h("a", "gitem");
  a.dataset.id = r[0];
  a.title = r[5];
  a.href = hook && hook.href ? hook.href(r[0]) : "#";
  const img = r[11].find((f) => f[2] === "i" && f[0] !== null);
  if (img) { const im = h("img"); im.src = img[0]; im.alt = (r[4] || r[0]).replace(/\\s+/g, " ").slice(0, 500); im.loading = "lazy"; a.append(im); }
  else a.append(h("span", "badge s-" + meta.states[r[1]], meta.states[r[1]]));
  a.append(h("span", "tok", r[0]));
  if (!(hook && hook.href)) a.addEventListener("click", (e) => { e.preventDefault(); openCard(i); });
  return a;
}
function openCard(i) {
  const pos = view.indexOf(i);
  if (pos < 0) return;
  layout.value = "cards";
  page = Math.floor(pos / PAGE);
  render();
  const el = gallery.children[pos % PAGE];
  if (el) { el.tabIndex = -1; el.focus({ preventScroll: true }); el.scrollIntoView({ block: "start" }); }
}
function drawGrid() {
  const ax = across.value, dn = down.value;
  const cols = [], downs = [], seenC = new Set(), seenD = new Set(), cells = new Map();
  for (const i of view.slice(0, GRID_MAX)) {
    const v = varsAt(i);
    const c = v.has(ax) ? v.get(ax) : NONE, d = dn === "" ? "" : v.has(dn) ? v.get(dn) : NONE;
    if (!seenC.has(c)) { seenC.add(c); cols.push(c); }
    if (!seenD.has(d)) { seenD.add(d); downs.push(d); }
    const key = d + "\\u0000" + c;
    if (!cells.has(key)) cells.set(key, []);
    cells.get(key).push(i);
  }
  const t = h("table", "mgrid");
  const head = h("tr");
  head.append(h("th", "corner", dn === "" ? ax + " \\u2192" : dn + " \\u2193 / " + ax + " \\u2192"));
  for (const c of cols) { const th = h("th", null, c); th.scope = "col"; head.append(th); }
  t.append(head);
  for (const d of downs) {
    const tr = h("tr");
    const th = h("th", null, dn === "" ? "every job" : d); th.scope = "row"; tr.append(th);
    for (const c of cols) { const td = h("td"); for (const i of cells.get(d + "\\u0000" + c) || []) td.append(gridItem(i)); tr.append(td); }
    t.append(tr);
  }
  const parts = [];
  if (view.length > GRID_MAX) parts.push(h("p", "note", "The grid shows the first " + GRID_MAX + " of " + view.length + " jobs: search or filter to narrow it."));
  if (view.length > 0) parts.push(t); else parts.push(h("p", "note", "No job matches."));
  gridBox.replaceChildren(...parts);
}
/** The grid when it is chosen and the shown jobs have a matrix variable, else the page of cards. */
function render() {
  const keys = [], seen = new Set();
  for (const i of view) for (const k of varsAt(i).keys()) if (!seen.has(k)) { seen.add(k); keys.push(k); }
  const matrix = keys.filter((k) => k !== "row");
  layout.hidden = matrix.length === 0;
  const grid = !layout.hidden && layout.value === "grid";
  axes.hidden = !grid; gridBox.hidden = !grid; gallery.hidden = grid; pager.hidden = grid;
  if (grid) {
    fillAxis(across, keys, false, pickAcross, matrix[0]);
    fillAxis(down, keys, true, pickDown, matrix.length > 1 ? matrix[1] : "");
    gallery.replaceChildren(); drawn = [];
    drawGrid();
    info.textContent = view.length === rows.length ? rows.length + " jobs" : view.length + " of " + rows.length + " jobs match";
    return;
  }
  if (gridBox.childElementCount > 0) { gridBox.replaceChildren(); drawn = []; }
  renderCards();
}
// The rows of the cards drawn: when the page would draw the same rows again (the view adding rows elsewhere), its cards are kept.
let drawn = [];
function renderCards() {
  const pages = Math.max(1, Math.ceil(view.length / PAGE));
  if (page >= pages) page = pages - 1;
  const shown = view.slice(page * PAGE, (page + 1) * PAGE).map((i) => rows[i]);
  if (gallery.childElementCount !== shown.length || shown.some((r, k) => r !== drawn[k])) gallery.replaceChildren(...shown.map(card));
  drawn = shown;
  info.textContent = view.length === rows.length ? rows.length + " jobs" : view.length + " of " + rows.length + " jobs match";
  pageInfo.textContent = "page " + (page + 1) + " of " + pages;
  prev.disabled = page === 0;
  next.disabled = page >= pages - 1;
}
function trackInfo(r) {
  const out = new Map();
  for (const [name, text] of r[12]) {
    const m = /^track(-\\d+)?\\.json$/.exec(name);
    if (!m) continue;
    try { out.set(m[1] || "", JSON.parse(text)); } catch (e) { /* shown as text instead */ }
  }
  return out;
}
function card(r) {
  const a = h("article", "card");
  a.append(h("h3", "tok", r[0]));
  // Visible at a glance: the state and the mark (the card's border and label too); the rest folded under "details".
  const st = h("p", "status");
  st.append(h("span", "badge s-" + meta.states[r[1]], meta.states[r[1]]));
  if (r[13]) { st.append(h("span", "badge m-" + r[13][0], r[13][0])); a.classList.add("marked-" + r[13][0]); }
  a.append(st);
  if (r[13] && r[13][1]) a.append(h("p", "note", "note: " + r[13][1]));
  if (r[5]) a.append(h("p", "vars", r[5]));
  if (r[4]) a.append(h("p", "prompt", r[4]));
  const more = h("details", "more");
  more.append(h("summary", null, "metadata"));
  const m = h("p", "meta");
  m.append(meta.models[r[2]]);
  if (r[3]) m.append(" \\u00b7 ", h("span", "tok", r[3]));
  if (r[7]) m.append(" \\u00b7 task ", h("span", "tok", r[7]));
  if (r[8] > 1) m.append(" \\u00b7 " + r[8] + " attempts");
  if (r[9]) { const t = h("time", null, local(r[9])); t.dateTime = r[9]; t.title = r[9]; m.append(" \\u00b7 finished ", t); }
  more.append(m);
  const fields = Object.entries(r[6]).filter(([k]) => k !== "messages");
  if (fields.length > 0) { const dl = h("dl", "input"); for (const [k, v] of fields) dl.append(h("dt", null, k), h("dd", null, v)); more.append(dl); }
  const tracks = trackInfo(r);
  const media = h("div", "media");
  const alt = (r[4] || r[0]).replace(/\\s+/g, " ").slice(0, 500);
  for (const f of r[11]) {
    if (f[0] === null) continue;
    if (f[2] === "i") { const link = h("a"); link.href = f[0]; const img = h("img"); img.src = f[0]; img.alt = alt; img.loading = "lazy"; link.append(img); media.append(link); }
    else if (f[2] === "a" || f[2] === "v") {
      const fig = h("figure", "player");
      const n = /(-\\d+)?\\.[^.]*$/.exec(f[1].split("/").pop());
      const track = tracks.get((n && n[1]) || "");
      fig.append(h("figcaption", null, track && track.title ? track.title + " (" + f[1].split("/").pop() + ")" : f[1].split("/").pop()));
      const el = h(f[2] === "a" ? "audio" : "video"); el.controls = true; el.preload = f[2] === "a" ? "none" : "metadata"; el.src = f[0];
      fig.append(el); media.append(fig);
    }
  }
  if (media.childElementCount > 0) a.append(media);
  if (r[12].length > 0) {
    const dl = h("dl", "texts");
    for (const [name, text] of r[12]) {
      const m2 = /^track(-\\d+)?\\.json$/.exec(name);
      const t = m2 ? tracks.get(m2[1] || "") : undefined;
      dl.append(h("dt", null, name));
      if (t && typeof t === "object") {
        const parts = [t.title, t.tags, typeof t.duration === "number" ? t.duration.toFixed(1) + " s" : null].filter((x) => x !== undefined && x !== null && x !== "");
        dl.append(h("dd", "track", parts.join(" \\u00b7 ")));
      } else { const dd = h("dd"); dd.append(h("pre", null, text)); dl.append(dd); }
    }
    a.append(dl);
  }
  if (r[11].length > 0) {
    const ul = h("ul", "files");
    more.append(ul);
    for (const f of r[11]) {
      const li = h("li");
      if (f[0] === null) li.append(f[1] + " ", h("span", "note", "(not linked: not a plain relative path)"));
      else { const link = h("a", null, f[1]); link.href = f[0]; li.append(link); }
      li.append(" ", h("span", "note", f[4] + ", " + bytes(f[3])));
      ul.append(li);
    }
  }
  if (r[10]) a.append(h("pre", "err", r[10]));
  a.append(more);
  if (hook) hook.card(a, r, meta.states[r[1]]);
  return a;
}
// Image size: small, medium (the default: 4 cards across at 1400 px, one at 390 px) or large.
const size = $("gb-size");
const sized = () => { gallery.dataset.size = size.value; };
size.addEventListener("change", sized);
let timer = 0;
q.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(apply, 150); });
for (const el of [fState, fModel, fKind, fMark, sortBy]) el.addEventListener("change", apply);
prev.addEventListener("click", () => { page--; render(); gallery.scrollIntoView(); });
next.addEventListener("click", () => { page++; render(); gallery.scrollIntoView(); });
layout.addEventListener("change", render);
across.addEventListener("change", () => { pickAcross = across.value; render(); });
down.addEventListener("change", () => { pickDown = down.value; render(); });
// A link can open the page searched and filtered: report.html#q=harbour&state=done&model=...&kind=image&sort=newest.
// An address changed in the open page (only its #...) does the same: what it does not name goes back to the default.
let want = new URLSearchParams(), touched = false;
const pick = (sel, name, label) => { if (!want.has(name)) return; for (const o of sel.options) if (o.value !== "" && label(o.value) === want.get(name)) sel.value = o.value; };
// A state, model, kind or mark the first rows do not have yet is picked once rows that have it come (the view), until the reader picks one.
const pickAll = () => {
  if (touched) return;
  pick(fState, "state", (v) => meta.states[v]);
  pick(fModel, "model", (v) => meta.models[v]);
  pick(fKind, "kind", (v) => (v === "-" ? "none" : KIND[v]));
  pick(fMark, "mark", (v) => (v === "-" ? "none" : v));
};
for (const el of [fState, fModel, fKind, fMark]) el.addEventListener("change", () => { touched = true; });
const fromHash = () => {
  want = new URLSearchParams(location.hash.slice(1));
  touched = false;
  for (const sel of [fState, fModel, fKind, fMark]) sel.value = "";
  q.value = want.get("q") || "";
  pickAll();
  layout.value = want.get("layout") === "grid" ? "grid" : "cards";
  pickAcross = want.has("across") ? want.get("across") : null;
  pickDown = want.has("down") ? want.get("down") : null;
  size.value = ["s", "m", "l"].includes(want.get("size")) ? want.get("size") : "m";
  sized();
  sortBy.value = want.has("sort") && Object.prototype.hasOwnProperty.call(SORTS, want.get("sort")) ? want.get("sort") : "order";
};
fromHash();
addEventListener("hashchange", () => { fromHash(); apply(); });
$("gb-controls").hidden = false;
apply();
// The view (src/view/) brings rows that changed: each replaces the row of its id, or is added at the end.
if (hook) {
  const at = new Map(rows.map((r, i) => [r[0], i]));
  hook.ready({
    rows,
    render,
    shown: () => (layout.value === "grid" && !layout.hidden ? [] : view).slice(page * PAGE, (page + 1) * PAGE).map((i) => rows[i][0]),
    update(changed, tables) {
      meta.states = tables.states;
      meta.models = tables.models;
      for (const r of changed) {
        const i = at.get(r[0]);
        if (i === undefined) { at.set(r[0], rows.length); rows.push(r); }
        else { rows[i] = r; hay[i] = undefined; varCache[i] = undefined; }
      }
      filters();
      pickAll();
      apply(true);
    },
    has: (id) => at.has(id),
    move(step) {
      const pages = Math.max(1, Math.ceil(view.length / PAGE));
      if (page + step < 0 || page + step >= pages) return false;
      page += step; render(); return true;
    },
  });
}
})();`;
