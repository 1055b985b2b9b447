import { closeSync, existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupPartials } from '../src/download/index.js';
import { UnsafePathError } from '../src/errors.js';
import { nameProblem, realpathOrAncestor, Root, within } from '../src/lib/root.js';
import { tempDir } from './helpers/tmp.js';

/**
 * src/lib/root.ts, the one door to the output and export folders: names relative to the root, no `..`, no
 * absolute name, no symbolic link at any level, checked when each operation runs. Real files in a temp folder.
 */
const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function setup(): { dir: string; root: Root; outside: string } {
  const t = tempDir('genbatch-root-');
  cleanups.push(t.cleanup);
  const outside = join(t.dir, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'secret');
  mkdirSync(join(t.dir, 'root', 'job'), { recursive: true });
  writeFileSync(join(t.dir, 'root', 'job', 'a.txt'), 'a');
  return { dir: t.dir, root: Root.open(join(t.dir, 'root')), outside };
}

const refused = (fn: () => unknown, what: RegExp) => {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(UnsafePathError);
  expect((err as UnsafePathError).what).toMatch(what);
};

describe('Root', () => {
  it('refuses names that leave it by their text: "..", absolute, empty parts, backslash, NUL', () => {
    const { root } = setup();
    for (const [name, why] of [['../outside/secret.txt', /\.\./], ['job/../../outside/secret.txt', /\.\./], ['/etc/passwd', /absolute/], ['job//a.txt', /empty/], ['./job/a.txt', /empty or "\."/], ['job\\a.txt', /backslash/], ['job/a\0', /NUL/], ['', /empty/]] as const) {
      expect(nameProblem(name), name).not.toBeNull();
      refused(() => root.lstat(name), why);
      refused(() => root.remove(name), why);
    }
  });

  it('refuses a symbolic link at any level, for reads, writes, renames, removals and listings', async () => {
    const { root, outside } = setup();
    symlinkSync(outside, join(root.dir, 'job', 'deep'));
    symlinkSync(outside, join(root.dir, 'top'));
    for (const name of ['top/secret.txt', 'job/deep/secret.txt']) {
      refused(() => root.openRead(name), /symbolic link/);
      refused(() => root.remove(name), /symbolic link/);
      refused(() => root.createNew(name.replace('secret', 'new')), /symbolic link/);
      refused(() => root.rename('job/a.txt', name.replace('secret', 'moved')), /symbolic link/);
      refused(() => root.link(join(root.dir, 'job', 'a.txt'), name.replace('secret', 'linked')), /symbolic link/);
    }
    refused(() => root.list('top'), /symbolic link/);
    refused(() => root.mkdirs('top/sub'), /symbolic link/);
    await expect(Promise.resolve().then(() => root.hash('top/secret.txt'))).rejects.toBeInstanceOf(UnsafePathError);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    expect(existsSync(join(outside, 'new.txt'))).toBe(false);
    expect(existsSync(join(root.dir, 'job', 'a.txt'))).toBe(true);
  });

  it('never opens a final link: a read is refused (O_NOFOLLOW), a new file is never written through one', () => {
    const { root, outside } = setup();
    symlinkSync(join(outside, 'secret.txt'), join(root.dir, 'job', 'link.txt'));
    refused(() => root.openRead('job/link.txt'), /symbolic link/);
    expect(() => root.createNew('job/link.txt')).toThrow(/EEXIST/);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    // remove() takes the link away, not what it points to.
    expect(root.remove('job/link.txt')).toBe(true);
    expect(existsSync(join(outside, 'secret.txt'))).toBe(true);
  });

  it('checks the realpath at the moment of the operation: a root swapped for a link after it was opened is refused', () => {
    const { dir, root, outside } = setup();
    renameSync(root.dir, join(dir, 'moved'));
    symlinkSync(outside, root.dir);
    refused(() => root.openRead('secret.txt'), /outside/);
    refused(() => root.createNew('planted.txt'), /outside/);
    expect(existsSync(join(outside, 'planted.txt'))).toBe(false);
  });

  it('reads, writes, renames, lists and removes inside it', async () => {
    const { root } = setup();
    const { fd } = root.createNew('job/sub/new.txt');
    writeSync(fd, 'hello');
    closeSync(fd);
    expect(await root.hash('job/sub/new.txt')).toEqual({ size: 5, sha256: '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824' });
    root.rename('job/sub/new.txt', 'job/other/new.txt');
    expect(root.list('job/other')!.map((e) => e.name)).toEqual(['new.txt']);
    expect(root.list('nope')).toBeNull();
    expect(root.openRead('job/missing.txt')).toBeNull();
    refused(() => root.remove('job/other'), /is a folder/);
    expect(root.remove('job/other/new.txt')).toBe(true);
    expect(root.remove('job/other/new.txt')).toBe(false);
  });

  it('mkdirsMade says whether this call made the folder', () => {
    const { root } = setup();
    expect(root.mkdirsMade('fresh')).toEqual({ path: join(root.dir, 'fresh'), made: true });
    expect(root.mkdirsMade('fresh')).toEqual({ path: join(root.dir, 'fresh'), made: false });
    expect(root.mkdirsMade('job')).toEqual({ path: join(root.dir, 'job'), made: false });
    expect(root.mkdirsMade('job/a/b')).toEqual({ path: join(root.dir, 'job', 'a', 'b'), made: true });
  });

  it('a rename within one folder checks that folder (a link there is refused) and the new name by its text', () => {
    const { root, outside } = setup();
    root.rename('job/a.txt', 'job/b.txt');
    expect(readFileSync(join(root.dir, 'job', 'b.txt'), 'utf8')).toBe('a');
    symlinkSync(outside, join(root.dir, 'linked'));
    refused(() => root.rename('linked/secret.txt', 'linked/moved.txt'), /symbolic link/);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    expect(existsSync(join(outside, 'moved.txt'))).toBe(false);
    refused(() => root.rename('job/b.txt', 'job/..'), /\.\./);
    refused(() => root.rename('job/b.txt', 'job/x\\y'), /backslash/);
    expect(existsSync(join(root.dir, 'job', 'b.txt'))).toBe(true);
  });

  it('compares folders by text and with links resolved', () => {
    const { dir, root } = setup();
    symlinkSync(root.dir, join(dir, 'alias'));
    expect(within(root.dir, join(dir, 'alias', 'x'))).toBe(false);
    expect(within(realpathOrAncestor(root.dir), realpathOrAncestor(join(dir, 'alias', 'x', 'y')))).toBe(true);
  });

  it('cleanupPartials does not follow a job folder that is a link: the .part files it leads to stay', async () => {
    const { root, outside } = setup();
    writeFileSync(join(outside, '.x.png.0123456789ab.part'), 'not ours');
    symlinkSync(outside, join(root.dir, 'linked'));
    expect(await cleanupPartials(join(root.dir, 'linked'))).toEqual([]);
    expect(existsSync(join(outside, '.x.png.0123456789ab.part'))).toBe(true);
    writeFileSync(join(root.dir, 'job', '.y.png.0123456789ab.part'), 'ours');
    expect(await cleanupPartials(join(root.dir, 'job'))).toEqual([join(root.dir, 'job', '.y.png.0123456789ab.part')]);
  });
});
