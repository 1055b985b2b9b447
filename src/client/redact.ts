/**
 * The API key out of everything the service sends back. A server may echo the key (an error
 * message "content policy for key sk-...", a file URL "...?token=sk-..."), and whatever it sends
 * is stored, reported, printed and used as file names: every string of every answer goes through
 * here first. The key is matched as it is, percent-encoded, and inside percent-encoded text.
 */

export const REDACTED = '[redacted]';

function forms(apiKey: string): string[] {
  if (apiKey.length < 4) return [];
  const encoded = encodeURIComponent(apiKey);
  return encoded === apiKey ? [apiKey] : [apiKey, encoded];
}

function decoded(text: string): string | null {
  if (!text.includes('%')) return null;
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** `text` with every occurrence of the key replaced by [redacted] (percent-encoded text that holds it: decoded, then redacted). */
export function redact(text: string, apiKey: string): string {
  const keys = forms(apiKey);
  let out = text;
  for (const k of keys) if (out.includes(k)) out = out.split(k).join(REDACTED);
  const plain = decoded(out);
  if (plain !== null && keys.some((k) => plain.includes(k))) return redact(plain, apiKey);
  return out;
}

function holds(text: string, keys: readonly string[]): boolean {
  if (keys.some((k) => text.includes(k))) return true;
  const plain = decoded(text);
  return plain !== null && keys.some((k) => plain.includes(k));
}

/**
 * A parsed JSON value with the key redacted from every string and property name, changed in place
 * (it is the caller's own copy) and returned. Iterative: nesting depth costs no stack.
 */
export function redactDeep<T>(value: T, apiKey: string): T {
  const keys = forms(apiKey);
  if (keys.length === 0) return value;
  if (typeof value === 'string') return (holds(value, keys) ? redact(value, apiKey) : value) as T;
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const node = todo.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v: unknown = node[i];
        if (typeof v === 'string') {
          if (holds(v, keys)) node[i] = redact(v, apiKey);
        } else if (typeof v === 'object' && v !== null) todo.push(v);
      }
      continue;
    }
    const obj = node as Record<string, unknown>;
    for (const name of Object.keys(obj)) {
      const v = obj[name];
      if (typeof v === 'string' && holds(v, keys)) obj[name] = redact(v, apiKey);
      else if (typeof v === 'object' && v !== null) todo.push(v);
      if (holds(name, keys)) {
        const clean = redact(name, apiKey);
        Object.defineProperty(obj, clean, { value: obj[name], enumerable: true, writable: true, configurable: true });
        delete obj[name];
      }
    }
  }
  return value;
}
