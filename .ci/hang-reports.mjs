// Prints a short summary of each Node diagnostic report in .ci/.hang-reports/ (written by a CLI child of a test
// that was still running 45 s after it started: test/helpers/hang.ts): its command, JavaScript stack, native
// stack and open handles. Nothing there: prints nothing.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = new URL('.hang-reports/', import.meta.url).pathname;
let files = [];
try {
  files = readdirSync(dir).filter((f) => f.endsWith('.json'));
} catch {
  // no folder: no CLI run was ever watched long enough
}
for (const f of files) {
  let r;
  try {
    r = JSON.parse(readFileSync(join(dir, f), 'utf8'));
  } catch (err) {
    console.log(`hang report ${f}: unreadable (${err.message})`);
    continue;
  }
  const h = r.header ?? {};
  console.log(`\n== hang report ${f}: pid ${h.processId}, ${(h.commandLine ?? []).slice(4).join(' ').slice(0, 300)}`);
  console.log(`javascript: ${r.javascriptStack?.message ?? ''}\n  ${(r.javascriptStack?.stack ?? []).slice(0, 15).join('\n  ')}`);
  console.log(`native:\n  ${(r.nativeStack ?? []).slice(0, 12).map((s) => s.symbol).join('\n  ')}`);
  const handles = (r.libuv ?? []).filter((x) => x.is_active).map((x) => `${x.type}${x.remoteEndpoint ? ` -> ${x.remoteEndpoint.host}:${x.remoteEndpoint.port}` : ''}${x.filename ? ` ${x.filename}` : ''}${x.firesInMsFromNow !== undefined ? ` in ${x.firesInMsFromNow} ms` : ''}`);
  console.log(`active handles: ${handles.join('; ').slice(0, 1500)}`);
}
if (files.length > 0) console.log(`\n${files.length} CLI process(es) still running 45 s after they started (reports in .ci/.hang-reports/)`);
