import { extname } from 'node:path';

/** A JSONL manifest's name (`.jsonl`, `.ndjson`): apart from jsonl.ts, so that telling the format apart loads no reader. */
export function isJsonlPath(file: string): boolean {
  return ['.jsonl', '.ndjson'].includes(extname(file).toLowerCase());
}
