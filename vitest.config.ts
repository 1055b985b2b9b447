import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ when a source is newer than it, once per run (the CLI tests spawn bin/genbatch.js).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two test files at a time on a 2-core machine (vitest's default there is one): most tests wait on
    // child processes, sandboxes and timers, not on the CPU. Measured: 375 s -> 247 s for the suite.
    maxWorkers: 2,
    // In CI the results are also written as JSON, which .ci/check-skips.mjs reads: a skipped test outside
    // its allow-list fails CI.
    ...(process.env.CI === 'true'
      ? { reporters: ['default', 'json'], outputFile: { json: '.ci/.vitest-results.json' } }
      : {}),
  },
});
