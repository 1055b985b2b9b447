/**
 * Whether a tool some tests need is here. Without it those tests are skipped on a developer's machine (the
 * caller's skipIf); with CI=true a missing tool is a failure instead, so CI never passes by skipping
 * (.ci/run installs every tool; .ci/check-skips.mjs also fails any skipped test outside its allow-list).
 */
export function toolPresent(tool: string, present: boolean, install: string): boolean {
  if (!present && process.env.CI === 'true') {
    throw new Error(`CI=true and ${tool} is missing: the tests that need it cannot run (${install})`);
  }
  return present;
}
