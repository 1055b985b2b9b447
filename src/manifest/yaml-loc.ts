import { isMap, isSeq, isScalar, type Document } from 'yaml';
import type { z } from 'zod';
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
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(part));
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

function rangeStart(node: unknown): number | null {
  if (node && typeof node === 'object' && 'range' in node) {
    const range = (node as { range?: unknown }).range;
    if (Array.isArray(range) && typeof range[0] === 'number') return range[0];
  }
  return null;
}
