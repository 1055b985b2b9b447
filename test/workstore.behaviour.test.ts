import { join } from 'node:path';
import { describe } from 'vitest';
import { SqliteWorkStore, Store, type JobInput } from '../src/store/index.js';
import { postgresWorkStore } from './helpers/pg-workstore.js';
import { tempDir } from './helpers/tmp.js';
import { workStoreBehaviour, type MakeWorkStore, type SeedJob } from './helpers/workstore-cases.js';

/** A SQLite state file holding the seeded run (written through Store, as a manifest sync and earlier runs would), and the work store over it. */
const sqlite: MakeWorkStore = async ({ jobs }) => {
  const t = tempDir('genbatch-workstore-');
  const path = join(t.dir, 'state.db');
  const store = Store.openForWrite(path);
  store.openRun(join(t.dir, 'm.yaml'), join(t.dir, 'out'), 'http://svc', false, false);
  seed(store, jobs);
  const reader = Store.openForRead(path);
  reader.useRun(store.run());
  return {
    store: new SqliteWorkStore(store),
    readElsewhere: (id) => Promise.resolve(reader.getJob(id)),
    force: (id, state) => {
      store.db.prepare('UPDATE jobs SET state = ? WHERE id = ?').run(state, id);
      return Promise.resolve();
    },
    close: () => {
      reader.close();
      store.close();
      t.cleanup();
      return Promise.resolve();
    },
  };
};

function seed(store: Store, jobs: SeedJob[]): void {
  const input = (j: SeedJob): JobInput => ({ id: j.id, model: 'm', kind: j.kind ?? 'submit', where: `m.yaml:${j.id}`, specHash: `h-${j.id}`, spec: '{}', estimatedCredits: j.estimatedCredits === undefined ? 1 : j.estimatedCredits });
  store.beginSync();
  for (const j of jobs) store.syncJob(input(j));
  store.graph.setManifestLinks(new Map(jobs.filter((j) => j.parents).map((j) => [j.id, { parents: j.parents! }])));
  store.commitSync();
  for (const j of jobs) {
    const state = j.state ?? 'pending';
    if (state === 'pending') continue;
    if (state === 'failed') {
      store.transition(j.id, 'pending', 'failed', { last_error: 'seeded' });
      continue;
    }
    store.transition(j.id, 'pending', 'submitting', { attemptsInc: 1 });
    store.transition(j.id, 'submitting', 'submitted', { task_id: `task-${j.id}` });
    if (state === 'submitted') continue;
    store.transition(j.id, 'submitted', 'downloading', { result: '{}' }, () => store.addFiles(j.id, j.files ?? []));
    if (state === 'downloading') continue;
    store.transition(j.id, 'downloading', 'done');
  }
}

describe.each([
  { name: 'SQLite', make: sqlite },
  { name: 'PostgreSQL', make: postgresWorkStore },
])('WorkStore on $name', ({ make }) => {
  workStoreBehaviour(make);
});
