// The modules that keep genbatch's invariants, each with the test files that pin it. `npm run test:mutation`
// mutates one group at a time and runs only that group's tests against each mutant (on 2 cores a mutant
// costs the run of those files, not of the whole suite). Tests that spawn the CLI cannot see a mutant (the CLI
// runs dist/), so a group lists only tests that import src/. `npm run test:mutation -- states redact` runs some.
export const GROUPS = {
  // The job-state table and the one transition function: a wrong pair can send a task twice.
  states: {
    mutate: ['src/store/states.ts'],
    tests: ['test/workstore.behaviour.test.ts', 'test/store.test.ts'],
  },
  // The API key out of every error, log and stored answer.
  redact: {
    mutate: ['src/client/redact.ts'],
    tests: ['test/redact.test.ts', 'test/client.test.ts', 'test/client.exchange.test.ts'],
  },
  // The upload limit (5 a minute per key, never a 429 we caused) and the status-read rate.
  limiters: {
    mutate: ['src/client/limiters.ts'],
    tests: ['test/client.limiters.test.ts', 'test/client.test.ts', 'test/client.limits.test.ts'],
  },
  // A download placed without replacing anything, checked by size and sha256, named inside its folder.
  download: {
    mutate: ['src/download/place.ts', 'src/download/check.ts', 'src/download/names.ts'],
    tests: ['test/download.place.test.ts', 'test/download.test.ts', 'test/download.paths.test.ts'],
  },
  // One door to disk: no path leaves its folder, no symlink or foreign file is followed or overwritten.
  paths: {
    mutate: ['src/lib/root.ts'],
    tests: ['test/lib.root.test.ts', 'test/lib.root.edges.test.ts', 'test/download.paths.test.ts'],
  },
  // The intent committed before the POST, the task id the moment it arrives.
  submits: {
    mutate: ['src/engine/pipeline/submits.ts'],
    tests: ['test/pipeline.submits.test.ts', 'test/pipeline.workstore.test.ts', 'test/engine.test.ts'],
  },
  // The spending cap: a run never charged more than its cap plus one task per process.
  cap: {
    mutate: ['src/engine/pipeline/cap.ts'],
    tests: ['test/engine.cap.test.ts'],
  },
  // The budget reservation on PostgreSQL: N workers never reserve past the run's cap together (real PostgreSQL).
  budget: {
    mutate: ['src/store/pg/budget.ts', 'src/store/pg/budget-holds.ts'],
    tests: ['test/pg.budget.test.ts', 'test/pg.sync-budget.test.ts', 'test/pg.budget-reclaim.test.ts', 'test/pg.budget-holds.test.ts', 'test/pg.work-store.test.ts'],
  },
  // A worker's moves grouped into shared transactions on PostgreSQL: each settles after its COMMIT, one that fails
  // undoes none of the others; a move's file rows and mark written by its own statement, nothing by a refused one.
  moves: {
    mutate: ['src/store/pg/move-group.ts', 'src/store/pg/move-writes.ts'],
    tests: ['test/pg.move-group.test.ts', 'test/workstore.behaviour.test.ts', 'test/pg.work-store.test.ts'],
  },
  // The sandbox's connection caps: a connection past a cap gets a 503 for its request (nothing made, sent again),
  // never a cut after the client wrote a submit (an uncertain job); a slowloris still costs little.
  connections: {
    mutate: ['src/sandbox/connections.ts'],
    tests: ['test/sandbox.connections.test.ts'],
  },
  // Completion callbacks are hints, never a source: read at once, adopted only from the job's latest submit and
  // only a task no other job records, anything else ignored and counted; none dropped in a submit's last step.
  callbacks: {
    mutate: ['src/engine/pipeline/callbacks.ts'],
    tests: ['test/pipeline.callbacks.test.ts'],
  },
};
