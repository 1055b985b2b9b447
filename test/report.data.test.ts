import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { REPORT_ROWS_KEPT, buildReportData } from '../src/engine/finish/report-data.js';
import { writeReports } from '../src/report/index.js';
import { Store, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const job = (id: string, credits: number | null): JobInput => ({
  id, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${id.length}, matrix n=${id}`, specHash: 'h',
  spec: JSON.stringify({ model: 'alpha-image-2', input: { prompt: `ask ${id}`, image_urls: ['local.png'] } }), estimatedCredits: credits,
});

/** A state with done jobs (files), failed and pending ones. */
function state(): { store: Store; dir: string } {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  for (let i = 0; i < 30; i++) store.syncJob(job(`j${i}`, i % 7 === 0 ? null : 1.5));
  for (let i = 0; i < 20; i++) {
    const id = `j${i}`;
    store.transition(id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: JSON.stringify({ prompt: `ask ${id}`, image_urls: [`https://up/${id}.png`] }) });
    store.transition(id, 'submitting', 'submitted', { task_id: `t${i}` });
    if (i % 5 === 4) {
      store.transition(id, 'submitted', 'failed', { last_error: `boom ${i}` });
      continue;
    }
    store.transition(id, 'submitted', 'downloading', { result: '{}', finished_at: '2026-01-01T00:00:00.000Z', expires_at: 1 }, () =>
      store.addFiles(id, [0, 1].map((idx) => ({ idx, name: `out_${idx}.png`, url: `http://x/${id}/${idx}`, type: 'image', content_type: 'image/png', expected_size: 10, expires_at: 1 }))),
    );
    store.transition(id, 'downloading', 'done', {}, () => {
      for (const idx of [0, 1]) store.fileDone(id, idx, { path: `${id}/out_${idx}.png`, size: 10 + idx, sha256: `${i}${idx}`.padEnd(64, '0'), content_type: 'image/png' });
    });
  }
  // Files not all done (one pending, one on disk) on a job still downloading; a text result saved locally (no URL).
  for (const [i, id] of [[20, 'j20'], [21, 'j21']] as const) {
    store.transition(id, 'pending', 'submitting', { attemptsInc: 1 });
    store.transition(id, 'submitting', 'submitted', { task_id: `t${i}` });
    store.transition(id, 'submitted', 'downloading', { result: '{}', finished_at: '2026-01-01T00:00:00.000Z', expires_at: 1 }, () =>
      store.addFiles(id, [0, 1, 2].map((idx) => ({ idx, name: `out_${idx}.txt`, url: idx === 2 ? null : `http://x/${id}/${idx}`, type: 'text', content_type: 'text/plain', expected_size: 3, expires_at: 1 }))),
    );
    for (const idx of i === 20 ? [1] : [0, 1, 2]) store.fileDone(id, idx, { path: `${id}/out_${idx}.txt`, size: idx, sha256: `${i}${idx}`.padEnd(64, '0'), content_type: null });
  }
  store.setRunFields({ finished_at: '2026-01-01T00:01:00.000Z' });
  return { store, dir: t.dir };
}

describe('report data', () => {
  it('rows kept after the first pass give the same four reports, byte for byte, as reading the store on every pass', async () => {
    const { store, dir } = state();
    const names = ['report.json', 'report.csv', 'report.md', 'report.html'];
    const read = (out: string) => names.map((n) => readFileSync(join(out, n), 'utf8'));
    await writeReports(join(dir, 'streamed'), buildReportData(store, 12.5, 0));
    await writeReports(join(dir, 'kept'), buildReportData(store, 12.5, REPORT_ROWS_KEPT));
    // Fewer rows kept than there are jobs: the rows go back to being read from the store.
    await writeReports(join(dir, 'over'), buildReportData(store, 12.5, 10));
    const streamed = read(join(dir, 'streamed'));
    expect(streamed[1]!.split('\n').length).toBeGreaterThan(30);
    // The streamed pass reads the files of all jobs by one query beside the rows; the kept pass by a query per job.
    expect(streamed[0]).toContain('"path":"j20/out_1.txt"');
    expect(streamed[0]).not.toContain('"path":"j20/out_0.txt"');
    expect(streamed[0]).toContain('"path":"j21/out_2.txt"');
    // Each job's input as sent (uploaded URL), else as the manifest gives it; its prompt and variables beside it.
    const jobs = (JSON.parse(streamed[0]!) as { jobs: Array<{ id: string; input: unknown; prompt: string; vars: unknown }> }).jobs;
    expect(jobs[3]).toMatchObject({ id: 'j3', prompt: 'ask j3', vars: { n: 'j3' }, input: { prompt: 'ask j3', image_urls: ['https://up/j3.png'] } });
    expect(jobs[25]).toMatchObject({ id: 'j25', prompt: 'ask j25', input: { prompt: 'ask j25', image_urls: ['local.png'] } });
    expect(read(join(dir, 'kept'))).toEqual(streamed);
    expect(read(join(dir, 'over'))).toEqual(streamed);
  });

  it('a whole report walks the jobs table once for the rows and their inputs (one statement), and once for the files', async () => {
    const { store, dir } = state();
    const prepare = vi.spyOn(store.db, 'prepare');
    await writeReports(join(dir, 'walk'), buildReportData(store, 12.5, 0));
    const walks = prepare.mock.calls.map(([sql]) => String(sql)).filter((sql) => /FROM jobs( j)? INDEXED BY jobs_by_seq/.test(sql));
    prepare.mockRestore();
    // A walk of the table in manifest order reads every row's record (at 100,000 jobs ~110 MB of pages): the rows and
    // their inputs were two walks before.
    expect(walks).toHaveLength(2);
    expect(walks.filter((sql) => /JOIN files/.test(sql))).toHaveLength(1);
    const jobs = (JSON.parse(readFileSync(join(dir, 'walk', 'report.json'), 'utf8')) as { jobs: Array<{ id: string; input: unknown; sent_by: unknown }> }).jobs;
    expect(jobs.map((j) => j.id)).toEqual(Array.from({ length: 30 }, (_, i) => `j${i}`));
    expect(jobs[3]).toMatchObject({ input: { prompt: 'ask j3', image_urls: ['https://up/j3.png'] } });
    expect(jobs[25]).toMatchObject({ input: { prompt: 'ask j25', image_urls: ['local.png'] }, sent_by: null });
  });

  it('every pass sees every job, also when a pass stops early', () => {
    const { store } = state();
    const data = buildReportData(store, null, REPORT_ROWS_KEPT);
    const ids = () => [...data.jobs()].map((j) => j.id);
    for (const j of data.jobs()) if (j.id === 'j3') break;
    const all = ids();
    expect(all).toHaveLength(30);
    expect(ids()).toEqual(all);
    expect(data.jobs()).toBe(data.jobs());
  });
});
