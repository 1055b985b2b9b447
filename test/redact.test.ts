import { beforeEach, describe, expect, it } from 'vitest';
import { REDACTED, holdsKey, redact, redactDeep } from '../src/client/redact.js';

// The invariant: the API key never reaches a database, report, log or error, however a server echoes it.
const KEY = 'sk-Ab9.z+key';
/** Each byte of `s` percent-encoded, hex in the given case. */
// redact.ts keeps the patterns of the last key it saw: each test starts from another key, so each builds them anew
// (a test that only reused them would not see a change to how they are built).
beforeEach(() => {
  redact('x', 'a-key-that-resets-the-cache');
});
const enc = (s: string, upper = true) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`).join('');

describe('redact: the API key out of a text', () => {
  it.each([
    ['plain', `bad key ${KEY}!`],
    ['twice', `${KEY} and ${KEY}`],
    ['percent-encoded whole, upper-case hex', `u?t=${enc(KEY)}`],
    ['percent-encoded whole, lower-case hex', `u?t=${enc(KEY, false)}`],
    ['percent-encoded in part', `u?t=sk-Ab9${enc('.z+')}key`],
    ['encoded twice (%25 then the hex)', `u?t=${enc(KEY).replace(/%/g, '%25')}`],
    ['beside a stray % and a bad escape', `100% sure %zz ${enc(KEY)} %`],
    ['base64 alone', `k=${Buffer.from(KEY).toString('base64')}`],
    ['base64 of "Bearer <key>"', `auth: ${Buffer.from(`Bearer ${KEY}`).toString('base64')}`],
    ['base64 with one byte before', Buffer.from(`x${KEY}y`).toString('base64')],
    ['base64 with two bytes before', Buffer.from(`xy${KEY}`).toString('base64')],
    ['base64url', Buffer.from(`?${KEY}?`).toString('base64url')],
    ['hex, either case', `${Buffer.from(KEY).toString('hex')} ${Buffer.from(KEY).toString('hex').toUpperCase()}`],
  ])('%s', (_, text) => {
    const out = redact(text, KEY);
    expect(out).toContain(REDACTED);
    expect(holdsKey(text, KEY)).toBe(true);
    expect(holdsKey(out, KEY)).toBe(false);
    expect(out).not.toContain(KEY);
    expect(out.toLowerCase()).not.toContain(enc(KEY).toLowerCase());
  });

  it('keeps the rest of the text as it was, and a text without the key unchanged', () => {
    expect(redact(`a ${KEY} b`, KEY)).toBe(`a ${REDACTED} b`);
    expect(redact(`x=${enc(KEY)}&y=1`, KEY)).toBe(`x=${REDACTED}&y=1`);
    expect(redact('no key here, 50% off', KEY)).toBe('no key here, 50% off');
    expect(holdsKey('no key here, 50% off', KEY)).toBe(false);
    expect(holdsKey('sk-Ab9.z+ke', KEY)).toBe(false);
  });

  it('reads the key\'s characters literally, not as a pattern (. and + match only themselves)', () => {
    expect(redact('sk-Ab9XzzkeyQ', KEY)).toBe('sk-Ab9XzzkeyQ');
    expect(holdsKey('%41 sk-Ab9XzzkeyQ', KEY)).toBe(false);
    expect(redact('%41 sk-Ab9Xz+key', KEY)).toBe('%41 sk-Ab9Xz+key');
  });

  it('a key of fewer than 4 characters is not looked for (it would match everywhere)', () => {
    expect(redact('abc abc', 'abc')).toBe('abc abc');
    expect(holdsKey('abc', 'abc')).toBe(false);
    expect(redactDeep({ a: 'abc' }, 'abc')).toEqual({ a: 'abc' });
    expect(redact('abcd', 'abcd')).toBe(REDACTED);
    expect(holdsKey('xabcdx', 'abcd')).toBe(true);
    expect(redactDeep({ a: 'abcd' }, 'abcd')).toEqual({ a: REDACTED });
  });

  it('every percent-encoded occurrence, and a whole base64 or hex form leaves nothing of the key', () => {
    expect(redact(`a=${enc(KEY)}&b=${enc(KEY, false)}`, KEY)).toBe(`a=${REDACTED}&b=${REDACTED}`);
    expect(redact(`k=${Buffer.from(KEY).toString('base64')}`, KEY)).toBe(`k=${REDACTED}`);
    expect(redact(`k=${Buffer.from(KEY).toString('hex')}.`, KEY)).toBe(`k=${REDACTED}.`);
  });

  it('base64url of a key whose base64 holds + and /: redacted like its base64', () => {
    const key = 'sk->>>???-key';
    expect(Buffer.from(key).toString('base64')).toMatch(/[+/]/);
    // The last character ("Q") also holds padding bits, not the key's alone: it stays (2 bits of the last byte).
    expect(redact(`u=${Buffer.from(key).toString('base64url')}`, key)).toBe(`u=${REDACTED}Q`);
    expect(redact(`b=${Buffer.from(key).toString('base64')}`, key)).toBe(`b=${REDACTED}Q==`);
  });

  it('an encoded form shorter than 12 characters is not looked for (it would match unrelated text); one of 12 is', () => {
    expect(redact('x 61626364 y', 'abcd')).toBe('x 61626364 y');
    expect(holdsKey('61626364', 'abcd')).toBe(false);
    expect(redact('x 616263646566 y', 'abcdef')).toBe(`x ${REDACTED} y`);
  });

  it('a multi-byte key is found with each UTF-8 byte encoded', () => {
    const key = 'clé-€42';
    expect(redact(`k=${encodeURIComponent(key)}`, key)).toBe(`k=${REDACTED}`);
    expect(redact(`k=${key}`, key)).toBe(`k=${REDACTED}`);
  });

  it('another key given later is looked for instead of the first', () => {
    expect(redact(`${enc(KEY)}`, KEY)).toBe(REDACTED);
    expect(redact(`${enc('other-key-1')} ${enc(KEY)}`, 'other-key-1')).toBe(`${REDACTED} ${enc(KEY)}`);
    expect(redact(`${enc(KEY)}`, KEY)).toBe(REDACTED);
  });
});

describe('redactDeep: the key out of every string and property name of an answer', () => {
  it('in nested objects and arrays, values and names, plain and encoded', () => {
    const answer = {
      code: 200,
      data: {
        files: [{ file_url: `https://f/x.png?token=${enc(KEY)}` }, [`echo ${KEY}`, 7, null, { deeper: [`${KEY}`] }]],
        [`name-${KEY}`]: 'v',
        [`enc-${enc(KEY)}`]: { inner: `a${KEY}b` },
        keep: 'untouched',
      },
    };
    const out = redactDeep(answer, KEY);
    const text = JSON.stringify(out);
    expect(holdsKey(text, KEY)).toBe(false);
    expect(out.data.keep).toBe('untouched');
    expect(out.code).toBe(200);
    expect((out.data.files[0] as { file_url: string }).file_url).toBe(`https://f/x.png?token=${REDACTED}`);
    expect(Object.keys(out.data)).toEqual(expect.arrayContaining([`name-${REDACTED}`, `enc-${REDACTED}`]));
    expect((out.data as Record<string, unknown>)[`name-${REDACTED}`]).toBe('v');
    expect((out.data as Record<string, { inner: string }>)[`enc-${REDACTED}`]!.inner).toBe(`a${REDACTED}b`);
    expect(text).toContain(`"echo ${REDACTED}"`);
  });

  it('a renamed property is a plain one (enumerable, writable, configurable), and an answer that is null, a number or a boolean comes back as it is', () => {
    const out = redactDeep({ [`k-${KEY}`]: { v: 1 } }, KEY) as Record<string, unknown>;
    expect(Object.getOwnPropertyDescriptor(out, `k-${REDACTED}`)).toEqual({ value: { v: 1 }, enumerable: true, writable: true, configurable: true });
    expect(redactDeep(null, KEY)).toBeNull();
    expect(redactDeep(5, KEY)).toBe(5);
    expect(redactDeep(true, KEY)).toBe(true);
    expect(redactDeep([[`${KEY}`, null, [{ [KEY]: [KEY] }]]], KEY)).toEqual([[REDACTED, null, [{ [REDACTED]: [REDACTED] }]]]);
  });

  it('a string answer, and an answer nested deeper than the stack would allow', () => {
    expect(redactDeep(`x ${KEY}`, KEY)).toBe(`x ${REDACTED}`);
    expect(redactDeep('plain', KEY)).toBe('plain');
    let deep: unknown = [`${KEY}`];
    for (let i = 0; i < 100_000; i++) deep = { d: deep };
    const out = redactDeep(deep, KEY);
    let node = out as { d?: unknown };
    while (!Array.isArray(node)) node = node.d as { d?: unknown };
    expect(node).toEqual([REDACTED]);
  });
});
