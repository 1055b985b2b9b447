import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { MAX_INPUT_FIELDS } from '../src/models/index.js';

/**
 * A submit with more fields than any input holds is refused with one 400 before the schema walks
 * them (issue #16 item 7): a 1 MiB body with 131,000 unknown fields made zod list 131,000 issues
 * and the sandbox answered 500 (Maximum call stack size exceeded) after 0.5 s of CPU.
 */

const open: Sandbox[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function submit(body: string): Promise<{ status: number; json: { code?: number; error?: { type?: string; message?: string } } }> {
  const sb = await startSandbox({ port: 0, keys: { k1: 1000 }, timeScale: 0.0001, seed: 1 });
  open.push(sb);
  const res = await fetch(`${sb.url}/api/generate/submit`, { method: 'POST', headers: { authorization: 'Bearer k1', 'content-type': 'application/json' }, body });
  return { status: res.status, json: (await res.json()) as { error?: { type?: string; message?: string } } };
}

const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** `"0":0,"1":0,...` with `n` fields named in base 62 (131,000 of them fit in 1 MiB). */
function fields(n: number): string {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    let name = '';
    for (let k = i; ; k = Math.floor(k / 62) - 1) {
      name = DIGITS[k % 62] + name;
      if (k < 62) break;
    }
    parts.push(`"${name}":0`);
  }
  return parts.join(',');
}

describe('sandbox submit with too many fields', () => {
  it('131,000 unknown fields in input (a 1 MiB body): 400 validation_error naming input and the limit, no task', async () => {
    const body = `{"model":"alpha-image-2","input":{"prompt":"a cat",${fields(131_000)}}}`;
    expect(body.length).toBeLessThan(1024 * 1024);
    const r = await submit(body);
    expect(r.status).toBe(400);
    expect(r.json.error).toEqual({ type: 'validation_error', message: 'input: has more than 1,000 fields (keys and list items, counted at every depth); at most 1,000' });
    expect(open[0]!.stats().tasks_total).toBe(0);
  });

  it('131,000 unknown fields at the root of the body: 400 naming the body', async () => {
    const body = `{"model":"vendora/dream-v5.0-flash/text-to-image","input":{"prompt":"a cat"},${fields(131_000)}}`;
    expect(body.length).toBeLessThan(1024 * 1024);
    const r = await submit(body);
    expect(r.status).toBe(400);
    expect(r.json.error?.message).toBe('body: has more than 1,000 fields (model, input, callback_url); at most 1,000');
  });

  it('a list of 131,000 wrong items in input: 400 at the limit, not one issue per item', async () => {
    const r = await submit(`{"model":"alpha-image-2","input":{"prompt":"a cat","image_urls":[${Array(131_000).fill('1').join(',')}]}}`);
    expect(r.status).toBe(400);
    expect(r.json.error?.message).toMatch(/^input: has more than 1,000 fields/);
  });

  it(`an input of exactly ${MAX_INPUT_FIELDS} fields is checked field by field as before`, async () => {
    const r = await submit(`{"model":"alpha-image-2","input":{"prompt":"a cat",${fields(MAX_INPUT_FIELDS - 1)}}}`);
    expect(r.status).toBe(400);
    expect(r.json.error?.message).toMatch(/unknown field \(not accepted by this model\)/);
  });
});
