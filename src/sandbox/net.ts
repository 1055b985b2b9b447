import { isIP } from 'node:net';

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

/**
 * IPv6: unspecified, loopback, IPv4-compatible (::/96, deprecated: all refused), IPv4-mapped,
 * NAT64 (64:ff9b::/96) and 6to4 (2002::/16) judged by the IPv4 address inside them;
 * local-use NAT64 64:ff9b:1::/48, discard 100::/64, Teredo 2001::/32, documentation
 * 2001:db8::/32, unique-local fc00::/7, link- and site-local fe80::/9, multicast ff00::/8.
 */
function privateV6(g: number[]): boolean {
  const [a = 0, b = 0, c = 0, d = 0, , , y = 0, z = 0] = g;
  if (g.slice(0, 6).every((x) => x === 0)) return true; // ::, ::1, ::a.b.c.d
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return privateV4(quad(y, z));
  if (a === 0x64 && b === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return privateV4(quad(y, z));
  if (a === 0x64 && b === 0xff9b && c === 1) return true;
  if (a === 0x2002) return privateV4(quad(b, c));
  if (a === 0x100 && b === 0 && c === 0 && d === 0) return true;
  if (a === 0x2001 && (b === 0 || b === 0xdb8)) return true;
  return (a & 0xfe00) === 0xfc00 || (a & 0xff80) === 0xfe80 || (a & 0xff00) === 0xff00;
}

/** Loopback, private, link-local, multicast, reserved, or an internal-looking name. */
export function isPrivateHost(hostname: string): boolean {
  const h = bare(hostname);
  if (isLoopbackHost(h)) return true;
  const a = v4(h);
  if (a) return privateV4(a);
  const g = v6(h);
  if (g) return privateV6(g);
  if (isIP(h) === 6) return true;
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
