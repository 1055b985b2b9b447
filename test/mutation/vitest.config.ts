import { defineConfig } from 'vitest/config';

// The vitest configuration Stryker runs (test/mutation/run.mjs): only the test files of the group being
// mutated (MUTATION_TESTS, comma-separated), no build step (the group's tests import src/ directly).
const tests = (process.env.MUTATION_TESTS ?? '').split(',').filter(Boolean);

export default defineConfig({
  test: {
    include: tests.length ? tests : ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
