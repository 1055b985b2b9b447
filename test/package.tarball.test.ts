import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, ensureBuilt, imageManifest } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * genbatch as a user gets it from a registry: `npm pack` makes the tarball, which is unpacked into
 * node_modules/genbatch of an empty project, as `npm install <tarball>` does. Its dependencies are not
 * fetched and compiled again (better-sqlite3 alone compiles for a minute): each production package of
 * the lockfile (not marked dev) is linked from this repository's node_modules, so a package the library
 * uses but package.json does not list as a dependency is missing there, as it would be for a user.
 * Then the project imports the package from an .mjs file (validate, estimate, run against the sandbox
 * it starts) and type-checks a .ts file against the shipped declarations (skipLibCheck off).
 */

let work: { dir: string; cleanup: () => void };
let project: string;
let packed: string[];

function sh(cmd: string, args: string[], cwd: string): { code: number | null; out: string; stdout: string } {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GENBATCH_') && !k.startsWith('VITEST') && !k.startsWith('npm_')) env[k] = v;
  const r = spawnSync(cmd, args, { cwd, env: { ...env, NO_COLOR: '1' }, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}`, stdout: r.stdout ?? '' };
}

beforeAll(() => {
  ensureBuilt();
  if (!existsSync(join(ROOT, 'dist', 'index.js'))) throw new Error('dist/index.js missing: run npm run build');
  work = tempDir('genbatch-pack-');
  // What npm packs from the repository: a copy, with what a developer's tree also holds planted in it
  // (a run's output and state file next to the example manifests, a test file), which must stay out.
  const stage = join(work.dir, 'stage');
  for (const p of ['package.json', 'README.md', 'bin', 'dist', 'manifests']) {
    cpSync(join(ROOT, p), join(stage, p), { recursive: true, filter: (src) => !/genbatch-out|\.db(-wal|-shm)?$/.test(src) });
  }
  mkdirSync(join(stage, 'manifests', 'genbatch-out', 'demo'), { recursive: true });
  writeFileSync(join(stage, 'manifests', 'genbatch-out', 'demo', 'state.db'), 'x');
  writeFileSync(join(stage, 'manifests', 'old.state.db'), 'x');
  mkdirSync(join(stage, 'test'));
  writeFileSync(join(stage, 'test', 'a.test.ts'), 'x');
  const pack = sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work.dir], stage);
  if (pack.code !== 0) throw new Error(`npm pack failed: ${pack.out}`);
  const info = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packed = info[0]!.files.map((f) => f.path);

  // The user's empty project, with the tarball unpacked as npm installs it.
  project = join(work.dir, 'project');
  const pkgDir = join(project, 'node_modules', 'genbatch');
  mkdirSync(pkgDir, { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
  const untar = sh('tar', ['-xzf', join(work.dir, info[0]!.filename), '-C', pkgDir, '--strip-components=1'], project);
  if (untar.code !== 0) throw new Error(`tar failed: ${untar.out}`);
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const linked = new Set<string>();
  for (const [key, entry] of Object.entries(lock.packages)) {
    const name = key.startsWith('node_modules/') ? key.slice('node_modules/'.length) : null;
    if (name === null || name.includes('/node_modules/') || entry.dev === true) continue;
    linked.add(name);
  }
  // The user's own dev tools for the .ts check: Node's types (TypeScript itself runs from this repository).
  linked.add('@types/node');
  for (const name of linked) {
    mkdirSync(join(project, 'node_modules', name, '..'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', name), join(project, 'node_modules', name), 'dir');
  }
  imageManifest(join(project, 'jobs.yaml'), 3, 'pic');
  imageManifest(join(project, 'more.yaml'), 6, 'more');
  writeFileSync(join(project, 'bad.yaml'), 'jobs:\n  - id: a\n    model: alpha-image-2\n    input: {prompt: "x", size: "7:5"}\n');
}, 180_000);

afterAll(() => work?.cleanup());

describe('the packed package', () => {
  it('holds the built library, the CLI and the example manifests, and no tests, run outputs or state files', () => {
    expect(packed).toContain('dist/index.js');
    expect(packed).toContain('dist/index.d.ts');
    expect(packed).toContain('bin/genbatch.js');
    expect(packed).toContain('manifests/demo.yaml');
    expect(packed.filter((p) => /genbatch-out|\.db$|^test\/|^src\//.test(p))).toEqual([]);
  });

  it('imports from an .mjs file: validate, estimate and run against the sandbox it starts; errors are typed', () => {
    writeFileSync(
      join(project, 'use.mjs'),
      `import { validate, estimate, run, startSandbox, ManifestError, UsageError, EXIT } from 'genbatch';
import { startSandbox as fromSubpath } from 'genbatch/sandbox';
const out = {};
out.valid = await validate('jobs.yaml');
out.invalid = await validate('bad.yaml');
try { await estimate('bad.yaml', { offline: true }); } catch (err) {
  out.estimateError = { manifestError: err instanceof ManifestError, code: err.code, exitCode: err.exitCode, problems: err.problems.length };
}
try { await run('jobs.yaml', { concurrency: 0, sandbox: true }); } catch (err) { out.usage = err instanceof UsageError && err.exitCode === EXIT.usage; }
const sandbox = await startSandbox({ port: 0, keys: { 'sk-user': 1000 }, timeScale: 0.005 });
const service = { baseUrl: sandbox.url, apiKey: 'sk-user' };
const est = await estimate('jobs.yaml', service);
out.estimate = { total: est.total_credits, balance: est.balance, affordable: est.affordable, jobs: est.jobs.length };
const events = [];
const summary = await run('jobs.yaml', { ...service, timeScale: 0.005, out: 'out', onEvent: (e) => events.push(e.type) });
out.run = { outcome: summary.outcome, exitCode: summary.exitCode, done: summary.counts.done, outDir: summary.outDir };
out.events = [events[0], events.at(-1), events.includes('file')];
out.subpath = typeof fromSubpath;
// Aborting stops new submissions and ends with the outcome 'interrupted' (exit code 130); the same call again resumes.
const stop = new AbortController();
const first = await run('more.yaml', { ...service, timeScale: 0.005, out: 'more', concurrency: 1, signal: stop.signal, onEvent: (e) => { if (e.type === 'sending') stop.abort(); } });
const again = await run('more.yaml', { ...service, timeScale: 0.005, out: 'more' });
out.abort = [first.outcome, first.exitCode, first.counts.pending > 0, again.outcome, again.counts.done];
await sandbox.close();
console.log(JSON.stringify(out));
`,
    );
    const r = sh(process.execPath, ['use.mjs'], project);
    expect(r.code, r.out).toBe(0);
    const out = JSON.parse(r.out.trim().split('\n').at(-1)!);
    expect(out.valid).toEqual({ valid: true, jobs: 3, problems: [] });
    expect(out.invalid.valid).toBe(false);
    expect(out.invalid.problems[0]).toMatchObject({ job: 'a', path: 'input.size' });
    expect(out.estimateError).toEqual({ manifestError: true, code: 'GB_MANIFEST', exitCode: 2, problems: 1 });
    expect(out.usage).toBe(true);
    expect(out.estimate).toEqual({ total: 6, balance: 1000, affordable: true, jobs: 3 });
    expect(out.run).toEqual({ outcome: 'done', exitCode: 0, done: 3, outDir: join(project, 'out') });
    expect(out.events).toEqual(['start', 'finish', true]);
    expect(existsSync(join(project, 'out', 'report.json'))).toBe(true);
    expect(out.subpath).toBe('function');
    expect(out.abort).toEqual(['interrupted', 130, true, 'done', 6]); // an abort is an interruption (130; 143 only for reason 'SIGTERM')
  });

  it('type-checks a TypeScript file against the shipped declarations', () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] }, files: ['use.ts'] }),
    );
    writeFileSync(
      join(project, 'use.ts'),
      `import { run, validate, estimate, startSandbox, ManifestError, type EngineEvent, type RunSummary, type ValidateResult } from 'genbatch';
const v: ValidateResult = await validate('jobs.yaml');
const firstRule: string | undefined = v.problems[0]?.message;
const sandbox = await startSandbox({ port: 0, timeScale: 0.01 });
const e = await estimate('jobs.yaml', { baseUrl: sandbox.url, apiKey: sandbox.keys[0] });
const credits: number = e.total_credits;
const seen: string[] = [];
const s: RunSummary = await run('jobs.yaml', {
  sandbox: true,
  concurrency: 4,
  signal: AbortSignal.timeout(60_000),
  onEvent: (ev: EngineEvent) => {
    if (ev.type === 'job') seen.push(\`\${ev.id}: \${ev.from} -> \${ev.to}\`);
  },
});
const done: number = s.counts.done;
const outcome: 'done' | 'failed' | 'incomplete' | 'interrupted' = s.outcome;
// @ts-expect-error concurrency is a number
await run('jobs.yaml', { concurrency: 'eight' });
// @ts-expect-error no such option
await run('jobs.yaml', { sandboxx: true });
const err: unknown = null;
if (err instanceof ManifestError) console.log(err.problems.length, err.code);
console.log(firstRule, credits, done, outcome);
`,
    );
    const r = sh(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], project);
    expect(r.out).toBe('');
    expect(r.code).toBe(0);
  }, 120_000); // tsc reads every declaration it reaches (skipLibCheck off): 10 s of CPU, 30 s and more on a busy machine

  it("runs the README's library example as written", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const example = /## Use it as a library[\s\S]*?```js\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toBeDefined();
    writeFileSync(join(project, 'readme.mjs'), example!);
    const r = sh(process.execPath, ['readme.mjs'], project);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain(`done 3 ${join(project, 'genbatch-out', 'jobs')}`);
  });

  it('runs its command line from the installed package', () => {
    const r = sh(process.execPath, [join(project, 'node_modules', 'genbatch', 'bin', 'genbatch.js'), 'validate', 'jobs.yaml'], project);
    expect(r.out).toContain('jobs.yaml: 3 jobs, all valid');
    expect(r.code).toBe(0);
  });
});
