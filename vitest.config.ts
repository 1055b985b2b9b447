import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two test files at a time on a 2-core machine (vitest's default there is one): most tests wait on
    // child processes, sandboxes and timers, not on the CPU. Measured: 375 s -> 247 s for the suite.
    maxWorkers: 2,
  },
});
