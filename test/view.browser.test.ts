import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { Store } from '../src/store/index.js';
import { consoleErrors, describeBrowser, launchChromium } from './helpers/browser.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { startViewProcess, type ViewProcess } from './helpers/view.js';
import { admin } from './helpers/admin.js';

/**
 * `genbatch view` in Chromium (playwright-core): what a reviewer sees and does. A run against the in-process
 * sandbox (the CLI as a child process), the view as a child process, the page in a real browser. Every page
 * opened is watched for console errors (none allowed), apart from the one that sends a POST without the
 * token on purpose.
 */
const KEY = 'sk-view-browser-0123456789abcdef';
const FAST = '0.001';
const JOBS: Array<[string, string]> = [
  ['harbour-dawn', 'A quiet harbour at dawn, fishing boats resting on still water'],
  ['harbour-night', 'A quiet harbour at night under the stars'],
  ['lighthouse-storm', 'A red lighthouse in a storm, waves breaking, unknown sailors watching'],
  ['forest-fog', 'A pine forest in morning fog'],
  ['long-link', `A poster of https://example.com/${'averyveryverylongpathsegment'.repeat(8)} in big letters`],
  ['policy-wall', 'A mural that says unsafe-output in red paint'],
];

function manifest(path: string, jobs: ReadonlyArray<[string, string]>): string {
  const lines = ['jobs:'];
  for (const [id, prompt] of jobs) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: ${JSON.stringify(prompt)}`);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

function taskIds(out: string): Map<string, string | null> {
  const store = Store.openForRead(join(out, 'state.db'));
  try {
    store.useRun(store.runs()[0]!);
    return new Map([...store.summaryRows()].map((r) => [r.id, r.task_id]));
  } finally {
    store.close();
  }
}

describeBrowser('genbatch view in Chromium', () => {
  let sb: Sandbox;
  let browser: Browser;
  let view: ViewProcess;
  let root: string;
  let out: string;
  let m: string;
  const cleanups: Array<() => void | Promise<unknown>> = [];
  const errors: string[] = [];

  beforeAll(async () => {
    ensureBuilt();
    sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(FAST), seed: 5 });
    const t = tempDir('genbatch-view-browser-');
    cleanups.push(t.cleanup);
    root = t.dir;
    out = join(root, 'out');
    m = manifest(join(root, 'm.yaml'), JOBS);
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', FAST, '--out', out], { GENBATCH_API_KEY: KEY });
    expect(r.stdout + r.stderr).toContain('5 done');
    view = await startViewProcess(['--out', out]);
    browser = await launchChromium(['evil.test']);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await view?.stop();
    await sb?.close();
    while (cleanups.length) await cleanups.pop()!();
  });
  afterEach(() => {
    expect(errors).toEqual([]);
    errors.length = 0;
  });

  async function open(url: string, width = 1280): Promise<Page> {
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    consoleErrors(page, errors);
    cleanups.push(() => page.close());
    await page.goto(url);
    return page;
  }
  const cards = (page: Page) => page.locator('#gb-gallery .card');
  const ids = (page: Page) => cards(page).evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.id));

  it('shows every job as a card with its prompt, also as its images\' alt text', async () => {
    const page = await open(view.url);
    await expect.poll(() => cards(page).count()).toBe(JOBS.length);
    const shown = await cards(page).evaluateAll((els) => els.map((e) => [(e as HTMLElement).dataset.id, e.querySelector('.prompt')?.textContent, e.querySelector('img')?.getAttribute('alt') ?? null]));
    expect(shown).toEqual(JOBS.map(([id, prompt]) => [id, prompt, id === 'policy-wall' ? null : prompt]));
  });

  it('narrows the cards by search and by the state filter', async () => {
    const page = await open(view.url);
    await page.fill('#gb-q', 'harbour');
    await expect.poll(() => ids(page)).toEqual(['harbour-dawn', 'harbour-night']);
    await page.fill('#gb-q', 'harbour stars');
    await expect.poll(() => ids(page)).toEqual(['harbour-night']);
    await page.fill('#gb-q', '');
    await page.selectOption('#gb-state', { label: 'failed (1)' });
    await expect.poll(() => ids(page)).toEqual(['policy-wall']);
    await page.selectOption('#gb-state', { label: 'done (5)' });
    await page.selectOption('#gb-sort', 'id');
    await expect.poll(() => ids(page)).toEqual(['forest-fog', 'harbour-dawn', 'harbour-night', 'lighthouse-storm', 'long-link']);
  });

  it('has no horizontal overflow at 390 px, on the gallery and on a job page', async () => {
    const page = await open(view.url, 390);
    await expect.poll(() => cards(page).count()).toBe(JOBS.length);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.goto(`${view.base}/job/long-link?token=${view.token}`);
    await page.waitForSelector('h1');
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.goto(`${view.base}/job/policy-wall?token=${view.token}`);
    expect(await page.locator('pre.err').textContent()).toContain('content policy');
  });

  it('rejects in the page, then run --redo rejected makes exactly those jobs again, and the view shows them back without a reload', async () => {
    const page = await open(view.url);
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    for (const id of ['harbour-dawn', 'forest-fog']) await page.locator(`.card[data-id="${id}"] .gb-reject`).click();
    await expect.poll(() => page.locator('.card .m-rejected').count()).toBe(2);
    const before = taskIds(out);
    const tasksBefore = ((await (await fetch(`${sb.url}/__sandbox/stats`, admin(sb))).json()) as { tasks_total: number }).tasks_total;
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', FAST, '--out', out, '--redo', 'rejected'], { GENBATCH_API_KEY: KEY });
    // Exit 6: the run still holds a job that failed permanently (policy-wall: a content-policy failure), which --redo rejected leaves as it is.
    expect(r.code, r.stdout + r.stderr).toBe(6);
    expect(r.stdout + r.stderr).toContain('5 done');
    const tasksAfter = ((await (await fetch(`${sb.url}/__sandbox/stats`, admin(sb))).json()) as { tasks_total: number }).tasks_total;
    expect(tasksAfter - tasksBefore).toBe(2);
    const after = taskIds(out);
    const changed = [...after].filter(([id, task]) => before.get(id) !== task).map(([id]) => id);
    expect(changed).toEqual(['harbour-dawn', 'forest-fog']);
    // The marks were cleared by the new results: the open page shows that within its next polls.
    await expect.poll(() => page.locator('.card .m-rejected').count(), { timeout: 5000 }).toBe(0);
    expect(await page.locator('.card[data-id="harbour-dawn"] .meta').textContent()).toContain(after.get('harbour-dawn')!);
    expect(await page.evaluate(() => (window as unknown as { marker: number }).marker)).toBe(42);
    // The job's page shows the earlier result (previous-1/) beside the new one, each file with its sha256.
    const detail = await open(`${view.base}/job/harbour-dawn?token=${view.token}`);
    expect(await detail.locator('.side > section h3').allTextContents()).toEqual(['current', 'previous-1']);
    expect(await detail.locator('.side > section img').count()).toBe(2);
    const shown = await detail.locator('.side > section:nth-child(2) td.tok').allTextContents();
    // The earlier image with the sha256 recorded for it (the result.json kept in previous-1/), not hashed for the page.
    const previous = readdirSync(join(out, 'harbour-dawn', 'previous-1')).filter((n) => n !== 'result.json');
    expect(shown).toContain(`harbour-dawn/previous-1/${previous[0]}`);
    expect(shown).toContain(createHash('sha256').update(readFileSync(join(out, 'harbour-dawn', 'previous-1', previous[0]!))).digest('hex'));
    // The printed URL left no token in the address bar.
    expect(detail.url()).toBe(`${view.base}/job/harbour-dawn`);
    await detail.locator('a', { hasText: 'all jobs' }).click();
    await expect.poll(() => cards(detail).count()).toBe(JOBS.length);
  });

  it('reviews with the keyboard: j/k move, a approves, r rejects, x selects; the mark filter narrows the cards', async () => {
    const page = await open(view.url);
    await expect.poll(() => cards(page).count()).toBe(JOBS.length);
    const current = () => page.locator('.card.current').getAttribute('data-id');
    await page.keyboard.press('j');
    expect(await current()).toBe('harbour-dawn');
    await page.keyboard.press('a');
    await expect.poll(() => page.locator('.card[data-id="harbour-dawn"] .m-approved').count()).toBe(1);
    await page.keyboard.press('ArrowDown');
    expect(await current()).toBe('harbour-night');
    await page.keyboard.press('r');
    await expect.poll(() => page.locator('.card[data-id="harbour-night"] .m-rejected').count()).toBe(1);
    await page.keyboard.press('k');
    expect(await current()).toBe('harbour-dawn');
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    await page.keyboard.press('x');
    await page.keyboard.press('j');
    await page.keyboard.press('x');
    expect(await page.locator('#gb-sel').textContent()).toBe('2 selected');
    await page.fill('#gb-note', 'keep these');
    await page.locator('#gb-q').blur();
    await page.keyboard.press('Escape');
    await page.locator('.card[data-id="forest-fog"] h3').click();
    await page.keyboard.press('a');
    await expect.poll(() => page.locator('.card .m-approved').count()).toBe(3);
    await page.selectOption('#gb-mark', { label: 'rejected (1)' });
    await expect.poll(() => ids(page)).toEqual(['harbour-night']);
    await page.selectOption('#gb-mark', { label: 'no mark (2)' });
    await expect.poll(() => ids(page)).toEqual(['long-link', 'policy-wall']);
    const store = Store.openForRead(join(out, 'state.db'));
    try {
      store.useRun(store.runs()[0]!);
      const marks = Object.fromEntries([...store.marks()].map(([id, mk]) => [id, [mk.state, mk.note]]));
      expect(marks).toEqual({ 'harbour-dawn': ['approved', null], 'harbour-night': ['rejected', null], 'lighthouse-storm': ['approved', 'keep these'], 'forest-fog': ['approved', 'keep these'] });
    } finally {
      store.close();
    }
  });

  it('refuses a read or a POST without the token (403) and a page reached by another host name (403)', async () => {
    const page = await browser.newPage();
    cleanups.push(() => page.close());
    // Without the token nothing is read: not the gallery, not a job page, not a file.
    expect((await page.goto(`${view.base}/`))?.status()).toBe(403);
    expect((await page.goto(`${view.base}/job/harbour-dawn`))?.status()).toBe(403);
    const status = await page.evaluate(() => fetch('/api/marks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ids: ['forest-fog'], mark: 'rejected' }) }).then((r) => r.status));
    expect(status).toBe(403);
    const evil = await page.goto(`http://evil.test:${view.port}/?token=${view.token}`);
    expect(evil?.status()).toBe(403);
  });

  it('shows the cards of a run in another process as they come, without a reload', async () => {
    const liveOut = join(root, 'live-out');
    const lm = manifest(join(root, 'live.yaml'), JOBS.slice(0, 1));
    expect((await runCli(['run', lm, '--base-url', sb.url, '--time-scale', FAST, '--out', liveOut], { GENBATCH_API_KEY: KEY })).code).toBe(0);
    const liveView = await startViewProcess(['--out', liveOut]);
    cleanups.push(() => liveView.stop());
    const page = await open(liveView.url);
    await expect.poll(() => ids(page)).toEqual(['harbour-dawn']);
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 7));
    const more = JOBS.slice(0, 4);
    manifest(lm, more);
    // A slower time scale for the run than the sandbox's: its first status read of each task comes 1.5 s after
    // the submit (15 s x 0.1), so the page sees the jobs pending first.
    const run = spawnCli(['run', lm, '--base-url', sb.url, '--time-scale', '0.1', '--out', liveOut], { GENBATCH_API_KEY: KEY });
    const ended = new Promise<number | null>((r) => run.on('exit', (code) => r(code)));
    cleanups.push(() => (run.exitCode === null ? run.kill('SIGKILL') : undefined));
    await expect.poll(() => ids(page), { timeout: 15_000 }).toEqual(more.map(([id]) => id));
    expect(await ended).toBe(0);
    await expect.poll(() => page.locator('.card .s-done').count(), { timeout: 5000 }).toBe(more.length);
    await expect.poll(() => page.locator('#gb-counts').textContent()).toContain('done: 4');
    expect(await page.locator('.card[data-id="forest-fog"] img').getAttribute('alt')).toBe(JOBS[3]![1]);
    expect(await page.evaluate(() => (window as unknown as { marker: number }).marker)).toBe(7);
  }, 60_000);
});
