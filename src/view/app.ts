/**
 * The view's script, run before the gallery's (src/report/html-app.ts), which hands it each card and, once
 * drawn, an api (update, render, shown, move, has). It adds:
 * - the rows after the page's first ones: GET /api/rows?after=<next> a stretch at a time once the first cards are
 *   painted, each handed to update; "loading jobs: n of N" in #gb-loading until the last (src/view/gallery.ts);
 * - live updates: GET /api/jobs?since=&gen= every second; changed rows replace theirs (or are added) and the
 *   counts are redrawn, without a reload;
 * - review marks: on each done card Approve / Reject (Clear mark when marked), a checkbox to select it, and a
 *   bar with a note and Approve selected / Reject selected; POST /api/marks (the token travels in the view's
 *   HttpOnly cookie, which the page never sees; the server checks the Origin);
 * - keys: j / ArrowDown / ArrowRight next card, k / ArrowUp / ArrowLeft previous (across pages), x select,
 *   a approve, r reject (the selection when there is one, else the current card); ignored while typing;
 * - a "details" link on each card to /job/<id> (href(id), also the link of a job in the grid layout);
 * - the header (time, credits, files, the invocations and their notes) redrawn from each changed poll's `head`
 *   (src/view/head.ts), as text;
 * - a lightbox: a card's image opens full size (Enter or o on the current card too); j / k / arrows move to the
 *   next / previous job (across pages), a approves, r rejects, Escape closes.
 */
export const VIEW_SCRIPT = `(() => {
"use strict";
const live = JSON.parse(document.getElementById("gb-live").textContent);
const h = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const button = (text, cls, fn) => { const b = h("button", cls, text); b.type = "button"; b.addEventListener("click", fn); return b; };
const sel = new Set(), states = new Map(), rowOf = new Map();
let current = null, api = null, since = live.since, gen = live.gen, busy = false, polled = 0;
// The rows after the page's first ones: GET /api/rows?after=<next>, a stretch at a time, until next is null.
let next = live.next;
const note = h("input"); note.id = "gb-note"; note.type = "text"; note.placeholder = "Note for the next mark (optional)"; note.setAttribute("aria-label", "Note for the next mark");
const selInfo = h("span", "note"); selInfo.id = "gb-sel";
const status = h("span", "note"); status.id = "gb-live-status"; status.setAttribute("aria-live", "polite");
const loading = h("span", "note"); loading.id = "gb-loading";
const bar = h("div", "bar"); bar.id = "gb-bar";
bar.append(note, button("Approve selected", null, () => mark([...sel], "approved")), button("Reject selected", null, () => mark([...sel], "rejected")), button("Clear selection", null, () => { sel.clear(); for (const c of document.querySelectorAll(".card.sel")) { c.classList.remove("sel"); c.querySelector("input[type=checkbox]").checked = false; } showSel(); }), selInfo, status, loading);
const keys = h("p", "note", "Keys: j / k or arrows: next / previous card; Enter or o (or a click on an image): the image full size, Esc closes it; x: select; a: approve; r: reject (the selection, else the current card).");
const gallery = document.getElementById("gb-gallery");
gallery.before(bar, keys);
const showSel = () => { selInfo.textContent = sel.size === 0 ? "" : sel.size + " selected"; };
const cardEl = (id) => { for (const c of gallery.children) if (c.dataset.id === id) return c; return null; };
function setCurrent(id, scroll) {
  current = id;
  for (const c of gallery.querySelectorAll(".card.current")) c.classList.remove("current");
  const el = id === null ? null : cardEl(id);
  if (el) { el.classList.add("current"); if (scroll) el.scrollIntoView({ block: "nearest" }); }
}
function toggle(id, on) {
  if (on) sel.add(id); else sel.delete(id);
  const el = cardEl(id);
  if (el) { el.classList.toggle("sel", on); el.querySelector("input[type=checkbox]").checked = on; }
  showSel();
}
async function mark(chosen, m) {
  if (chosen.length === 0) { status.textContent = "Nothing chosen: select cards, or move to one with j / k."; return; }
  const ids = chosen.filter((id) => states.get(id) === "done");
  if (ids.length === 0) { status.textContent = "Only done jobs can be marked."; return; }
  let res, body = {};
  try {
    res = await fetch("/api/marks", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ids, mark: m, note: note.value === "" ? null : note.value }) });
    body = await res.json();
  } catch (e) { status.textContent = "Not marked: the view did not answer."; return; }
  if (!res.ok) { status.textContent = "Not marked: " + (body.error || "HTTP " + res.status); return; }
  status.textContent = (m === null ? "Cleared the mark of " : "Marked ") + body.changed + " job(s)" + (m === null ? "" : " " + m) + ".";
  note.value = "";
  for (const id of ids) sel.delete(id);
  showSel();
  await sync(true);
}
function counts(list, total) {
  const ul = document.getElementById("gb-counts");
  if (ul) {
    const items = [h("li")]; items[0].append(h("span", "badge", "jobs: " + total));
    for (const [state, n] of list) { const li = h("li"); li.append(h("span", "badge s-" + state, state + ": " + n)); items.push(li); }
    ul.replaceChildren(...items);
  }
  const title = document.getElementById("gb-jobs-title");
  if (title) title.textContent = "Jobs (" + total + ")";
}
const local = (iso) => { const d = new Date(iso); return isNaN(d.getTime()) ? iso : d.toLocaleString(); };
const timeEl = (iso) => { const t = h("time", null, local(iso)); t.dateTime = iso; t.title = iso; return t; };
function head(v) {
  if (!v) return;
  const tm = document.getElementById("gb-h-time"), cr = document.getElementById("gb-h-credits"), fl = document.getElementById("gb-h-files"), box = document.getElementById("gb-credits");
  if (tm) tm.replaceChildren(timeEl(v.time.from), v.time.running ? " to now, running (" + v.time.took + " so far)" : " to ", ...(v.time.running ? [] : [timeEl(v.time.to), " (" + v.time.took + ")"]));
  if (cr) cr.textContent = v.credits;
  if (fl) fl.textContent = v.files;
  if (box) {
    const parts = [];
    if (v.invocations.length > 0) { const ul = h("ul", "note"); for (const [n, at, tail] of v.invocations) { const li = h("li"); li.append("invocation " + n + ", started ", timeEl(at), tail); ul.append(li); } parts.push(ul); }
    for (const n of v.notes) parts.push(h("p", "note", n));
    box.replaceChildren(...parts);
  }
}
head(live.head);
// The lightbox: one job's first image, full size, with its id, prompt, mark and the review buttons.
const lb = h("div"); lb.id = "gb-lb"; lb.hidden = true; lb.setAttribute("role", "dialog"); lb.setAttribute("aria-label", "Image");
const lbImg = h("img"), lbBox = h("div", "lb-img"), lbText = h("div", "lb-text"), lbBar = h("div", "lb-bar");
lbBox.append(lbImg);
lbBar.append(button("\u2190 Previous", "lb-prev", () => step(-1)), button("Approve (a)", "gb-approve", () => current !== null && mark([current], "approved")), button("Reject (r)", "gb-reject", () => current !== null && mark([current], "rejected")), button("Next \u2192", "lb-next", () => step(1)), lbText, button("Close (Esc)", "lb-close", () => closeBox()));
lb.append(lbBox, lbBar);
document.body.append(lb);
lbBox.addEventListener("click", (e) => { if (e.target === lbBox) closeBox(); });
const firstImage = (r) => { const f = r ? r[11].find((x) => x[2] === "i" && x[0] !== null) : null; return f ? f[0] : null; };
function showBox() {
  const r = rowOf.get(current);
  if (!r) return;
  const src = firstImage(r);
  lbImg.hidden = src === null;
  if (src !== null && lbImg.getAttribute("src") !== src) lbImg.src = src;
  lbImg.alt = (r[4] || r[0]).replace(/\s+/g, " ").slice(0, 500);
  const m = r[13] ? r[13][0] : null;
  lb.className = m ? "lb-" + m : "";
  lb.dataset.id = r[0];
  const t = [h("strong", "tok", r[0]), " "];
  t.push(h("span", "badge " + (m ? "m-" + m : "s-" + states.get(r[0])), m || states.get(r[0])));
  if (src === null) t.push(" ", h("span", null, "(no image)"));
  if (r[4]) t.push(h("p", "prompt", r[4]));
  lbText.replaceChildren(...t);
}
function openBox(id) { setCurrent(id, true); lb.hidden = false; showBox(); }
function closeBox() { lb.hidden = true; }
function showLoading() {
  if (next === null) { loading.textContent = ""; loading.dataset.done = "1"; }
  else loading.textContent = "loading jobs: " + api.rows.length + " of " + live.total;
}
// One stretch of rows; false when the view did not give it (tried again later).
async function more() {
  try {
    const res = await fetch("/api/rows?after=" + encodeURIComponent(next), { cache: "no-store" });
    if (!res.ok) { loading.textContent = "Loading the jobs: the view answered HTTP " + res.status + "."; return false; }
    const b = await res.json();
    next = b.next;
    if (b.rows.length > 0) { api.update(b.rows, b.tables); setCurrent(current, false); }
    showLoading();
    return true;
  } catch (e) { loading.textContent = "Loading the jobs: the view is not answering (stopped?)."; return false; }
}
async function poll() {
  polled = Date.now();
  try {
    const res = await fetch("/api/jobs?since=" + encodeURIComponent(since) + "&gen=" + gen, { cache: "no-store" });
    if (!res.ok) { status.textContent = "The view answered HTTP " + res.status + "."; return; }
    const b = await res.json();
    since = b.since; gen = b.gen;
    // While rows are still to come, a changed job not yet here is left to them: added now, it would go out of manifest order.
    const rows = next === null ? b.rows : b.rows.filter((r) => api.has(r[0]));
    if (rows.length > 0) { api.update(rows, b.tables); setCurrent(current, false); }
    if (b.counts) counts(b.counts, b.total);
    if (b.head) head(b.head);
    if (!lb.hidden) showBox();
    status.dataset.gen = String(gen);
  } catch (e) { status.textContent = "The view is not answering (stopped?)."; }
}
// Rows and polls one at a time, in the order they were read: a later answer is never replaced by an earlier one.
// While rows are coming, a stretch each turn and a poll at most once a second (or after a mark: now).
// The time to wait before the next turn (ms): none while rows are coming, unless the view failed to give them.
async function sync(now) {
  if (busy || api === null) return next !== null ? 50 : 1000;
  busy = true;
  let ok = true;
  try {
    if (next !== null) ok = await more();
    if (next === null || now === true || Date.now() - polled >= 1000) await poll();
  } finally { busy = false; }
  return next !== null && ok ? 0 : 1000;
}
window.gbView = {
  href: (id) => "/job/" + encodeURIComponent(id),
  card(a, r, state) {
    a.dataset.id = r[0];
    states.set(r[0], state);
    rowOf.set(r[0], r);
    for (const link of a.querySelectorAll(".media a")) link.addEventListener("click", (e) => { e.preventDefault(); openBox(r[0]); });
    if (sel.has(r[0])) a.classList.add("sel");
    if (current === r[0]) a.classList.add("current");
    const box = h("div", "review");
    const pick = h("label", "note");
    const cb = h("input"); cb.type = "checkbox"; cb.checked = sel.has(r[0]);
    cb.addEventListener("change", () => toggle(r[0], cb.checked));
    pick.append(cb, " select");
    box.append(pick);
    const ok = button("Approve", "gb-approve", () => mark([r[0]], "approved"));
    const no = button("Reject", "gb-reject", () => mark([r[0]], "rejected"));
    if (state !== "done") { ok.disabled = true; no.disabled = true; ok.title = no.title = "only done jobs can be marked"; }
    box.append(ok, no);
    if (r[13]) box.append(button("Clear mark", "gb-clear", () => mark([r[0]], null)));
    const more = h("a", null, "details"); more.href = window.gbView.href(r[0]);
    box.append(more);
    a.append(box);
    a.addEventListener("click", (e) => { if (!e.target.closest("a,button,input,label,audio,video")) setCurrent(r[0], false); });
  },
  ready(x) {
    api = x;
    polled = Date.now();
    showLoading();
    const tick = async () => { setTimeout(tick, await sync(false)); };
    // The first stretch once the first cards are painted (a frame, then a task): its parse and update wait for them.
    if (next !== null) requestAnimationFrame(() => setTimeout(tick, 0));
    else setTimeout(tick, 1000);
  },
};
function step(d) {
  const ids = api.shown();
  if (ids.length === 0) return;
  let i = ids.indexOf(current);
  if (i === -1) i = d > 0 ? -1 : ids.length;
  i += d;
  if (i < 0) { if (api.move(-1)) { const s = api.shown(); setCurrent(s[s.length - 1], true); } }
  else if (i >= ids.length) { if (api.move(1)) setCurrent(api.shown()[0], true); }
  else setCurrent(ids[i], true);
  if (!lb.hidden) showBox();
}
document.addEventListener("keydown", (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey || api === null) return;
  const t = e.target;
  if (t && ((t.tagName === "INPUT" && t.type !== "checkbox") || t.tagName === "SELECT" || t.tagName === "TEXTAREA" || t.isContentEditable)) return;
  const k = e.key;
  if (!lb.hidden) {
    if (k === "Escape") { e.preventDefault(); closeBox(); }
    else if (k === "j" || k === "ArrowRight" || k === "ArrowDown") { e.preventDefault(); step(1); }
    else if (k === "k" || k === "ArrowLeft" || k === "ArrowUp") { e.preventDefault(); step(-1); }
    else if ((k === "a" || k === "r") && current !== null) mark([current], k === "a" ? "approved" : "rejected");
    return;
  }
  if ((k === "Enter" || k === "o") && current !== null && t === document.body) { e.preventDefault(); openBox(current); return; }
  const chosen = () => (sel.size > 0 ? [...sel] : current === null ? [] : [current]);
  if (k === "j" || k === "ArrowDown" || k === "ArrowRight") { e.preventDefault(); step(1); }
  else if (k === "k" || k === "ArrowUp" || k === "ArrowLeft") { e.preventDefault(); step(-1); }
  else if (k === "x" && current !== null) toggle(current, !sel.has(current));
  else if (k === "a") mark(chosen(), "approved");
  else if (k === "r") mark(chosen(), "rejected");
});
})();`;
