import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch, ROOT } from './fixtures/manifest/cli.js';

/**
 * Users know "the service" and "the API", not our internal word "contract": it appears in no help text, no
 * catalogue or estimate output, no README, no example manifest and no generated JSON Schema.
 */

beforeAll(() => ensureBuilt(), 180_000);

const COMMANDS = ['validate', 'estimate', 'models', 'run', 'status', 'report', 'balance', 'sandbox'];
const lines = (name: string, text: string) => text.split('\n').flatMap((l, i) => (/contract/i.test(l) ? [`${name}:${i + 1}: ${l.trim()}`] : []));

describe('plain words', () => {
  it('no "contract" in --help, the model catalogue (text and JSON) or an estimate', async () => {
    const runs = await Promise.all([
      genbatch(['--help']),
      ...COMMANDS.map((c) => genbatch([c, '--help'])),
      genbatch(['models']),
      genbatch(['models', '--json']),
      genbatch(['estimate', 'manifests/demo.yaml', '--offline']),
      genbatch(['estimate', 'manifests/demo.yaml', '--offline', '--json']),
    ]);
    for (const r of runs) expect(r.stdout.length).toBeGreaterThan(0);
    expect(runs.flatMap((r, i) => lines(`output ${i}`, r.stdout + r.stderr))).toEqual([]);
  });

  it('no "contract" in the README files, the example manifests or the generated JSON Schema', () => {
    const files = ['README.md', 'manifests/README.md', ...readdirSync(join(ROOT, 'manifests')).filter((f) => /\.(ya?ml|csv|json)$/.test(f)).map((f) => `manifests/${f}`)];
    for (const dir of readdirSync(join(ROOT, 'src'), { withFileTypes: true })) {
      if (dir.isDirectory() && readdirSync(join(ROOT, 'src', dir.name)).includes('README.md')) files.push(`src/${dir.name}/README.md`);
    }
    expect(files).toContain('manifests/genbatch.schema.json');
    expect(files.flatMap((f) => lines(f, readFileSync(join(ROOT, f), 'utf8')))).toEqual([]);
  });
});
