// Sums self time of a V8 .cpuprofile (node --cpu-prof) per function and per file.
// Usage: node bench/prof-summary.mjs <file.cpuprofile> [--top 40]
import { readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) {
  console.error('usage: node bench/prof-summary.mjs <file.cpuprofile> [--top N]');
  process.exit(2);
}
const ti = process.argv.indexOf('--top');
const TOP = ti > 0 ? Number(process.argv[ti + 1]) : 40;
const prof = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
const deltas = prof.timeDeltas;
for (let i = 0; i < prof.samples.length; i++) {
  const id = prof.samples[i];
  self.set(id, (self.get(id) ?? 0) + (deltas[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const short = (url) => {
  if (!url) return '(native)';
  const m = /\/(dist|node_modules)\/(.*)$/.exec(url);
  if (m) return m[1] === 'node_modules' ? 'nm/' + m[2].split('/').slice(0, m[2].startsWith('@') ? 2 : 1).join('/') : m[2];
  return url.replace(/^node:/, 'node:').replace(/^file:\/\/.*\//, '');
};
const byFn = new Map();
const byFile = new Map();
for (const [id, us] of self) {
  const n = byId.get(id);
  const cf = n.callFrame;
  const f = short(cf.url);
  const key = `${cf.functionName || '(anon)'} ${f}:${cf.lineNumber + 1}`;
  byFn.set(key, (byFn.get(key) ?? 0) + us);
  byFile.set(f, (byFile.get(f) ?? 0) + us);
}
const pr = (m, title) => {
  console.log(`\n== ${title} (total ${(total / 1e6).toFixed(2)} s sampled) ==`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${(us / 1000).toFixed(0).padStart(7)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`);
};
pr(byFile, 'self time per file');
pr(byFn, 'self time per function');

// Native and Node-internal time charged to the nearest caller in our code or a library
// (e.g. the fsync of a FileHandle under download.js counts for download.js).
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const owner = new Map();
const ownerOf = (id) => {
  if (owner.has(id)) return owner.get(id);
  const n = byId.get(id);
  const url = n.callFrame.url;
  let o;
  if (/\/(dist|node_modules)\//.test(url)) o = short(url);
  else if (n.callFrame.functionName === '(garbage collector)' || n.callFrame.functionName === '(idle)' || n.callFrame.functionName === '(program)') o = n.callFrame.functionName;
  else o = parent.has(id) ? ownerOf(parent.get(id)) : `(no owner) ${short(url)}`;
  owner.set(id, o);
  return o;
};
const byOwner = new Map();
for (const [id, us] of self) {
  const o = ownerOf(id);
  byOwner.set(o, (byOwner.get(o) ?? 0) + us);
}
pr(byOwner, 'self time charged to the nearest project or library file');
