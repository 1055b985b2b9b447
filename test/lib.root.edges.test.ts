import { closeSync, existsSync, linkSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join, sep } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UnsafePathError } from '../src/errors.js';
import { nameProblem, realpathOrAncestor, Root, within } from '../src/lib/root.js';
import { tempDir } from './helpers/tmp.js';

/**
 * src/lib/root.ts, each operation at its edges, in this process (so that a mutant of it is seen): what a
 * missing name, a file where a folder should be, a folder where a file should be, and the root itself give.
 * The link and `..` refusals are in lib.root.test.ts. Real files in a temp folder.
 */
const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function setup(): { dir: string; root: Root } {
  const t = tempDir('genbatch-root-edges-');
  cleanups.push(t.cleanup);
  mkdirSync(join(t.dir, 'root', 'job'), { recursive: true });
  writeFileSync(join(t.dir, 'root', 'job', 'a.txt'), 'abc');
  return { dir: t.dir, root: Root.open(join(t.dir, 'root')) };
}

/** The UnsafePathError `fn` throws: its path and reason. */
function refusal(fn: () => unknown): { path: string; what: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UnsafePathError);
    return { path: (err as UnsafePathError).path, what: (err as UnsafePathError).what };
  }
  throw new Error('not refused');
}

describe('the name rules, by their text', () => {
  it('each rule broken gives its own reason; a plain nested name gives none', () => {
    expect(nameProblem('')).toBe('is an empty name');
    expect(nameProblem('a\0b')).toBe('holds a NUL character');
    expect(nameProblem('a\\b')).toBe('holds a backslash');
    expect(nameProblem('/a')).toBe('is an absolute name');
    expect(nameProblem('a//b')).toBe('has an empty or "." part');
    expect(nameProblem('a/./b')).toBe('has an empty or "." part');
    expect(nameProblem('a/')).toBe('has an empty or "." part');
    expect(nameProblem('a/../b')).toBe('has a ".." part');
    expect(nameProblem('..')).toBe('has a ".." part');
    for (const ok of ['a', 'a/b/c.png', '..a', 'a..', '.hidden', 'a b/c']) expect(nameProblem(ok), ok).toBeNull();
  });

  it('within: the folder itself and what is below it, not a sibling that shares its start nor its parent', () => {
    expect(within('/x/out', '/x/out')).toBe(true);
    expect(within('/x/out', '/x/out/a/b')).toBe(true);
    expect(within('/x/out', '/x/out2')).toBe(false);
    expect(within('/x/out', '/x/out2/a')).toBe(false);
    expect(within('/x/out', '/x')).toBe(false);
    expect(within('/x/out', '/x/out/../y')).toBe(false);
    expect(within('/x/out', '/x/out/..a')).toBe(true);
  });

  it('realpathOrAncestor: a missing tail is kept under the realpath of the nearest folder that exists', () => {
    const { dir, root } = setup();
    symlinkSync(root.dir, join(dir, 'alias'));
    expect(realpathOrAncestor(join(dir, 'alias'))).toBe(root.real);
    expect(realpathOrAncestor(join(dir, 'alias', 'new', 'deeper'))).toBe(join(root.real, 'new', 'deeper'));
    // A file on the way (ENOTDIR): the path is taken from the file's folder on.
    expect(realpathOrAncestor(join(dir, 'alias', 'job', 'a.txt', 'x'))).toBe(join(root.real, 'job', 'a.txt', 'x'));
  });

  it('realpathOrAncestor: a folder missing just below the filesystem root keeps its whole name', () => {
    const missing = join(sep, `genbatch-no-such-folder-${process.pid}`, 'a', 'b');
    expect(realpathOrAncestor(missing)).toBe(missing);
  });

  it('realpathOrAncestor: a link loop on the way is an error, not a missing folder to walk past', () => {
    const { dir } = setup();
    symlinkSync(join(dir, 'loop'), join(dir, 'loop'));
    expect(() => realpathOrAncestor(join(dir, 'loop', 'x'))).toThrow(expect.objectContaining({ code: 'ELOOP' }));
  });
});

describe('Root operations at their edges', () => {
  it('open: made with its parents when asked; a missing folder without create, and a file, are refused', () => {
    const { dir } = setup();
    const made = Root.open(join(dir, 'new', 'out'), { create: true });
    expect(statSync(made.dir).isDirectory()).toBe(true);
    expect(made.dir).toBe(join(dir, 'new', 'out'));
    expect(() => Root.open(join(dir, 'missing'))).toThrow(/ENOENT/);
    expect(refusal(() => Root.open(join(dir, 'root', 'job', 'a.txt')))).toEqual({ path: join(dir, 'root', 'job', 'a.txt'), what: 'is not a folder' });
  });

  it('path: the absolute path of a good name; a bad one is refused naming it, a NUL shown as \\0', () => {
    const { root } = setup();
    expect(root.path('job/a.txt')).toBe(join(root.dir, 'job', 'a.txt'));
    expect(refusal(() => root.path('job/x\0y'))).toEqual({ path: join(root.dir, 'job', 'x\\0y'), what: 'holds a NUL character' });
    expect(refusal(() => root.path('../x')).what).toBe('has a ".." part');
  });

  it('nameOf: the slash-separated name under the root; null for the root itself and for a path outside', () => {
    const { dir, root } = setup();
    expect(root.nameOf(join(root.dir, 'job', 'a.txt'))).toBe('job/a.txt');
    expect(root.nameOf(join(root.dir, 'job', 'a.txt').split(sep).join('/'))).toBe('job/a.txt');
    expect(root.nameOf(root.dir)).toBeNull();
    expect(root.nameOf(join(dir, 'elsewhere', 'a.txt'))).toBeNull();
    expect(root.nameOf(`${root.dir}2/a.txt`)).toBeNull();
  });

  it('a file where a folder is needed is refused, for every operation that walks the folders', async () => {
    const { root } = setup();
    const file = join(root.dir, 'job', 'a.txt');
    const notFolder = { path: file, what: 'is not a folder' };
    expect(refusal(() => root.lstat('job/a.txt/x'))).toEqual(notFolder);
    expect(refusal(() => root.openRead('job/a.txt/x'))).toEqual(notFolder);
    expect(refusal(() => root.createNew('job/a.txt/x'))).toEqual(notFolder);
    expect(refusal(() => root.mkdirs('job/a.txt/x'))).toEqual(notFolder);
    expect(refusal(() => root.checkDir('job/a.txt'))).toEqual(notFolder);
    expect(refusal(() => root.list('job/a.txt'))).toEqual(notFolder);
    expect(refusal(() => root.remove('job/a.txt/x'))).toEqual(notFolder);
    expect(refusal(() => root.rename('job/a.txt', 'job/a.txt/x'))).toEqual(notFolder);
    await expect(root.hash('job/a.txt/x')).rejects.toBeInstanceOf(UnsafePathError);
    expect(readFileSync(file, 'utf8')).toBe('abc');
  });

  it('a missing folder on the way reads as missing (null or false), and nothing is made by a read', async () => {
    const { root } = setup();
    expect(root.lstat('none/a.txt')).toBeNull();
    expect(root.lstat('job/none.txt')).toBeNull();
    expect(root.openRead('none/a.txt')).toBeNull();
    expect(root.readStream('none/a.txt')).toBeNull();
    expect(await root.hash('none/a.txt')).toBeNull();
    expect(root.checkDir('none')).toBeNull();
    expect(root.checkDir('none/deeper')).toBeNull();
    expect(root.list('none')).toBeNull();
    expect(root.remove('none/a.txt')).toBe(false);
    expect(root.removeDir('none')).toBe(false);
    expect(() => root.rename('none/a.txt', 'job/b.txt')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(existsSync(join(root.dir, 'none'))).toBe(false);
  });

  it('mkdirs and checkDir: the root itself by the empty name; folders made all the way and found again', () => {
    const { root } = setup();
    expect(root.mkdirs('')).toBe(root.dir);
    expect(root.checkDir('')).toBe(root.dir);
    expect(root.mkdirs('x/y/z')).toBe(join(root.dir, 'x', 'y', 'z'));
    expect(statSync(join(root.dir, 'x', 'y', 'z')).isDirectory()).toBe(true);
    expect(root.mkdirs('x/y/z')).toBe(join(root.dir, 'x', 'y', 'z'));
    expect(root.checkDir('x/y')).toBe(join(root.dir, 'x', 'y'));
    expect(refusal(() => root.mkdirs('x/../y')).what).toBe('has a ".." part');
    expect(refusal(() => root.checkDir('/x')).what).toBe('is an absolute name');
  });

  it('lstat: the entry itself (a link is a link, not what it points to)', () => {
    const { root } = setup();
    symlinkSync('a.txt', join(root.dir, 'job', 'l'));
    expect(root.lstat('job/a.txt')!.size).toBe(3);
    expect(root.lstat('job/l')!.isSymbolicLink()).toBe(true);
    expect(root.lstat('job')!.isDirectory()).toBe(true);
  });

  it('openRead and readStream: a regular file with its size; a folder is not a regular file', async () => {
    const { root } = setup();
    const got = root.openRead('job/a.txt')!;
    expect(got.size).toBe(3);
    closeSync(got.fd);
    const s = root.readStream('job/a.txt')!;
    const chunks: Buffer[] = [];
    for await (const c of s.stream) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('abc');
    expect(s.size).toBe(3);
    expect(refusal(() => root.openRead('job'))).toEqual({ path: join(root.dir, 'job'), what: 'is not a regular file' });
  });

  it('hash: the size and sha256 of the bytes read; an empty file too', async () => {
    const { root } = setup();
    expect(await root.hash('job/a.txt')).toEqual({ size: 3, sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' });
    writeFileSync(join(root.dir, 'job', 'empty'), '');
    expect(await root.hash('job/empty')).toEqual({ size: 0, sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' });
  });

  it('createNew: a new file with the mode asked, its folders made; never an existing name', () => {
    const { root } = setup();
    const { fd, path } = root.createNew('job/new/b.bin', 0o600);
    writeSync(fd, 'xy');
    closeSync(fd);
    expect(path).toBe(join(root.dir, 'job', 'new', 'b.bin'));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const dflt = root.createNew('job/c.bin');
    closeSync(dflt.fd);
    expect(statSync(dflt.path).mode & 0o777).toBe(0o644 & ~process.umask());
    expect(() => root.createNew('job/a.txt')).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(readFileSync(join(root.dir, 'job', 'a.txt'), 'utf8')).toBe('abc');
  });

  it('link: a hard link under the root, its folders made; never over an existing name', () => {
    const { dir, root } = setup();
    writeFileSync(join(dir, 'src.bin'), 'data');
    const p = root.link(join(dir, 'src.bin'), 'exp/d/src.bin');
    expect(p).toBe(join(root.dir, 'exp', 'd', 'src.bin'));
    expect(statSync(p).ino).toBe(statSync(join(dir, 'src.bin')).ino);
    expect(() => root.link(join(dir, 'src.bin'), 'job/a.txt')).toThrow(expect.objectContaining({ code: 'EEXIST' }));
  });

  it('rename: into a folder made for it; the old name is gone', () => {
    const { root } = setup();
    root.rename('job/a.txt', 'job/previous-1/a.txt');
    expect(readFileSync(join(root.dir, 'job', 'previous-1', 'a.txt'), 'utf8')).toBe('abc');
    expect(existsSync(join(root.dir, 'job', 'a.txt'))).toBe(false);
  });

  it('rename: a missing source is ENOENT naming it, and the folder asked for the new name is not made', () => {
    const { root } = setup();
    expect(() => root.rename('gone/a.txt', 'new/place/a.txt')).toThrow(
      expect.objectContaining({ code: 'ENOENT', message: expect.stringContaining(join(root.dir, 'gone', 'a.txt')) }),
    );
    expect(existsSync(join(root.dir, 'new'))).toBe(false);
  });

  it('an error of the system other than a missing name is thrown as it is (a name too long), not read as missing or as a link', () => {
    const { root } = setup();
    const long = `job/${'n'.repeat(300)}`;
    expect(() => root.lstat(long)).toThrow(expect.objectContaining({ code: 'ENAMETOOLONG' }));
    expect(() => root.openRead(long)).toThrow(expect.objectContaining({ code: 'ENAMETOOLONG' }));
  });

  it('remove: a file or a link (not what it points to), never a folder', () => {
    const { dir, root } = setup();
    writeFileSync(join(dir, 'target'), 't');
    symlinkSync(join(dir, 'target'), join(root.dir, 'job', 'l'));
    expect(root.remove('job/l')).toBe(true);
    expect(readFileSync(join(dir, 'target'), 'utf8')).toBe('t');
    linkSync(join(dir, 'target'), join(root.dir, 'job', 'h'));
    expect(root.remove('job/h')).toBe(true);
    expect(existsSync(join(dir, 'target'))).toBe(true);
    expect(refusal(() => root.remove('job'))).toEqual({ path: join(root.dir, 'job'), what: 'is a folder' });
    expect(root.remove('job/a.txt')).toBe(true);
    expect(existsSync(join(root.dir, 'job', 'a.txt'))).toBe(false);
  });

  it('removeDir: an empty folder; never the root, never a folder with something in it, never a link', () => {
    const { dir, root } = setup();
    expect(refusal(() => root.removeDir(''))).toEqual({ path: root.dir, what: 'is the root itself' });
    expect(() => root.removeDir('job')).toThrow(expect.objectContaining({ code: 'ENOTEMPTY' }));
    mkdirSync(join(dir, 'elsewhere'));
    symlinkSync(join(dir, 'elsewhere'), join(root.dir, 'l'));
    expect(refusal(() => root.removeDir('l')).what).toBe('is a symbolic link');
    expect(existsSync(join(dir, 'elsewhere'))).toBe(true);
    root.mkdirs('job/empty');
    expect(root.removeDir('job/empty')).toBe(true);
    expect(existsSync(join(root.dir, 'job', 'empty'))).toBe(false);
    expect(root.removeDir('job/empty')).toBe(false);
  });

  it('list: the entries of a folder with their kinds; the root by the empty name', () => {
    const { root } = setup();
    mkdirSync(join(root.dir, 'job', 'sub'));
    const entries = root.list('job')!.map((e) => `${e.name}:${e.isDirectory() ? 'dir' : 'file'}`).sort();
    expect(entries).toEqual(['a.txt:file', 'sub:dir']);
    expect(root.list('')!.map((e) => e.name)).toEqual(['job']);
  });
});
