import { LineCounter, type Document } from 'yaml';
import type { Problem } from '../errors.js';
import { fastItem } from './yaml-fast.js';
import { parseYaml, syntaxProblems, toJs, type Loc, type Path } from './yaml-loc.js';

/**
 * The items of a split YAML manifest (yaml-split.ts) read back as job
 * entries, a batch of items per parse.
 */

export interface RawEntry {
  js: unknown;
  loc: Loc;
  index: number;
  /** Syntax problems of this entry (it is then skipped). */
  errors: Problem[];
}

/** Items of a split file parsed together by the library: bounded memory, without a parser per item. */
const BATCH_ITEMS = 200;

/**
 * The items of a split file, in order. An item of the simple shape (yaml-fast.ts) is read without the library,
 * one at a time (`fast: false`: never); the others are parsed by the library a run of consecutive items at a
 * time (at most BATCH_ITEMS), and a run with a syntax error item by item.
 */
export async function* chunkEntries(items: Iterable<{ line: number; text: string }> | AsyncIterable<{ line: number; text: string }>, name: string, fast = true): AsyncGenerator<RawEntry> {
  let index = 0;
  let slow: Array<{ line: number; text: string }> = [];
  for await (const item of items) {
    const js = fast ? fastItem(item.text) : null;
    if (js === null) {
      slow.push(item);
      if (slow.length >= BATCH_ITEMS) {
        yield* libraryEntries(slow, index - slow.length + 1, name);
        slow = [];
      }
    } else {
      if (slow.length > 0) yield* libraryEntries(slow, index - slow.length, name);
      slow = [];
      yield { js, loc: lazyLoc(item, name), index, errors: [] };
    }
    index++;
  }
  if (slow.length > 0) yield* libraryEntries(slow, index - slow.length, name);
}

/** Consecutive items parsed by the library together (one at a time when they hold a syntax error); `from`: the first one's index. */
function* libraryEntries(batch: Array<{ line: number; text: string }>, from: number, name: string): Generator<RawEntry> {
  const first = batch[0];
  if (!first) return;
  const parsed = parseChunk(batch.map((it) => it.text).join('\n'), first.line, name);
  const list = parsed.errors.length === 0 ? toJs(parsed.loc.doc, `${name}:${first.line}`, parsed.errors) : undefined;
  if (parsed.errors.length === 0 && Array.isArray(list) && list.length === batch.length) {
    for (let k = 0; k < batch.length; k++) yield { js: list[k], loc: { ...parsed.loc, base: [k] }, index: from + k, errors: [] };
    return;
  }
  for (const [k, item] of batch.entries()) {
    const one = parseChunk(item.text, item.line, name);
    const js = one.errors.length === 0 ? toJs(one.loc.doc, `${name}:${item.line}`, one.errors) : undefined;
    yield { js: Array.isArray(js) ? js[0] : undefined, loc: one.loc, index: from + k, errors: one.errors };
  }
}

/**
 * The position of an item read without the library: the item alone is parsed by it (as an item of a batch
 * with a syntax error is) only when a problem asks where a node is; the entry's own line is its first line.
 */
export function lazyLoc(item: { line: number; text: string }, name: string): Loc {
  return new LazyLoc(item, name);
}

/** A class, not an object literal with a getter (one made per job: a shared prototype keeps them cheap). */
class LazyLoc implements Loc {
  readonly base: Path = [0];
  readonly entryWhere: string;
  private parsed: Loc | null = null;
  constructor(
    private readonly item: { line: number; text: string },
    private readonly name: string,
  ) {
    this.entryWhere = `${name}:${item.line}`;
  }
  private get loc(): Loc {
    return (this.parsed ??= parseChunk(this.item.text, this.item.line, this.name).loc);
  }
  get doc(): Document {
    return this.loc.doc;
  }
  lineAt(offset: number): string {
    return this.loc.lineAt(offset);
  }
}

function parseChunk(text: string, line: number, name: string): { loc: Loc; errors: Problem[] } {
  const lc = new LineCounter();
  const doc = parseYaml(text, lc);
  const lineAt = (offset: number) => `${name}:${lc.linePos(offset).line + line - 1}`;
  return { loc: { doc, lineAt, base: [0] }, errors: syntaxProblems(doc, lineAt) };
}
