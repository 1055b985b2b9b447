import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { Agent } from 'undici';
import { isLoopbackHost, isPrivateHost } from '../lib/address.js';

/**
 * Outgoing requests of the sandbox (callback deliveries, upload/url downloads)
 * connect only to allowed addresses: every address a host name resolves to must
 * be public, or loopback when the sandbox runs with allowLoopback. The check runs
 * inside the connection's own DNS lookup (an undici Agent), so the address checked
 * is the address connected to (no second lookup that could answer differently).
 */

/** Resolves a host name to its addresses (default: the system resolver, every address). */
export type HostResolver = (host: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (host) => (await dnsLookup(host, { all: true })).map((a) => a.address);

export function addressAllowed(address: string, allowLoopback: boolean): boolean {
  if (allowLoopback && isLoopbackHost(address)) return true;
  return !isPrivateHost(address);
}

/** The first resolved address that is not allowed, or null. */
export function refusedAddress(addresses: string[], allowLoopback: boolean): string | null {
  return addresses.find((a) => !addressAllowed(a, allowLoopback)) ?? null;
}

export class RefusedAddressError extends Error {
  readonly code = 'ERR_SANDBOX_REFUSED_ADDRESS';
}

/** An undici dispatcher whose connections resolve through `resolver` and refuse disallowed addresses. */
export function guardedAgent(resolver: HostResolver, allowLoopback: boolean): Agent {
  const lookup: LookupFunction = (hostname, options, callback) => {
    resolver(hostname).then(
      (addresses) => {
        if (addresses.length === 0) return callback(new Error(`${hostname} did not resolve to any address`), '', 4);
        const bad = refusedAddress(addresses, allowLoopback);
        if (bad) return callback(new RefusedAddressError(`${hostname} resolves to ${bad}, a private, loopback or internal address`), '', 4);
        const list = addresses.map((address) => ({ address, family: isIP(address) === 6 ? 6 : 4 }));
        if (options.all) return callback(null, list);
        const first = list[0] ?? { address: '', family: 4 };
        return callback(null, first.address, first.family);
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), '', 4),
    );
  };
  return new Agent({ connect: { lookup } });
}
