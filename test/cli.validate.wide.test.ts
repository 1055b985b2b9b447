import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Manifests with more columns or fields than any job holds are refused with exit 2 and one clear
 * line (issue #16 item 7): a CSV with 130,000 `input.*` columns crashed validate with exit 70
 * (Maximum call stack size exceeded from `issues.push(...zodIssues())`).
 */

const tmp = tempDir('genbatch-wide-');
beforeAll(() => ensureBuilt(), 180_000);
afterAll(() => tmp.cleanup());

/** A CSV job list with `n` input columns, every cell of its one row filled. */
function wideCsv(name: string, n: number): string {
  const head = ['id', 'model'];
  const row = ['wide', 'alpha-image-2'];
  for (let i = 0; i < n; i++) {
    head.push(`input.f${i}`);
    row.push('x');
  }
  const path = join(tmp.dir, name);
  writeFileSync(path, `${head.join(',')}\n${row.join(',')}\n`);
  return path;
}

describe('validate refuses manifests wider than any job', () => {
  it('a CSV job list with 130,000 input columns: exit 2 naming the file and the 10,000-column limit', async () => {
    const path = wideCsv('wide.csv', 130_000);
    const r = await genbatch(['validate', path]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `${path}: the header has 130,002 columns; a CSV/TSV file has at most 10,000\n` });
  });

  it('a CSV row filling 5,000 input columns: exit 2 naming the job, the row and the 1,000-field limit', async () => {
    const path = wideCsv('fields.csv', 5000);
    const r = await genbatch(['validate', path]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `job wide (${path}:2, row 1) input: has more than 1,000 fields (keys and list items, counted at every depth); at most 1,000\n` });
  });

  it('a rows file with 130,000 columns: exit 2 naming the job, its line and rows.file', async () => {
    const cols = Array.from({ length: 130_000 }, (_, i) => `c${i}`);
    writeFileSync(join(tmp.dir, 'rows.csv'), `${cols.join(',')}\n${cols.map(() => 'x').join(',')}\n`);
    const path = join(tmp.dir, 'rows.yaml');
    writeFileSync(path, 'jobs:\n  - id: "r-{{row}}"\n    model: alpha-image-2\n    rows: {file: rows.csv}\n    input: {prompt: "{{c0}}"}\n');
    const r = await genbatch(['validate', path]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `${path}:4 rows.file: the header has 130,000 columns; a CSV/TSV file has at most 10,000\n` });
  });

  it('a YAML job whose input lists 131,000 items: exit 2 with one line, not one per item', async () => {
    const path = join(tmp.dir, 'list.yaml');
    writeFileSync(path, `jobs:\n  - id: many\n    model: alpha-image-2\n    input:\n      prompt: a cat\n      image_urls: [${Array(131_000).fill('1').join(',')}]\n`);
    const r = await genbatch(['validate', path]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `job many (${path}:4) input: has more than 1,000 fields (keys and list items, counted at every depth); at most 1,000\n` });
  });
});
