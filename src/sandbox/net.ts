import { isIP } from 'node:net';

/**
 * Address checks for callback URLs (and remote upload URLs): which hosts are
 * loopback, and which are private or internal (refused unless loopback is allowed).
 * Names are judged by their text only (no DNS lookup): IP literals by range,
 * `localhost`, and internal-looking names (no dot, .local, .internal, .lan, .home.arpa).
 */

function v4(host: string): number[] | null {
  const parts = host.split('.');
  if (parts.length !== 4) return null;
  const n = parts.map(Number);
  return n.every((x) => Number.isInteger(x) && x >= 0 && x <= 255) ? n : null;
}

function bare(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '').toLowerCase();
}

export function isLoopbackHost(hostname: string): boolean {
  const h = bare(hostname);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const a = v4(h);
  if (a) return a[0] === 127;
  if (isIP(h) === 6) return h === '::1' || /^::ffff:127\./.test(h) || /^::ffff:7f/.test(h);
  return false;
}

function privateV4([a = 0, b = 0, c = 0]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || a >= 224 ||
    (a === 100 && b >= 64 && b <= 127) ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && c === 0) ||
    (a === 198 && (b === 18 || b === 19))
  );
}

/** Loopback, private, link-local, multicast, reserved, or an internal-looking name. */
export function isPrivateHost(hostname: string): boolean {
  const h = bare(hostname);
  if (isLoopbackHost(h)) return true;
  const a = v4(h);
  if (a) return privateV4(a);
  if (isIP(h) === 6) {
    if (h === '::' || h === '::1') return true;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h);
    if (mapped?.[1]) return privateV4(v4(mapped[1]) ?? [0]);
    return /^(f[cd]|fe[89ab]|ff)/.test(h) || h.startsWith('::ffff:');
  }
  if (!h.includes('.')) return true;
  return /\.(local|internal|lan|intranet|corp|home\.arpa|localdomain)$/.test(h);
}

/**
 * Why a callback URL is refused, or null when it is acceptable: HTTPS only,
 * at most 2048 characters, public address; with allowLoopback, http(s) to a
 * loopback host is accepted too.
 */
export function callbackUrlProblem(url: string, allowLoopback: boolean): string | null {
  if (url.length > 2048) return `must be at most 2048 characters (got ${url.length})`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be an absolute HTTPS URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an HTTPS URL';
  if (allowLoopback && isLoopbackHost(u.hostname)) return null;
  if (u.protocol !== 'https:') return 'must be an HTTPS URL';
  if (u.username || u.password) return 'must not carry credentials';
  if (isPrivateHost(u.hostname)) return 'must point to a publicly reachable host (private, loopback and internal addresses are refused)';
  return null;
}
