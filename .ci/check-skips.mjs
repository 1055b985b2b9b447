// Reads the JSON results vitest wrote under CI=true (vitest.config.ts) and fails when any test was skipped
// (or left as todo) outside the allow-list below: CI must not pass by skipping. Run by .ci/run after npm test.
import { readFileSync } from 'node:fs';

/** Tests that may skip in CI, each with the reason it cannot always run. Keep it short. */
const ALLOWED = [
  // Needs an address of this machine other than loopback; a CI container may have none.
  { file: 'test/sandbox.admin-token.test.ts', title: 'a caller from a non-loopback address needs the token' },
  // Needs /dev/shm on another file system than the temporary folder, to copy across devices.
  { file: 'test/review.export.test.ts', title: 'copies (and checks) each file when the export folder is on another filesystem' },
];

const path = process.argv[2] ?? '.ci/.vitest-results.json';
const results = JSON.parse(readFileSync(path, 'utf8'));
const root = process.cwd() + '/';
const skipped = [];
let total = 0;
for (const file of results.testResults ?? []) {
  const name = String(file.name).startsWith(root) ? String(file.name).slice(root.length) : String(file.name);
  for (const t of file.assertionResults ?? []) {
    total++;
    if (t.status === 'passed' || t.status === 'failed') continue;
    const allowed = ALLOWED.some((a) => a.file === name && a.title === t.title);
    if (!allowed) skipped.push(`${name} > ${t.fullName ?? t.title} (${t.status})`);
  }
}
if (total === 0) {
  console.error(`check-skips: no test results in ${path}`);
  process.exit(1);
}
if (skipped.length > 0) {
  console.error(`check-skips: ${skipped.length} test(s) did not run in CI (only the allow-list in .ci/check-skips.mjs may):`);
  for (const s of skipped) console.error(`  ${s}`);
  process.exit(1);
}
console.log(`check-skips: ${total} tests, none skipped outside the allow-list`);
