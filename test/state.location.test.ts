import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl, parseStateLocation, stateOption } from '../src/store/location.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/** --state and GENBATCH_STATE: a path (SQLite) or a postgres:// URL, whose password is never printed. */

const SECRET = 'Sup3rSecretPw';
const t = tempDir('genbatch-location-');
beforeAll(() => ensureBuilt(), 180_000);
afterAll(() => t.cleanup());

describe('parseStateLocation', () => {
  it('reads a path as a SQLite file, resolved against the current folder', () => {
    expect(parseStateLocation('runs/state.db')).toEqual({ kind: 'sqlite', path: join(process.cwd(), 'runs', 'state.db') });
  });

  it('reads postgres:// and postgresql:// URLs, the display form with the password as ***', () => {
    const url = `postgres://gb:${SECRET}@db.example.com:5432/genbatch?sslmode=require`;
    expect(parseStateLocation(url)).toEqual({ kind: 'postgres', url, display: 'postgres://gb:***@db.example.com:5432/genbatch?sslmode=require' });
    expect(parseStateLocation('postgresql://db.example.com/genbatch')).toMatchObject({ kind: 'postgres', display: 'postgresql://db.example.com/genbatch' });
    expect(parseStateLocation('postgres://gb@/genbatch?host=/var/run/postgresql')).toMatchObject({ kind: 'postgres' });
  });

  it('hides a password given as a query parameter, or in text that is not a valid URL', () => {
    expect(displayUrl(`postgres://db/x?user=gb&password=${SECRET}&sslmode=require`)).toBe('postgres://db/x?user=gb&password=***&sslmode=require');
    // An unencoded @ or # in the password: everything up to the last @ is the user part.
    expect(displayUrl(`postgres://gb:a@b#${SECRET}@db:5432/x`)).toBe('postgres://gb:***@db:5432/x');
  });

  it('refuses another scheme and a URL that does not parse, naming the flag, without the password', () => {
    expect(() => parseStateLocation(`mysql://gb:${SECRET}@db/x`)).toThrow(/--state expects a path or a postgres:\/\/ \(or postgresql:\/\/\) URL, got "mysql:\/\/gb:\*\*\*@db\/x": the scheme mysql:\/\/ is not supported/);
    let message = '';
    try {
      parseStateLocation(`postgres://gb:${SECRET}@db:99999/x`, 'GENBATCH_STATE');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toBe('GENBATCH_STATE: "postgres://gb:***@db:99999/x" is not a valid URL (expected postgres://USER:PASSWORD@HOST:PORT/DATABASE; a password with @, :, / or # in it must be percent-encoded)');
  });

  it('takes GENBATCH_STATE when --state is not given (empty: unset)', () => {
    expect(stateOption(undefined, { GENBATCH_STATE: '/x/state.db' })).toBe('/x/state.db');
    expect(stateOption('/y.db', { GENBATCH_STATE: '/x/state.db' })).toBe('/y.db');
    expect(stateOption(undefined, { GENBATCH_STATE: '' })).toBeUndefined();
  });
});

describe('--state and GENBATCH_STATE on the command line', () => {
  it('run and status use GENBATCH_STATE as the state file; --state beats it', async () => {
    const manifest = imageManifest(join(t.dir, 'env.yaml'), 2, 'env');
    const state = join(t.dir, 'elsewhere', 'state.db');
    const r = await runCli(['run', manifest, '--sandbox', '--time-scale', '0.002'], { GENBATCH_STATE: state });
    expect(r.code).toBe(0);
    expect(existsSync(state)).toBe(true);
    expect(existsSync(join(t.dir, 'genbatch-out', 'env.sandbox', 'state.db'))).toBe(false);
    const st = await runCli(['status', '--json'], { GENBATCH_STATE: state });
    expect(st.stderr).toBe('');
    expect(JSON.parse(st.stdout)).toMatchObject({ manifest, counts: { done: 2 } });
    const other = await runCli(['status', '--state', join(t.dir, 'none.db')], { GENBATCH_STATE: state });
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(`no state file at ${join(t.dir, 'none.db')}`);
  });

  it('a bad URL is exit 2 with the flag named and the password hidden, for run and the readers', async () => {
    const manifest = imageManifest(join(t.dir, 'bad.yaml'), 1, 'bad');
    const bad = `postgres://gb:${SECRET}@db:99999/x`;
    for (const args of [['run', manifest, '--sandbox'], ['status'], ['report'], ['view', '--port', '0'], ['export', '--to', join(t.dir, 'x')]]) {
      const r = await runCli([...args, '--state', bad]);
      expect(r.code, args[0]).toBe(2);
      expect(r.stderr, args[0]).toContain('--state: "postgres://gb:***@db:99999/x" is not a valid URL');
      expect(r.stdout + r.stderr, args[0]).not.toContain(SECRET);
    }
    const env = await runCli(['status'], { GENBATCH_STATE: `redis://gb:${SECRET}@db/0` });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('GENBATCH_STATE expects a path or a postgres:// (or postgresql://) URL, got "redis://gb:***@db/0"');
    expect(env.stderr).not.toContain(SECRET);
  });
});
