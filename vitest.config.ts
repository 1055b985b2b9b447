import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ when a source is newer than it, once per run (the CLI tests spawn bin/genbatch.js).
    globalSetup: ['test/global-setup.ts'],
    // A guard against a test that hangs, not a speed check: an end-to-end test that takes 16 s alone took up to
    // 25 s on a busy machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll waits on real processes, servers and a browser: vitest's default of 1 s failed a view test in CI
    // when the rest of a large page's rows took longer on a loaded machine. A poll that passes returns as soon as it
    // does; only a wrong result waits the whole 15 s.
    expect: { poll: { timeout: 15_000 } },
    pool: 'forks',
    // Test files share their worker's process, one after another (vitest's default starts a process per file):
    // the sources are imported once per worker instead of once per file (169 s of the suite's import time went
    // to 26 s) and the embedded PostgreSQL of test/helpers/pg.ts starts once per worker instead of once per
    // file that uses it (25 files). No test mocks a module or changes process.env, so nothing leaks between
    // files but open handles, which each file closes in its afterAll.
    isolate: false,
    // Two test files at a time on a 2-core machine (vitest's default there is one): most tests wait on
    // child processes, sandboxes and timers, not on the CPU. Measured: one -> two, 375 s -> 247 s for the suite
    // (when it was smaller). Three were tried (2026-11-28): the suite took 668-789 s instead of ~800-850 s, but
    // the CPUs were then 96% busy and three of five full CI runs failed a test on time (a retry wait, a sandbox
    // task, a callback's status read outrun by the load). All three are fixed (the third was a race in the runner:
    // a callback dropped between the task id's commit and its fsync; test/pipeline.callbacks.test.ts). Two stay
    // until several full CI runs at three have shown no fourth.
    maxWorkers: 2,
    // In CI the results are also written as JSON, which .ci/check-skips.mjs reads: a skipped test outside
    // its allow-list fails CI.
    ...(process.env.CI === 'true'
      ? { reporters: ['default', 'json'], outputFile: { json: '.ci/.vitest-results.json' } }
      : {}),
  },
});
