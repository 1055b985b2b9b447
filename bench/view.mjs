// genbatch view and report.html over a 100,000-job state, in Chromium (numbers printed; no pass/fail):
//  - bytes of the view's page (HTML with the rows inside) and of its data (the rows' JSON), and of report.html
//  - time to the first paint and to the first card, and to a search result (typing into the search box,
//    its 150 ms debounce included), for the view and for report.html opened from disk
//  - the view's update latency during a run: another connection (this process; the view runs as
//    `genbatch view` in its own process) moves a job to done, and the open page shows its card done
//  - the view's own cost of one poll: idle (nothing changed) and after a change
// Usage: npm run build && node bench/view.mjs [--jobs 100000] [--chromium PATH]
//   (default /usr/bin/chromium, the desktop browser the figures in the notes were taken with; where it is not
//   installed, as in CI, /usr/bin/chromium-headless-shell)
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';

const ROOT = resolve(import.meta.dirname, '..');
const WORK = join(ROOT, 'bench', '.work', 'view');
const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const N = Number(arg('--jobs', '100000'));
const CHROMIUM = arg('--chromium', ['/usr/bin/chromium', '/usr/bin/chromium-headless-shell'].find((p) => existsSync(p)) ?? '/usr/bin/chromium');
const LIVE = 5; // jobs left pending, moved to done one at a time to time the updates
const { Store } = await import('../dist/store/index.js');

rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });
const statePath = join(WORK, 'state.db');
const WORDS = ['harbour', 'lighthouse', 'forest', 'desert', 'city', 'mountain', 'river', 'garden', 'station', 'market'];

let t = performance.now();
const store = Store.openForWrite(statePath);
store.openRun(join(WORK, 'm.yaml'), WORK, 'http://service.invalid', true, false);
store.db.transaction(() => {
  for (let i = 0; i < N; i++) {
    const id = `job-${String(i).padStart(6, '0')}`;
    const input = { prompt: `Picture ${i} of a quiet ${WORDS[i % WORDS.length]} at dusk, seen from afar`, quality: 'low' };
    store.syncJob({ id, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${i + 2}`, specHash: 'h', spec: JSON.stringify({ model: 'alpha-image-2', input }), estimatedCredits: 2 });
    if (i >= N - LIVE) continue;
    store.transition(id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: JSON.stringify(input) });
    store.transition(id, 'submitting', 'submitted', { task_id: `t${i}` });
    done(id, i);
  }
})();
function done(id, i) {
  store.transition(id, 'submitted', 'downloading', { result: '{}', finished_at: new Date().toISOString(), expires_at: 1 }, () =>
    store.addFiles(id, [{ idx: 0, name: 'image-1.png', url: `http://x/${id}`, type: 'image', content_type: 'image/png', expected_size: 5000, expires_at: 1 }]),
  );
  store.transition(id, 'downloading', 'done', {}, () => store.fileDone(id, 0, { path: `${id}/image-1.png`, size: 5000, sha256: String(i).padEnd(64, '0'), content_type: 'image/png' }));
}
console.log(`state: ${N} jobs written in ${((performance.now() - t) / 1000).toFixed(1)} s (${(statSync(statePath).size / 1e6).toFixed(1)} MB)`);

// report.html of the same state, by `genbatch report`.
t = performance.now();
await run(['report', '--state', statePath]);
const reportPath = join(WORK, 'report.html');
console.log(`report.html: ${mb(statSync(reportPath).size)} (rows ${mb(rowsBytes(readFileSync(reportPath, 'utf8')))}), written in ${((performance.now() - t) / 1000).toFixed(1)} s`);

const view = spawn(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), 'view', '--state', statePath, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((ok) => {
  let out = '';
  view.stdout.on('data', (d) => {
    out += d;
    const m = /^(http:\S+)\n/.exec(out);
    if (m) ok(m[1]);
  });
});
const base = url.replace(/\/\?token=.*/, '');
// Every route needs the token: the header here (a browser gets the cookie from the printed URL).
const auth = { headers: { 'x-genbatch-token': url.replace(/.*\?token=/, '') } };
try {
  // GET / three times: the least of the view process's own CPU (Linux: /proc), steadier than the wall time on a loaded machine.
  let html = '';
  const served = [];
  for (let k = 0; k < 3; k++) {
    t = performance.now();
    const cpu0 = cpuOf(view.pid);
    html = await (await fetch(`${base}/`, auth)).text();
    served.push({ cpu: cpuOf(view.pid) - cpu0, wall: performance.now() - t });
  }
  const least = (key) => Math.min(...served.map((x) => x[key]));
  console.log(`view page: ${mb(Buffer.byteLength(html))} (rows ${mb(rowsBytes(html))}), served in ${(least('wall') / 1000).toFixed(2)} s, view CPU ${Number.isNaN(least('cpu')) ? 'n/a' : `${(least('cpu') / 1000).toFixed(2)} s`} (least of 3; CPU each: ${served.map((x) => (x.cpu / 1000).toFixed(2)).join(', ')} s)`);
  // The rest of the rows, where the view serves them apart (GET /api/rows?after=, following next): bytes and the view's CPU.
  const live0 = JSON.parse(/<script type="application\/json" id="gb-live">([^<]*)<\/script>/.exec(html)[1]);
  if (live0.next !== undefined) {
    let next = live0.next, bytes = 0, answers = 0;
    t = performance.now();
    const cpu0 = cpuOf(view.pid);
    while (next !== null) {
      const body = await (await fetch(`${base}/api/rows?after=${next}`, auth)).text();
      bytes += Buffer.byteLength(body);
      answers++;
      next = JSON.parse(body).next;
    }
    console.log(`view rows after the page (/api/rows): ${mb(bytes)} in ${answers} answers, ${((performance.now() - t) / 1000).toFixed(2)} s, view CPU ${((cpuOf(view.pid) - cpu0) / 1000).toFixed(2)} s`);
  }

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
  for (const [name, target] of [['view', url], ['report.html', `file://${reportPath}`]]) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    // The page's own clock (ms from its navigation) when the first card is put in the gallery: Playwright's
    // waitForSelector below sees it only once the page's main thread is free again.
    await page.addInitScript(() => {
      new MutationObserver((_, obs) => {
        const g = document.getElementById('gb-gallery');
        if (g && g.querySelector('.card')) { window.__firstCard = performance.now(); obs.disconnect(); }
      }).observe(document, { childList: true, subtree: true });
    });
    // Result files do not exist in this made-up state: their requests are cut short.
    await page.route(/\/(files\/)?job-\d+\/image-1\.png$/, (r) => r.abort());
    const vcpu0 = cpuOf(view.pid);
    t = performance.now();
    const t0 = Date.now();
    await page.goto(target, { waitUntil: 'commit' });
    await page.waitForSelector('#gb-gallery .card', { timeout: 120_000 });
    const firstCard = performance.now() - t;
    const paint = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('paint').map((e) => [e.name, e.startTime])));
    const nav = await page.evaluate(() => { const n = performance.getEntriesByType('navigation')[0]; return { origin: performance.timeOrigin, response: n.responseEnd, interactive: n.domInteractive, card: window.__firstCard }; });
    // The first card put in the gallery and the first contentful paint, from this script's navigation call (as firstCard), by the page's clock.
    const since = (pageMs) => (pageMs === undefined ? undefined : nav.origin + pageMs - t0);
    // The view that loads its rows after the page (#gb-loading): every row in the page, before the search.
    let allRows = '';
    if ((await page.locator('#gb-loading').count()) > 0) {
      await page.waitForSelector('#gb-loading[data-done]', { state: 'attached', timeout: 300_000 });
      allRows = `, every row ${ms(performance.now() - t)} (view CPU from the navigation ${((cpuOf(view.pid) - vcpu0) / 1000).toFixed(2)} s)`;
    }
    const search = await page.evaluate(async () => {
      const q = document.getElementById('gb-q');
      const info = document.getElementById('gb-info');
      const before = info.textContent;
      const start = performance.now();
      q.value = 'lighthouse 4';
      q.dispatchEvent(new Event('input'));
      while (info.textContent === before) await new Promise((r) => setTimeout(r, 5));
      return { ms: performance.now() - start, info: info.textContent };
    });
    console.log(`${name} in Chromium: first paint ${ms(paint['first-paint'])}, first contentful paint ${ms(paint['first-contentful-paint'])}, first card ${ms(firstCard)} after navigation as Playwright sees it; by the page's clock from the same call: first card in the DOM ${ms(since(nav.card))}, first contentful paint ${ms(since(paint['first-contentful-paint']))} (page: response end ${ms(nav.response)}, DOM interactive ${ms(nav.interactive)})${allRows}; search "lighthouse 4": ${ms(search.ms)} (150 ms debounce included; ${search.info})`);
    if (name === 'view') await latency(page);
    await page.close();
  }
  await browser.close();
} finally {
  view.kill('SIGTERM');
  store.close();
}

async function latency(page) {
  // Poll cost as the view sees it: nothing changed, then one job changed.
  const live = await page.evaluate(() => JSON.parse(document.getElementById('gb-live').textContent));
  let t0 = performance.now();
  const idle = await (await fetch(`${base}/api/jobs?since=${encodeURIComponent(live.since)}&gen=99999999`, auth)).text();
  const changedMs = performance.now() - t0;
  const latest = JSON.parse(idle);
  t0 = performance.now();
  const quiet = await (await fetch(`${base}/api/jobs?since=${encodeURIComponent(latest.since)}&gen=${latest.gen}`, auth)).text();
  console.log(`view poll: ${ms(performance.now() - t0)} and ${quiet.length} B when nothing changed; ${ms(changedMs)} and ${idle.length} B for the rows changed since the page was made (${latest.rows.length} rows)`);
  const times = [];
  for (let k = 0; k < LIVE; k++) {
    const i = N - LIVE + k;
    const id = `job-${String(i).padStart(6, '0')}`;
    await page.fill('#gb-q', id);
    await page.waitForFunction((want) => document.querySelectorAll('#gb-gallery .card').length === 1 && document.querySelector('#gb-gallery .card').dataset.id === want, id);
    await new Promise((r) => setTimeout(r, 300 + 150 * k)); // not in step with the page's 1 s poll
    store.transition(id, 'pending', 'submitting', { attemptsInc: 1 });
    store.transition(id, 'submitting', 'submitted', { task_id: `t${i}` });
    const start = performance.now();
    done(id, i);
    await page.waitForFunction((want) => document.querySelector(`#gb-gallery .card[data-id="${want}"] .s-done`) !== null, id, { polling: 20, timeout: 10_000 });
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  console.log(`view update latency (a job done in another connection -> its card done in the open page, poll every 1 s): median ${ms(times[Math.floor(times.length / 2)])}, max ${ms(times.at(-1))} over ${times.length}`);
}

/** CPU milliseconds (user + system) a process has used so far, from /proc; NaN where there is none. */
function cpuOf(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // clock ticks (USER_HZ 100)
  } catch {
    return NaN;
  }
}
function rowsBytes(html) {
  const m = /<script type="application\/json" id="gb-jobs">([^<]*)<\/script>/.exec(html);
  return m ? Buffer.byteLength(m[1]) : 0;
}
function mb(n) {
  return `${(n / 1e6).toFixed(1)} MB`;
}
function ms(v) {
  return v === undefined ? 'n/a' : `${Math.round(v)} ms`;
}
function run(args) {
  return new Promise((ok, fail) => {
    const c = spawn(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
    c.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`genbatch ${args[0]} exited with ${code}`))));
  });
}
