import { hostRefusal } from '../lib/address.js';

const CALLBACK_MAX = 2048;

/**
 * callback_url: an https URL the service can reach from the internet. Parsed
 * with the WHATWG URL parser (a malformed host fails); its host is judged by the
 * same check the sandbox makes (lib/address.ts: `localhost`, `localhost.`, internal
 * names such as *.local and *.internal, and loopback, private, multicast, reserved
 * and other special-purpose addresses, also inside NAT64 and 6to4 forms, are refused),
 * and a URL with credentials (`user:pw@`) is refused.
 * Host names are not resolved (DNS may differ where the service runs).
 */
export function checkCallback(url: string, add: (path: string, message: string) => void): void {
  if (url.length > CALLBACK_MAX) return add('callback_url', `must be at most ${CALLBACK_MAX} characters (has ${url.length})`);
  if (!/^https:\/\//i.test(url)) return add('callback_url', 'must be an https:// URL (the service calls back over HTTPS only)');
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return add('callback_url', `${JSON.stringify(url)} is not a valid URL (check the host name)`);
  }
  const host = u.hostname.toLowerCase();
  if (host === '') return add('callback_url', 'must name a host');
  const refusal = hostRefusal(u, false);
  if (refusal === 'credentials') add('callback_url', 'must not carry credentials (user:password@ before the host): the service would send them to whoever the host is');
  else if (refusal === 'private') add('callback_url', `host ${host} is local or private: the service calls back over the internet, so it needs a public host`);
}
