import { listModels } from '../../models/index.js';

export default async function models(opts: { json?: boolean }): Promise<number> {
  const rows = listModels().map((m) => ({ id: m.id, kind: m.kind, family: m.family, summary: m.summary }));
  if (opts.json) process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
  else for (const r of rows) process.stdout.write(`${r.id.padEnd(44)} ${r.kind.padEnd(6)} ${r.summary}\n`);
  return 0;
}
