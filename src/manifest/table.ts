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
 * the header; `line` is the file line the row starts on (a quoted cell may hold
 * line breaks, and blank lines are skipped, so the two differ). A malformed row
 * is reported and skipped; reading goes on.
 */

export type TableItem =
  | { kind: 'header'; cells: string[] }
  | { kind: 'row'; row: number; line: number | undefined; cells: string[] }
  | { kind: 'error'; row: number | null; line?: number; message: string };

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
      // Blank lines come through as records of one empty cell, skipped below: each record's lines are then counted here.
      skip_empty_lines: false,
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
  const lines = new LineCounter();
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      while (pending.length > 0 && (pending[0]?.before ?? 0) <= records) {
        lines.lose();
        yield { kind: 'error', row: header ? ++row : null, message: await pendingMessage(pending.shift(), file) };
      }
      records++;
      const line = lines.take(record);
      if (record.length === 1 && record[0] === '') continue; // a blank line
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
        yield { kind: 'error', row, ...(line === undefined ? {} : { line }), message: `has ${record.length} cells; the header has ${header.length}` };
      } else {
        yield { kind: 'row', row, line, cells: record };
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

/**
 * The file line each record starts on, counted from the records themselves (csv-parse's own `info` costs
 * about 3 us a record): a record takes one line plus the line breaks inside its quoted cells (CRLF, CR or
 * LF: one each); blank lines are records too. After a record the parser skipped (its lines are not known)
 * the count is lost and lines are undefined.
 */
class LineCounter {
  private next: number | undefined = 1;

  take(cells: readonly string[]): number | undefined {
    const start = this.next;
    if (start === undefined) return undefined;
    let breaks = 0;
    for (const cell of cells) {
      if (!cell.includes('\n') && !cell.includes('\r')) continue;
      for (let i = 0; i < cell.length; i++) {
        const c = cell.charCodeAt(i);
        if (c === 0x0d && cell.charCodeAt(i + 1) === 0x0a) i++;
        if (c === 0x0d || c === 0x0a) breaks++;
      }
    }
    // A CR ending the last cell is the first half of this record's CRLF (in a file whose other lines end in LF).
    if (breaks > 0 && cells[cells.length - 1]?.endsWith('\r')) breaks--;
    this.next = start + 1 + breaks;
    return start;
  }

  lose(): void {
    this.next = undefined;
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
