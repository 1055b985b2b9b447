import { mkdtempSync, readFileSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatProblem } from '../src/errors.js';
import { openManifest, type ManifestJob } from '../src/manifest/index.js';
import { splitJobs } from '../src/manifest/yaml-split.js';

/**
 * Big YAML manifests are read item by item (yaml-split.ts). Files it cannot cut
 * exactly are parsed whole; both ways must give the same jobs and problems.
 */

const FIX = join(import.meta.dirname, 'fixtures', 'manifest');
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-split-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function read(path: string): Promise<{ jobs: Array<Omit<ManifestJob, 'dir'>>; problems: string[] }> {
  const m = await openManifest(path);
  const jobs: ManifestJob[] = [];
  for await (const j of m.jobs()) jobs.push(j);
  return { jobs: jobs.map(({ dir: _dir, ...rest }) => rest), problems: [...m.problems, ...jobs.flatMap((j) => j.problems)].map(formatProblem) };
}

describe('splitJobs', () => {
  it('cuts a block jobs list into items and blanks them in the head, keeping line numbers', () => {
    const text = 'budget: 5\njobs:\n  - id: a\n    input: |\n      - not an item\n  # a comment\n  - {id: b}\ndefaults: {model: x}\n';
    const s = splitJobs(text);
    expect([...s!.items]).toEqual([
      { line: 3, text: '  - id: a\n    input: |\n      - not an item\n  # a comment' },
      { line: 7, text: '  - {id: b}' },
    ]);
    expect(s?.head.split('\n')).toEqual(['budget: 5', 'jobs:', '', '', '', '', '', 'defaults: {model: x}', '']);
  });

  it('handles items at the same indentation as jobs:', () => {
    expect([...splitJobs('jobs:\n- id: a\n  model: m\n- id: b\npricing: {}\n')!.items].map((i) => i.line)).toEqual([2, 4]);
  });

  it('declines files it cannot cut exactly', () => {
    expect(splitJobs('jobs: [{id: a}]\n')).toBeNull();
    expect(splitJobs('jobs: []\n')).toBeNull();
    expect(splitJobs('defaults: &d {model: x}\njobs:\n  - input: *d\n')).toBeNull();
    expect(splitJobs('---\njobs:\n  - id: a\n')).toBeNull();
    expect(splitJobs('jobs:\n  - id: a\n   odd: indent\n  bad: line\n')).toBeNull();
    expect(splitJobs('budget: 1\n')).toBeNull();
  });
});

describe('item-by-item reading gives what a whole parse gives', () => {
  const cases = [
    join(FIX, 'twenty-mistakes.yaml'),
    join(import.meta.dirname, '..', 'manifests', 'video.yaml'),
    join(import.meta.dirname, '..', 'manifests', 'chat.yaml'),
    join(import.meta.dirname, '..', 'manifests', 'music.yaml'),
  ];
  for (const file of cases) {
    it(file.split('/').slice(-2).join('/'), async () => {
      const name = file.split('/').pop() ?? 'm.yaml';
      const split = join(dir, name);
      const whole = join(dir, `whole-${name}`);
      const text = readFileSync(file, 'utf8');
      writeFileSync(split, text);
      // A trailing comment with an anchor-like word makes the reader parse the file whole; lines are unchanged.
      writeFileSync(whole, `${text}\n# &whole\n`);
      for (const f of ['not-image.png', 'ref.png']) copyFileSync(join(FIX, f), join(dir, f));
      expect(splitJobs(text)).not.toBeNull();
      const a = await read(split);
      const b = await read(whole);
      expect(a.jobs.length).toBeGreaterThan(0);
      expect(a.problems.map((p) => p.replaceAll(`whole-${name}`, name))).toEqual(b.problems.map((p) => p.replaceAll(`whole-${name}`, name)));
      expect(JSON.stringify(a.jobs).replaceAll(`whole-${name}`, name)).toBe(JSON.stringify(b.jobs).replaceAll(`whole-${name}`, name));
    });
  }
});

describe('big YAML manifests', () => {
  it('reads 1,000 items in batches with true line numbers, and a syntax error costs only its own item', async () => {
    const lines = ['jobs:'];
    for (let i = 1; i <= 1000; i++) {
      lines.push(`  - id: y${i}`, '    model: alpha-image-2', `    input: {prompt: "prompt ${i}"${i === 700 ? ', quality: top' : ''}}`);
      if (i === 450) lines.push('    broken: [unclosed');
    }
    const p = join(dir, 'big.yaml');
    writeFileSync(p, lines.join('\n') + '\n');
    const { jobs, problems } = await read(p);
    expect(jobs).toHaveLength(999);
    expect(jobs[998]).toMatchObject({ id: 'y1000', where: `${p}:${2 + 999 * 3 + 1}` });
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(new RegExp(`^${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:1352: YAML syntax: `));
    expect(problems[1]).toBe(`job y700 (${p}:${2 + 699 * 3 + 1 + 2}) input.quality: quality "top" is not one of low, medium, high`);
  });
});
