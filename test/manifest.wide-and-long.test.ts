import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseYaml } from '../src/manifest/yaml-loc.js';
import { fastItem } from '../src/manifest/yaml-fast.js';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';

/**
 * Manifests of unusual size: mappings of 20,000 keys (duplicates found with a Set, not by the yaml library's
 * pairwise uniqueKeys check), and strings of 10 MB (the fast reader checks quoted scalars with loops: a regular
 * expression overflowed V8's regexp stack and the CLI ended with exit 70), also after an unclosed `{{` or `${{`
 * (the template and reference patterns backtracked over every split of the spaces: never done). Timings:
 * bench/manifest.mjs.
 */

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-wide-'));
  ensureBuilt();
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const errorsOf = (errors: Array<{ code: string; pos: [number, number]; message: string }>) => errors.map((e) => `${e.code}@${e.pos[0]} ${e.message.split('\n')[0]}`);

describe('duplicate keys', () => {
  const cases = [
    'a: 1\na: 2\n',
    '<<: {x: 1}\n<<: {y: 2}\n',
    '? [a]\n: 1\n? [a]\n: 2\n',
    '&x a: 1\na: 2\n',
    'a: 1\n&y a: 2\n',
    'a: 1\n!!str a: 2\n',
    '1: a\n"1": b\n',
    ': a\n: b\n',
    '{a: 1, a: 2}\n',
    '- [a: 1, a: 2]\n',
    '!!str 1: a\n"1": b\n',
    'a: 1\n"a": 2\n',
    'x: &k a\n*k : 1\na: 2\n',
    '.nan: 1\n.nan: 2\n',
    'a:\n  b: 1\n  b: [\n  c: 2\na: 3\n',
    'a: {b: 1, b: 2, c: {d: 1, d: 2}}\nx: 1\nx: 2\n  bad indent\n',
    '? a\n: 1\n? a\n: 2\n',
    'a: 1\n? |\n  a\n: 2\n',
    "'a': 1\na: 2\nb: 1\nb: 1\nb: 1\n",
    'jobs:\n  - id: a\n    id: b\n  - {id: c, id: d}\n',
    '0x1: a\n1: b\n',
    '1.0: a\n1: b\n',
    'null: a\n~: b\n',
    'true: a\nTrue: b\n',
    'a: 1\na: "unterminated\n',
    '[a, b]: 1\n[a, b]: 2\n',
  ];
  it('are the errors the yaml library gives with uniqueKeys, at the same offsets and in the same order', () => {
    for (const text of cases) {
      const ref = parseDocument(text, { lineCounter: new LineCounter(), prettyErrors: false, uniqueKeys: true, merge: true });
      expect([text, errorsOf(parseYaml(text, new LineCounter()).errors)]).toEqual([text, errorsOf(ref.errors)]);
    }
  });
});

const KEYS = 20_000;
const keys = (indent: string) => Array.from({ length: KEYS }, (_, i) => `${indent}k${i}: v\n`).join('');
const job = 'jobs:\n  - id: a\n    model: dream-4\n    input:\n      prompt: hi\n';

describe('a mapping of 20,000 keys', () => {
  it('in a job input: read whole by the fast reader, and refused for its size at the input line', async () => {
    const item = `  - id: a\n    input:\n${keys('      ')}`;
    expect(Object.keys((fastItem(item)?.input as object) ?? {})).toHaveLength(KEYS);
    const file = join(dir, 'input.yaml');
    writeFileSync(file, `${job}${keys('      ')}`);
    const r = await genbatch(['validate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`job a (${file}:4) input: has more than 1,000 fields (keys and list items, counted at every depth); at most 1,000\n`);
  }, 60_000);

  it('in a job input with a duplicate last key: the duplicate named at its line', async () => {
    const file = join(dir, 'input-dup.yaml');
    writeFileSync(file, `${job}${keys('      ')}      k7: again\n`);
    const r = await genbatch(['validate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${file}:${6 + KEYS}: YAML syntax: Map keys must be unique\n`);
  }, 60_000);

  it('at the root: each unknown key named at its own line, and a duplicate at its line', async () => {
    const file = join(dir, 'root.yaml');
    writeFileSync(file, `${keys('')}${job}`);
    const r = await genbatch(['validate', file]);
    expect(r.code).toBe(2);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(KEYS);
    expect(lines[0]).toBe(`${file}:1 k0: unknown key "k0"; allowed keys: budget, budget_per_invocation, pricing, defaults, jobs`);
    expect(lines[KEYS - 1]).toBe(`${file}:${KEYS} k${KEYS - 1}: unknown key "k${KEYS - 1}"; allowed keys: budget, budget_per_invocation, pricing, defaults, jobs`);
    writeFileSync(file, `${keys('')}${job}k19999: again\n`);
    const d = await genbatch(['validate', file]);
    expect(d.code).toBe(2);
    expect(d.stderr).toBe(`${file}:${KEYS + 6}: YAML syntax: Map keys must be unique\n`);
  }, 60_000);
});

describe('a string of 10 MB', () => {
  const big = 'a'.repeat(10 * 1024 * 1024);
  const shapes: Array<[string, string]> = [
    ['double-quoted in a job input', `${job}      negative_prompt: "${big}"\n`],
    ['single-quoted in a job input', `${job}      negative_prompt: '${big}'\n`],
    ['in a flow mapping', `jobs:\n  - id: a\n    model: dream-4\n    input: {prompt: "${big}"}\n`],
    ['double-quoted at the root', `budget: "${big}"\n${job}`],
    ['of spaces after an unclosed {{ (a template)', `${job}      negative_prompt: "{{${' '.repeat(10 * 1024 * 1024)}x"\n`],
    ['of spaces after an unclosed ${{ (a job reference)', `${job}      negative_prompt: "\${{${' '.repeat(10 * 1024 * 1024)}x"\n`],
    ['of digits as the prompt', `${job.replace('prompt: hi', `prompt: ${'1'.repeat(10 * 1024 * 1024)}x`)}`],
  ];
  for (const [what, text] of shapes) {
    it(`${what}: a manifest answer (exit 0 or 2), never an internal error`, async () => {
      const file = join(dir, 'long.yaml');
      writeFileSync(file, text);
      const r = await genbatch(['validate', file]);
      expect(r.stderr).not.toContain('internal error');
      expect([0, 2]).toContain(r.code);
    }, 60_000);
  }
});
