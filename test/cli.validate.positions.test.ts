import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';
import { tempDir } from './helpers/tmp.js';

/** Where `genbatch validate` points a user: did-you-mean on unknown input fields, and CSV rows by file line and row. */

const t = tempDir('genbatch-positions-');
beforeAll(() => ensureBuilt(), 180_000);
afterAll(() => t.cleanup());

const validate = async (name: string, text: string) => {
  writeFileSync(join(t.dir, name), text);
  const r = await genbatch(['validate', name], {}, t.dir);
  return { code: r.code, lines: r.stderr.trim().split('\n') };
};

describe('unknown input fields', () => {
  it('name the nearest field of the model, as an unknown model does (promt -> prompt, qualty -> quality)', async () => {
    const r = await validate('typo.yaml', 'jobs:\n  - id: a\n    model: alpha-image-2\n    input: {promt: a cat, qualty: high}\n  - id: b\n    model: alpha-image-2\n    input: {prompt: a dog, zzzzzz: 1}\n');
    expect(r.code).toBe(2);
    expect(r.lines).toContain('job a (typo.yaml:4) input.promt: unknown field (not accepted by this model; did you mean "prompt"?)');
    expect(r.lines).toContain('job a (typo.yaml:4) input.qualty: unknown field (not accepted by this model; did you mean "quality"?)');
    // Nothing close: no guess.
    expect(r.lines).toContain('job b (typo.yaml:7) input.zzzzzz: unknown field (not accepted by this model)');
  });

  it('an unknown CSV column names the nearest job column', async () => {
    const r = await validate('cols.csv', 'id,modle,input.prompt\na,alpha-image-2,x\n');
    expect(r.lines[0]).toBe('cols.csv:header modle: unknown column "modle" (did you mean "model"? columns are id, model, callback_url, protocol and input.<field>, e.g. input.prompt)');
    // Nothing to suggest for a one-letter name whose every letter would change.
    const short = await validate('short.csv', 'id,p,model\na,x,alpha-image-2\n');
    expect(short.lines[0]).toBe('short.csv:header p: unknown column "p" (columns are id, model, callback_url, protocol and input.<field>, e.g. input.prompt)');
  });

  it('in a CSV job list too, and for a music workflow', async () => {
    const r = await validate('typo.csv', 'id,model,input.prompt,input.custom_mode,input.instrumental,input.styel\nm1,generate-music,a song,false,false,rock\n');
    expect(r.lines).toContain('job m1 (typo.csv:2, row 1) input.styel: unknown field (not accepted by this model; did you mean "style"?)');
  });
});

describe('CSV positions', () => {
  it('name the file line a row starts on as well as the row, past quoted line breaks, CRLF and blank lines', async () => {
    const csv = ['id,model,input.prompt,input.quality', 'a,alpha-image-2,"two\r\nlines",ultra', '', 'b,alpha-image-2,fine,ultra', 'c,alpha-image-2,"x\ny\nz",ultra', 'd,alpha-image-2,ok,ultra'].join('\r\n') + '\r\n';
    const r = await validate('pos.csv', csv);
    expect(r.code).toBe(2);
    const rule = 'input.quality: quality "ultra" is not one of low, medium, high';
    expect(r.lines).toEqual([`job a (pos.csv:2, row 1) ${rule}`, `job b (pos.csv:5, row 2) ${rule}`, `job c (pos.csv:6, row 3) ${rule}`, `job d (pos.csv:9, row 4) ${rule}`]);
  });

  it('count right in a file whose lines end in LF but one in CRLF, after a quoted cell', async () => {
    const r = await validate('mixed.csv', 'id,model,input.prompt,input.quality\n\na,alpha-image-2,"two\nlines",ultra\r\nb,alpha-image-2,x,ultra\n');
    expect(r.lines.map((l) => l.split(')')[0])).toEqual(['job a (mixed.csv:3, row 1', 'job b (mixed.csv:5, row 2']);
  });

  it('a rows source of a YAML entry names the rows file line too', async () => {
    writeFileSync(join(t.dir, 'r.tsv'), 'Prompt\tq\ncat\tlow\n\ndog\tultra\n');
    const r = await validate('rows.yaml', 'jobs:\n  - rows: {file: r.tsv}\n    id: "p-{{row}}"\n    model: alpha-image-2\n    input: {prompt: "{{Prompt}}", quality: "{{q}}"}\n');
    expect(r.lines).toEqual(['job p-2 (rows.yaml:5, r.tsv:4, row 2) input.quality: quality "ultra" is not one of low, medium, high']);
  });
});
