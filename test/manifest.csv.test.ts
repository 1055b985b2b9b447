import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatProblem } from '../src/errors.js';
import { openManifest, validateManifest } from '../src/manifest/index.js';
import { readAll, writeIn } from './helpers/manifest.js';

/** CSV/TSV manifests: columns, schema typing, positions, header and row problems, streaming. */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-csv-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (name: string, text: string | Buffer): string => writeIn(dir, name, text);

const all = readAll;

describe('CSV manifests', () => {
  it('reads one job per row with id, model, callback_url and input.* columns', async () => {
    const p = write('jobs.csv', 'id,model,callback_url,input.prompt,input.size\nc1,alpha-image-2,https://example.com/h,"a cat, sitting",16:9\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ id: 'c1', model: 'alpha-image-2', kind: 'submit', callback_url: 'https://example.com/h', input: { prompt: 'a cat, sitting', size: '16:9' }, where: `${p}:2, row 1`, dir, problems: [] });
  });

  it('types cells by the model schema: numbers, booleans, JSON arrays and objects; empty cells are absent', async () => {
    const p = write(
      'jobs.csv',
      [
        'id,model,input.prompt,input.n,input.image_urls,input.size,input.enable_safety_checker,input.output_format',
        'a,dream-5.0-lite,1984,3,"[""https://x/a.png"",""https://x/b.png""]","{""width"":1024,""height"":768}",,',
        'b,vendora/dream-v5.0-flash/text-to-image,42,,,16:9,FALSE,png',
      ].join('\n') + '\n',
    );
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]?.input).toEqual({ prompt: '1984', n: 3, image_urls: ['https://x/a.png', 'https://x/b.png'], size: { width: 1024, height: 768 } });
    expect(jobs[1]?.input).toMatchObject({ prompt: '42', size: '16:9', enable_safety_checker: false, output_format: 'png' });
  });

  it('supports dotted and indexed paths, and reads undescribed fields of open models by their look', async () => {
    const p = write('jobs.csv', 'model,input.prompt,input.size.width,input.size.height,input.image_urls[0],input.guidance,input.flag,input.tags\ndream-5.0-lite,x,800,600,https://x/a.png,,,\nalpha-image-4o,y,,,,7.5,true,"[""a""]"\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]?.input).toEqual({ prompt: 'x', size: { width: 800, height: 600 }, image_urls: ['https://x/a.png'] });
    expect(jobs[1]?.input).toMatchObject({ prompt: 'y', guidance: 7.5, flag: true, tags: ['a'] });
  });

  it('reads chat rows with a JSON messages cell and a protocol column', async () => {
    const p = write('chat.csv', 'id,model,protocol,input.messages,input.stream\nq1,vendorb/verse-4,messages,"[{""role"":""user"",""content"":""hi""}]",true\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]).toMatchObject({ id: 'q1', kind: 'chat', protocol: 'messages', input: { messages: [{ role: 'user', content: 'hi' }], stream: true } });
  });

  it('keeps a cell that cannot be typed as text, so the schema names the rule', async () => {
    const p = write('jobs.csv', 'id,model,input.prompt,input.n\na,dream-4,x,three\n');
    const { problems } = await all(p);
    expect(problems).toEqual([`job a (${p}:2, row 1) input.n: must be a number`]);
  });

  it('reports header problems once and row problems with their row number', async () => {
    const p = write('jobs.csv', 'id,model,prompt,input.prompt,id\na,alpha-image-2,x,y,a2\nb,alpha-image-3,x,y,b2\nc,alpha-image-2,x\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.id)).toEqual(['a', 'b']);
    expect(problems).toEqual([
      `${p}:header prompt: unknown column "prompt" (columns are id, model, callback_url, protocol and input.<field>, e.g. input.prompt)`,
      `${p}:header id: column "id" appears twice`,
      `${p}:4, row 3: has 3 cells; the header has 5`,
      `job b (${p}:3, row 2) model: unknown model "alpha-image-3"; did you mean "alpha-image-2"? (see \`genbatch models\`)`,
    ]);
  });

  it('reports columns that set the same field twice (one a part of the other, or one path spelled two ways): no cell is dropped silently', async () => {
    const p = write(
      'jobs.csv',
      'id,model,input.prompt,input.size,input.size.width,input.size.height,input.image_urls,input.image_urls[0],input.image_urls.[1]\nj1,dream-5.0-lite,a,2K,800,600,"[""https://x/a.png""]",https://x/b.png,https://x/c.png\n',
    );
    const { problems } = await all(p);
    expect(problems).toEqual([
      `${p}:header input.size.width: sets a part of input.size, which column "input.size" sets whole: use one or the other`,
      `${p}:header input.size.height: sets a part of input.size, which column "input.size" sets whole: use one or the other`,
      `${p}:header input.image_urls[0]: sets a part of input.image_urls, which column "input.image_urls" sets whole: use one or the other`,
      `${p}:header input.image_urls.[1]: sets a part of input.image_urls, which column "input.image_urls" sets whole: use one or the other`,
    ]);
    const same = write('same.csv', 'model,input.prompt,input.a[0],input.a.[0]\nalpha-image-4o,x,1,2\n');
    expect((await all(same)).problems).toEqual([`${same}:header input.a.[0]: sets the same field as column "input.a[0]"`]);
  });

  it('requires a model column, and reports malformed quoting with its row after the good rows', async () => {
    const noModel = write('nomodel.csv', 'id,input.prompt\na,x\n');
    expect((await all(noModel)).problems).toContain(`${noModel}:header model: a model column is required`);
    const p = write('bad.csv', 'id,model,input.prompt\na,alpha-image-2,ok\nb,alpha-image-2,"x"\n"c,alpha-image-2,unclosed\n');
    const r = await validateManifest(p);
    expect(r.jobs).toBe(2);
    expect(r.problems.map(formatProblem)).toEqual([`${p}:row 3: CSV syntax error: the quoted field opened on line 4 is never closed (a closing " is missing)`]);
  });

  it('reports a file with only a header', async () => {
    const p = write('head.csv', 'id,model,input.prompt\n');
    expect((await validateManifest(p)).problems.map(formatProblem)).toEqual([`${p}:header: no jobs: the file has no rows after its header line`]);
  });

  it('reports an empty file and a missing file', async () => {
    const empty = write('empty.csv', '');
    expect((await validateManifest(empty)).problems.map(formatProblem)).toEqual([`${empty}: ${empty} is empty (a header line naming the columns is required)`]);
    const missing = join(dir, 'missing.csv');
    expect((await validateManifest(missing)).problems.map(formatProblem)).toEqual([`${missing}: file not found: ${missing}`]);
  });

  it('reads TSV without quoting, so a cell may start with a quote', async () => {
    const p = write('jobs.tsv', 'id\tmodel\tinput.prompt\nt1\talpha-image-2\t"GIGGLE" painted on a wall\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]?.input.prompt).toBe('"GIGGLE" painted on a wall');
  });

  it('derives ids for rows without one', async () => {
    const p = write('jobs.csv', 'model,input.prompt\nalpha-image-2,x\nalpha-image-2,x\n');
    const ids = (await all(p)).jobs.map((j) => j.id);
    expect(ids[0]).toMatch(/^j-[0-9a-f]{12}$/);
    expect(ids[1]).toBe(`${ids[0]}-2`);
  });

  it('yields jobs one at a time: the first job of a large file arrives before the rest is read', async () => {
    const rows = ['id,model,input.prompt'];
    for (let i = 0; i < 50_000; i++) rows.push(`r${i},alpha-image-2,prompt ${i}`);
    rows.push('bad,alpha-image-2,"unclosed quote at the very end');
    const p = write('big.csv', rows.join('\n') + '\n');
    const m = await openManifest(p);
    const it = m.jobs()[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value?.id).toBe('r0');
    // Stop early: an eager reader would have met the malformed last row by now.
    await it.return?.(undefined);
    expect(m.problems).toEqual([]);
    // A full pass does meet it.
    expect((await validateManifest(p)).problems.map((x) => x.message)).toEqual([expect.stringContaining('is never closed')]);
  });
});
