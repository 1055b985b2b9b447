// StrykerJS over one group of test/mutation/groups.mjs (MUTATION_GROUP), run by test/mutation/run.mjs.
import { GROUPS } from './groups.mjs';

const group = GROUPS[process.env.MUTATION_GROUP ?? ''];
if (!group) throw new Error(`MUTATION_GROUP must be one of: ${Object.keys(GROUPS).join(', ')}`);

export default {
  testRunner: 'vitest',
  vitest: { configFile: 'test/mutation/vitest.config.ts', related: false },
  plugins: ['@stryker-mutator/vitest-runner'],
  mutate: group.mutate,
  coverageAnalysis: 'perTest',
  // MUTATION_CONCURRENCY=1 where the machine is shared (default 2, one per core).
  concurrency: Number(process.env.MUTATION_CONCURRENCY ?? 2),
  // A mutant whose tests hang costs this much more than their time without it (MUTATION_TIMEOUT_MS: less on a
  // shared machine for groups whose tests take seconds, where a hang would cost a minute each).
  timeoutMS: Number(process.env.MUTATION_TIMEOUT_MS ?? 60_000),
  reporters: ['clear-text', 'json'],
  jsonReporter: { fileName: `reports/mutation/${process.env.MUTATION_GROUP}.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportMutants: true, reportScoreTable: true },
  // One folder per group, so that two groups can run at once; none copies another's.
  tempDirName: `.stryker-tmp-${process.env.MUTATION_GROUP}`,
  ignorePatterns: ['/.stryker-tmp*', '/reports', '/bench/.work'],
  cleanTempDir: 'always',
  // Static mutants (module-level tables such as TRANSITIONS) are the point of some groups: kept, each run
  // against every test of its group.
  ignoreStatic: false,
};
