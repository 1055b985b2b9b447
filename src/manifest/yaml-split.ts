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
 * The text is walked line by line by offsets (no array of its lines) and each
 * item is cut from it only when iterated: a 100,000-job list costs its text
 * and one batch of items at a time, not a copy per line.
 */

export interface SplitYaml {
  /** The file with the item lines blanked. */
  head: string;
  /** The file without the item lines (lines after the list are numbered `blankTo - blankFrom` lower than in the file). */
  compactHead: string;
  /** Each item of `jobs`: its first line (1-based) and its text, cut when iterated (each iteration starts over). */
  items: Iterable<{ line: number; text: string }>;
  /** The blanked lines of `head`: indexes (0-based) from `blankFrom` up to, not including, `blankTo`. */
  blankFrom: number;
  blankTo: number;
}

const BLANK_OR_COMMENT = /^\s*(#.*)?\r?$/;
const ITEM_START = /^( *)-( |\r?$)/;

/** Every line of `text` (as `text.split('\n')` gives them): its index and its start and end offsets. */
function* lines(text: string, from = 0, index = 0): Generator<{ i: number; start: number; end: number }> {
  let start = from;
  for (let i = index; ; i++) {
    const nl = text.indexOf('\n', start);
    const end = nl < 0 ? text.length : nl;
    yield { i, start, end };
    if (nl < 0) return;
    start = nl + 1;
  }
}

export function splitJobs(text: string): SplitYaml | null {
  if (/^(---|\.\.\.)(\s|$)/m.test(text)) return null;
  if (/(^|[\s[\]{},])[&*][^\s[\]{},]/m.test(text)) return null;
  let jobsAt = -1;
  let listStart = 0;
  for (const { i, start, end } of lines(text)) {
    const l = text.slice(start, Math.min(end, start + 64));
    if (/^jobs:\s*(#.*)?\r?$/.test(text.slice(start, end)) && jobsAt < 0) {
      jobsAt = i;
      listStart = end + 1;
    } else if (/^["']?jobs["']?\s*:/.test(l)) return null;
  }
  if (jobsAt < 0 || listStart > text.length) return null;
  // The list's extent: from the line after `jobs:` to the first line back at the top level.
  let indent = -1;
  let count = 0;
  let end = jobsAt + 1;
  let endOffset = -1;
  for (const { i, start, end: e } of lines(text, listStart, jobsAt + 1)) {
    const l = text.slice(start, e);
    end = i + 1;
    if (BLANK_OR_COMMENT.test(l)) continue;
    const item = ITEM_START.exec(l);
    if (indent < 0) {
      if (!item) return null;
      indent = item[1]?.length ?? 0;
    }
    if (l.startsWith('\t')) return null;
    const lead = l.length - l.trimStart().length;
    if (lead < indent || (lead === indent && indent === 0 && !item)) {
      end = i;
      endOffset = start;
      break;
    }
    if (lead === indent) {
      if (!item) return null;
      count++;
    }
  }
  if (count === 0) return null;
  const ended = endOffset >= 0;
  const before = text.slice(0, listStart - 1);
  const after = ended ? `\n${text.slice(endOffset)}` : '';
  const listEnd = ended ? endOffset - 1 : text.length;
  return {
    head: before + '\n'.repeat(end - jobsAt - 1) + after,
    compactHead: before + after,
    items: { [Symbol.iterator]: () => cut(text, listStart, listEnd, jobsAt + 1, indent) },
    blankFrom: jobsAt + 1,
    blankTo: end,
  };
}

/**
 * The items between offsets `from` and `to` (whole lines, the first numbered `index`, 0-based): each from its
 * `- ` line (at the list's indentation: the only lines there, blank lines and comments aside) to the next.
 */
function* cut(text: string, from: number, to: number, index: number, indent: number): Generator<{ line: number; text: string }> {
  let itemStart = -1;
  let itemLine = 0;
  for (const { i, start, end } of lines(text, from, index)) {
    if (start > to) break;
    const dash = start + indent;
    if (dash < end && text.charCodeAt(dash) === 0x2d && (indent === 0 || text.charCodeAt(dash - 1) === 0x20) && ITEM_START.test(text.slice(start, Math.min(end, dash + 2)))) {
      if (itemStart >= 0) yield { line: itemLine, text: text.slice(itemStart, start - 1) };
      itemStart = start;
      itemLine = i + 1;
    }
  }
  if (itemStart >= 0) yield { line: itemLine, text: text.slice(itemStart, to) };
}
