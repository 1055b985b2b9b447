import { EXIT, UsageError } from '../../errors.js';
import { EXPORT_FORMATS, exportResults, type ExportFormat, type ExportWhich } from '../../export/index.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead } from './state-file.js';

export interface ExportCliOptions {
  state?: string;
  out?: string;
  to?: string;
  only?: string;
  format?: string;
  includeRemoved?: boolean;
}

/**
 * `genbatch export <manifest|--state PATH|--out DIR|s3://...> --to DIR|s3://bucket/prefix [--only approved|done] [--format imagefolder|jsonl|csv]`:
 * the run's chosen results as a data set (src/export/). Exit 1 when a file could not be exported (each named).
 */
export default async function exportCommand(manifest: string | undefined, opts: ExportCliOptions): Promise<number> {
  ignoreBrokenPipe();
  if (opts.to === undefined) throw new UsageError('export expects --to DIR (or s3://bucket/prefix), where to export into');
  const which: ExportWhich = opts.only === undefined ? 'default' : opts.only === 'approved' || opts.only === 'done' ? opts.only : badOnly(opts.only);
  const format = (opts.format ?? 'imagefolder') as ExportFormat;
  if (!EXPORT_FORMATS.includes(format)) throw new UsageError(`--format expects one of ${EXPORT_FORMATS.join(', ')}, got "${opts.format}"`);
  const state = await openStateForRead(manifest, opts.state, opts.out, 'export', opts.includeRemoved === true);
  const { store, runs } = state;
  try {
    if (runs.length > 1) throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose results to export`);
    store.useRun(runs[0]!);
    const r = await exportResults(store, { to: opts.to, which, format });
    for (const p of r.problems) process.stderr.write(`genbatch: export: ${p}\n`);
    process.stdout.write(
      `exported ${r.files} file(s) of ${r.jobs} job(s) to ${r.dir} (${r.linked} hard-linked, ${r.copied} copied, ${r.kept} already there${r.removed > 0 ? `, ${r.removed} no longer chosen removed` : ''}); index: ${r.index}\n`,
    );
    return r.problems.length > 0 ? EXIT.jobsFailed : EXIT.ok;
  } finally {
    await state.close();
    await flushed(process.stdout);
  }
}

function badOnly(value: string): never {
  throw new UsageError(`--only expects approved or done, got "${value}"`);
}
