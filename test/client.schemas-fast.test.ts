import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { EnvelopeSchema, SubmitResultSchema, TaskSchema, fastEnvelopeData, fastSubmitResult, fastTask } from '../src/client/schemas.js';

/**
 * The fast paths of src/client/schemas.ts against their zod schemas, on
 * bodies generated from the documented shape with every field dropped,
 * retyped or added (seeded, so a failure repeats). Whenever a fast path
 * answers, zod must accept the same body and give the same value: same
 * values, same keys in the same order at every level, same prototypes, and
 * new objects exactly where zod makes new ones.
 */

/** mulberry32: a small seeded PRNG. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD_VALUES = ['null', 'true', 'false', '0', '-0', '-1', '1.5', '100', '100.5', '101', '9007199254740991', '9007199254740992', '1e300', '""', '"x"', '"finished"', '"running"', '[]', '[1]', '{}', '{"a":1}', '{"__proto__":{"a":1}}'];
const STATUSES = ['"not_started"', '"running"', '"finished"', '"failed"', '"finished"', '"running"', '"finished"', '"failed"', '"Finished"', '"done"', '""'];
const EXTRA_KEYS = ['extra', '__proto__', 'constructor', '1', '0', 'toString', 'hasOwnProperty', 'files2', 'é'];

type Gen = () => number;
const pick = <T>(r: Gen, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;

/** A JSON object text from [key, json] pairs (JSON text, so `__proto__` stays an own key once parsed). */
const obj = (pairs: [string, string][]): string => `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;

/** Each field kept (usually), dropped, or given an odd value; some extra keys, in random places. */
function mutate(r: Gen, fields: [string, () => string][], rate: number): string {
  const pairs: [string, string][] = [];
  for (const [k, good] of fields) {
    const x = r();
    if (x < rate / 2) continue;
    pairs.push([k, x < rate ? pick(r, ODD_VALUES) : good()]);
  }
  const extras = r() < 0.3 ? 1 + Math.floor(r() * 3) : 0;
  for (let i = 0; i < extras; i++) pairs.splice(Math.floor(r() * (pairs.length + 1)), 0, [pick(r, EXTRA_KEYS), pick(r, ODD_VALUES)]);
  return obj(pairs);
}

function metadata(r: Gen): string {
  return pick(r, ['{}', '{"width":1024,"height":1024}', '{"2":1,"a":{"b":[1]},"1":3}', '{"nested":{"deep":null}}', '{"toString":"x"}', '{"width":1}', '{"__proto__":{"x":1}}', '{"constructor":1}', '[]', 'null', '"x"']);
}

function fileEntry(r: Gen, rate: number): string {
  if (r() < 0.05) return pick(r, ODD_VALUES);
  return mutate(
    r,
    [
      ['file_url', () => pick(r, ['"http://127.0.0.1/files/t/1.png"', '"x"', '"http://127.0.0.1/files/t/1.png"', '"x"', '""'])],
      ['file_type', () => pick(r, ['"image"', '"video"', '"image"', '"video"', '""'])],
      ['label', () => '"main"'],
      ['format', () => '"png"'],
      ['content_type', () => '"image/png"'],
      ['file_name', () => '"1.png"'],
      ['file_size', () => pick(r, ['5641', '0', '5641', '9007199254740991', '-1', '1.5', '9007199254740992'])],
      ['metadata', () => metadata(r)],
    ],
    rate,
  );
}

function taskBody(r: Gen, rate: number): string {
  return mutate(
    r,
    [
      ['task_id', () => pick(r, ['"t-1"', '"a"', '"t-1"', '""'])],
      ['status', () => pick(r, STATUSES)],
      ['created_time', () => '"2026-11-21T10:00:00"'],
      ['progress', () => pick(r, ['0', '100', '40.5', '-0', '0', '100', '40.5', '-1', '100.01'])],
      ['error_message', () => pick(r, ['null', '"policy"', '""'])],
      ['files', () => (r() < 0.1 ? 'null' : `[${Array.from({ length: Math.floor(r() * 3) }, () => fileEntry(r, rate)).join(',')}]`)],
    ],
    rate,
  );
}

function submitBody(r: Gen, rate: number): string {
  return mutate(
    r,
    [
      ['task_id', () => pick(r, ['"t-1"', '"t-1"', '"t-1"', '""', JSON.stringify('t'.repeat(256)), JSON.stringify('t'.repeat(257)), '"t-\\u001b[2J"', '"t-\\u202e"'])],
      ['status', () => pick(r, STATUSES)],
      ['created_time', () => '"2026-11-21T10:00:00"'],
    ],
    rate,
  );
}

/**
 * Same value, same key order and prototypes everywhere, and at each place
 * the same answer to "is this the very object of the input?".
 */
function sameAsZod(fast: unknown, zod: unknown, input: unknown, path = '$'): void {
  if (typeof zod !== 'object' || zod === null) {
    expect(Object.is(fast, zod), path).toBe(true);
    return;
  }
  expect(typeof fast === 'object' && fast !== null, path).toBe(true);
  const f = fast as Record<string, unknown>;
  const z = zod as Record<string, unknown>;
  expect(Object.getPrototypeOf(f), path).toBe(Object.getPrototypeOf(z));
  expect(Array.isArray(f), path).toBe(Array.isArray(z));
  expect(Object.keys(f), path).toEqual(Object.keys(z));
  expect(f === input, `${path} is the input's own object`).toBe(z === input);
  const inObj = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : undefined;
  for (const k of Object.keys(z)) sameAsZod(f[k], z[k], inObj && Object.hasOwn(inObj, k) ? inObj[k] : undefined, `${path}.${k}`);
}

function compare<S extends z.ZodType>(schema: S, fast: (d: unknown) => unknown, text: string): boolean {
  const input: unknown = JSON.parse(text);
  const quick = fast(input);
  if (quick === undefined) return false;
  const r = schema.safeParse(JSON.parse(text));
  const rSame = schema.safeParse(input);
  expect(r.success, text).toBe(true);
  expect(JSON.stringify(quick), text).toBe(JSON.stringify(r.data));
  sameAsZod(quick, rSame.data, input);
  return true;
}

describe('fast paths give exactly what zod gives, or leave the body to zod', () => {
  it('TaskSchema: 20,000 generated status bodies', () => {
    const r = rng(20261122);
    let fast = 0;
    const n = 20_000;
    for (let i = 0; i < n; i++) if (compare(TaskSchema, fastTask, taskBody(r, i % 2 === 0 ? 0.02 : 0.15))) fast++;
    // Not vacuous: plenty of bodies go the fast way, and plenty do not.
    expect(fast).toBeGreaterThan(n * 0.1);
    expect(fast).toBeLessThan(n * 0.9);
  });

  it('SubmitResultSchema: 5,000 generated submit answers', () => {
    const r = rng(7);
    let fast = 0;
    for (let i = 0; i < 5_000; i++) if (compare(SubmitResultSchema, fastSubmitResult, submitBody(r, 0.3))) fast++;
    expect(fast).toBeGreaterThan(500);
  });

  it('the success envelope: data taken only when EnvelopeSchema accepts it with code absent or 200', () => {
    const r = rng(99);
    let fast = 0;
    for (let i = 0; i < 5_000; i++) {
      const text = mutate(r, [['code', () => pick(r, ['200', '201', '"200"', 'null', '402'])], ['data', () => pick(r, ODD_VALUES)]], 0.3);
      const input: unknown = JSON.parse(text);
      const quick = fastEnvelopeData(input);
      if (quick === undefined) continue;
      fast++;
      const env = EnvelopeSchema.safeParse(input);
      expect(env.success, text).toBe(true);
      expect(env.data?.data, text).toBe(quick);
      expect(env.data?.code === undefined || env.data?.code === 200, text).toBe(true);
    }
    expect(fast).toBeGreaterThan(500);
    // Arrays and non-objects are never read as an envelope.
    for (const t of ['[1]', 'null', '3', '"x"', '{"code":200}', '{"data":null,"code":500}']) {
      const v: unknown = JSON.parse(t);
      const env = EnvelopeSchema.safeParse(v);
      const zodData = env.success && env.data.data !== undefined && (env.data.code === undefined || env.data.code === 200) ? env.data.data : undefined;
      expect(fastEnvelopeData(v), t).toBe(zodData);
    }
  });

  it('the bodies of the sandbox and of the service documentation take the fast way', () => {
    const sandbox = '{"task_id":"cded27710af9c011431c8c169d8b4cdb","status":"finished","files":[{"file_url":"http://127.0.0.1:38757/files/c/c-1.jpg","file_type":"image","format":"jpeg","content_type":"image/jpeg","file_name":"c-1.jpg","file_size":1980,"metadata":{"width":1024,"height":1024,"served_width":128,"served_height":128}}],"created_time":"2026-11-22T02:19:44","progress":100,"error_message":null}';
    expect(compare(TaskSchema, fastTask, sandbox)).toBe(true);
    expect(compare(TaskSchema, fastTask, '{"task_id":"t","status":"running","created_time":"x","progress":40}')).toBe(true);
    expect(compare(TaskSchema, fastTask, '{"task_id":"t","status":"failed","created_time":"x","files":null,"error_message":"content policy"}')).toBe(true);
    expect(compare(SubmitResultSchema, fastSubmitResult, '{"task_id":"t","status":"not_started","created_time":"2026-11-22T02:19:44"}')).toBe(true);
  });
});
