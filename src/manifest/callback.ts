const CALLBACK_MAX = 2048;

/**
 * callback_url: an https URL the service can reach from the internet. Parsed
 * with the WHATWG URL parser (a malformed host fails); `localhost` and literal
 * loopback, private, link-local and unspecified IP addresses are rejected.
 * Host names are not resolved (DNS may differ where the service runs).
 */
export function checkCallback(url: string, add: (path: string, message: string) => void): void {
  if (url.length > CALLBACK_MAX) return add('callback_url', `must be at most ${CALLBACK_MAX} characters (has ${url.length})`);
  if (!/^https:\/\//i.test(url)) return add('callback_url', 'must be an https:// URL (the service calls back over HTTPS only)');
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return add('callback_url', `${JSON.stringify(url)} is not a valid URL (check the host name)`);
  }
  if (host === '') return add('callback_url', 'must name a host');
  if (host === 'localhost' || host.endsWith('.localhost') || privateIp(host)) {
    add('callback_url', `host ${host} is local or private: the service calls back over the internet, so it needs a public host`);
  }
}

/** True for a literal loopback, private, link-local, shared (CGNAT) or unspecified IPv4/IPv6 address. */
function privateIp(host: string): boolean {
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(host);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127);
  }
  if (!host.startsWith('[')) return false;
  const v6 = host.slice(1, -1);
  const mapped = /^::ffff:(.+)$/.exec(v6);
  if (mapped?.[1]) {
    const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(mapped[1]);
    if (hex) {
      const n = (parseInt(hex[1] ?? '0', 16) << 16) | parseInt(hex[2] ?? '0', 16);
      return privateIp(`${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`);
    }
    return privateIp(mapped[1]);
  }
  return v6 === '::' || v6 === '::1' || /^f[cd][0-9a-f]{0,2}:/.test(v6) || /^fe[89ab][0-9a-f]?:/.test(v6);
}
