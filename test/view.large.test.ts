import type { Browser, Page, Route } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { Store } from '../src/store/index.js';
import { startView, type View } from '../src/view/index.js';
import { consoleErrors, describeBrowser, launchChromium } from './helpers/browser.js';
import { tempDir } from './helpers/tmp.js';
import { bigViewState, jobId } from './helpers/view-state.js';

/**
 * A run with more jobs than one page of cards, in Chromium: GET / brings the first page of rows and the first
 * card shows from it alone; the rest come from /api/rows (40 an answer here: several stretches), and search,
 * filters, marks, the lightbox and the job page work over every job. The view in this process, the page in a
 * real browser; no console error allowed.
 */
const N = 130;
const FAILED = [70, 110];
const TOKEN = 'view-large-token-0123456789';

describeBrowser('the view of a run larger than one page of cards, in Chromium', () => {
  let view: View;
  let store: Store;
  let statePath: string;
  let browser: Browser;
  const base = () => `http://127.0.0.1:${view.port}`;
  const cleanups: Array<() => void | Promise<unknown>> = [];
  const errors: string[] = [];

  beforeAll(async () => {
    const t = tempDir('genbatch-view-large-');
    cleanups.push(t.cleanup);
    ({ statePath } = bigViewState(t.dir, N, { failed: FAILED }));
    store = Store.openForRead(statePath);
    store.useRun(store.runs()[0]!);
    view = await startView({ store, port: 0, token: TOKEN, chunkRows: 40 });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await view?.close();
    store?.close();
    while (cleanups.length) await cleanups.pop()!();
  });
  afterEach(() => {
    expect(errors).toEqual([]);
    errors.length = 0;
  });

  async function open(path = '/'): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    consoleErrors(page, errors);
    cleanups.push(() => page.close());
    await page.goto(`${base()}/?token=${TOKEN}`, { waitUntil: 'commit' });
    // The page is left first: a path that differs from the open one only after # is not loaded again (the page follows
    // the new address instead: the last test), and the first load may or may not have run its script by then.
    if (path !== '/') {
      await page.goto('about:blank');
      await page.goto(`${base()}${path}`);
    }
    return page;
  }
  const ids = (page: Page) => page.locator('#gb-gallery .card').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.id));
  const loaded = (page: Page) => page.waitForSelector('#gb-loading[data-done]', { state: 'attached' });
  const marks = () => Object.fromEntries([...store.marks()].map(([id, m]) => [id, m.state]));

  it('shows the first card from the small page alone, then finds, filters and marks jobs beyond it once the rest has come', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    consoleErrors(page, errors);
    cleanups.push(() => page.close());
    // The rows after the first page are held back until the first card is shown.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const asked: string[] = [];
    await page.route(/\/api\/rows\?/, async (route: Route) => {
      asked.push(new URL(route.request().url()).search);
      await held;
      await route.continue();
    });
    await page.goto(`${base()}/?token=${TOKEN}`);
    await page.waitForSelector('#gb-gallery .card');
    expect(await ids(page)).toEqual(Array.from({ length: 48 }, (_, i) => jobId(i)));
    expect(await page.evaluate(() => (JSON.parse(document.getElementById('gb-jobs')!.textContent!) as unknown[]).length)).toBe(48);
    expect(await page.locator('#gb-loading').textContent()).toBe(`loading jobs: 48 of ${N}`);
    await expect.poll(() => asked.length).toBe(1);
    // A job beyond the first stretch is marked meanwhile: the poll that follows the first stretch names a job the page
    // does not have yet, which the second stretch brings at its place in the manifest.
    const r = await fetch(`${base()}/api/marks`, { method: 'POST', headers: { 'x-genbatch-token': TOKEN, 'content-type': 'application/json' }, body: JSON.stringify({ ids: [jobId(100)], mark: 'approved' }) });
    expect(r.status).toBe(200);
    // A card opened by the reader stays as it is while the rows come (the page's cards are not drawn again).
    await page.locator(`.card[data-id="${jobId(0)}"] .more > summary`).click();
    await new Promise((done) => setTimeout(done, 1100));
    release();
    await loaded(page);
    expect(await page.locator(`.card[data-id="${jobId(0)}"] details.more`).getAttribute('open')).toBe('');
    expect(asked.length).toBeGreaterThanOrEqual(3);
    expect(await page.locator('#gb-info').textContent()).toBe(`${N} jobs`);
    // Manifest order over every job: the second page of cards is jobs 48 to 95.
    await page.locator('#gb-next').click();
    await expect.poll(() => ids(page)).toEqual(Array.from({ length: 48 }, (_, i) => jobId(48 + i)));
    // Search finds a job that was not in the page GET / sent; its mark, made while the rows came, is shown.
    await page.fill('#gb-q', jobId(100));
    await expect.poll(() => ids(page)).toEqual([jobId(100)]);
    expect(await page.locator(`.card[data-id="${jobId(100)}"] .m-approved`).count()).toBe(1);
    await page.fill('#gb-q', '');
    await page.selectOption('#gb-state', { label: 'failed (2)' });
    await expect.poll(() => ids(page)).toEqual(FAILED.map(jobId));
    await page.selectOption('#gb-state', '');
    // A mark by the card's button and one in the lightbox, on jobs beyond the first page.
    await page.fill('#gb-q', jobId(125));
    await expect.poll(() => ids(page)).toEqual([jobId(125)]);
    await page.locator(`.card[data-id="${jobId(125)}"] .gb-reject`).click();
    await expect.poll(() => page.locator(`.card[data-id="${jobId(125)}"] .m-rejected`).count()).toBe(1);
    await page.fill('#gb-q', jobId(129));
    await expect.poll(() => ids(page)).toEqual([jobId(129)]);
    await page.locator(`.card[data-id="${jobId(129)}"] .media a`).click();
    expect(await page.locator('#gb-lb').getAttribute('data-id')).toBe(jobId(129));
    await page.keyboard.press('a');
    await expect.poll(() => page.locator('#gb-lb.lb-approved').count()).toBe(1);
    expect(marks()).toEqual({ [jobId(100)]: 'approved', [jobId(125)]: 'rejected', [jobId(129)]: 'approved' });
    await page.keyboard.press('Escape');
    // Its job page.
    await page.locator(`.card[data-id="${jobId(129)}"] a`, { hasText: 'details' }).click();
    await page.waitForURL(`${base()}/job/${jobId(129)}`);
    expect(await page.locator('h1').textContent()).toContain(jobId(129));
  });

  it('applies a filter named in the address once the rows that have it come', async () => {
    // No failed job is among the first 48: the state filter has no "failed" to pick until the stretches bring them.
    const page = await open('/#state=failed');
    await loaded(page);
    await expect.poll(() => ids(page)).toEqual(FAILED.map(jobId));
    expect(await page.locator('#gb-state option:checked').textContent()).toBe('failed (2)');
  });

  it('follows an address changed after # in the open page: what it names is picked, what it does not goes back to all', async () => {
    const page = await open();
    await loaded(page);
    expect(await ids(page)).toHaveLength(48);
    // The same document, a new hash: no load, the page reads the address again.
    await page.goto(`${base()}/#state=failed`);
    await expect.poll(() => ids(page)).toEqual(FAILED.map(jobId));
    // A filter picked by hand, then a new address: the address wins, and the state it does not name is all again.
    await page.selectOption('#gb-state', '');
    await page.selectOption('#gb-sort', 'id');
    await page.evaluate(() => { location.hash = 'q=job-12&sort=oops'; });
    await expect.poll(() => ids(page)).toEqual(Array.from({ length: 10 }, (_, i) => jobId(120 + i)));
    expect(await page.locator('#gb-state').inputValue()).toBe('');
    expect(await page.locator('#gb-sort').inputValue()).toBe('order');
    expect(await page.locator('#gb-q').inputValue()).toBe('job-12');
  });
});
