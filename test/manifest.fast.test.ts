import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatProblem } from '../src/errors.js';
import { openManifest, type ManifestJob } from '../src/manifest/index.js';
import { jobSchema } from '../src/manifest/schema.js';
import { surelyValidEntry } from '../src/manifest/yaml.js';
import { chunkEntries } from '../src/manifest/yaml-batch.js';
import { fastItem } from '../src/manifest/yaml-fast.js';
import { nodeAt } from '../src/manifest/yaml-loc.js';
import { splitJobs } from '../src/manifest/yaml-split.js';

/**
 * Job items of the simple shape are read without the yaml library (yaml-fast.ts); the library stays the
 * reference: whatever the fast reader takes must be exactly what the library makes of it, and every
 * problem keeps its file:line.
 */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-fast-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** What the manifest reader gets from the library for one item (its first list item), or the library's errors. */
function library(text: string): { ok: true; value: unknown } | { ok: false } {
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, merge: true });
  if (doc.errors.length > 0) return { ok: false };
  const js = doc.toJS({ maxAliasCount: 1000 }) as unknown;
  return Array.isArray(js) && js.length === 1 ? { ok: true, value: js[0] } : { ok: false };
}

/** A small seeded generator (mulberry32): the same items on every run. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ['id', 'model', 'input', 'prompt', 'n', 'seed', 'quality', 'x_1', '_k', 'true', 'True', 'null', 'NULL', 'y', 'no', 'on', '__proto__', 'constructor', 'prototype', 'a-b', '1a', 'é', 'k'.repeat(200)];
const VALUES = [
  '"Bench picture 1"', '"with # hash and: colon"', '""', "''", "'single \"q\" \\ back'", '"tab\\there"', '"quote \\" inside"', "'it''s'", '"unicode é ü 漢字"', '"emoji 😀"',
  'alpha-image-2', 'b0', 'a.b/c_d', 'true', 'false', 'True', 'FALSE', 'null', 'Null', '~', 'yes', 'no', 'on', 'off', 'y', 'n',
  '0', '7', '-3', '007', '-0', '12345678901234', '1234567890123456789', '0x1F', '0o17', '1e3', '1.5', '.5', '.inf', '-.inf', '.nan', '+1',
  'a b', 'a:b', 'a: b', 'a #c', '#c', '[1, 2]', '{a: 1}', '&x a', '*x', '!tag a', '|', '>', '@a', '`a', '%a', '-a', '?a', '"unclosed', "'unclosed",
  'NaN', 'Infinity', 'inf', 'nan', 'null_x', 'true1', 'Yes', 'ON', 'e3', 'x:', '0b1', '1_000', '2001-12-14', '12:30', 'a_b-c.d/e',
  '"a" ', ' "a"', '"\u0007bell"', '"\u2028sep"', '"\ufeffbom"', '"\u0085nel"', '"del\u007f"',
  // Plain text, escapes and one-line flow collections (read by the fast path since it takes lists and flow values).
  'a [b] {c}', 'a, b', "it's", 'a :b', '...', '.5', '.hidden', '1.', '1e', '0x', '0o8', 'a  b', '16:9', '2K', '2048x1536', './refs/cat.png', '/abs/x.png',
  '"\\ud800"', '"\\x41"', '"\\/"', '"\\u00e9"', '"\\e"', '"a\\"', '"\\"', "'a''", '{a: 1,}', '[a, ]', '{a: b: c}', '{a:b}', '[a b, c]', '{"a": 1}', '{"a":1}',
  '{"__proto__": 1}', '{a: null}', '[~]', '{a: 1} x', '[a, [b, [c]]]', '{a: "x, y"}', "{a: 'x'' y'}", '[-1, +1, 1.5]', '{a: .inf}', '[a, {b: c}]',
  '[{a: 1}, {a: 2}]', '{a: 2K, b: 16:9}', '{a: x #c}', '{a: x}}', '[a]]', '{ a: 1 }', '[ ]', '{a: 1, a: 2}', '{a: [}', '{true: 1}', '{a: -}', '{a: [b, c], d: {e: "f"}}',
];

const SAFE_KEYS = ['id', 'model', 'input', 'prompt', 'n', 'seed', 'quality', 'x_1', '_k'];
const SAFE_VALUES = [
  'NaN', 'Infinity', 'Yes', 'a_b-c.d/e', '"Bench picture 1"', '"with # hash and: colon"', '""', "''", "'it''s'", '"unicode é ü 漢字"', 'alpha-image-2', 'b0', 'a.b/c_d', 'true', 'false', '0', '7', '-3', '12345678901234',
  'A cat reading a newspaper', '16:9', '2K', '2048x1536', './refs/cat.png', "'Prompt 1: a \"quoted\" lighthouse, watercolor'", '"esc \\" \\\\ \\n \\t \\u00e9"',
  '{prompt: "p", n: 2}', '[a, b]', '{a: [1, two], b: {c: x y}}', '[]', '{}', '["x.png", \'y.png\']',
];

function randomItem(r: () => number): string {
  const any = <T,>(list: readonly T[]): T => list[Math.floor(r() * list.length)] as T;
  // Mostly names and values of the simple shape, so that whole items of it come up often; the rest from everything.
  const pick = <T,>(list: readonly T[]): T => (r() < 0.93 ? any((list === (KEYS as unknown) ? SAFE_KEYS : SAFE_VALUES) as unknown as readonly T[]) : any(list));
  const lines: string[] = [];
  const base = any([0, 2, 4]);
  const pad = (n: number) => ' '.repeat(n);
  const keyCount = 1 + Math.floor(r() * 4);
  for (let i = 0; i < keyCount; i++) {
    const lead = i === 0 ? `${pad(base)}- ` : pad(base + 2 + (r() < 0.05 ? any([-1, 1]) : 0));
    if (r() < 0.12) {
      // A block list: at the key's indentation or deeper (sometimes odd), one value a line.
      lines.push(`${lead}${pick(KEYS)}:`);
      const at = base + 2 + any([0, 0, 2, 2, 1]);
      const n = r() < 0.05 ? 0 : 1 + Math.floor(r() * 3);
      for (let k = 0; k < n; k++) lines.push(`${pad(at + (r() < 0.03 ? 1 : 0))}- ${pick(VALUES)}`);
    } else if (r() < 0.3) {
      lines.push(`${lead}${pick(KEYS)}:`);
      const inner = base + 2 + any([1, 2, 4]);
      const n = r() < 0.1 ? 0 : 1 + Math.floor(r() * 3);
      for (let k = 0; k < n; k++) {
        if (r() < 0.15) lines.push(`${pad(inner + 2)}${pick(KEYS)}:`, `${pad(inner + 4)}${pick(KEYS)}: ${pick(VALUES)}`);
        else lines.push(`${pad(inner + (r() < 0.05 ? 1 : 0))}${pick(KEYS)}: ${pick(VALUES)}`);
      }
    } else {
      const sep = r() < 0.05 ? any([':  ', ':', ':\t']) : ': ';
      lines.push(`${lead}${pick(KEYS)}${sep}${pick(VALUES)}`);
    }
    if (r() < 0.05) lines.push(any(['', '   ', `${pad(base + 2)}# note`, `${pad(base + 2)}- x`]));
  }
  return lines.join('\n');
}

describe('fastItem', () => {
  it('takes only what the yaml library reads without errors, and gives exactly its value (20,000 generated items)', () => {
    const r = rng(42);
    let taken = 0;
    let declined = 0;
    for (let i = 0; i < 20_000; i++) {
      const text = randomItem(r);
      const fast = fastItem(text);
      if (fast === null) {
        declined++;
        continue;
      }
      taken++;
      const lib = library(text);
      expect(lib.ok, text).toBe(true);
      if (lib.ok) expect(fast, text).toStrictEqual(lib.value);
      expect(Object.getPrototypeOf(fast)).toBe(Object.prototype);
      if (surelyValidEntry(fast)) expect(jobSchema.safeParse(fast).success, text).toBe(true);
    }
    // Both ways are exercised.
    expect(taken).toBeGreaterThan(1000);
    expect(declined).toBeGreaterThan(1000);
  });

  it('reads the usual job item, and declines the shapes it leaves to the library', () => {
    expect(fastItem('  - id: b0\n    model: alpha-image-2\n    input:\n      prompt: "Bench picture 0"\n      n: 2\n')).toStrictEqual({ id: 'b0', model: 'alpha-image-2', input: { prompt: 'Bench picture 0', n: 2 } });
    // As the yaml package and PyYAML write a job list, and as a hand-written flow value.
    expect(fastItem("  - id: job-1\n    model: alpha-image-2\n    input:\n      prompt: 'Prompt 1: a \"quoted\" lighthouse, watercolor'\n      size: 16:9\n      resolution: 2K\n      image_urls:\n      - ./refs/cat.png\n    needs:\n      - a")).toStrictEqual({
      id: 'job-1',
      model: 'alpha-image-2',
      input: { prompt: 'Prompt 1: a "quoted" lighthouse, watercolor', size: '16:9', resolution: '2K', image_urls: ['./refs/cat.png'] },
      needs: ['a'],
    });
    expect(fastItem('  - id: y1\n    input: {prompt: "prompt \\"1\\"", quality: low, size: "16:9", resolution: 2K, image_urls: [a.png, "b.png"]}')).toStrictEqual({
      id: 'y1',
      input: { prompt: 'prompt "1"', quality: 'low', size: '16:9', resolution: '2K', image_urls: ['a.png', 'b.png'] },
    });
    for (const text of [
      '  - id: a\n    id: b', // duplicate key: the library reports it
      '  - id: a\n    input:', // null value
      '  - id: a\n    input:\n    model: m', // null value, then a sibling
      '  - id: a # comment',
      '  - id: a\n    # comment',
      '  - {id: a}',
      '  - id: a\n     model: m', // odd indentation
      '  - id: a\n   model: m',
      '  - id: "a\\xb"', // an escape JSON does not have
      '  - id: a\n    tags:\n      - x: 1', // a list of mappings
      '  - id: a\n    input: {prompt: "p",\n      n: 2}', // a flow value over two lines
      '  - __proto__: x',
      '  - input:\n      constructor: x',
      '  -\n    id: a',
      '  - id: a\r\n    model: m',
    ]) {
      expect(fastItem(text), text).toBeNull();
    }
  });
});

async function read(path: string): Promise<{ jobs: Array<Omit<ManifestJob, 'dir'>>; problems: string[] }> {
  const m = await openManifest(path);
  const jobs: ManifestJob[] = [];
  for await (const j of m.jobs()) jobs.push(j);
  return { jobs: jobs.map(({ dir: _dir, ...rest }) => rest), problems: [...m.problems, ...jobs.flatMap((j) => j.problems)].map(formatProblem) };
}

describe('manifests of simple items', () => {
  it('give the same jobs and the same problems (file:line) as a whole parse by the library', async () => {
    const lines = ['jobs:'];
    for (let i = 1; i <= 450; i++) {
      lines.push(`  - id: ${i === 30 ? 'y29' : i === 31 ? '-bad' : `y${i}`}`);
      lines.push(`    model: ${i === 40 ? 'alpha-image-9' : i === 41 ? 'true' : 'alpha-image-2'}`);
      if (i === 50) continue; // no input
      lines.push('    input:');
      lines.push(`      prompt: "prompt ${i}"`);
      if (i === 60) lines.push('      quality: top');
      if (i === 61) lines.push('      colour: red');
      if (i === 62) lines.push('      n: 99');
      if (i === 300) lines.push('      tags:', '        - a');
      // Items the fast reader leaves to the library (a comment), between items it reads: one run parsed by the library.
      if (i >= 301 && i <= 303) lines.push('      # read by the library');
      if (i === 302) lines.push('      quality: top');
    }
    const text = lines.join('\n') + '\n';
    expect(splitJobs(text)).not.toBeNull();
    const split = join(dir, 'm.yaml');
    const whole = join(dir, 'whole.yaml');
    writeFileSync(split, text);
    // A trailing comment with an anchor-like word makes the reader parse the file whole; lines are unchanged.
    writeFileSync(whole, `${text}# &whole\n`);
    const a = await read(split);
    const b = await read(whole);
    expect(a.problems.length).toBeGreaterThanOrEqual(8);
    expect(a.problems.some((p) => p.startsWith('job y302 (') && p.includes('input.quality'))).toBe(true);
    expect(a.problems.map((p) => p.replaceAll(split, 'M'))).toEqual(b.problems.map((p) => p.replaceAll(whole, 'M')));
    expect(JSON.stringify(a.jobs).replaceAll(split, 'M')).toBe(JSON.stringify(b.jobs).replaceAll(whole, 'M'));
  });

  it('keeps every problem at its line in flow values and block lists read by the fast path', async () => {
    const p = join(dir, 'flow.yaml');
    const text = 'jobs:\n  - id: f1\n    model: alpha-image-2\n    input: {prompt: "a", quality: top}\n  - id: f2\n    model: alpha-image-2-edit\n    input:\n      prompt: b\n      image_urls:\n      - ./ok.png\n      - missing.png\n    needs:\n    - f9\n';
    for (const item of [...splitJobs(text)!.items]) expect(fastItem(item.text), item.text).not.toBeNull();
    writeFileSync(p, text);
    writeFileSync(join(dir, 'ok.png'), Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8ffff3f0005fe02fea7d6a4c10000000049454e44ae426082', 'hex'));
    const { problems } = await read(p);
    expect(problems).toEqual([
      `job f2 (${p}:13) needs[0]: no job with id "f9" in this manifest (did you mean "f1"?)`,
      `job f1 (${p}:4) input.quality: quality "top" is not one of low, medium, high`,
      `job f2 (${p}:11) input.image_urls[1]: local file "missing.png" does not exist`,
    ]);
  });

  it('keys after the jobs list keep their lines (the head is parsed without the blanked item lines)', async () => {
    const lines = ['budget: -1', 'pricing:', '  alpha-image-2: many', 'jobs:'];
    for (let i = 1; i <= 40; i++) lines.push(`  - id: h${i}`, '    input:', `      prompt: "p ${i}"`, ...(i === 7 ? ['      colour: red'] : []));
    lines.push('', '# after the list', 'defaults:', '  model: alpha-image-2', '  colour: blue', '  input:', '    quality: top', 'unknown_key: 1');
    const text = lines.join('\n') + '\n';
    expect(splitJobs(text)).not.toBeNull();
    const split = join(dir, 'h.yaml');
    const whole = join(dir, 'whole.yaml');
    writeFileSync(split, text);
    writeFileSync(whole, `${text}# &whole\n`);
    const a = await read(split);
    const b = await read(whole);
    expect(a.problems.some((p) => p.includes(`${split}:${lines.indexOf('unknown_key: 1') + 1}`))).toBe(true);
    expect(a.problems.some((p) => p.includes(`${split}:${lines.indexOf('    quality: top') + 1}`))).toBe(true);
    expect(a.problems.map((p) => p.replaceAll(split, 'M'))).toEqual(b.problems.map((p) => p.replaceAll(whole, 'M')));
    expect(JSON.stringify(a.jobs).replaceAll(split, 'M')).toBe(JSON.stringify(b.jobs).replaceAll(whole, 'M'));
    // A syntax error after the list (a second budget key), at its own line.
    writeFileSync(split, `${text}budget: 3\n`);
    writeFileSync(whole, `${text}budget: 3\n# &whole\n`);
    const c = await read(split);
    const d = await read(whole);
    expect(c.problems).toContain(`${split}:${lines.length + 1}: YAML syntax: Map keys must be unique`);
    expect(c.problems.map((p) => p.replaceAll(split, 'M'))).toEqual(d.problems.map((p) => p.replaceAll(whole, 'M')));
    // An error the library places at the end of the text (an unclosed flow value before the list, the list last):
    // at the line a parse of the head with its blank lines gives (as before the head was parsed without them).
    const last = `pricing: "abc\njobs:\n${lines.slice(4, 12).join('\n')}\n\n`;
    writeFileSync(split, last);
    const head = splitJobs(last)!.head;
    const lc = new LineCounter();
    const ref = parseDocument(head, { lineCounter: lc, prettyErrors: false, uniqueKeys: true, merge: true });
    expect(ref.errors.length).toBeGreaterThan(0);
    const e = await read(split);
    expect(e.problems[0]).toMatch(new RegExp(`^${split.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${lc.linePos(ref.errors[0]!.pos[0]).line}: YAML syntax: `));
    expect(lc.linePos(ref.errors[0]!.pos[0]).line).toBeGreaterThan(2);
  });

  it('read by the fast path or by the library, each item has the same value and entry line', async () => {
    const items = Array.from({ length: 250 }, (_, i) => ({ line: 2 + i * 3, text: `  - id: j${i}\n    input:\n      prompt: "p ${i}"` }));
    const all = async (fast: boolean) => {
      const out = [];
      for await (const e of chunkEntries(items, 'm.yaml', fast)) out.push(e);
      return out;
    };
    const fast = await all(true);
    const slow = await all(false);
    expect(fast.map((e) => e.js)).toStrictEqual(slow.map((e) => e.js));
    for (let k = 0; k < items.length; k++) {
      const f = fast[k]!;
      const s = slow[k]!;
      expect(f.loc.entryWhere).toBe(s.loc.lineAt(nodeAt(s.loc.doc, s.loc.base).offset));
      // The library's positions, when a problem asks for them, are those of the batch parse.
      expect(f.loc.lineAt(nodeAt(f.loc.doc, [...f.loc.base, 'input', 'prompt']).offset)).toBe(s.loc.lineAt(nodeAt(s.loc.doc, [...s.loc.base, 'input', 'prompt']).offset));
    }
  });
});

describe('surelyValidEntry', () => {
  it('is true only for entries jobSchema accepts (and for the common ones)', () => {
    const common = [
      { id: 'a', model: 'alpha-image-2', input: { prompt: 'p' } },
      { model: 'm', input: {}, callback_url: 'https://x', protocol: 'messages', rehost: true },
      {},
    ];
    for (const e of common) {
      expect(surelyValidEntry(e), JSON.stringify(e)).toBe(true);
      expect(jobSchema.safeParse(e).success).toBe(true);
    }
    const odd: unknown[] = [
      null, [], 'x', 1, { id: 1 }, { model: null }, { input: [] }, { input: null }, { input: 'p' }, { rehost: 'yes' }, { protocol: 2 },
      { needs: 'a' }, { for_each: 'x' }, { rows: { file: 'a.csv' } }, { glob: '*.png' }, { matrix: { a: [1] } }, { colour: 'red' },
      Object.assign(Object.create(null) as object, { id: 'a' }), { input: Object.create(null) as object }, { input: new Date(0) }, { input: new Map() },
    ];
    for (const e of odd) {
      if (surelyValidEntry(e)) expect(jobSchema.safeParse(e).success, JSON.stringify(e)).toBe(true);
      else expect(surelyValidEntry(e)).toBe(false);
    }
    // Entries the predicate leaves to zod include ones zod refuses: the problems still come from zod.
    expect(odd.filter((e) => !surelyValidEntry(e) && !jobSchema.safeParse(e).success).length).toBeGreaterThan(10);
  });
});
