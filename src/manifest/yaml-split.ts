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
 */

export interface SplitYaml {
  /** The file with the item lines blanked. */
  head: string;
  /** Each item of `jobs`: its first line (1-based) and its text. */
  items: Array<{ line: number; text: string }>;
  /** The blanked lines of `head`: indexes (0-based) from `blankFrom` up to, not including, `blankTo`. */
  blankFrom: number;
  blankTo: number;
}

const BLANK_OR_COMMENT = /^\s*(#.*)?\r?$/;
const ITEM_START = /^( *)-( |\r?$)/;

export function splitJobs(text: string): SplitYaml | null {
  if (/^(---|\.\.\.)(\s|$)/m.test(text)) return null;
  if (/(^|[\s[\]{},])[&*][^\s[\]{},]/m.test(text)) return null;
  const lines = text.split('\n');
  const jobsAt = lines.findIndex((l) => /^jobs:\s*(#.*)?\r?$/.test(l));
  if (jobsAt < 0) return null;
  if (lines.some((l, i) => i !== jobsAt && /^["']?jobs["']?\s*:/.test(l))) return null;
  let i = jobsAt + 1;
  while (i < lines.length && BLANK_OR_COMMENT.test(lines[i] ?? '')) i++;
  const first = ITEM_START.exec(lines[i] ?? '');
  if (!first) return null;
  const indent = first[1]?.length ?? 0;
  const items: Array<{ line: number; lines: string[] }> = [];
  for (; i < lines.length; i++) {
    const l = lines[i] ?? '';
    if (BLANK_OR_COMMENT.test(l)) {
      items[items.length - 1]?.lines.push(l);
      continue;
    }
    if (l.startsWith('\t')) return null;
    const lead = l.length - l.trimStart().length;
    if (lead < indent || (lead === indent && indent === 0 && !ITEM_START.test(l))) break;
    if (lead === indent) {
      if (!ITEM_START.test(l)) return null;
      items.push({ line: i + 1, lines: [l] });
    } else {
      items[items.length - 1]?.lines.push(l);
    }
  }
  const end = i;
  const head = lines.map((l, k) => (k > jobsAt && k < end ? '' : l)).join('\n');
  return { head, items: items.map((it) => ({ line: it.line, text: it.lines.join('\n') })), blankFrom: jobsAt + 1, blankTo: end };
}
