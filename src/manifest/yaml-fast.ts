/**
 * The common shape of a job item read without the yaml library's lexer and
 * parser (most of the per-job cost of a big manifest: ~0.3 ms per item before
 * V8 has optimised the library, ~40 us after). Only a strict subset is taken:
 *
 *   - key: value           block mappings, nested by indentation;
 *     key: value           keys: [A-Za-z_][A-Za-z0-9_]* (not true/false/null
 *     input:                 words, not an object-machinery key);
 *       key: "text"        values: scalars, one-line flow collections
 *       list:                ({k: v, k: [a, b]}), or a block list of such
 *         - item             values (`- item` lines, indented or not);
 *                          scalars: "double" quoted (JSON's escapes only),
 *                            'single' quoted, plain text that YAML 1.2 reads
 *                            as text, small integers, true and false.
 *
 * Anything else (comments, block scalars, multi-line flow collections, other
 * escapes, floats, null, anchors, tabs, control characters, a duplicate key,
 * odd indentation) returns null and the item is parsed by the yaml library,
 * as before. The yaml library still gives every position: an item read here
 * is parsed by it only when a problem needs a `file:line` (yaml-batch.ts).
 * test/manifest.fast.test.ts compares both on generated items.
 */

/** Any character outside printable ASCII, the BMP's printable range, and the separators YAML treats apart. */
const UNSAFE_CHAR = /[^\n\x20-\x7e\u00a0-\ud7ff\ue000-\ufffd]|[\u2028\u2029\ufeff]/;
const FIRST_LINE = /^( *)- ([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$/;
const KEY_LINE = /^( *)([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$/;
const SEQ_LINE = /^( *)- (.*)$/;
const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Plain text in a block (may hold spaces, commas, brackets, quotes; no ": " and no " #"). */
const PLAIN_BLOCK = /^[A-Za-z0-9_./][^\n]*$/;
/** Plain text in a flow collection: no flow indicators, colons, quotes or #. */
const PLAIN_FLOW = /^[A-Za-z0-9_./][^,[\]{}:#"'\n]*$/;
/** Every form the YAML 1.2 core schema reads as a number (ints, octal, hex, floats, .inf, .nan). */
const NUMBER = /^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;
const INT = /^-?(?:0|[1-9][0-9]{0,14})$/;
/** Words the core schema reads as booleans or null (only exact `true` and `false` are taken here). */
const SPECIAL_WORD = /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE|[Nn]ull|NULL)$/;
const MACHINERY = new Set(['__proto__', 'constructor', 'prototype']);
/** Nesting of mappings taken here (deeper items go to the library). */
const MAX_LEVELS = 8;
/** YAML limits implicit keys to 1024 characters; keys are kept far below that. */
const MAX_KEY = 128;

type Obj = Record<string, unknown>;

/** A scalar's value, or null when it is not taken here. `flow`: inside a flow collection. */
function scalar(text: string, flow: boolean): { value: unknown } | null {
  if (text === '' || text.startsWith(' ') || text.endsWith(' ')) return null;
  const c = text.charCodeAt(0);
  if (c === 0x22) return isDouble(text) ? { value: JSON.parse(text) as string } : null;
  if (c === 0x27) return isSingle(text) ? { value: text.slice(1, -1).replaceAll("''", "'") } : null;
  if (text === 'true') return { value: true };
  if (text === 'false') return { value: false };
  if (INT.test(text)) return text === '-0' ? null : { value: Number(text) };
  if (NUMBER.test(text) || SPECIAL_WORD.test(text)) return null;
  if (flow) return PLAIN_FLOW.test(text) ? { value: text } : null;
  if (!PLAIN_BLOCK.test(text) || text.endsWith(':') || text.includes(': ') || text.includes(' #')) return null;
  return { value: text };
}

/*
 * The quoted scalars are checked by loops, not regular expressions: a pattern like /^"(?:[^"\\]|\\.)*"$/ keeps a
 * backtrack entry per character, and a 10 MB string overflowed V8's regexp stack (exit 70). Both are linear.
 */

/** Double quoted with JSON's escapes only (JSON.parse reads it as YAML does); \u escapes of surrogates are left out. */
function isDouble(text: string): boolean {
  const last = text.length - 1;
  if (last < 1 || text.charCodeAt(last) !== 0x22) return false;
  for (let i = 1; i < last; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) return false;
    if (c !== 0x5c) continue;
    const e = text[++i];
    if (e === 'u') {
      const hex = text.slice(i + 1, i + 5);
      if (i + 4 >= last || !/^[0-9a-fA-F]{4}$/.test(hex) || /^[dD][89a-fA-F]/.test(hex)) return false;
      i += 4;
    } else if (i >= last || e === undefined || !'"\\/bfnrt'.includes(e)) return false;
  }
  return true;
}

/** Single quoted: a quote inside is doubled. */
function isSingle(text: string): boolean {
  const last = text.length - 1;
  if (last < 1 || text.charCodeAt(last) !== 0x27) return false;
  for (let i = 1; i < last; i++) {
    if (text.charCodeAt(i) !== 0x27) continue;
    if (i + 1 >= last || text.charCodeAt(i + 1) !== 0x27) return false;
    i++;
  }
  return true;
}

/** A value after `key: ` or `- `: a one-line flow collection or a scalar. */
function value(text: string): { value: unknown } | null {
  const c = text.charCodeAt(0);
  if (c !== 0x7b && c !== 0x5b) return scalar(text, false);
  const flow = new Flow(text);
  const v = flow.collection();
  return v !== null && flow.atEnd() ? { value: v } : null;
}

/** A one-line flow collection: `{k: v, k: v}` and `[a, b]`, nested; each value a flow scalar or collection. */
class Flow {
  private i = 0;
  private depth = 0;
  constructor(private readonly s: string) {}

  atEnd(): boolean {
    this.spaces();
    return this.i === this.s.length;
  }

  private spaces(): void {
    while (this.s.charCodeAt(this.i) === 0x20) this.i++;
  }

  collection(): unknown {
    if (++this.depth > MAX_LEVELS) return null;
    const open = this.s[this.i];
    this.i++;
    const close = open === '{' ? '}' : ']';
    const out: Obj | unknown[] = open === '{' ? {} : [];
    this.spaces();
    if (this.s[this.i] === close) {
      this.i++;
      this.depth--;
      return out;
    }
    for (;;) {
      if (Array.isArray(out)) {
        const v = this.item();
        if (v === null) return null;
        out.push(v.value);
      } else {
        const key = this.key();
        if (key === null || Object.hasOwn(out, key)) return null;
        const v = this.item();
        if (v === null) return null;
        out[key] = v.value;
      }
      this.spaces();
      const c = this.s[this.i];
      this.i++;
      if (c === close) break;
      if (c !== ',') return null;
      this.spaces();
    }
    this.depth--;
    return out;
  }

  /** `key: ` (a plain key, or a double-quoted one as JSON writes it). */
  private key(): string | null {
    let key: string;
    if (this.s[this.i] === '"') {
      const end = this.s.indexOf('"', this.i + 1);
      if (end < 0) return null;
      key = this.s.slice(this.i + 1, end);
      if (key.includes('\\')) return null;
      this.i = end + 1;
    } else {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(this.s.slice(this.i));
      if (!m) return null;
      key = m[0];
      this.i += key.length;
    }
    if (!KEY.test(key) || key.length > MAX_KEY || MACHINERY.has(key) || SPECIAL_WORD.test(key)) return null;
    if (this.s[this.i] !== ':' || this.s[this.i + 1] !== ' ') return null;
    this.i += 2;
    this.spaces();
    return key;
  }

  /** A value inside the collection, up to the next `,` or closing bracket. */
  private item(): { value: unknown } | null {
    const c = this.s[this.i];
    if (c === '{' || c === '[') {
      const v = this.collection();
      return v === null ? null : { value: v };
    }
    let end = this.i;
    if (c === '"') {
      // The closing quote: the first " not escaped.
      for (end = this.i + 1; end < this.s.length && this.s[end] !== '"'; end += this.s[end] === '\\' ? 2 : 1);
      end++;
    } else if (c === "'") {
      for (end = this.i + 1; end < this.s.length; end++) {
        if (this.s[end] !== "'") continue;
        if (this.s[end + 1] !== "'") break;
        end++;
      }
      end++;
    } else {
      while (end < this.s.length && !',]}'.includes(this.s[end] as string)) end++;
    }
    const text = this.s.slice(this.i, end).trimEnd();
    this.i = end;
    return text === '' ? null : scalar(text, true);
  }
}

/** The value of one `jobs` item (its text as cut by yaml-split.ts), or null when it is not of the simple shape. */
export function fastItem(text: string): Obj | null {
  if (UNSAFE_CHAR.test(text)) return null;
  const lines = text.split('\n');
  const first = FIRST_LINE.exec(lines[0] ?? '');
  if (!first) return null;
  const root: Obj = {};
  const stack: Array<{ indent: number; obj: Obj }> = [{ indent: (first[1] ?? '').length + 2, obj: root }];
  /** The key whose value (a mapping or a list) is on the next lines, and the mapping it belongs to. */
  let open = put(root, first[2] ?? '', first[3]);
  if (open === false) return null;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (/^ *$/.test(line)) continue;
    const top = stack[stack.length - 1];
    if (!top) return null;
    const seq = open !== null ? SEQ_LINE.exec(line) : null;
    if (open !== null && seq) {
      // A block list under the open key: at the key's own indentation or deeper, one `- value` a line.
      const indent = (seq[1] ?? '').length;
      if (indent < top.indent) return null;
      const list: unknown[] = [];
      for (; i < lines.length; i++) {
        const l = lines[i] ?? '';
        if (/^ *$/.test(l)) continue;
        const m = SEQ_LINE.exec(l);
        if (!m || (m[1] ?? '').length !== indent) break;
        const v = value(m[2] ?? '');
        if (!v) return null;
        list.push(v.value);
      }
      open.obj[open.key] = list;
      open = null;
      i--;
      continue;
    }
    const m = KEY_LINE.exec(line);
    if (!m) return null;
    const indent = (m[1] ?? '').length;
    if (open !== null) {
      if (indent <= top.indent || stack.length >= MAX_LEVELS) return null;
      const child: Obj = {};
      open.obj[open.key] = child;
      stack.push({ indent, obj: child });
    } else {
      while (stack.length > 0 && (stack[stack.length - 1]?.indent ?? 0) > indent) stack.pop();
      if (stack[stack.length - 1]?.indent !== indent) return null;
    }
    const into = stack[stack.length - 1];
    if (!into) return null;
    open = put(into.obj, m[2] ?? '', m[3]);
    if (open === false) return null;
  }
  // A key with nothing under it is null in YAML: left to the library.
  return open === null ? root : null;
}

/** Sets `key` of `obj` from the rest of its line: null when done, the open key when a mapping follows, false when not taken here. */
function put(obj: Obj, key: string, rest: string | undefined): { key: string; obj: Obj } | null | false {
  if (key.length > MAX_KEY || MACHINERY.has(key) || SPECIAL_WORD.test(key) || Object.hasOwn(obj, key)) return false;
  if (rest === undefined) return { key, obj };
  const v = value(rest);
  if (!v) return false;
  obj[key] = v.value;
  return null;
}
