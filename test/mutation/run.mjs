// npm run test:mutation [-- group ...]: StrykerJS, one group of test/mutation/groups.mjs at a time, then a table
// of the mutation score per module of every group run.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { GROUPS } from './groups.mjs';

const asked = process.argv.slice(2);
const names = asked.length ? asked : Object.keys(GROUPS);
for (const n of names) if (!GROUPS[n]) throw new Error(`unknown group ${n}: one of ${Object.keys(GROUPS).join(', ')}`);

const rows = [];
let failed = false;
for (const name of names) {
  const g = GROUPS[name];
  console.log(`\n== ${name}: ${g.mutate.join(', ')} against ${g.tests.join(', ')}`);
  const r = spawnSync('npx', ['stryker', 'run', 'test/mutation/stryker.config.mjs'], {
    stdio: 'inherit',
    env: { ...process.env, MUTATION_GROUP: name, MUTATION_TESTS: g.tests.join(',') },
  });
  if (r.status !== 0) {
    failed = true;
    continue;
  }
  const report = JSON.parse(readFileSync(`reports/mutation/${name}.json`, 'utf8'));
  for (const [file, { mutants }] of Object.entries(report.files)) {
    const count = (s) => mutants.filter((m) => s.includes(m.status)).length;
    const killed = count(['Killed', 'Timeout']);
    const survived = count(['Survived', 'NoCoverage']);
    rows.push({ group: name, file, killed, survived, score: killed + survived ? (100 * killed) / (killed + survived) : 100 });
  }
}
console.log('\nmutation score per module (killed / (killed + survived + no coverage)):');
for (const r of rows) console.log(`  ${r.score.toFixed(1).padStart(5)}%  ${String(r.killed).padStart(4)} killed  ${String(r.survived).padStart(4)} alive  ${r.file}  (${r.group})`);
if (failed) process.exitCode = 1;
