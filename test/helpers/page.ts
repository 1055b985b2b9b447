import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

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
  }));
  return { rows, more: m.more };
}

/** Debian's Chromium, when installed (browser checks are skipped without it, saying so). */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p)) ?? null;

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
