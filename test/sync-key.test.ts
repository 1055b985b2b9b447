import { readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { prepare } from '../src/engine/prepare/prepare.js';
import type { EngineEvent } from '../src/engine/events.js';
import { openManifest } from '../src/manifest/index.js';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

const t = tempDir('genbatch-synckey-');
afterAll(() => t.cleanup());

const ASSETS = join(import.meta.dirname, '..', 'manifests', 'assets');
const job = (id: string, file: string, prompt: string) => `  - id: ${id}\n    model: alpha-image-2-edit\n    input:\n      prompt: "${prompt}"\n      image_urls: ["${file}"]\n`;

/** One sync of `manifest` into the state file, as `genbatch run` does it; returns the `synced` event. */
async function sync(state: string, manifest: string, prices: Record<string, number> | null = null) {
  const store = Store.openForWrite(state);
  try {
    store.openRun(manifest, t.dir, 'http://127.0.0.1:9', false, prices !== null);
    const events: EngineEvent[] = [];
    await prepare(store, await openManifest(manifest), prices, (e) => events.push(e));
    const specs = Object.fromEntries([...store.allJobs()].map((j) => [j.id, j.spec_hash]));
    return { key: store.getMeta(`sync-key:${store.currentRunId}`), synced: events.find((e) => e.type === 'synced') as Extract<EngineEvent, { type: 'synced' }>, specs, states: Object.fromEntries([...store.allJobs()].map((j) => [j.id, j.state])) };
  } finally {
    store.close();
  }
}

describe('manifest sync key (resume without re-reading an unchanged manifest)', () => {
  it('an unchanged manifest is not read again; a changed manifest, local image or price list is', async () => {
    const dir = join(t.dir, 'a');
    const state = join(dir, 'state.db');
    const manifest = join(t.dir, 'a.yaml');
    writeFileSync(join(t.dir, 'a.png'), readFileSync(join(ASSETS, 'demo-tiles.png')));
    writeFileSync(manifest, 'jobs:\n' + job('e1', 'a.png', 'one') + job('e2', 'a.png', 'two'));
    const first = await sync(state, manifest);
    expect(first.synced).toMatchObject({ jobs: 2, new: 2 });
    expect(JSON.parse(first.key ?? 'null')).toMatchObject({ jobs: 2, files: [{ file: join(t.dir, 'a.png') }] });
    const again = await sync(state, manifest);
    expect(again.synced).toMatchObject({ jobs: 2, new: 0, changed: 0, unchanged: 2 });
    expect(again.specs).toEqual(first.specs);

    // The image changes with its size and mtime kept: still found (local files are hashed again).
    const png = join(t.dir, 'a.png');
    const st = statSync(png);
    const bytes = readFileSync(png);
    bytes[bytes.length - 20] = (bytes[bytes.length - 20]! + 1) % 256;
    writeFileSync(png, bytes);
    utimesSync(png, st.atime, st.mtime);
    const image = await sync(state, manifest);
    expect(image.specs.e1).not.toBe(first.specs.e1);
    expect(image.synced).toMatchObject({ unchanged: 0 });

    // The manifest changes with its size and mtime kept: found by its sha256.
    const mst = statSync(manifest);
    writeFileSync(manifest, 'jobs:\n' + job('e1', 'a.png', 'one') + job('e2', 'a.png', 'TWO'));
    utimesSync(manifest, mst.atime, mst.mtime);
    const text = await sync(state, manifest);
    expect(text.specs.e2).not.toBe(image.specs.e2);
    expect(text.specs.e1).toBe(image.specs.e1);

    // Other prices: every job checked again (estimates are recomputed).
    const priced = await sync(state, manifest, { 'alpha-image-2-edit': 3 });
    expect(priced.synced).toMatchObject({ jobs: 2, unchanged: 2 });
    expect((await sync(state, manifest, { 'alpha-image-2-edit': 3 })).synced).toMatchObject({ jobs: 2, unchanged: 2 });
  });

  it('a YAML manifest that reads other files (rows, glob) gets no key', async () => {
    writeFileSync(join(t.dir, 'rows.csv'), 'p\none\n');
    const manifest = join(t.dir, 'rows.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: r{{row}}\n    model: alpha-image-2\n    rows:\n      file: rows.csv\n    input:\n      prompt: "{{p}}"\n');
    const r = await sync(join(t.dir, 'c', 'state.db'), manifest);
    expect(r.synced).toMatchObject({ jobs: 1 });
    expect(r.key).toBeNull();
  });

  it('a removed job is skipped once; a job skipped after the sync (job graph) makes the next run check the manifest again', async () => {
    const state = join(t.dir, 'b', 'state.db');
    const manifest = join(t.dir, 'b.csv');
    writeFileSync(manifest, 'id,model,input.prompt\nj1,alpha-image-2,one\nj2,alpha-image-2,two\n');
    await sync(state, manifest);
    writeFileSync(manifest, 'id,model,input.prompt\nj1,alpha-image-2,one\n');
    expect((await sync(state, manifest)).states).toEqual({ j1: 'pending', j2: 'skipped' });
    expect((await sync(state, manifest)).synced).toMatchObject({ jobs: 1, unchanged: 1, skipped: 0 });
    // j1 skipped behind the sync's back (as the job graph does when a parent fails): the full sync revisits it.
    const store = Store.openForWrite(state);
    store.db.exec(`UPDATE jobs SET state = 'skipped' WHERE id = 'j1'`);
    store.close();
    expect((await sync(state, manifest)).states).toEqual({ j1: 'pending', j2: 'skipped' });
  });
});
