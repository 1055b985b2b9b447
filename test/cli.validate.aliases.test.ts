import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A YAML manifest whose aliases expand past 256 MB is refused at once (issue #16 item 7): a 40 MB
 * scalar aliased 900 times took 55 s and 1.45 GB to validate (every copy hashed for its job id).
 */

const tmp = tempDir('genbatch-alias-');
beforeAll(() => ensureBuilt(), 180_000);
afterAll(() => tmp.cleanup());

/** Chat jobs sharing one 1 MiB message through `aliases` aliases of its anchor. */
function aliased(name: string, aliases: number): string {
  const lines = ['jobs:', '  - model: vendora/chat-5-mini', `    input: {messages: [{role: user, content: &big ${'x'.repeat(1024 * 1024)}}]}`];
  for (let i = 0; i < aliases; i++) lines.push('  - model: vendora/chat-5-mini', '    input: {messages: [{role: user, content: *big}]}');
  const path = join(tmp.dir, name);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

describe('YAML aliases', () => {
  it('a 1 MiB string aliased 300 times (301 MiB expanded): exit 2 naming the manifest and the 256 MB cap', async () => {
    const path = aliased('over.yaml', 300);
    const r = await genbatch(['validate', path]);
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr: `${path}: YAML: the manifest expands to more than 256 MB (268,435,456 characters of keys and strings, each alias counted as a copy of its anchor's value); at most 256 MB\n`,
    });
  });

  it('estimate refuses it the same way', async () => {
    const r = await genbatch(['estimate', '--offline', aliased('over2.yaml', 300)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('YAML: the manifest expands to more than 256 MB');
  });

  it('the same string aliased 20 times stays valid', async () => {
    const path = aliased('under.yaml', 20);
    const r = await genbatch(['validate', path]);
    expect(r).toEqual({ code: 0, stdout: `${path}: 21 jobs, all valid\n`, stderr: '' });
  });
});
