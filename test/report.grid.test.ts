import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { consoleErrors, describeBrowser, launchChromium } from './helpers/browser.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { startViewProcess, type ViewProcess } from './helpers/view.js';

/**
 * The grid layout of report.html and of `genbatch view` (same page): after a real sandbox run of a matrix
 * manifest (mood x size, 3 x 2), the jobs are placed by their variables, one across and one down; search
 * narrows the grid; a cell opens the job's card (report) or its page (view); nothing overflows at 390 px;
 * no console error. A job whose prompt holds the sandbox's policy word fails: its cell shows its state.
 */
const KEY = 'sk-report-grid-0123456789abcdef';
const FAST = '0.001';
const MANIFEST = `jobs:
  - id: "street-{{mood}}-{{size}}"
    matrix: {mood: [rainy, sunny, unsafe-output], size: [square, wide]}
    model: alpha-image-2
    input: {prompt: "a street, {{mood}}, {{size}} frame", quality: low}
  - id: plain
    model: alpha-image-2
    input: {prompt: "a plain harbour", quality: low}
`;
const MOODS = ['rainy', 'sunny', 'unsafe-output'];
const SIZES = ['square', 'wide'];

describeBrowser('the grid layout in Chromium', () => {
  let sb: Sandbox;
  let browser: Browser;
  let view: ViewProcess;
  let out: string;
  const cleanups: Array<() => void | Promise<unknown>> = [];
  const errors: string[] = [];

  beforeAll(async () => {
    ensureBuilt();
    sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(FAST), seed: 7 });
    const t = tempDir('genbatch-report-grid-');
    cleanups.push(t.cleanup);
    writeFileSync(join(t.dir, 'm.yaml'), MANIFEST);
    out = join(t.dir, 'out');
    const r = await runCli(['run', join(t.dir, 'm.yaml'), '--base-url', sb.url, '--time-scale', FAST, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.stdout + r.stderr).toContain('5 done');
    view = await startViewProcess(['--out', out]);
    browser = await launchChromium();
  }, 120_000);
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
  const report = (hash = '') => pathToFileURL(join(out, 'report.html')).href + (hash ? `#${hash}` : '');
  /** The grid as text: its header row, then each row's header and the ids in each cell. */
  const grid = (page: Page) =>
    page.evaluate(() => {
      const t = document.querySelector('#gb-grid table');
      if (!t) return null;
      return [...t.querySelectorAll('tr')].map((tr) => [...tr.children].map((c) => (c.tagName === 'TH' ? c.textContent : [...c.querySelectorAll('.gitem')].map((a) => (a as HTMLElement).dataset.id).join(' '))));
    });
  const cell = (mood: string, size: string) => `street-${mood}-${size}`;

  it('places each matrix job by its variables: the first one across, the second down, the others in a (none) column', async () => {
    const page = await open(report());
    await expect.poll(() => page.locator('#gb-gallery .card').count()).toBe(7);
    expect(await page.isVisible('#gb-layout')).toBe(true);
    expect(await page.isVisible('#gb-across')).toBe(false);
    await page.selectOption('#gb-layout', 'grid');
    expect(await page.isVisible('#gb-gallery')).toBe(false);
    expect(await page.inputValue('#gb-across')).toBe('mood');
    expect(await page.inputValue('#gb-down')).toBe('size');
    expect(await grid(page)).toEqual([
      ['size ↓ / mood →', ...MOODS, '—'],
      ...SIZES.map((s) => [s, ...MOODS.map((m) => cell(m, s)), '']),
      ['—', '', '', '', 'plain'],
    ]);
    // Cells of done jobs show their first image, the failed ones their state.
    expect(await page.locator(`#gb-grid .gitem[data-id="${cell('rainy', 'wide')}"] img`).count()).toBe(1);
    expect(await page.locator(`#gb-grid .gitem[data-id="${cell('unsafe-output', 'wide')}"] .badge`).textContent()).toBe('failed');

    await page.selectOption('#gb-across', 'size');
    await page.selectOption('#gb-down', 'mood');
    expect(await grid(page)).toEqual([
      ['mood ↓ / size →', ...SIZES, '—'],
      ...MOODS.map((m) => [m, ...SIZES.map((s) => cell(m, s)), '']),
      ['—', '', '', 'plain'],
    ]);
    await page.selectOption('#gb-down', '');
    expect(await grid(page)).toEqual([
      ['size →', ...SIZES, '—'],
      ['every job', ...SIZES.map((s) => MOODS.map((m) => cell(m, s)).join(' ')), 'plain'],
    ]);
  });

  it('shows only the jobs the search and filters leave, and is not offered when none of them has a variable', async () => {
    const page = await open(report('layout=grid'));
    await page.fill('#gb-q', 'sunny');
    await expect.poll(() => grid(page)).toEqual([['size ↓ / mood →', 'sunny'], ['square', cell('sunny', 'square')], ['wide', cell('sunny', 'wide')]]);
    await page.fill('#gb-q', 'wide');
    await expect.poll(() => grid(page)).toEqual([['size ↓ / mood →', ...MOODS], ['wide', ...MOODS.map((m) => cell(m, 'wide'))]]);
    await page.selectOption('#gb-state', { label: 'failed (2)' });
    await expect.poll(() => grid(page)).toEqual([['size ↓ / mood →', 'unsafe-output'], ['wide', cell('unsafe-output', 'wide')]]);
    await page.fill('#gb-q', 'plain');
    await page.selectOption('#gb-state', '');
    await expect.poll(() => page.isVisible('#gb-layout')).toBe(false);
    expect(await page.locator('#gb-gallery .card').count()).toBe(1);
    expect(await page.isVisible('#gb-grid')).toBe(false);
  });

  it('opens the job\'s card from its cell in report.html', async () => {
    const page = await open(report('layout=grid&across=size&down=mood'));
    await page.click(`#gb-grid .gitem[data-id="${cell('sunny', 'wide')}"]`);
    expect(await page.isVisible('#gb-grid')).toBe(false);
    expect(await page.inputValue('#gb-layout')).toBe('cards');
    expect(await page.evaluate(() => document.activeElement?.querySelector('h3')?.textContent)).toBe(cell('sunny', 'wide'));
  });

  it('opens the job\'s page from its cell in genbatch view', async () => {
    const page = await open(`${view.url}#layout=grid`);
    await expect.poll(() => grid(page)).not.toBeNull();
    expect((await grid(page))![0]).toEqual(['size ↓ / mood →', ...MOODS, '—']);
    await page.click(`#gb-grid .gitem[data-id="${cell('rainy', 'square')}"]`);
    await page.waitForURL(/\/job\/street-rainy-square$/);
    expect(await page.locator('h1').textContent()).toContain(cell('rainy', 'square'));
  });

  it('scrolls inside its own box at 390 px: the page does not overflow', async () => {
    for (const url of [report('layout=grid'), `${view.url}#layout=grid`]) {
      const page = await open(url, 390);
      await expect.poll(() => grid(page)).not.toBeNull();
      const m = await page.evaluate(() => {
        const box = document.getElementById('gb-grid')!;
        return { page: document.documentElement.scrollWidth, box: box.clientWidth, inner: box.scrollWidth, right: box.getBoundingClientRect().right };
      });
      expect(m.page).toBeLessThanOrEqual(390);
      expect(m.right).toBeLessThanOrEqual(390);
      expect(m.inner).toBeGreaterThan(m.box);
    }
  });
});
