import { readLines } from './lines.js';

/**
 * Big YAML manifests are not parsed whole: the yaml library keeps several KB
 * of nodes per job, so a 50,000-job file would need gigabytes. When the file
 * has the usual shape (a top-level block `jobs:` list), its items are cut out
 * by their indentation and parsed one at a time while the jobs stream by; the
 * rest (budget, pricing, defaults) is parsed as the "head", with the item
 * lines blanked so line numbers stay true.
 *
 * Cutting at `- ` lines of the list's own indentation is exact for valid YAML:
 * any deeper content (block scalars, multi-line flow values) must be indented
 * further. Files this cannot handle exactly return null and are parsed whole:
 * several documents, anchors or aliases (an alias may point into another
 * item), a flow `jobs: [...]`, an empty list, or odd indentation.
 *
 * A file is read twice as a stream (`splitFile`): once to find the list and
 * keep the head, then once more each time the items are iterated. Neither the
 * file's text nor its items are ever held whole.
 */

export interface SplitYaml<Items = Iterable<Item>> {
  /** The file with the item lines blanked. */
  head: string;
  /** The file without the item lines (lines after the list are numbered `blankTo - blankFrom` lower than in the file). */
  compactHead: string;
  /** Each item of `jobs`: its first line (1-based) and its text, cut when iterated (each iteration starts over). */
  items: Items;
  /** The blanked lines of `head`: indexes (0-based) from `blankFrom` up to, not including, `blankTo`. */
  blankFrom: number;
  blankTo: number;
}

export interface Item {
  line: number;
  text: string;
}

const BLANK_OR_COMMENT = /^\s*(#.*)?\r?$/;
const ITEM_START = /^( *)-( |\r?$)/;
const JOBS_LINE = /^jobs:\s*(#.*)?\r?$/;
const OTHER_JOBS_KEY = /^["']?jobs["']?\s*:/;
const DOCUMENT_MARKER = /^(---|\.\.\.)(\s|$)/;
const ANCHOR_OR_ALIAS = /(^|[\s[\]{},])[&*][^\s[\]{},]/;

/**
 * Finds the list line by line: `line()` for each line of the file in order (false once the file cannot be
 * split), then `result()`.
 */
class ListFinder {
  private i = 0;
  private jobsAt = -1;
  private indent = -1;
  private count = 0;
  /** Index of the first line after the list, once known. */
  private end = -1;
  private readonly before: string[] = [];
  private readonly after: string[] = [];

  line(l: string): boolean {
    const i = this.i++;
    if (DOCUMENT_MARKER.test(l) || ANCHOR_OR_ALIAS.test(l)) return false;
    if (this.jobsAt < 0) {
      if (JOBS_LINE.test(l)) this.jobsAt = i;
      else if (OTHER_JOBS_KEY.test(l)) return false;
      this.before.push(l);
      return true;
    }
    if (this.end >= 0) {
      if (OTHER_JOBS_KEY.test(l)) return false;
      this.after.push(l);
      return true;
    }
    if (BLANK_OR_COMMENT.test(l)) return true;
    const item = ITEM_START.exec(l);
    if (this.indent < 0) {
      if (!item) return false;
      this.indent = item[1]?.length ?? 0;
    }
    if (l.startsWith('\t')) return false;
    const lead = l.length - l.trimStart().length;
    if (lead < this.indent || (lead === this.indent && this.indent === 0 && !item)) {
      if (OTHER_JOBS_KEY.test(l)) return false;
      this.end = i;
      this.after.push(l);
      return true;
    }
    if (lead !== this.indent) return true;
    if (!item) return false;
    this.count++;
    return true;
  }

  result(): Omit<SplitYaml, 'items'> & { indent: number } | null {
    if (this.jobsAt < 0 || this.count === 0) return null;
    const blankTo = this.end >= 0 ? this.end : this.i;
    const before = this.before.join('\n');
    const after = this.end >= 0 ? `\n${this.after.join('\n')}` : '';
    return { head: before + '\n'.repeat(blankTo - this.jobsAt - 1) + after, compactHead: before + after, blankFrom: this.jobsAt + 1, blankTo, indent: this.indent };
  }
}

/**
 * Cuts items from the list's lines, fed in order from line index `from`: each item from its `- ` line (at the
 * list's indentation: the only lines there, blank lines and comments aside) up to the next.
 */
class ItemCutter {
  private i: number;
  private current: { line: number; lines: string[] } | null = null;
  constructor(
    from: number,
    private readonly indent: number,
  ) {
    this.i = from;
  }

  /** The item this line ends, if any. */
  line(l: string): Item | null {
    const i = this.i++;
    const starts = l.charCodeAt(this.indent) === 0x2d && ITEM_START.test(l) && (ITEM_START.exec(l)?.[1]?.length ?? -1) === this.indent;
    if (starts) {
      const done = this.finish();
      this.current = { line: i + 1, lines: [l] };
      return done;
    }
    this.current?.lines.push(l);
    return null;
  }

  finish(): Item | null {
    const c = this.current;
    this.current = null;
    return c ? { line: c.line, text: c.lines.join('\n') } : null;
  }
}

/** The split of a YAML text (small files, tests): items cut from the text when iterated. */
export function splitJobs(text: string): SplitYaml | null {
  const lines = text.split('\n');
  const finder = new ListFinder();
  for (const l of lines) if (!finder.line(l)) return null;
  const found = finder.result();
  if (!found) return null;
  const { indent, ...split } = found;
  function* items(): Generator<Item> {
    const cutter = new ItemCutter(split.blankFrom, indent);
    for (let i = split.blankFrom; i < split.blankTo; i++) {
      const done = cutter.line(lines[i] ?? '');
      if (done) yield done;
    }
    const last = cutter.finish();
    if (last) yield last;
  }
  return { ...split, items: { [Symbol.iterator]: items } };
}

/** The split of a YAML file read as a stream, or null when it cannot be split (then it is parsed whole). */
export async function splitFile(file: string): Promise<SplitYaml<AsyncIterable<Item>> | null> {
  const finder = new ListFinder();
  for await (const chunk of readLines(file)) for (const l of chunk) if (!finder.line(l)) return null;
  const found = finder.result();
  if (!found) return null;
  const { indent, ...split } = found;
  async function* items(): AsyncGenerator<Item> {
    const cutter = new ItemCutter(split.blankFrom, indent);
    let i = 0;
    read: for await (const chunk of readLines(file)) {
      for (const l of chunk) {
        const index = i++;
        if (index < split.blankFrom) continue;
        if (index >= split.blankTo) break read;
        const done = cutter.line(l);
        if (done) yield done;
      }
    }
    const last = cutter.finish();
    if (last) yield last;
  }
  return { ...split, items: { [Symbol.asyncIterator]: items } };
}
