import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Children of different parents run concurrently under the same limits: from
 * the NDJSON events of one run, the children of two for_each jobs (over the
 * lines of two chat answers) are in flight at the same time, and at most
 * --concurrency submits are ever in flight (between a job's pending->submitting
 * and its next state).
 */
const SCALE = '0.02';
const KEY = 'sk-test-graph-concurrency-0123456789';
const CONCURRENCY = 2;
let sb: Sandbox;
const t = tempDir('genbatch-graph-concurrency-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 21 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const chat = (id: string, lines: string[]) => `  - id: ${id}
    model: vendora/chat-5
    input: {messages: [{role: user, content: "${lines.join('\\n')}"}]}
  - id: ${id}-pics
    for_each: \${{ jobs.${id}.lines }}
    model: alpha-image-2
    input: {prompt: "\${{ item }}", quality: low}
`;

interface Ev {
  ts: string;
  type: string;
  id?: string;
  from?: string;
  to?: string;
}

describe('for_each children of different parents', () => {
  it(`overlap in time, with at most ${CONCURRENCY} submits in flight`, async () => {
    const manifest = join(t.dir, 'two.yaml');
    writeFileSync(manifest, `jobs:\n${chat('a', ['a fox', 'an owl', 'a frog', 'a hare'])}${chat('b', ['a boat', 'a kite', 'a tram', 'a bell'])}`);
    const out = join(t.dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--json', '--concurrency', String(CONCURRENCY)], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(readJobs(join(out, 'state.db')).every((j) => j.state === 'done')).toBe(true);
    const events = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Ev)
      .filter((e) => e.type === 'job');

    // Submits in flight: from pending->submitting to the job's next move out of submitting.
    let inFlight = 0;
    let maxInFlight = 0;
    for (const e of events) {
      if (e.from === 'pending' && e.to === 'submitting') maxInFlight = Math.max(maxInFlight, ++inFlight);
      else if (e.from === 'submitting') inFlight--;
    }
    expect(inFlight).toBe(0);
    expect(maxInFlight).toBeGreaterThanOrEqual(1);
    expect(maxInFlight).toBeLessThanOrEqual(CONCURRENCY);

    // Children of a and of b: each from its submit to done, by event order; some child of a overlaps some child of b.
    const span = new Map<string, { from: number; to: number }>();
    events.forEach((e, i) => {
      if (!e.id || !/^[ab]-pics\.\d$/.test(e.id)) return;
      const s = span.get(e.id) ?? { from: Infinity, to: -Infinity };
      if (e.to === 'submitting') s.from = Math.min(s.from, i);
      if (e.to === 'done') s.to = i;
      span.set(e.id, s);
    });
    expect([...span.keys()].sort()).toEqual(['a-pics.0', 'a-pics.1', 'a-pics.2', 'a-pics.3', 'b-pics.0', 'b-pics.1', 'b-pics.2', 'b-pics.3']);
    const of = (p: string) => [...span].filter(([id]) => id.startsWith(p)).map(([, s]) => s);
    const overlapping = of('a-pics.').flatMap((x) => of('b-pics.').filter((y) => x.from < y.to && y.from < x.to)).length;
    expect(overlapping).toBeGreaterThan(0);
  }, 60_000);
});
