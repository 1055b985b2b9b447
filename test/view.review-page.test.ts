import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { Store } from '../src/store/index.js';
import { consoleErrors, describeBrowser, launchChromium } from './helpers/browser.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { startViewProcess, type ViewProcess } from './helpers/view.js';

/**
 * The review page in Chromium: cards built around their images (columns at 1400 and 390 px, the size control),
 * marked cards told apart at a glance, the lightbox (keys, approve and reject), and the job page (its buttons,
 * the local reference image beside the result, times in the browser's zone). With GENBATCH_SHOTS=DIR the
 * gallery, the lightbox and the job page are saved there as PNGs at both widths.
 */
const KEY = 'sk-view-review-0123456789abcdef';
const FAST = '0.001';
const SHOTS = process.env.GENBATCH_SHOTS;
const SUBJECTS = ['harbour at dawn', 'red lighthouse in a storm', 'pine forest in fog', 'desert road at noon', 'city rooftops at night', 'mountain lake', 'market stall with fruit', 'old tram in the rain'];
const IDS = SUBJECTS.map((_, i) => `pic-${i + 1}`);

describeBrowser('the review page in Chromium', () => {
  let sb: Sandbox;
  let browser: Browser;
  let view: ViewProcess;
  let out: string;
  const cleanups: Array<() => void | Promise<unknown>> = [];
  const errors: string[] = [];

  beforeAll(async () => {
    ensureBuilt();
    sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(FAST), seed: 11, policyWords: [] });
    const t = tempDir('genbatch-view-review-');
    cleanups.push(t.cleanup);
    out = join(t.dir, 'out');
    mkdirSync(join(t.dir, 'refs'));
    writeFileSync(join(t.dir, 'refs', 'mug.png'), solidPng(96, 96, [200, 40, 40]));
    const lines = ['jobs:'];
    SUBJECTS.forEach((s, i) => lines.push(`  - id: ${IDS[i]}`, '    model: alpha-image-2', `    input: {prompt: "A photograph of a ${s}, soft light"}`));
    lines.push('  - id: edit-mug', '    model: dream-4', '    input: {prompt: "the red mug on an oak table", image_urls: [refs/mug.png]}', '');
    writeFileSync(join(t.dir, 'm.yaml'), lines.join('\n'));
    const r = await runCli(['run', join(t.dir, 'm.yaml'), '--base-url', sb.url, '--time-scale', FAST, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    view = await startViewProcess(['--out', out]);
    browser = await launchChromium();
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

  async function open(path: string, width: number): Promise<Page> {
    const ctx = await browser.newContext({ viewport: { width, height: 900 }, timezoneId: 'Asia/Tokyo', locale: 'en-GB' });
    const page = await ctx.newPage();
    consoleErrors(page, errors);
    cleanups.push(() => ctx.close());
    await page.goto(`${view.base}${path}${path.includes('?') ? '&' : '?'}token=${view.token}`);
    return page;
  }
  const shot = async (page: Page, name: string, at?: string) => {
    if (!SHOTS) return;
    if (at) await page.locator(at).evaluate((e) => e.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: join(SHOTS, `${name}.png`) });
  };
  /** The number of cards in the gallery's first row (distinct tops). */
  const across = (page: Page) => page.evaluate(() => {
    const tops = [...document.querySelectorAll('#gb-gallery .card')].map((c) => Math.round(c.getBoundingClientRect().top));
    return tops.filter((t) => t === tops[0]).length;
  });
  const markOf = (id: string) => {
    const store = Store.openForRead(join(out, 'state.db'));
    try {
      store.useRun(store.runs()[0]!);
      return store.markOf(id)?.state ?? null;
    } finally {
      store.close();
    }
  };

  it('shows the images large: 3 or 4 cards across at 1400 px, one at 390 px; the size control changes it', async () => {
    const wide = await open('/', 1400);
    await expect.poll(() => wide.locator('#gb-gallery .card').count()).toBe(IDS.length + 1);
    await wide.waitForFunction(() => [...document.querySelectorAll('#gb-gallery img')].every((i) => (i as HTMLImageElement).complete));
    const n = await across(wide);
    expect(n).toBeGreaterThanOrEqual(3);
    expect(n).toBeLessThanOrEqual(4);
    // The image spans the card: at least 280 px wide at 1400.
    expect(await wide.locator('.card[data-id="pic-1"] .media img').evaluate((i) => i.getBoundingClientRect().width)).toBeGreaterThan(280);
    // The metadata is folded.
    expect(await wide.locator('.card[data-id="pic-1"] details.more').evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    await shot(wide, 'gallery-1400', '#gb-gallery');
    await wide.selectOption('#gb-size', 'l');
    expect(await across(wide)).toBeLessThan(n);
    await wide.selectOption('#gb-size', 's');
    expect(await across(wide)).toBeGreaterThan(n);
    const narrow = await open('/', 390);
    await expect.poll(() => narrow.locator('#gb-gallery .card').count()).toBe(IDS.length + 1);
    expect(await across(narrow)).toBe(1);
    expect(await narrow.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(narrow, 'gallery-390', '#gb-gallery');
  });

  it('opens an image in the lightbox: arrows and j / k move, a approves, r rejects, Escape closes; marked cards differ at a glance', async () => {
    const page = await open('/', 1400);
    await expect.poll(() => page.locator('#gb-gallery .card').count()).toBe(IDS.length + 1);
    const shown = () => page.locator('#gb-lb').getAttribute('data-id');
    await page.locator('.card[data-id="pic-2"] .media a').click();
    expect(await page.locator('#gb-lb').isVisible()).toBe(true);
    expect(await shown()).toBe('pic-2');
    expect(await page.locator('#gb-lb img').getAttribute('src')).toMatch(/^\/files\/pic-2\//);
    await page.keyboard.press('ArrowRight');
    expect(await shown()).toBe('pic-3');
    await page.keyboard.press('a');
    await expect.poll(() => page.locator('#gb-lb').getAttribute('class')).toBe('lb-approved');
    expect(markOf('pic-3')).toBe('approved');
    await page.keyboard.press('j');
    expect(await shown()).toBe('pic-4');
    await page.keyboard.press('r');
    await expect.poll(() => page.locator('#gb-lb').getAttribute('class')).toBe('lb-rejected');
    expect(markOf('pic-4')).toBe('rejected');
    await page.keyboard.press('k');
    await page.keyboard.press('ArrowLeft');
    expect(await shown()).toBe('pic-2');
    await page.locator('#gb-lb .gb-reject').click();
    await expect.poll(() => markOf('pic-2')).toBe('rejected');
    await page.keyboard.press('ArrowRight');
    await shot(page, 'lightbox-1400');
    await page.keyboard.press('Escape');
    expect(await page.locator('#gb-lb').isVisible()).toBe(false);
    // At a glance: a thick green or red border, a label over the image, a rejected image dimmed.
    await expect.poll(() => page.locator('.card.marked-rejected').count()).toBe(2);
    await shot(page, 'gallery-marked-1400', '#gb-gallery');
    const look = (id: string) =>
      page.locator(`.card[data-id="${id}"]`).evaluate((c) => ({
        border: getComputedStyle(c).borderTopWidth,
        color: getComputedStyle(c).borderTopColor,
        label: getComputedStyle(c, '::before').content,
        opacity: getComputedStyle(c.querySelector('.media img')!).opacity,
      }));
    const approved = await look('pic-3');
    const rejected = await look('pic-4');
    const plain = await look('pic-1');
    expect(approved.border).toBe('3px');
    expect(rejected.border).toBe('3px');
    expect(plain.border).toBe('1px');
    expect(approved.color).not.toBe(rejected.color);
    expect(approved.label).toContain('approved');
    expect(rejected.label).toContain('rejected');
    expect(plain.label).toBe('none');
    expect(Number(rejected.opacity)).toBeLessThan(0.5);
    expect(Number(approved.opacity)).toBe(1);
    const narrow = await open('/', 390);
    await expect.poll(() => narrow.locator('#gb-gallery .card').count()).toBe(IDS.length + 1);
    await shot(narrow, 'gallery-marked-390', '.card[data-id="pic-2"]');
    await narrow.locator('.card[data-id="pic-3"] .media a').click();
    expect(await narrow.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(narrow, 'lightbox-390');
  });

  it('the job page approves and rejects, shows the local reference image beside the result, and its times in the browser\'s zone', async () => {
    const page = await open('/job/edit-mug', 1400);
    const ref = page.locator('.side .refs img');
    expect(await ref.count()).toBe(1);
    expect(await page.locator('.side .refs figcaption').textContent()).toBe('refs/mug.png');
    await page.waitForFunction(() => (document.querySelector('.side .refs img') as HTMLImageElement).complete);
    expect(await ref.evaluate((i) => (i as HTMLImageElement).naturalWidth)).toBe(96);
    expect(await page.locator('.side > section').count()).toBe(2);
    // The times as the gallery shows them: the browser's zone (Asia/Tokyo here), the ISO time as the title.
    const times = await page.locator('time').evaluateAll((ts) => ts.map((t) => [t.getAttribute('datetime'), t.textContent, new Date(t.getAttribute('datetime')!).toLocaleString()]));
    expect(times.length).toBeGreaterThan(0);
    for (const [iso, text, expected] of times) {
      expect(text).not.toBe(iso);
      expect(text).toBe(expected);
    }
    await shot(page, 'job-1400');
    await page.locator('#gb-mark .gb-reject').click();
    await expect.poll(() => markOf('edit-mug')).toBe('rejected');
    await page.waitForSelector('.summary .m-rejected');
    await page.locator('#gb-mark .gb-approve').click();
    await expect.poll(() => markOf('edit-mug')).toBe('approved');
    await page.waitForSelector('.summary .m-approved');
    const narrow = await open('/job/edit-mug', 390);
    await narrow.waitForSelector('.side .refs img');
    expect(await narrow.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(narrow, 'job-390');
  });
});
