import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { extname } from 'node:path';
import type { CsvError } from 'csv-parse';

/**
 * Streaming reader of CSV and TSV files, shared by CSV/TSV manifests and YAML
 * rows sources. `.csv`: comma-separated, RFC 4180 double quotes. `.tsv` (and
 * `.tab`): tab-separated with no quoting at all (IANA TSV), so a cell may
 * start with a quote, as PartiPrompts.tsv does. A UTF-8 BOM is dropped; blank
 * lines are skipped. Row numbers count data rows: row 1 is the first row after
 * the header. A malformed row is reported and skipped; reading goes on.
 */

export type TableItem =
  | { kind: 'header'; cells: string[] }
  | { kind: 'row'; row: number; cells: string[] }
  | { kind: 'error'; row: number | null; message: string };

/**
 * Most columns of a CSV/TSV file (a job list or a rows source): a job list's
 * `input.*` columns may be sparse (an empty cell is absent), so this is well
 * above the fields one job may fill (MAX_INPUT_FIELDS). A wider header is
 * refused before any row is read.
 */
export const MAX_COLUMNS = 10_000;

export function isTablePath(file: string): boolean {
  return ['.csv', '.tsv', '.tab'].includes(extname(file).toLowerCase());
}

export async function* readTable(file: string, limit: number | null = null): AsyncGenerator<TableItem> {
  try {
    const st = await stat(file);
    if (!st.isFile()) {
      yield { kind: 'error', row: null, message: `${file} is not a file` };
      return;
    }
  } catch {
    yield { kind: 'error', row: null, message: `file not found: ${file}` };
    return;
  }
  const tsv = extname(file).toLowerCase() !== '.csv';
  // Skipped (malformed) records are reported through on_skip while the parser
  // runs ahead of this consumer; each is put back in order by the number of
  // records parsed before it.
  const pending: Array<{ before: number; message: string; unclosed?: boolean }> = [];
  // Loaded on first use (YAML manifests without rows sources never need it).
  const { parse } = await import('csv-parse');
  const source = createReadStream(file);
  const parser = source.pipe(
    parse({
      delimiter: tsv ? '\t' : ',',
      quote: tsv ? false : '"',
      relax_quotes: true,
      bom: true,
      skip_empty_lines: true,
      relax_column_count: true,
      skip_records_with_error: true,
      on_skip: (err: CsvError | undefined) => {
        if (!err) return undefined;
        const line = typeof err.lines === 'number' ? err.lines : 0;
        const before = typeof err.records === 'number' ? err.records : 0;
        if (err.code === 'CSV_QUOTE_NOT_CLOSED') pending.push({ before, message: '', unclosed: true });
        else pending.push({ before, message: `${tsv ? 'TSV' : 'CSV'} syntax error near line ${line}: ${err.message.replace(/ at line \d+.*$/, '')}` });
        return undefined;
      },
    }),
  );
  let header: string[] | null = null;
  let row = 0;
  let records = 0;
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      while (pending.length > 0 && (pending[0]?.before ?? 0) <= records) {
        yield { kind: 'error', row: header ? ++row : null, message: await pendingMessage(pending.shift(), file) };
      }
      records++;
      if (!header) {
        if (record.length > MAX_COLUMNS) {
          yield { kind: 'error', row: null, message: `the header has ${record.length.toLocaleString('en-US')} columns; a CSV/TSV file has at most ${MAX_COLUMNS.toLocaleString('en-US')}` };
          return;
        }
        header = record;
        yield { kind: 'header', cells: record };
        continue;
      }
      row++;
      if (record.length !== header.length) {
        yield { kind: 'error', row, message: `has ${record.length} cells; the header has ${header.length}` };
      } else {
        yield { kind: 'row', row, cells: record };
      }
      if (limit !== null && row >= limit) break;
    }
    while (pending.length > 0) yield { kind: 'error', row: header ? ++row : null, message: await pendingMessage(pending.shift(), file) };
    if (!header) yield { kind: 'error', row: null, message: `${file} is empty (a header line naming the columns is required)` };
  } catch (err) {
    yield { kind: 'error', row: null, message: `cannot read ${file}: ${err instanceof Error ? err.message : String(err)}` };
  } finally {
    parser.destroy();
    source.destroy();
  }
}

async function pendingMessage(p: { message: string; unclosed?: boolean } | undefined, file: string): Promise<string> {
  if (!p?.unclosed) return p?.message ?? '';
  const line = await unclosedQuoteLine(file);
  return `CSV syntax error: the quoted field opened on line ${line ?? '?'} is never closed (a closing " is missing)`;
}

/**
 * The line (1-based, counting LF or CRLF line ends) where the last quoted
 * field of a CSV file opens without ever closing, or null. Read again only
 * when the parser reported an unclosed quote (it names the end of the file).
 */
async function unclosedQuoteLine(file: string): Promise<number | null> {
  const buf = await readFile(file);
  let i = buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  let line = 1;
  let fieldStart = true;
  let openedAt: number | null = null;
  for (; i < buf.length; i++) {
    const c = buf[i];
    if (openedAt !== null) {
      if (c === 0x0a) line++;
      else if (c === 0x22) {
        if (buf[i + 1] === 0x22) i++;
        else {
          openedAt = null;
          fieldStart = false;
        }
      }
      continue;
    }
    if (c === 0x0a) {
      line++;
      fieldStart = true;
    } else if (c === 0x2c) fieldStart = true;
    else if (c === 0x22 && fieldStart) openedAt = line;
    else if (c !== 0x0d) fieldStart = false;
  }
  return openedAt;
}
