import { isMap, isPair, isSeq, isScalar, parseDocument, YAMLParseError, type Document, type LineCounter, type Pair, type YAMLMap } from 'yaml';
import type * as z from 'zod';
import type { Problem } from '../errors.js';
import { joinPath } from '../models/index.js';
import { nearest } from '../lib/nearest.js';
import { EXPANDED_MESSAGE, MAX_DEPTH, MAX_EXPANDED, expandedSize } from './safe.js';

/**
 * Positions in a parsed YAML manifest: the node at a path, `file:line` of
 * syntax problems and of zod issues (used by yaml.ts, yaml-batch.ts and
 * yaml-entry.ts).
 */

export type Path = Array<string | number>;

/** Where a node lives: its document, how offsets become `file:line`, and the path of the entry in it. */
export interface Loc {
  doc: Document;
  lineAt(offset: number): string;
  base: Path;
  /** `file:line` of the entry (the node at `base`) when known without the document (an item read by yaml-fast.ts). */
  entryWhere?: string;
}

/**
 * A YAML text parsed as manifests are: merge keys, and duplicate keys an error ("Map keys must be unique" at the
 * second key, as the library's `uniqueKeys` says it). The library's own check compares each key with every key
 * before it (20,000 keys in one mapping: 5 s in `input`, 29 s at the root); here each mapping's keys go in a Set.
 */
export function parseYaml(text: string, lineCounter: LineCounter): Document {
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: false, merge: true });
  const found = duplicateKeys(doc);
  if (found.length > 0) {
    // Merged into the library's errors by position (theirs keep their order).
    const merged: YAMLParseError[] = [];
    let k = 0;
    for (const e of doc.errors) {
      while (k < found.length && (found[k]?.pos[0] ?? 0) <= e.pos[0]) merged.push(found[k++] as YAMLParseError);
      merged.push(e);
    }
    doc.errors.splice(0, doc.errors.length, ...merged, ...found.slice(k));
  }
  return doc;
}

/** A DUPLICATE_KEY error for each key equal to an earlier key of its mapping (scalars by value, as the library compares them). */
function duplicateKeys(doc: Document): YAMLParseError[] {
  const out: YAMLParseError[] = [];
  // An explicit stack: no recursion on deeply nested documents.
  const stack: unknown[] = [doc.contents];
  while (stack.length > 0) {
    const node = stack.pop();
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        const key = pair.key;
        if (!isScalar(key) || Number.isNaN(key.value)) continue;
        if (seen.has(key.value)) {
          const at = key.range?.[0] ?? 0;
          out.push(new YAMLParseError([at, at + 1], 'DUPLICATE_KEY', 'Map keys must be unique'));
        }
        seen.add(key.value);
      }
      for (let i = node.items.length - 1; i >= 0; i--) {
        const pair = node.items[i];
        if (isPair(pair)) stack.push(pair.value, pair.key);
      }
    } else if (isSeq(node)) {
      for (let i = node.items.length - 1; i >= 0; i--) stack.push(node.items[i]);
    }
  }
  // A mapping's keys are checked before its values are walked: in the text's order by position.
  return out.sort((a, b) => a.pos[0] - b.pos[0]);
}

export function syntaxProblems(doc: Document, lineAt: (offset: number) => string): Problem[] {
  // The yaml library reports its own stack overflow (thousands of nested levels) as an error at the deep node.
  const text = (m: string) => (/Maximum call stack/i.test(m) ? `too deeply nested to read (values may be nested at most ${MAX_DEPTH} levels)` : `YAML syntax: ${m.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '')}`);
  return doc.errors.map((e) => ({ job: null, where: lineAt(e.pos[0]), path: '', message: text(e.message) }));
}

export function toJs(doc: Document, where: string, problems: Problem[]): unknown {
  try {
    const js = doc.toJS({ maxAliasCount: 1000 }) as unknown;
    // Aliases share their anchor's value: it is cheap to build, and the size of its copies is what later steps pay.
    if (expandedSize(js, MAX_EXPANDED) > MAX_EXPANDED) throw new Error(EXPANDED_MESSAGE);
    return js;
  } catch (err) {
    problems.push({ job: null, where, path: '', message: `YAML: ${err instanceof Error ? err.message : String(err)}` });
    return undefined;
  }
}

/**
 * Problems from zod issues, positioned at their nodes and in file order.
 * `owner`: the job id they belong to; `prefix`: shown before the path when
 * there is no owner (e.g. jobs[3]); `keysAt`: the allowed keys of a mapping.
 */
export function issueProblems(issues: readonly z.core.$ZodIssue[], loc: Loc, owner: string | null, prefix: Path, keysAt: (path: Path) => readonly string[]): Array<{ offset: number; issuePath: Path; problem: Problem }> {
  const out: Array<{ offset: number; issuePath: Path; problem: Problem }> = [];
  for (const iss of issues) {
    const base: Path = iss.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
    const keys: Array<string | null> = iss.code === 'unrecognized_keys' ? iss.keys : [null];
    for (const key of keys) {
      const path: Path = key === null ? base : [...base, key];
      const offset = nodeAt(loc.doc, [...loc.base, ...path]).offset;
      const message = key === null ? iss.message : unknownKeyMessage(key, keysAt(base));
      out.push({ offset, issuePath: path, problem: { job: owner, where: loc.lineAt(offset), path: joinPath('', [...prefix, ...path]), message } });
    }
  }
  // Stable sort: issues of one node keep zod's order.
  return out.sort((a, b) => a.offset - b.offset);
}

function unknownKeyMessage(key: string, allowed: readonly string[]): string {
  const near = nearest(key, [...allowed]);
  return `unknown key "${key}"${near ? ` (did you mean "${near}"?)` : ''}${allowed.length > 0 ? `; allowed keys: ${allowed.join(', ')}` : ''}`;
}

/**
 * The source offset of the node at `path`: the key of the deepest map entry
 * found (its line is where users look), or the item of a list.
 * `complete` is false when the path goes deeper than the document.
 */
export function nodeAt(doc: Document, path: Path): { offset: number; complete: boolean } {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const part of path) {
    if (isMap(node)) {
      const pair = pairAt(node, String(part));
      if (!pair) return { offset, complete: false };
      offset = rangeStart(pair.key) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof part === 'number') {
      const item: unknown = node.items[part];
      if (item === undefined) return { offset, complete: false };
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      return { offset, complete: false };
    }
  }
  return { offset, complete: true };
}

/** A big mapping's first pair of each key (a problem per key of 20,000 keys would otherwise search them all each time). */
const pairIndex = new WeakMap<YAMLMap, Map<string, Pair>>();

function pairAt(map: YAMLMap, key: string): Pair | undefined {
  if (map.items.length <= 32) return map.items.find((p) => isScalar(p.key) && String(p.key.value) === key);
  let index = pairIndex.get(map);
  if (!index) {
    index = new Map();
    for (const p of map.items) if (isScalar(p.key) && !index.has(String(p.key.value))) index.set(String(p.key.value), p);
    pairIndex.set(map, index);
  }
  return index.get(key);
}

function rangeStart(node: unknown): number | null {
  if (node && typeof node === 'object' && 'range' in node) {
    const range = (node as { range?: unknown }).range;
    if (Array.isArray(range) && typeof range[0] === 'number') return range[0];
  }
  return null;
}
