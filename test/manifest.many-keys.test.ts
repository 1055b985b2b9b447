import { LineCounter, parseDocument } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseYaml } from '../src/manifest/yaml-loc.js';

const CASES = ["a: 1\na: 2\n","<<: {x: 1}\n<<: {y: 2}\n","? [a]\n: 1\n? [a]\n: 2\n","&x a: 1\na: 2\n","a: 1\n&y a: 2\n","a: 1\n!!str a: 2\n","1: a\n\"1\": b\n",": a\n: b\n","{a: 1, a: 2}\n","- [a: 1, a: 2]\n","!!str 1: a\n\"1\": b\n","a: 1\n\"a\": 2\n","x: &k a\n*k : 1\na: 2\n",".nan: 1\n.nan: 2\n",
"a:\n  b: 1\n  b: [\n  c: 2\na: 3\n", "a: {b: 1, b: 2, c: {d: 1, d: 2}}\nx: 1\nx: 2\n  bad indent\n", "? a\n: 1\n? a\n: 2\n", "a: 1\n? |\n  a\n: 2\n", "'a': 1\na: 2\nb: 1\nb: 1\nb: 1\n", "jobs:\n  - id: a\n    id: b\n  - {id: c, id: d}\n", "0x1: a\n1: b\n", "1.0: a\n1: b\n", "null: a\n~: b\n", "true: a\nTrue: b\n", "a: 1\na: \"unterminated\n", "[a, b]: 1\n[a, b]: 2\n"];

describe('x', () => {
  it('y', () => {
    for (const t of CASES) {
      const a = parseDocument(t, { lineCounter: new LineCounter(), prettyErrors: false, uniqueKeys: true, merge: true });
      const b = parseYaml(t, new LineCounter());
      const ea = a.errors.map((e) => `${e.code}@${e.pos[0]} ${e.message.split('\n')[0]}`);
      const eb = b.errors.map((e) => `${e.code}@${e.pos[0]} ${e.message.split('\n')[0]}`);
      expect([t, eb]).toEqual([t, ea]);
    }
  });
});
