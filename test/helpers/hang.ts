import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * Evidence when a CLI run in a test hangs. Each CLI child is started with Node's diagnostic report on SIGUSR2; one
 * still running HANG_REPORT_MS after it started (the tests' limit is 60 s) is sent SIGUSR2 once and writes a
 * report (its JavaScript and native stacks, its open handles and sockets) into .ci/.hang-reports/, and goes on.
 * .ci/run prints a summary of every report there after the suite (.ci/hang-reports.mjs), so a test that times out
 * in CI says where its process was waiting, instead of only that it took too long.
 */
export const HANG_REPORT_DIR = join(resolve(import.meta.dirname, '..', '..'), '.ci', '.hang-reports');
export const HANG_REPORT_MS = 45_000;
export const REPORT_ARGS = ['--report-on-signal', '--report-signal=SIGUSR2', `--report-directory=${HANG_REPORT_DIR}`];

/** Ask `child` for a report if it still runs after `ms`; returns the stop of that watch. */
export function watchHang(child: ChildProcess, ms = HANG_REPORT_MS): () => void {
  mkdirSync(HANG_REPORT_DIR, { recursive: true });
  const t = setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGUSR2');
  }, ms);
  t.unref();
  return () => clearTimeout(t);
}
