import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openManifest } from '../src/manifest/index.js';
import { readAll, writeIn } from './helpers/manifest.js';

/** Gaps found by the manifest audit (issue 2): unsafe keys, list indexes, nesting, big matrices, ids, callbacks, files, messages. */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-audit-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (name: string, text: string | Buffer): string => writeIn(dir, name, text);

const all = readAll;

describe('prototype keys', () => {
  it('a CSV column input.__proto__.prompt is a header problem and does not make a later empty prompt valid', async () => {
    const p = write('jobs.csv', 'id,model,input.prompt,input.__proto__.prompt\na,alpha-image-2,,polluted\nb,alpha-image-2,,\n');
    const { problems } = await all(p);
    expect(({} as Record<string, unknown>).prompt).toBeUndefined();
    expect(problems).toContain(`${p}:header input.__proto__.prompt: the key "__proto__" is not allowed (it names JavaScript object machinery, not a field)`);
    expect(problems).toContain(`job a (${p}:2, row 1) input.prompt: is required`);
    expect(problems).toContain(`job b (${p}:3, row 2) input.prompt: is required`);
  });

  it('YAML defaults and jobs with __proto__, constructor or prototype keys are rejected; the job is still checked', async () => {
    const p = write('m.yaml', 'defaults:\n  input:\n    __proto__:\n      prompt: x\njobs:\n  - id: a\n    model: alpha-image-2\n    input:\n      constructor: {prompt: y}\n      size: 16:9\n');
    const { jobs, problems } = await all(p);
    expect(jobs).toHaveLength(1);
    expect(problems).toContain(`${p}:3 defaults.input.__proto__: the key "__proto__" is not allowed (it names JavaScript object machinery, not a field)`);
    expect(problems).toContain(`job a (${p}:9) input.constructor: the key "constructor" is not allowed (it names JavaScript object machinery, not a field)`);
    expect(problems).toContain(`job a (${p}:8) input.prompt: is required`);
  });

  it('a JSON cell with a __proto__ key is reported', async () => {
    const p = write('jobs.csv', 'id,model,input.prompt,input.size\na,dream-5.0-lite,hi,"{""__proto__"": {""x"": 1}}"\n');
    const { problems } = await all(p);
    expect(problems.some((x) => x.includes('input.size.__proto__: the key "__proto__" is not allowed'))).toBe(true);
  });
});

describe('list indexes in CSV columns', () => {
  it('an index over 1000 is a header problem (no giant sparse list)', async () => {
    const p = write('jobs.csv', 'id,model,input.prompt,input.image_urls[99999999]\na,alpha-image-2-edit,hi,https://example.com/a.png\n');
    const { problems } = await all(p);
    expect(problems).toContain(`${p}:header input.image_urls[99999999]: list index [99999999] is over 1000`);
  });

  it('indexes must run from [0] without gaps', async () => {
    const p = write('jobs.csv', 'id,model,input.prompt,input.image_urls[1]\na,alpha-image-2-edit,hi,https://example.com/a.png\n');
    const { problems } = await all(p);
    expect(problems).toContain(`${p}:header input.image_urls: list columns must number their items from [0] without gaps: no column for [0]`);
    expect(problems.some((x) => x.includes('image_urls[0]: must be a string'))).toBe(false);
  });

  it('contiguous indexes are fine', async () => {
    const p = write('jobs.csv', 'id,model,input.prompt,input.image_urls[0],input.image_urls[1]\na,alpha-image-2-edit,hi,https://example.com/a.png,https://example.com/b.png\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]?.input.image_urls).toEqual(['https://example.com/a.png', 'https://example.com/b.png']);
  });
});

describe('nesting depth', () => {
  it('a JSON cell nested 20,000 deep is a problem, not a crash', async () => {
    const deep = '['.repeat(20000) + ']'.repeat(20000);
    const p = write('jobs.csv', `id,model,input.prompt,input.image_urls\na,alpha-image-2-edit,hi,${deep}\n`);
    const { problems } = await all(p);
    expect(problems.some((x) => x.startsWith(`job a (${p}:2, row 1) input.image_urls[0]`) && x.endsWith(': nested more than 64 levels deep'))).toBe(true);
  });

  it('a column path 5,000 levels deep is a header problem', async () => {
    const p = write('jobs.csv', `id,model,input.${Array(5000).fill('a').join('.')}\na,alpha-image-2,1\n`);
    const { problems } = await all(p);
    expect(problems.some((x) => x.startsWith(`${p}:header input.a.a.a`) && x.endsWith('the column path is 64 levels deep at most (has 5000)'))).toBe(true);
  });

  it('a YAML value nested 100 deep is a problem', async () => {
    const p = write('m.yaml', `jobs:\n  - id: a\n    model: alpha-image-2\n    input:\n      prompt: hi\n      extra: ${'['.repeat(100)}${']'.repeat(100)}\n`);
    const { problems } = await all(p);
    expect(problems.some((x) => x.includes('input.extra[0]') && x.endsWith('nested more than 64 levels deep'))).toBe(true);
  });
});

describe('big matrices', () => {
  const tenValues = '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]';
  it('combinations are made one at a time: the first jobs of a 10,000,000-combination matrix come at once', async () => {
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    const p = write('m.yaml', `jobs:\n  - id: "j{{a}}{{b}}{{c}}{{d}}{{e}}{{f}}{{g}}"\n    model: alpha-image-2\n    input: {prompt: "x {{a}}"}\n    matrix:\n${keys.map((k) => `      ${k}: ${tenValues}`).join('\n')}\n`);
    const m = await openManifest(p);
    const ids: string[] = [];
    const heapBefore = process.memoryUsage().heapUsed;
    for await (const j of m.jobs()) {
      expect(j.problems).toEqual([]);
      ids.push(j.id);
      if (ids.length === 3) break;
    }
    expect(ids).toEqual(['j0000000', 'j0000001', 'j0000002']);
    // Building every combination up front holds gigabytes here.
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(256 * 1024 * 1024);
  });

  it('product() is a generator: the first of 10^9 combinations comes without building the rest', async () => {
    const { product } = await import('../src/manifest/matrix.js');
    const matrix = Object.fromEntries('abcdefghi'.split('').map((k) => [k, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]));
    const it = product(matrix);
    expect(it.next().value).toEqual('abcdefghi'.split('').map((k) => [k, 0]));
    expect(it.next().value?.[8]).toEqual(['i', 1]);
  });

  it('more than 10,000,000 combinations in one entry is a problem', async () => {
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const p = write('m.yaml', `jobs:\n  - id: "j{{a}}"\n    model: alpha-image-2\n    input: {prompt: "x {{a}}{{b}}{{c}}{{d}}{{e}}{{f}}{{g}}{{h}}"}\n    matrix:\n${keys.map((k) => `      ${k}: ${tenValues}`).join('\n')}\n`);
    const { jobs, problems } = await all(p);
    expect(jobs).toEqual([]);
    expect(problems).toEqual([`${p}:5 matrix: makes 1.00e8 combinations; at most 10,000,000 per entry`]);
  });

  it('keeps the order: the first key varies slowest', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: "j-{{s}}-{{n}}"\n    model: alpha-image-2\n    input: {prompt: "x"}\n    matrix:\n      s: [a, b]\n      n: [1, 2, 3]\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs.map((j) => j.id)).toEqual(['j-a-1', 'j-a-2', 'j-a-3', 'j-b-1', 'j-b-2', 'j-b-3']);
  });
});

describe('job entries with key problems', () => {
  it('an unknown key or a numeric id is reported and the job is still checked from its known keys', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: a\n    model: alpha-image-2\n    colour: red\n    input:\n      prompt: ""\n  - id: 42\n    model: alpha-image-2\n    input: {size: "99:1", prompt: hi}\n  - id: c\n    model: 7\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.id)).toEqual(['a', '42', 'c']);
    expect(problems).toHaveLength(5);
    expect(problems).toEqual(expect.arrayContaining([
      expect.stringMatching(/^job a \(.*:4\) colour: unknown key "colour"; allowed keys: id, model, input, callback_url, protocol, /),
      `job a (${p}:6) input.prompt: must not be empty`,
      `job 42 (${p}:7) id: must be a string (a job id)`,
      expect.stringMatching(new RegExp(`^job 42 \\(${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:9\\) input.size: size "99:1" is not one of`)),
      `job c (${p}:11) model: must be a string (a model id)`,
    ]));
  });
});

describe('reserved job ids', () => {
  it('ids naming the output folder files are rejected; similar ids are fine', async () => {
    const ids = ['report.json', 'report.csv', 'report.md', 'REPORT.HTML', 'state.db', 'state.db-wal', 'report', 'state', 'report.json.1'];
    const p = write('jobs.csv', `id,model,input.prompt\n${ids.map((id) => `${id},alpha-image-2,hi`).join('\n')}\n`);
    const { problems } = await all(p);
    expect(problems).toHaveLength(6);
    expect(problems).toContain(`job report.json (${p}:2, row 1) id: "report.json" is reserved: the output folder holds genbatch's own report files (report.json, report.csv, report.md, report.html)`);
    expect(problems).toContain(`job state.db-wal (${p}:7, row 6) id: "state.db-wal" is reserved: the output folder holds genbatch's own state database (state.db and its state.db-* files)`);
    expect(problems.some((x) => x.startsWith('job REPORT.HTML'))).toBe(true);
  });
});

describe('callback_url', () => {
  it('rejects localhost, literal private and loopback addresses and malformed hosts; accepts public hosts', async () => {
    const urls = ['https://127.0.0.1/', 'https://10.1.2.3/', 'https://localhost:8443/', 'https://exa mple.com/hook', 'https://[::1]/h', 'https://192.168.0.5/h', 'https://[::ffff:10.0.0.1]/h', 'https://0x7f000001/h', 'https://example.com/hook', 'https://8.8.8.8/h', 'https://172.32.0.1/h'];
    const p = write('jobs.csv', `id,model,callback_url,input.prompt\n${urls.map((u, i) => `c${i},alpha-image-2,${u},hi`).join('\n')}\n`);
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job c0 (${p}:2, row 1) callback_url: host 127.0.0.1 is local or private: the service calls back over the internet, so it needs a public host`,
      `job c1 (${p}:3, row 2) callback_url: host 10.1.2.3 is local or private: the service calls back over the internet, so it needs a public host`,
      `job c2 (${p}:4, row 3) callback_url: host localhost is local or private: the service calls back over the internet, so it needs a public host`,
      `job c3 (${p}:5, row 4) callback_url: "https://exa mple.com/hook" is not a valid URL (check the host name)`,
      `job c4 (${p}:6, row 5) callback_url: host [::1] is local or private: the service calls back over the internet, so it needs a public host`,
      `job c5 (${p}:7, row 6) callback_url: host 192.168.0.5 is local or private: the service calls back over the internet, so it needs a public host`,
      `job c6 (${p}:8, row 7) callback_url: host [::ffff:a00:1] is local or private: the service calls back over the internet, so it needs a public host`,
      `job c7 (${p}:9, row 8) callback_url: host 127.0.0.1 is local or private: the service calls back over the internet, so it needs a public host`,
    ]);
  });
});

describe('messages', () => {
  it('an unclosed CSV quote names the line where the quoted field opened (LF and CRLF)', async () => {
    const lines = ['id,model,input.prompt', 'a,alpha-image-2,hi', 'b,alpha-image-2,"open', 'c,alpha-image-2,hi', 'd,alpha-image-2,hi', 'e,alpha-image-2,hi'];
    for (const eol of ['\n', '\r\n']) {
      const p = write(`q${eol.length}.csv`, lines.join(eol) + eol);
      const { problems } = await all(p);
      expect(problems).toEqual([`${p}:row 2: CSV syntax error: the quoted field opened on line 3 is never closed (a closing " is missing)`]);
    }
  });

  it('file: and ftp: image references say the URL scheme is unsupported', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: a\n    model: alpha-image-2-edit\n    input:\n      prompt: hi\n      image_urls: ["file:///etc/passwd", "ftp://x/y.png"]\n');
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job a (${p}:6) input.image_urls[0]: "file:///etc/passwd" uses the unsupported URL scheme file:; an image is an http(s) URL, a data: URL or a local file path`,
      `job a (${p}:6) input.image_urls[1]: "ftp://x/y.png" uses the unsupported URL scheme ftp:; an image is an http(s) URL, a data: URL or a local file path`,
    ]);
  });
});

describe('local image formats and sizes per model', () => {
  const gif = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
  it('a GIF named .png is refused by dream-5.0-lite-edit (JPEG/PNG only) and accepted by dream-5.0-lite', async () => {
    write('ref.png', gif);
    const p = write('m.yaml', 'jobs:\n  - id: e\n    model: dream-5.0-lite-edit\n    input: {prompt: hi, image_urls: [ref.png]}\n  - id: b\n    model: dream-5.0-lite\n    input: {prompt: hi, image_urls: [ref.png]}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([`job e (${p}:4) input.image_urls[0]: local file "ref.png" is GIF (from its bytes); dream-5.0-lite-edit takes JPEG, PNG only`]);
  });

  it('imagine-image checks the format and the 10.0 MB limit of local files', async () => {
    write('anim.webp', gif);
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
    write('big.png', Buffer.concat([png, Buffer.alloc(10_000_001 - png.length)]));
    write('ok.png', png);
    const p = write('m.yaml', 'jobs:\n  - id: g\n    model: imagine-image\n    input: {prompt: hi, image_urls: [anim.webp]}\n  - id: big\n    model: imagine-image\n    input: {prompt: hi, image_urls: [big.png]}\n  - id: ok\n    model: imagine-image\n    input: {prompt: hi, image_urls: [ok.png]}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job g (${p}:4) input.image_urls[0]: local file "anim.webp" is GIF (from its bytes); imagine-image takes JPEG, PNG, WebP only`,
      `job big (${p}:7) input.image_urls[0]: local file "big.png" has 10.0 MB (10,000,001 bytes); imagine-image takes images of at most 10.0 MB (10,000,000 bytes)`,
    ]);
  });
});

describe('JSON Schema for editors', () => {
  it('lists the model ids and describes each model input; the example manifests still pass', async () => {
    const { manifestJsonSchema } = await import('../src/manifest/index.js');
    const { parse } = await import('yaml');
    const { readFileSync, readdirSync } = await import('node:fs');
    // ajv arrives with fastify (a dependency); used here only to check the generated schema.
    const { Ajv } = (await import('ajv')) as unknown as { Ajv: new (o: object) => { compile(s: object): ((d: unknown) => boolean) & { errors?: unknown } } };
    const check = new Ajv({ strict: false, allErrors: true }).compile(manifestJsonSchema());
    const jobs = (list: unknown[]) => ({ jobs: list });
    expect(check(jobs([{ id: 'a', model: 'alpha-image-2', input: { prompt: 'x', size: '16:9' } }]))).toBe(true);
    expect(check(jobs([{ id: 'a', model: 'alpha-imgae-2', input: { prompt: 'x' } }]))).toBe(false);
    expect(check(jobs([{ id: 'a', model: 'alpha-image-2', input: { prompt: 'x', size: 7 } }]))).toBe(false);
    expect(check(jobs([{ id: 'a', model: 'alpha-image-2', input: { prompt: 'x', colour: 'red' } }]))).toBe(false);
    expect(check(jobs([{ id: 'a', model: 'somevendor/some-model', protocol: 'messages', input: { messages: [] } }]))).toBe(true);
    expect(check(jobs([{ id: 'a-{{n}}', model: '{{m}}', input: { prompt: 'x', size: '{{s}}' }, matrix: { m: ['alpha-image-2'], n: [1], s: ['1:1'] } }]))).toBe(true);
    expect(check(jobs([{ id: 'a', model: 'alpha-image-2', input: { size: '16:9' } }]))).toBe(true);
    const dirName = join(import.meta.dirname, '..', 'manifests');
    for (const name of readdirSync(dirName).filter((n) => n.endsWith('.yaml'))) {
      const ok = check(parse(readFileSync(join(dirName, name), 'utf8')));
      expect(ok, `${name}: ${JSON.stringify(check.errors)}`).toBe(true);
    }
  });
});

describe('very deep YAML', () => {
  it('thousands of nested levels are reported as too deep, not as a syntax error or a crash', async () => {
    const p = write('m.yaml', `jobs:\n  - id: a\n    model: alpha-image-2\n    input:\n      prompt: hi\n      x: ${'['.repeat(20000)}${']'.repeat(20000)}\n`);
    const { problems } = await all(p);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.every((x) => x.endsWith('too deeply nested to read (values may be nested at most 64 levels)'))).toBe(true);
  });
});
