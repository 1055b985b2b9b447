import { createHash } from 'node:crypto';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { extname } from 'node:path';
import { GENBATCH_VERSION } from '../../lib/version.js';
import { isJsonlPath } from '../../manifest/jsonl-path.js';
import type { Store } from '../../store/index.js';
import { canonicalJson, sha256Hex } from '../results.js';

/**
 * What a manifest sync depends on, kept in the state file after a sync that
 * committed: the manifest's path, size, mtime and sha256, the prices in force,
 * the sha256 of every local file its jobs name, the genbatch version, and how
 * many jobs were skipped right after it. A rerun whose key matches in full
 * (the manifest and the local files are hashed again, never trusted from
 * size and mtime alone) would find every job unchanged, so it skips reading
 * and checking the manifest again (a 100,000-job resume: ~1.3 s less).
 *
 * Only self-contained manifests get a key: CSV/TSV tables, and YAML or JSONL
 * without `rows` or `glob` sources (those read other files or folder listings).
 * More skipped jobs than right after the sync means the job graph skipped
 * some since; the full sync revisits them, so the key no longer matches.
 */
export interface SyncKey {
  v: 1;
  genbatch: string;
  manifestPath: string;
  size: number;
  mtimeMs: number;
  sha256: string;
  prices: string;
  files: Array<{ file: string; sha256: string }>;
  jobs: number;
  skippedAfter: number;
}

const metaKey = (runId: number): string => `sync-key:${runId}`;

export interface ManifestPrint {
  manifestPath: string;
  size: number;
  mtimeMs: number;
  sha256: string;
  selfContained: boolean;
}

/**
 * Size, mtime and sha256 of the manifest file, read before its jobs are; null
 * when unreadable. Streamed (a 100,000-row table is never held whole for this).
 */
export async function manifestPrint(manifestPath: string): Promise<ManifestPrint | null> {
  try {
    const st = statSync(manifestPath);
    const table = ['.csv', '.tsv', '.tab'].includes(extname(manifestPath).toLowerCase());
    // A rows or glob key: in YAML at the start of a line (after indentation or a list dash), in JSONL as a quoted key.
    const sourceKey = isJsonlPath(manifestPath) ? /"(rows|glob)"\s*:/ : /^[\s-]*(rows|glob)\s*:/m;
    const hash = createHash('sha256');
    let sources = false;
    // The text since the last line end, tested again with the next chunk (a key may straddle two chunks).
    let tail = '';
    for await (const chunk of createReadStream(manifestPath, { highWaterMark: 1 << 20 })) {
      hash.update(chunk as Buffer);
      if (table || sources) continue;
      const text = tail + (chunk as Buffer).toString('latin1');
      sources = sourceKey.test(text);
      tail = text.slice(text.lastIndexOf('\n') + 1);
    }
    return { manifestPath, size: st.size, mtimeMs: st.mtimeMs, sha256: hash.digest('hex'), selfContained: table || !sources };
  } catch {
    return null;
  }
}

export function pricesHash(userPrices: Record<string, number> | null, observed = ''): string {
  return sha256Hex(canonicalJson(userPrices ?? null) + (observed === '' ? '' : `\n${observed}`));
}

/** The stored key when everything it names is still the same, else null. */
export function matchingKey(store: Store, print: ManifestPrint | null, prices: string): SyncKey | null {
  if (!print?.selfContained) return null;
  const raw = store.getMeta(metaKey(store.currentRunId));
  if (!raw) return null;
  let key: SyncKey;
  try {
    key = JSON.parse(raw) as SyncKey;
  } catch {
    return null;
  }
  if (key.v !== 1 || key.genbatch !== GENBATCH_VERSION || key.manifestPath !== print.manifestPath || key.prices !== prices) return null;
  if (key.size !== print.size || key.mtimeMs !== print.mtimeMs || key.sha256 !== print.sha256) return null;
  for (const f of key.files) {
    try {
      if (createHash('sha256').update(readFileSync(f.file)).digest('hex') !== f.sha256) return null;
    } catch {
      return null;
    }
  }
  if (store.counts().skipped !== key.skippedAfter) return null;
  return key;
}

/** Forget the key (before a sync starts: a sync that fails leaves no stale key). */
export function clearKey(store: Store): void {
  store.setMeta(metaKey(store.currentRunId), null);
}

/** Record the key of a sync that committed, unless the manifest changed while it was read. */
export function saveKey(store: Store, print: ManifestPrint | null, prices: string, files: Array<{ file: string; sha256: string }>, jobs: number): void {
  if (!print?.selfContained) return;
  try {
    const st = statSync(print.manifestPath);
    if (st.size !== print.size || st.mtimeMs !== print.mtimeMs) return;
  } catch {
    return;
  }
  const key: SyncKey = {
    v: 1,
    genbatch: GENBATCH_VERSION,
    manifestPath: print.manifestPath,
    size: print.size,
    mtimeMs: print.mtimeMs,
    sha256: print.sha256,
    prices,
    files,
    jobs,
    skippedAfter: store.counts().skipped,
  };
  store.setMeta(metaKey(store.currentRunId), JSON.stringify(key));
}
