import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The one check of addresses, shared by the runner (a manifest's `callback_url`,
 * manifest/callback.ts) and the sandbox (callback URLs at submit, upload/url downloads,
 * and every address an outgoing request resolves to: sandbox/guard.ts). It judges the
 * text of a URL's host: IP literals by ipaddr.js's ranges (only 'unicast' is public,
 * IPv4 inside the IPv4-mapped, NAT64 and 6to4 forms judged as IPv4), `localhost`, and
 * internal-looking names (no dot, .local, .internal, .lan, .home.arpa, ...); a trailing
 * dot (`localhost.`) changes nothing. A URL with credentials (`user:pw@`) is refused.
 */

/** A hostname without IPv6 brackets or the trailing dot of an absolute name (`localhost.` is `localhost`), lower case. */
function bare(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
}

/** The IP address a host literal is (an IPv6 zone allowed), or null for a name. */
function ipOf(host: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (isIP(host) === 0) return null;
  try {
    return ipaddr.parse(host);
  } catch {
    return null;
  }
}

function quad(hi: number, lo: number): ipaddr.IPv4 {
  return ipaddr.fromByteArray([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]) as ipaddr.IPv4;
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible (::a.b.c.d, not :: or ::1) address. */
function mappedOrCompatible(g: number[]): ipaddr.IPv4 | null {
  if (!g.slice(0, 5).every((x) => x === 0)) return null;
  if (g[5] === 0xffff || (g[5] === 0 && ((g[6] ?? 0) !== 0 || (g[7] ?? 0) > 1))) return quad(g[6] ?? 0, g[7] ?? 0);
  return null;
}

export function isLoopbackHost(hostname: string): boolean {
  const h = bare(hostname);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const ip = ipOf(h);
  if (ip === null) return false;
  if (ip.kind() === 'ipv4') return ip.range() === 'loopback';
  if (ip.range() === 'loopback') return true;
  return mappedOrCompatible((ip as ipaddr.IPv6).parts)?.range() === 'loopback';
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
  const embedded = (hi: number, lo: number) => quad(hi, lo).range() !== 'unicast';
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
 * Why a parsed URL's authority is refused, or null: `credentials` when it carries a user or a
 * password (`user:pw@host`, `127.0.0.1%2f@example.com`), `private` when its host is not public
 * (isPrivateHost); with allowLoopback, a loopback host is accepted (credentials never are).
 */
export function hostRefusal(u: URL, allowLoopback: boolean): 'credentials' | 'private' | null {
  if (u.username !== '' || u.password !== '') return 'credentials';
  if (allowLoopback && isLoopbackHost(u.hostname)) return null;
  return isPrivateHost(u.hostname) ? 'private' : null;
}

/**
 * Why a callback URL is refused by the sandbox, or null when it is acceptable: HTTPS only,
 * at most 2048 characters, no credentials, public address; with allowLoopback, http(s) to a
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
  const refusal = hostRefusal(u, allowLoopback);
  if (refusal === 'credentials') return 'must not carry credentials';
  if (allowLoopback && refusal === null && isLoopbackHost(u.hostname)) return null;
  if (u.protocol !== 'https:') return 'must be an HTTPS URL';
  if (refusal === 'private') return 'must point to a publicly reachable host (private, loopback and internal addresses are refused)';
  return null;
}
