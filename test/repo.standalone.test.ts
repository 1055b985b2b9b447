import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch, ROOT } from './fixtures/manifest/cli.js';

/**
 * A user's clone has nothing beside it: no file the repository tracks may reach outside it, and every
 * example manifest must validate in a clone made into an empty folder.
 */

const OUTSIDE = new RegExp(['\\.\\./', '(?:\\.\\./)*', 'shared/'].join(''));

let parent: string;
let clone: string;

beforeAll(() => {
  ensureBuilt();
  parent = mkdtempSync(join(tmpdir(), 'genbatch-clone-'));
  clone = join(parent, 'genbatch');
  execFileSync('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone], { stdio: 'pipe' });
}, 180_000);

afterAll(() => rmSync(parent, { recursive: true, force: true }));

describe('a clone in an empty folder stands alone', () => {
  it('the clone has no sibling: its parent folder holds the clone alone', () => {
    expect(readdirSync(parent)).toEqual(['genbatch']);
  });

  it('no tracked file names a path into a shared folder beside the repository', () => {
    const files = execFileSync('git', ['ls-files', '-z'], { cwd: clone, encoding: 'utf8' }).split('\0').filter(Boolean);
    const offenders = files.filter((f) => OUTSIDE.test(readFileSync(join(clone, f), 'latin1')));
    expect(offenders).toEqual([]);
  });

  // The committed example manifests (what a clone gets); parti-categories.tsv is data, not a job list.
  const manifests = execFileSync('git', ['ls-files', 'manifests'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .map((f) => f.slice('manifests/'.length))
    .filter((f) => /^[^/]+\.(ya?ml|csv|tsv|jsonl)$/.test(f) && f !== 'parti-categories.tsv');

  it('the example manifests are found (at least the eleven of this writing)', () => {
    expect(manifests.length).toBeGreaterThanOrEqual(11);
  });

  for (const m of manifests) {
    it(`manifests/${m} validates in the clone`, async () => {
      const r = await genbatch(['validate', join('manifests', m)], {}, clone);
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/: \d+ jobs, all valid\n$/);
      expect(r.code).toBe(0);
    });
  }
});
