import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CHROMIUM } from './chromium.js';

/** A job row of report.html's data (src/report/html-data.ts), by name. */
export interface PageRow {
  id: string;
  state: string;
  model: string;
  where: string;
  prompt: string | null;
  vars: string;
  input: Record<string, string | number | boolean>;
  task_id: string | null;
  attempts: number;
  finished_at: string | null;
  error: string | null;
  files: Array<{ href: string | null; path: string; kind: string; size: number; type: string }>;
  texts: Array<[string, string]>;
  /** [approved|rejected, note or null], or null. */
  mark: [string, string | null] | null;
}

/** The jobs report.html carries, read back from its two JSON script elements. */
export function pageRows(html: string): { rows: PageRow[]; more: number } {
  const jobs = /<script type="application\/json" id="gb-jobs">([^<]*)<\/script>/.exec(html);
  const meta = /<script type="application\/json" id="gb-meta">([^<]*)<\/script>/.exec(html);
  if (!jobs || !meta) throw new Error('report.html: no gb-jobs or gb-meta data');
  const m = JSON.parse(meta[1]!) as { states: string[]; models: string[]; more: number };
  const raw = JSON.parse(jobs[1]!) as unknown[][];
  const rows = raw.map((r) => ({
    id: r[0] as string,
    state: m.states[r[1] as number]!,
    model: m.models[r[2] as number]!,
    where: r[3] as string,
    prompt: r[4] as string | null,
    vars: r[5] as string,
    input: r[6] as PageRow['input'],
    task_id: r[7] as string | null,
    attempts: r[8] as number,
    finished_at: r[9] as string | null,
    error: r[10] as string | null,
    files: (r[11] as unknown[][]).map((f) => ({ href: f[0] as string | null, path: f[1] as string, kind: f[2] as string, size: f[3] as number, type: f[4] as string })),
    texts: r[12] as Array<[string, string]>,
    mark: (r[13] ?? null) as PageRow['mark'],
  }));
  return { rows, more: m.more };
}

/** Debian's Chromium, when installed (browser checks are skipped without it, saying so): ./chromium.ts. */
export { CHROMIUM };

/**
 * report.html as Chromium draws it (`--dump-dom`, after its script ran), and every console message
 * (errors, CSP refusals, uncaught exceptions). `hash`: e.g. `q=harbour&state=done`.
 */
export function renderedPage(path: string, hash = ''): { dom: string; console: string[] } {
  if (CHROMIUM === null) throw new Error('no chromium');
  const url = pathToFileURL(path).href + (hash ? `#${hash}` : '');
  const r = spawnSync(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--enable-logging=stderr', '--v=0', '--virtual-time-budget=5000', '--dump-dom', url], {
    encoding: 'utf8',
    timeout: 60_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`chromium exited ${r.status}: ${r.stderr.slice(-2000)}`);
  const console = r.stderr.split('\n').filter((l) => l.includes(':CONSOLE'));
  return { dom: r.stdout, console };
}

/**
 * The elements of report.html that reach past the right edge of a `width` px wide viewport, or whose
 * content is wider than their box (cut off or overflowing), once its script has drawn the cards
 * (`<pre>` and other scrolling boxes scroll inside and are not counted). The page
 * is drawn inside an iframe of that width (Chromium's headless window is at least 500 px wide); a copy
 * of it gets a measuring script, so its Content-Security-Policy is left out of the copy (layout only).
 */
export function overflowAt(path: string, width: number): { viewport: number; scrollWidth: number; wide: string[] } {
  const html = readFileSync(path, 'utf8').replace(/<meta http-equiv="Content-Security-Policy"[^>]*>/, '');
  const probe = `<script>addEventListener('load',()=>{const W=document.documentElement.clientWidth;const wide=[];for(const e of document.querySelectorAll('body *')){if(e.closest('pre'))continue;const r=e.getBoundingClientRect();const o=getComputedStyle(e).overflowX;const cut=e.clientWidth>0&&o!=='auto'&&o!=='scroll'&&e.scrollWidth>e.clientWidth+1;if(r.right>W+0.5||cut)wide.push(e.tagName.toLowerCase()+'.'+e.className+' '+(e.textContent||'').slice(0,60))}document.body.dataset.probe=JSON.stringify({viewport:W,scrollWidth:document.documentElement.scrollWidth,wide})})</script>`;
  const copy = join(dirname(path), `.probe-${process.pid}-${width}.html`);
  const frame = join(dirname(path), `.frame-${process.pid}-${width}.html`);
  writeFileSync(copy, html.replace('</body>', `${probe}</body>`));
  writeFileSync(frame, `<!DOCTYPE html><body style="margin:0"><iframe id="f" src="${basename(copy)}" style="width:${width}px;height:900px;border:0"></iframe><script>f.onload=()=>setTimeout(()=>{document.body.dataset.probe=f.contentDocument.body.dataset.probe},200)</script></body>`);
  try {
    const r = spawnSync(CHROMIUM!, ['--headless', '--no-sandbox', '--disable-gpu', '--allow-file-access-from-files', '--virtual-time-budget=5000', '--window-size=1400,900', '--dump-dom', pathToFileURL(frame).href], {
      encoding: 'utf8',
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const m = /<body[^>]*data-probe="([^"]*)"/.exec(r.stdout);
    if (!m) throw new Error(`no measure from chromium: ${r.stderr.slice(-1000)}`);
    return JSON.parse(m[1]!.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')) as { viewport: number; scrollWidth: number; wide: string[] };
  } finally {
    rmSync(copy, { force: true });
    rmSync(frame, { force: true });
  }
}
