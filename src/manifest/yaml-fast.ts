/**
 * The common shape of a job item read without the yaml library's lexer and
 * parser (most of the per-job cost of a big manifest: ~0.3 ms per item before
 * V8 has optimised the library, ~40 us after). Only a strict subset is taken:
 *
 *   - key: value           block mappings only, nested by indentation;
 *     key: value           keys: [A-Za-z_][A-Za-z0-9_]* (not true/false/null
 *     input:                 words, not an object-machinery key);
 *       key: "text"        values: "double" or 'single' quoted text without
 *                            escapes, plain words that YAML 1.2 reads as
 *                            text, small integers, true and false.
 *
 * Anything else (comments, lists, flow collections, block scalars, escapes,
 * floats, null, anchors, tabs, control characters, a duplicate key, odd
 * indentation) returns null and the item is parsed by the yaml library, as
 * before. The yaml library still gives every position: an item read here
 * is parsed by it only when a problem needs a `file:line` (yaml-batch.ts).
 * test/manifest.fast.test.ts compares both on generated items.
 */

/** Any character outside printable ASCII, the BMP's printable range, and the separators YAML treats apart. */
const UNSAFE_CHAR = /[^\n\x20-\x7e\u00a0-\ud7ff\ue000-\ufffd]|[\u2028\u2029\ufeff]/;
const FIRST_LINE = /^( *)- ([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$/;
const KEY_LINE = /^( *)([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$/;
const DOUBLE = /^"([^"\\]*)"$/;
const SINGLE = /^'([^']*)'$/;
/** A plain scalar that the YAML 1.2 core schema reads as a string (starts with a letter or _, no indicator characters). */
const PLAIN_TEXT = /^[A-Za-z_][A-Za-z0-9_./-]*$/;
const INT = /^-?(?:0|[1-9][0-9]{0,14})$/;
/** Words the core schema reads as booleans or null (only exact `true` and `false` are taken here). */
const SPECIAL_WORD = /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE|[Nn]ull|NULL)$/;
const MACHINERY = new Set(['__proto__', 'constructor', 'prototype']);
/** Nesting of mappings taken here (deeper items go to the library). */
const MAX_LEVELS = 8;
/** YAML limits implicit keys to 1024 characters; keys are kept far below that. */
const MAX_KEY = 128;

type Obj = Record<string, unknown>;

function scalar(text: string): { value: unknown } | null {
  if (text === '' || text.startsWith(' ') || text.endsWith(' ')) return null;
  let m = DOUBLE.exec(text);
  if (m) return { value: m[1] };
  m = SINGLE.exec(text);
  if (m) return { value: m[1] };
  if (text === 'true') return { value: true };
  if (text === 'false') return { value: false };
  if (INT.test(text)) return text === '-0' ? null : { value: Number(text) };
  if (PLAIN_TEXT.test(text) && !SPECIAL_WORD.test(text)) return { value: text };
  return null;
}

/** The value of one `jobs` item (its text as cut by yaml-split.ts), or null when it is not of the simple shape. */
export function fastItem(text: string): Obj | null {
  if (UNSAFE_CHAR.test(text)) return null;
  const lines = text.split('\n');
  const first = FIRST_LINE.exec(lines[0] ?? '');
  if (!first) return null;
  const root: Obj = {};
  const stack: Array<{ indent: number; obj: Obj }> = [{ indent: (first[1] ?? '').length + 2, obj: root }];
  /** The key whose value is a mapping on the next lines, and the mapping it belongs to. */
  let open = put(root, first[2] ?? '', first[3]);
  if (open === false) return null;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (/^ *$/.test(line)) continue;
    const m = KEY_LINE.exec(line);
    if (!m) return null;
    const indent = (m[1] ?? '').length;
    if (open !== null) {
      const top = stack[stack.length - 1];
      if (!top || indent <= top.indent || stack.length >= MAX_LEVELS) return null;
      const child: Obj = {};
      open.obj[open.key] = child;
      stack.push({ indent, obj: child });
    } else {
      while (stack.length > 0 && (stack[stack.length - 1]?.indent ?? 0) > indent) stack.pop();
      if (stack[stack.length - 1]?.indent !== indent) return null;
    }
    const top = stack[stack.length - 1];
    if (!top) return null;
    open = put(top.obj, m[2] ?? '', m[3]);
    if (open === false) return null;
  }
  // A key with nothing under it is null in YAML: left to the library.
  return open === null ? root : null;
}

/** Sets `key` of `obj` from the rest of its line: null when done, the open key when a mapping follows, false when not taken here. */
function put(obj: Obj, key: string, rest: string | undefined): { key: string; obj: Obj } | null | false {
  if (key.length > MAX_KEY || MACHINERY.has(key) || SPECIAL_WORD.test(key) || Object.hasOwn(obj, key)) return false;
  if (rest === undefined) return { key, obj };
  const s = scalar(rest);
  if (!s) return false;
  obj[key] = s.value;
  return null;
}
