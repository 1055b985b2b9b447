import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Address checks for callback URLs (and remote upload URLs): which hosts are
 * loopback, and which are private or internal (refused unless loopback is allowed).
 * These judge the text of a URL's host (at submit: IP literals by range,
 * `localhost`, internal-looking names: no dot, .local, .internal, .lan, .home.arpa);
 * outgoing requests then check every address a name resolves to (guard.ts).
 */

function v4(host: string): number[] | null {
  const parts = host.split('.');
  if (parts.length !== 4) return null;
  const n = parts.map(Number);
  return n.every((x) => Number.isInteger(x) && x >= 0 && x <= 255) ? n : null;
}

/** A hostname without IPv6 brackets or the trailing dot of an absolute name (`localhost.` is `localhost`), lower case. */
function bare(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
}

export function isLoopbackHost(hostname: string): boolean {
  const h = bare(hostname);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const a = v4(h);
  if (a) return a[0] === 127;
  const g = v6(h);
  if (!g) return false;
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return true; // ::1
  const embedded = mappedOrCompatible(g);
  return embedded !== null && embedded[0] === 127;
}

/** The eight 16-bit groups of an IPv6 literal (a trailing dotted IPv4 part allowed), or null. */
export function v6(host: string): number[] | null {
  if (isIP(host) !== 6) return null;
  let text = host.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const q = v4(dotted[1]);
    if (!q) return null;
    text = `${text.slice(0, -dotted[1].length)}${(((q[0] ?? 0) << 8) | (q[1] ?? 0)).toString(16)}:${(((q[2] ?? 0) << 8) | (q[3] ?? 0)).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const a = head === '' ? [] : head.split(':');
  const b = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - a.length - b.length;
  const groups = [...a, ...Array<string>(Math.max(0, fill)).fill('0'), ...b].map((x) => parseInt(x, 16));
  return groups.length === 8 && groups.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffff) ? groups : null;
}

function quad(hi: number, lo: number): number[] {
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff];
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible (::a.b.c.d) address. */
function mappedOrCompatible(g: number[]): number[] | null {
  if (!g.slice(0, 5).every((x) => x === 0)) return null;
  if (g[5] === 0xffff || (g[5] === 0 && ((g[6] ?? 0) !== 0 || (g[7] ?? 0) > 1))) return quad(g[6] ?? 0, g[7] ?? 0);
  return null;
}

/**
 * Whether an IP literal is a special-purpose address: anything the IANA IPv4 and IPv6
 * special-purpose registries (and the multicast, link-local and reserved blocks) set apart,
 * as ipaddr.js's range table lists them; only its 'unicast' is public. The translation forms
 * that carry an IPv4 address (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96, 6to4 2002::/16)
 * are judged by that address; IPv4-compatible ::/96 (deprecated) is always refused.
 */
export function isSpecialAddress(ip: string): boolean {
  if (!ipaddr.isValid(ip)) return true;
  const addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv4') return addr.range() !== 'unicast';
  const g = (addr as ipaddr.IPv6).parts;
  const [a = 0, b = 0, c = 0, , , , y = 0, z = 0] = g;
  const embedded = (hi: number, lo: number) => ipaddr.fromByteArray(quad(hi, lo)).range() !== 'unicast';
  if (g.slice(0, 6).every((x) => x === 0)) return true; // ::, ::1, ::a.b.c.d
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return embedded(y, z);
  if (a === 0x64 && b === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return embedded(y, z);
  if (a === 0x2002) return embedded(b, c);
  return addr.range() !== 'unicast';
}

/** Loopback, private, link-local, multicast, reserved, or an internal-looking name. */
export function isPrivateHost(hostname: string): boolean {
  const h = bare(hostname);
  if (isLoopbackHost(h)) return true;
  if (isIP(h) !== 0) return isSpecialAddress(h);
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
