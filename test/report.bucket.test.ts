/**
 * The four reports written under `s3://bucket/prefix` (writeReports with an s3:// output), against a real
 * S3 API (s3rver in-process): the same bytes as on disk, each a whole object with its sha256 in metadata;
 * a report that cannot be written to its end leaves the earlier one and no upload behind; a cut connection
 * to the bucket is retried.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeReports, type ReportData, type ReportJob, type ReportSummary } from '../src/report/index.js';
import { PARTIAL_DIR } from '../src/storage/index.js';
import { startProxy, type TcpProxy } from './helpers/proxy.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';

const NAMES = ['report.json', 'report.csv', 'report.md', 'report.html'] as const;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

let s3: TestS3;
const t = tempDir('genbatch-report-bucket-');
const saved = { ...process.env };

function useEndpoint(endpoint: string): void {
  process.env.AWS_ENDPOINT_URL_S3 = endpoint;
}

beforeAll(async () => {
  s3 = await startS3();
  Object.assign(process.env, s3.env);
});
afterAll(async () => {
  process.env = saved;
  await s3?.stop();
  t.cleanup();
});

function summary(jobs: number): ReportSummary {
  return {
    manifest: '/data/m.yaml', out_dir: 's3://bucket/runs/a', base_url: 'https://api.example.com', sandbox: false,
    started_at: '2026-11-25T10:00:00.000Z', finished_at: '2026-11-25T11:00:00.000Z', wall_seconds: 3600, counts: { done: jobs },
    credits: { estimated_known: 2 * jobs, unknown_price_jobs: 0, balance_before: null, balance_after: null, charged: null, user_prices: false, invocations: [] },
  };
}

function* jobs(n: number, failAt = -1): Generator<ReportJob> {
  for (let i = 0; i < n; i++) {
    if (i === failAt) throw new Error(`the state could not be read at job ${i}`);
    const prompt = `Picture number ${i} of a quiet harbour at dusk, ${'with boats and gulls and long shadows on the water '.repeat(4)}`;
    yield {
      id: `img-${i}`, model: 'alpha-image-2', where: `m.yaml:${i + 2}`, input: { prompt, size: '1:1' }, prompt, vars: {}, task_id: `t-${i}`, state: 'done',
      attempts: 1, error: null, estimated_credits: 2, files: [{ path: `img-${i}/image-1.png`, size: 1000 + i, sha256: sha(`img-${i}`), type: 'image', contentType: 'image/png' }],
      texts: {}, submitted_at: '2026-11-25T10:00:01.000Z', finished_at: '2026-11-25T10:00:09.000Z',
    };
  }
}

const data = (n: number, failAt = -1): ReportData => ({ summary: summary(n), jobs: () => jobs(n, failAt) }) as ReportData;

describe('reports in a bucket', () => {
  it('writes the four reports under the prefix with the bytes written to disk, each with its sha256 and content type', async () => {
    const paths = await writeReports('s3://bucket/runs/a', data(50));
    expect(paths).toEqual({ json: 's3://bucket/runs/a/report.json', csv: 's3://bucket/runs/a/report.csv', md: 's3://bucket/runs/a/report.md', html: 's3://bucket/runs/a/report.html' });
    await writeReports(join(t.dir, 'a'), data(50));
    const objects = await s3.objects('runs/a/');
    expect(objects.map((o) => o.key)).toEqual(['runs/a/report.csv', 'runs/a/report.html', 'runs/a/report.json', 'runs/a/report.md']);
    for (const name of NAMES) {
      const body = await s3.get(`runs/a/${name}`);
      expect(body.equals(readFileSync(join(t.dir, 'a', name))), name).toBe(true);
      expect(objects.find((o) => o.key === `runs/a/${name}`)!.metadata.sha256).toBe(sha(body));
    }
    expect(objects.find((o) => o.key.endsWith('.html'))!.contentType).toMatch(/^text\/html/);
    expect(objects.find((o) => o.key.endsWith('.json'))!.contentType).toMatch(/^application\/json/);
    // report.html links the results relatively: from the prefix, as on disk.
    expect((await s3.get('runs/a/report.html')).toString()).toContain('"img-7/image-1.png"');
  });

  it('a report larger than one part (a multipart upload) is replaced whole: the new bytes, no temporary object or upload left', async () => {
    await writeReports('s3://bucket/runs/big', data(10));
    const n = 30_000;
    await writeReports('s3://bucket/runs/big', data(n));
    await writeReports(join(t.dir, 'big'), data(n));
    const json = await s3.get('runs/big/report.json');
    expect(json.length).toBeGreaterThan(8 * 1024 * 1024);
    expect(json.equals(readFileSync(join(t.dir, 'big', 'report.json')))).toBe(true);
    expect((await s3.objects('runs/big/report.json'))[0]!.metadata.sha256).toBe(sha(json));
    expect(await s3.keys(`runs/big/${PARTIAL_DIR}/`)).toEqual([]);
    expect(s3.pendingUploads()).toEqual([]);
  });

  it('a report that cannot be written to its end leaves the earlier reports as they were, and no upload behind', async () => {
    await writeReports('s3://bucket/runs/fail', data(20));
    const before = await Promise.all(NAMES.map((n) => s3.get(`runs/fail/${n}`)));
    // The jobs fail to read after more than a part (8 MiB) of report.json went to a multipart upload.
    await expect(writeReports('s3://bucket/runs/fail', data(30_000, 25_000))).rejects.toThrow('could not be read at job 25000');
    const after = await Promise.all(NAMES.map((n) => s3.get(`runs/fail/${n}`)));
    for (let i = 0; i < NAMES.length; i++) expect(after[i]!.equals(before[i]!), NAMES[i]).toBe(true);
    expect(await s3.keys('runs/fail/')).toEqual(NAMES.map((n) => `runs/fail/${n}`).sort());
    expect(s3.pendingUploads()).toEqual([]);
  });

  it('a connection to the bucket cut in the middle of a report is retried: the reports are whole', async () => {
    const proxy: TcpProxy = await startProxy(s3.port);
    try {
      useEndpoint(proxy.url);
      proxy.cutAfter(3 * 1024 * 1024);
      await writeReports('s3://bucket/runs/cut', data(30_000));
      expect(proxy.cuts).toBe(1);
    } finally {
      useEndpoint(s3.endpoint);
      await proxy.stop();
    }
    await writeReports(join(t.dir, 'cut'), data(30_000));
    for (const name of NAMES) expect((await s3.get(`runs/cut/${name}`)).equals(readFileSync(join(t.dir, 'cut', name))), name).toBe(true);
    expect(await s3.keys(`runs/cut/${PARTIAL_DIR}/`)).toEqual([]);
  });

  it('report.html of a run in the bucket written to another prefix links the results relatively from there', async () => {
    await writeReports('s3://bucket/reports/a', data(3), { reportDir: 's3://bucket/reports/a' });
    const html = (await s3.get('reports/a/report.html')).toString();
    expect(html).toContain('"../../runs/a/img-1/image-1.png"');
  });
});
