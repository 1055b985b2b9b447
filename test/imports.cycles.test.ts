import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * No import circle in src/: a folder, and a file, can be read without the ones that build on it (issue #24
 * item 6). Every relative module name counts: `import`, `import type`, `export ... from`, `import()` and
 * `typeof import()` types. Type-only imports count too: they vanish from the JavaScript, but a reader
 * still needs the other file to read this one, and a circle of types is where a circle of values starts.
 * A shared type goes down to the lower file (as sandbox/hooks.ts, storage/proof.ts, pricing's PricedJob).
 */

/** The .ts files under `dir` (no .d.ts), absolute. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** The files under `dir` that `file` names with a relative module name, resolved as NodeNext does (x.js -> x.ts). */
function importsOf(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, false);
  const names: string[] = [];
  const visit = (n: ts.Node): void => {
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) names.push(n.moduleSpecifier.text);
    else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword && n.arguments[0] && ts.isStringLiteral(n.arguments[0])) names.push(n.arguments[0].text);
    else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal)) names.push(n.argument.literal.text);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return names.filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s).replace(/\.js$/, '.ts'));
}

/** Every import circle among the .ts files under `dir`, each as a path `a.ts -> b.ts -> a.ts` (names relative to dir). */
function importCircles(dir: string): string[] {
  const graph = new Map<string, string[]>();
  for (const f of sources(dir)) graph.set(f, []);
  for (const f of graph.keys()) graph.set(f, importsOf(f).filter((t) => graph.has(t)));
  // Tarjan's strongly connected components: each component of more than one file (or a file importing
  // itself) holds at least one circle; one circle per component is named, found by a breadth-first walk.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[] = [];
  const name = (f: string): string => relative(dir, f);
  const circleIn = (component: Set<string>, start: string): string[] => {
    const from = new Map<string, string>();
    const queue = [start];
    for (let i = 0; i < queue.length; i++) {
      const v = queue[i]!;
      for (const w of graph.get(v)!) {
        if (!component.has(w)) continue;
        if (w === start) {
          const path = [v];
          while (path[0] !== start) path.unshift(from.get(path[0]!)!);
          return [...path, start];
        }
        if (!from.has(w)) {
          from.set(w, v);
          queue.push(w);
        }
      }
    }
    return [start, start];
  };
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = new Set<string>();
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.add(w);
    } while (w !== v);
    if (component.size > 1 || graph.get(v)!.includes(v)) {
      const first = [...component].sort()[0]!;
      circles.push(circleIn(component, first).map(name).join(' -> '));
    }
  };
  for (const f of [...graph.keys()].sort()) if (!index.has(f)) connect(f);
  return circles.sort();
}

describe('imports', () => {
  it('src/ has no import circle, type-only imports counted', () => {
    const src = join(ROOT, 'src');
    expect(sources(src).length).toBeGreaterThan(200);
    expect(importCircles(src)).toEqual([]);
  });

  it('a circle is named file by file, whichever way the files name each other', () => {
    const work = tempDir();
    try {
      const d = work.dir;
      mkdirSync(join(d, 'a'));
      mkdirSync(join(d, 'b'));
      writeFileSync(join(d, 'a', 'one.ts'), "import type { Two } from '../b/two.js';\nexport type One = Two;\n");
      writeFileSync(join(d, 'b', 'two.ts'), "export type Two = number;\nexport const three = async () => (await import('./three.js')).x;\n");
      writeFileSync(join(d, 'b', 'three.ts'), "export { type One } from '../a/one.js';\nexport const x = 1;\n");
      writeFileSync(join(d, 'b', 'leaf.ts'), "import type { One } from '../a/one.js';\nexport type L = One;\n");
      writeFileSync(join(d, 'self.ts'), "export type S = typeof import('./self.js');\n");
      expect(importCircles(d)).toEqual(['a/one.ts -> b/two.ts -> b/three.ts -> a/one.ts', 'self.ts -> self.ts']);
    } finally {
      work.cleanup();
    }
  });
});
