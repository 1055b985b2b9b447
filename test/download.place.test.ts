import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BodyCheck } from '../src/download/check.js';
import { nameFromUrl, numberedName, safeJoin, sanitizeName } from '../src/download/names.js';
import { commitWhole, linkNoReplace, place } from '../src/download/place.js';
import { NetworkError, UnsafeResultError } from '../src/errors.js';
import { tempDir } from './helpers/tmp.js';

// The invariant: a downloaded file never replaces an existing one, and an existing file is reused only when
// it holds exactly the same bytes (size AND sha256), as a plain file, not through a symlink.

const t = tempDir('genbatch-place-');
afterAll(() => t.cleanup());
let n = 0;
const folder = (): string => {
  const d = join(t.dir, `f${++n}`);
  mkdirSync(d);
  return d;
};
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const BODY = Buffer.from('the downloaded bytes\n');
/** A finished temporary file holding BODY, as the download leaves it. */
const tmpFile = (dir: string): string => {
  const p = join(dir, '.x.png.0123456789ab.part');
  writeFileSync(p, BODY);
  return p;
};
const placeBody = (dir: string, name = 'x.png') => place(tmpFile(dir), dir, name, BODY.length, sha(BODY), false);
const fail = (code: string) => () => {
  throw Object.assign(new Error(`link: ${code}`), { code });
};

describe('place: never replaces a file, reuses only identical bytes', () => {
  it('a free name: the file is placed under it and the temporary file is gone', async () => {
    const dir = folder();
    const r = await placeBody(dir);
    expect(r).toMatchObject({ name: 'x.png', reused: false, renamed: false });
    expect(readFileSync(join(dir, 'x.png'))).toEqual(BODY);
    expect(readdirSync(dir)).toEqual(['x.png']);
  });

  it('a name holding other bytes of the same size is kept: the download goes to "x (2).png" (the sha256 decides, not the size)', async () => {
    const dir = folder();
    const same = Buffer.from(BODY.toString().replace('downloaded', 'DOWNLOADED'));
    expect(same.length).toBe(BODY.length);
    writeFileSync(join(dir, 'x.png'), same);
    const r = await placeBody(dir);
    expect(r).toMatchObject({ name: 'x (2).png', reused: false, renamed: true });
    expect(readFileSync(join(dir, 'x.png'))).toEqual(same);
    expect(readFileSync(join(dir, 'x (2).png'))).toEqual(BODY);
  });

  it('a name holding the same bytes is reused (renamed when it is a numbered name); one of another size is not', async () => {
    const dir = folder();
    writeFileSync(join(dir, 'x.png'), Buffer.concat([BODY, Buffer.from('more')]));
    writeFileSync(join(dir, 'x (2).png'), BODY);
    const tmp = tmpFile(dir);
    const r = await place(tmp, dir, 'x.png', BODY.length, sha(BODY), false);
    expect(r).toMatchObject({ name: 'x (2).png', reused: true, renamed: true });
    expect(existsSync(tmp)).toBe(true); // the caller removes a temporary file that was not placed
    expect(readdirSync(dir).filter((f) => !f.endsWith('.part')).sort()).toEqual(['x (2).png', 'x.png']);
  });

  it('a symlink or a folder under the name is never reused or followed, even to identical bytes', async () => {
    const dir = folder();
    writeFileSync(join(t.dir, `same-${n}.png`), BODY);
    symlinkSync(join(t.dir, `same-${n}.png`), join(dir, 'x.png'));
    mkdirSync(join(dir, 'x (2).png'));
    const r = await placeBody(dir);
    expect(r).toMatchObject({ name: 'x (3).png', reused: false });
    expect(lstatSync(join(dir, 'x.png')).isSymbolicLink()).toBe(true);
  });

  it('a symlink whose own size equals the body size, to identical bytes, is not reused either', async () => {
    const dir = folder();
    const target = `../same-${'s'.repeat(BODY.length - 12)}.png`; // the link's own size is its target's length
    expect(target.length).toBe(BODY.length);
    writeFileSync(join(dir, target), BODY);
    symlinkSync(target, join(dir, 'x.png'));
    expect(lstatSync(join(dir, 'x.png')).size).toBe(BODY.length);
    expect(await placeBody(dir)).toMatchObject({ name: 'x (2).png', reused: false });
  });

  it('every numbered name taken: an unsafe-result error naming the name and the count, and commitWhole leaves no temporary file', async () => {
    const dir = folder();
    writeFileSync(join(dir, 'x.png'), 'other');
    for (let i = 2; i <= 999; i++) writeFileSync(join(dir, `x (${i}).png`), 'other');
    const tmp = join(dir, '.x.png.feedfacecafe.part');
    const err = await commitWhole(tmp, [BODY], BODY.length, sha(BODY), 'image/png', 'x.png', { dir } as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnsafeResultError);
    expect((err as Error).message).toBe(`file name: "x.png" and 998 numbered variants are all taken in ${dir}`);
    expect(existsSync(tmp)).toBe(false);
    expect(readdirSync(dir)).toHaveLength(999);
  });

  it('the 999th name is still tried', async () => {
    const dir = folder();
    writeFileSync(join(dir, 'x.png'), 'other');
    for (let i = 2; i <= 998; i++) writeFileSync(join(dir, `x (${i}).png`), 'other');
    expect(await placeBody(dir)).toMatchObject({ name: 'x (999).png', reused: false });
  });

  it('commitWhole writes the body, places it, and reports size and sha256', async () => {
    const dir = folder();
    const r = await commitWhole(join(dir, '.t.part'), [BODY.subarray(0, 5), BODY.subarray(5)], BODY.length, sha(BODY), 'image/png', 'x.png', { dir } as never);
    expect(r).toMatchObject({ name: 'x.png', size: BODY.length, sha256: sha(BODY), contentType: 'image/png', reused: false });
    expect(readdirSync(dir)).toEqual(['x.png']);
  });
});

describe('linkNoReplace on a filesystem without hard links', () => {
  it.each(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EXDEV'])('link fails with %s: the file is renamed into a free name', (code) => {
    const dir = folder();
    const tmp = tmpFile(dir);
    expect(linkNoReplace(tmp, join(dir, 'x.png'), fail(code))).toBe(true);
    expect(readdirSync(dir)).toEqual(['x.png']);
  });

  it('a taken name is left alone (false), the temporary file kept', () => {
    const dir = folder();
    const tmp = tmpFile(dir);
    writeFileSync(join(dir, 'x.png'), 'mine');
    expect(linkNoReplace(tmp, join(dir, 'x.png'), fail('EPERM'))).toBe(false);
    expect(readFileSync(join(dir, 'x.png'), 'utf8')).toBe('mine');
    expect(existsSync(tmp)).toBe(true);
  });

  it('EEXIST means taken; any other error is thrown', () => {
    const dir = folder();
    const tmp = tmpFile(dir);
    expect(linkNoReplace(tmp, join(dir, 'x.png'), fail('EEXIST'))).toBe(false);
    expect(existsSync(join(dir, 'x.png'))).toBe(false);
    expect(() => linkNoReplace(tmp, join(dir, 'x.png'), fail('EACCES'))).toThrow('link: EACCES');
    expect(existsSync(join(dir, 'x.png'))).toBe(false);
  });
});

describe('BodyCheck: the limits of a body', () => {
  const check = (c: Partial<{ declared: number | null; expected: number | null; maxBytes: number }>) =>
    new BodyCheck({ where: 'https://f/x', declared: null, expected: null, maxBytes: 10, ...c });
  it('a body of exactly the limit passes; one byte more is refused', () => {
    const ok = check({});
    ok.update(Buffer.alloc(10));
    expect(ok.finish()).toEqual({ size: 10, sha256: sha(Buffer.alloc(10)) });
    expect(() => check({}).update(Buffer.alloc(11))).toThrow('body is over the limit of 10 bytes');
  });
  it('a body shorter than Content-Length is a cut body (retried): a network error', () => {
    const c = check({ declared: 8 });
    c.update(Buffer.alloc(5));
    const err = (() => {
      try {
        c.finish();
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).sent).toBe(true); // the request was sent: a GET, retried as such
    expect((err as Error).message).toBe('download of https://f/x: body has 5 bytes, Content-Length said 8');
  });
});

describe('names: cleaned server names and joined paths', () => {
  it('a cut name drops every trailing dot and space before its extension, and a name of exactly 180 bytes is kept whole', () => {
    const stem = `${'a'.repeat(100)} ${'a'.repeat(71)}`; // 172 bytes, then dots and spaces that the cut at 180 leaves last
    expect(sanitizeName(`${stem}. .  . . xyz.png`, 'f')).toBe(`${stem}.png`);
    const exact = `${'b'.repeat(172)} c d.png`; // 180 bytes
    expect(Buffer.byteLength(exact)).toBe(180);
    expect(sanitizeName(exact, 'f')).toBe(exact);
    const spaced = `${'b'.repeat(175)} .png`; // 180 bytes, a stem ending in a space is kept as the server gave it
    expect(sanitizeName(spaced, 'f')).toBe(spaced);
    expect(sanitizeName(`${'d'.repeat(100)} e ${'f'.repeat(100)}.png`, 'f')).toBe(`${'d'.repeat(100)} e ${'f'.repeat(73)}.png`);
  });
  it('device names are prefixed only when the whole name is one', () => {
    expect(sanitizeName('falcon.png', 'f')).toBe('falcon.png');
    expect(sanitizeName('con.png', 'f')).toBe('_con.png');
    expect(sanitizeName('xcom1', 'f')).toBe('xcom1');
  });
  it('numbered names keep only a trailing sane extension', () => {
    expect(numberedName('a.b.png', 2)).toBe('a.b (2).png');
    expect(numberedName('noext', 3)).toBe('noext (3)');
    expect(numberedName('a.tar.verylongextension', 2)).toBe('a.tar.verylongextension (2)');
  });
  it('a NUL in any part is refused, and a path leaving the folder names the path', () => {
    expect(() => safeJoin('/out', 'a', 'b\0c')).toThrow('file path: contains a NUL character');
    expect(() => safeJoin('/out', 'a', '../../x')).toThrow('file path: "a/../../x" resolves outside the output folder');
  });
  it('the name of a URL is its last non-empty segment, decoded when it can be', () => {
    expect(nameFromUrl('https://f/a/b.png/')).toBe('b.png');
    expect(nameFromUrl('https://f/a/%E0%A4%A')).toBe('%E0%A4%A');
    expect(nameFromUrl('https://f/a/b%20c.png')).toBe('b c.png');
    expect(nameFromUrl('https://f/')).toBeNull();
  });
});
