import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

export interface StateJob {
  id: string;
  state: string;
  task_id: string | null;
  attempts: number;
  last_error: string | null;
}

export function readJobs(statePath: string): StateJob[] {
  const db = new Database(statePath, { readonly: true });
  try {
    return db.prepare('SELECT id, state, task_id, attempts, last_error FROM jobs ORDER BY seq').all() as StateJob[];
  } finally {
    db.close();
  }
}

export function integrity(statePath: string): string {
  const db = new Database(statePath, { readonly: true });
  try {
    return String(db.pragma('integrity_check', { simple: true }));
  } finally {
    db.close();
  }
}

/** Every file recorded as done exists with its recorded size and sha256. Returns how many were checked. */
export function checkFiles(statePath: string, outDir: string): number {
  const db = new Database(statePath, { readonly: true });
  let n = 0;
  try {
    const rows = db.prepare(`SELECT job_id, path, size, sha256 FROM files WHERE state = 'done'`).all() as Array<{ job_id: string; path: string; size: number; sha256: string }>;
    for (const r of rows) {
      const buf = readFileSync(join(outDir, r.path));
      if (buf.length !== r.size) throw new Error(`${r.path}: ${buf.length} bytes on disk, ${r.size} recorded`);
      const sha = createHash('sha256').update(buf).digest('hex');
      if (sha !== r.sha256) throw new Error(`${r.path}: sha256 differs from the recorded one`);
      n++;
    }
  } finally {
    db.close();
  }
  return n;
}

/** Every path under `dir` (recursive) whose name matches. */
export function findFiles(dir: string, test: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...findFiles(p, test));
    else if (test(e.name)) out.push(p);
  }
  return out;
}

export function fileSize(p: string): number {
  return statSync(p).size;
}

/**
 * For every job with a recorded task result, every `files[i].file_size` the
 * server sent equals the size of the file on disk. Returns how many were compared.
 */
export function checkServerSizes(statePath: string, outDir: string): number {
  const db = new Database(statePath, { readonly: true });
  let n = 0;
  try {
    const jobs = db.prepare(`SELECT id, result FROM jobs WHERE state = 'done'`).all() as Array<{ id: string; result: string }>;
    const fileAt = db.prepare('SELECT path FROM files WHERE job_id = ? AND idx = ?');
    for (const j of jobs) {
      const task = JSON.parse(j.result) as { files: Array<{ file_size?: number }> };
      task.files.forEach((f, i) => {
        if (typeof f.file_size !== 'number') return;
        const row = fileAt.get(j.id, i) as { path: string } | undefined;
        if (!row) throw new Error(`job ${j.id}: no file recorded for files[${i}]`);
        const size = statSync(join(outDir, row.path)).size;
        if (size !== f.file_size) throw new Error(`job ${j.id}: ${row.path} has ${size} bytes, the server said ${f.file_size}`);
        n++;
      });
    }
  } finally {
    db.close();
  }
  return n;
}

/** The state file's callback token (meta `callback_token`), made by the first run with --listen. */
export function callbackToken(statePath: string): string {
  const db = new Database(statePath, { readonly: true });
  try {
    return (db.prepare("SELECT value FROM meta WHERE key = 'callback_token'").get() as { value: string }).value;
  } finally {
    db.close();
  }
}

/**
 * The test's service came back at another address (a second sandbox standing in for the same service, fixed):
 * forget the service the state recorded, as for a state made before the check, so the next run adopts it.
 */
export function forgetService(statePath: string): void {
  const db = new Database(statePath);
  try {
    db.prepare("DELETE FROM meta WHERE key LIKE 'service:%'").run();
  } finally {
    db.close();
  }
}
