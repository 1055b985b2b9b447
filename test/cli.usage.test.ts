import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch, ROOT } from './fixtures/manifest/cli.js';

/** Command-line usage as a user meets it (the built CLI in child processes): help, usage errors, a reader closing early. */

let dir: string;
beforeAll(() => {
  ensureBuilt();
  const stale = [['src/cli/main.ts', 'dist/cli/main.js'], ['src/cli/commands/models.ts', 'dist/cli/commands/models.js']].some(
    ([src, out]) => !existsSync(join(ROOT, out)) || statSync(join(ROOT, src)).mtimeMs > statSync(join(ROOT, out)).mtimeMs,
  );
  if (stale) spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', ROOT], { encoding: 'utf8' });
  dir = mkdtempSync(join(tmpdir(), 'genbatch-usage-'));
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Every command with its positional arguments (a valid count) as declared in src/cli/main.ts. */
const COMMANDS: Array<{ name: string; args: string[]; required: boolean }> = [
  { name: 'validate', args: ['m.yaml'], required: true },
  { name: 'estimate', args: ['m.yaml'], required: true },
  { name: 'models', args: ['alpha-image-2'], required: false },
  { name: 'run', args: ['m.yaml'], required: true },
  { name: 'status', args: ['m.yaml'], required: false },
  { name: 'report', args: ['m.yaml'], required: false },
  { name: 'prune', args: ['m.yaml'], required: true },
  { name: 'balance', args: [], required: false },
  { name: 'sandbox', args: [], required: false },
];

describe('usage', () => {
  it('--help on the program and on every command exits 0 and prints its usage on stdout', async () => {
    const root = await genbatch(['--help']);
    expect(root.code).toBe(0);
    expect(root.stdout).toContain('Usage: genbatch [options] [command]');
    for (const c of COMMANDS) expect(root.stdout).toContain(`\n  ${c.name} `);
    const runs = await Promise.all(COMMANDS.map((c) => genbatch([c.name, '--help'])));
    runs.forEach((r, i) => {
      const name = COMMANDS[i]?.name ?? '';
      expect(r.code, name).toBe(0);
      expect(r.stdout, name).toMatch(new RegExp(`^Usage: genbatch ${name} \\[options\\]`));
      expect(r.stdout, name).toContain('-h, --help');
      expect(r.stderr, name).toBe('');
    });
  });

  it('an unknown option exits 2 with the message on stderr, for every command', async () => {
    const runs = await Promise.all(COMMANDS.map((c) => genbatch([c.name, ...c.args, '--bogus'])));
    runs.forEach((r, i) => {
      const name = COMMANDS[i]?.name ?? '';
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toContain("error: unknown option '--bogus'");
      expect(r.stdout, name).toBe('');
    });
  });

  it('a missing argument exits 2 naming it', async () => {
    const required = COMMANDS.filter((c) => c.required);
    const runs = await Promise.all(required.map((c) => genbatch([c.name])));
    runs.forEach((r, i) => {
      const name = required[i]?.name ?? '';
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toContain("error: missing required argument 'manifest'");
    });
  });

  it('too many arguments exit 2, for every command', async () => {
    const runs = await Promise.all(COMMANDS.map((c) => genbatch([c.name, ...c.args, 'extra'])));
    runs.forEach((r, i) => {
      const name = COMMANDS[i]?.name ?? '';
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toContain(`error: too many arguments for '${name}'`);
    });
  });

  it('an unknown command, a bad option value and a bad choice exit 2', async () => {
    const [unknown, value, choice] = await Promise.all([
      genbatch(['frobnicate']),
      genbatch(['run', 'm.yaml', '--concurrency', 'many']),
      genbatch(['run', 'm.yaml', '--uncertain', 'guess']),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("error: unknown command 'frobnicate'");
    expect(value.code).toBe(2);
    expect(value.stderr).toContain('--concurrency expects an integer >= 1, got "many"');
    expect(choice.code).toBe(2);
    expect(choice.stderr).toContain('--uncertain expects skip, resubmit or resubmit-after=DURATION (e.g. resubmit-after=24h), got "guess"');
  });
});

/** Run the CLI, close `which` after its first chunk (as `| head -1` does), and give the exit code and the other stream. */
function closeEarly(args: string[], which: 'stdout' | 'stderr'): Promise<{ code: number | null; signal: NodeJS.Signals | null; other: string; first: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/genbatch.js'), ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NO_COLOR: '1' } });
    let first = '';
    let other = '';
    const closing = child[which];
    closing.once('data', (chunk: Buffer) => {
      first = chunk.toString('utf8').split('\n')[0] ?? '';
      closing.destroy();
    });
    (which === 'stdout' ? child.stderr : child.stdout).on('data', (chunk: Buffer) => (other += chunk.toString('utf8')));
    child.on('close', (code, signal) => done({ code, signal, other, first }));
  });
}

describe('a reader that closes early (| head -1)', () => {
  it('closed stdout: estimate --json keeps its own exit code (0), no EPIPE crash', async () => {
    const rows = ['id,model,input.prompt', ...Array.from({ length: 20_000 }, (_, i) => `j${i},alpha-image-2,a lighthouse number ${i}`)];
    const csv = join(dir, 'big.csv');
    writeFileSync(csv, rows.join('\n') + '\n');
    const r = await closeEarly(['estimate', '--offline', '--json', csv], 'stdout');
    expect(r.first.startsWith('{"total_credits":40000')).toBe(true);
    expect(r.signal).toBeNull();
    expect(r.other).not.toContain('EPIPE');
    expect(r.code).toBe(0);
  });

  it('closed stderr: validate with 20,000 problems keeps its own exit code (2), not 1', async () => {
    const rows = ['id,model,input.prompt', ...Array.from({ length: 20_000 }, (_, i) => `j${i},alpha-image-2,`)];
    const csv = join(dir, 'bad.csv');
    writeFileSync(csv, rows.join('\n') + '\n');
    const r = await closeEarly(['validate', csv], 'stderr');
    expect(r.first).toMatch(/^job j0 \(.*bad\.csv:2, row 1\) input\.prompt: is required$/);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(2);
  });
});

describe('engines', () => {
  /** semver comes with fastify (a dependency); only `satisfies` is used. */
  const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };
  const enginesOf = (file: string): string => {
    const json = JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as { engines?: { node?: string } };
    return json.engines?.node ?? '*';
  };

  it('package.json engines.node is exactly the Node versions every dependency (tests included) supports', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    const names = [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies), 'vite'];
    const ranges = names.map((n) => [n, enginesOf(`node_modules/${n}/package.json`)] as const);
    const ours = enginesOf('package.json');
    const versions = ['18.20.0', '20.0.0', '20.18.1', '20.19.0', '20.20.2', '21.7.0', '22.11.0', '22.12.0', '23.11.0', '24.0.0', '25.2.0', '26.1.0', '27.0.0'];
    for (const v of versions) {
      const all = ranges.every(([, r]) => semver.satisfies(v, r));
      expect(semver.satisfies(v, ours), `node ${v}: ours ${ours}; ${ranges.filter(([, r]) => !semver.satisfies(v, r)).map(([n, r]) => `${n} ${r}`).join(', ')}`).toBe(all);
    }
    expect(semver.satisfies(process.versions.node, ours)).toBe(true);
  });

  it('the README states the same range', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain('Requires Node.js 20.19+, 22.12+ or 24 to 26');
  });
});
