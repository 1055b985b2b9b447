import { spawn } from 'node:child_process';
import { buildReportData } from '../../engine/index.js';
import { writeReports } from '../../report/index.js';
import { UsageError } from '../../errors.js';
import { startView } from '../../view/index.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead, reportsOut } from './state-file.js';

export interface ViewCliOptions {
  state?: string;
  out?: string;
  port?: number;
  host?: string;
  open?: boolean;
  includeRemoved?: boolean;
}

/**
 * `genbatch view [manifest|--state PATH|--out DIR] [--port 8788] [--host 127.0.0.1] [--open]`: serve the run's
 * gallery live (src/view/) until SIGINT or SIGTERM (exit 0). The URL, with the token, is the first line of stdout.
 * When marks were made in the page, the run's reports are written again as the view stops.
 */
export default async function view(manifest: string | undefined, opts: ViewCliOptions): Promise<number> {
  ignoreBrokenPipe();
  const state = await openStateForRead(manifest, opts.state, opts.out, 'view', opts.includeRemoved === true);
  const { store, runs } = state;
  try {
    if (runs.length > 1) throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose jobs to view`);
    store.useRun(runs[0]!);
    let v;
    try {
      v = await startView({ store, host: opts.host, port: opts.port, saveMarks: state.saveMarks });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'EADDRINUSE') throw new UsageError(`--port ${opts.port}: the port is in use (--port 0 takes any free port)`);
      if (e.code === 'EADDRNOTAVAIL' || e.code === 'ENOTFOUND') throw new UsageError(`--host ${opts.host}: not an address of this machine`);
      throw err;
    }
    // Listening for the signals before the URL is out: a script may stop the view as soon as it reads it.
    const stopped = new Promise<NodeJS.Signals>((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
    });
    const stopRefresh = state.location.kind === 'postgres' ? refreshEvery(REFRESH_MS, state.refresh) : () => undefined;
    process.stdout.write(`${v.url}\n`);
    process.stdout.write(`genbatch view: ${runs[0]!.manifest} (${state.shown}); press Ctrl+C to stop\n`);
    await flushed(process.stdout);
    if (opts.open) openBrowser(v.url);
    const signal = await stopped;
    await stopRefresh();
    await v.close();
    // The reports show the marks (as after genbatch mark): written again once, when the view stops.
    if (v.marksWritten() > 0) {
      const { dir, options } = reportsOut(runs[0]!, opts.out);
      const paths = await writeReports(dir, buildReportData(store), options);
      process.stderr.write(`genbatch view: ${v.marksWritten()} mark(s) made; reports written again: ${paths.html.replace(/\.html$/, '.{json,csv,md,html}')}\n`);
    }
    process.stderr.write(`genbatch view stopped (${signal})\n`);
    return 0;
  } finally {
    await state.close();
    await flushed(process.stdout);
  }
}

/** How often a view of a PostgreSQL state asks the database whether the run changed (and copies what did). */
const REFRESH_MS = 1000;

/**
 * Call `refresh` every `ms` (the next call `ms` after the previous one ended) until the returned stop is
 * called (it resolves once a refresh in progress has ended). A failure is printed once (until one succeeds
 * again) and the view keeps showing the last copy.
 */
function refreshEvery(ms: number, refresh: () => Promise<boolean>): () => Promise<void> {
  let stopped = false;
  let failing: string | null = null;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout;
  const tick = () => {
    running = refresh().then(
      () => {
        if (failing !== null) process.stderr.write('genbatch view: the database answers again\n');
        failing = null;
      },
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        if (message !== failing) process.stderr.write(`genbatch view: could not read the run's changes (showing the last copy): ${message}\n`);
        failing = message;
      },
    ).then(() => {
      if (!stopped) timer = setTimeout(tick, ms);
    });
  };
  timer = setTimeout(tick, ms);
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}

/** The platform's opener, detached; a failure to open is only a note (the URL is printed). */
function openBrowser(url: string): void {
  const cmd = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  try {
    const child = spawn(cmd, [url], { stdio: 'ignore', detached: true });
    child.on('error', () => process.stderr.write(`genbatch view: could not run ${cmd}; open the URL yourself\n`));
    child.unref();
  } catch {
    process.stderr.write(`genbatch view: could not run ${cmd}; open the URL yourself\n`);
  }
}
