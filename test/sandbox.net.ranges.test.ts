import { describe, expect, it } from 'vitest';
import { addressAllowed } from '../src/sandbox/guard.js';
import { callbackUrlProblem, isPrivateHost } from '../src/lib/address.js';

/**
 * The sandbox's SSRF guard refuses every special-purpose address: each block of IANA's IPv4 and
 * IPv6 Special-Purpose Address Registries (written out here from the registries, not taken from
 * the library the guard uses), plus multicast and the deprecated site-local block, is checked at
 * its first and its last address.
 */

const V4: string[] = [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12',
  '192.0.0.0/24', '192.0.0.0/29', '192.0.0.8/32', '192.0.0.170/32', '192.0.0.171/32', '192.0.2.0/24',
  '192.31.196.0/24', '192.52.193.0/24', '192.88.99.0/24', '192.168.0.0/16', '192.175.48.0/24',
  '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4', '255.255.255.255/32',
  '224.0.0.0/4',
];

const V6: string[] = [
  '::1/128', '::/128', '::ffff:0:0/96', '64:ff9b:1::/48', '100::/64', '2001::/23', '2001::/32',
  '2001:2::/48', '2001:3::/32', '2001:4:112::/48', '2001:10::/28', '2001:20::/28', '2001:30::/28',
  '2001:db8::/32', '2620:4f:8000::/48', '3fff::/20', '5f00::/16', 'fc00::/7', 'fe80::/10',
  'ff00::/8', 'fec0::/10',
];

function v4Ends(cidr: string): [string, string] {
  const [addr = '', bits = '32'] = cidr.split('/');
  const n = addr.split('.').reduce((acc, x) => acc * 256 + Number(x), 0);
  const size = 2 ** (32 - Number(bits));
  const text = (v: number) => [24, 16, 8, 0].map((s) => Math.floor(v / 2 ** s) % 256).join('.');
  return [text(n), text(n + size - 1)];
}

function v6Ends(cidr: string): [string, string] {
  const [addr = '', bits = '128'] = cidr.split('/');
  const [head = '', tail = ''] = addr.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t].map((x) => BigInt(`0x${x}`));
  const n = groups.reduce((acc, g) => (acc << 16n) | g, 0n);
  const last = n | ((1n << BigInt(128 - Number(bits))) - 1n);
  const text = (v: bigint) => Array.from({ length: 8 }, (_, i) => ((v >> BigInt(16 * (7 - i))) & 0xffffn).toString(16)).join(':');
  return [text(n), text(last)];
}

describe('the sandbox refuses every special-purpose address (callbacks and remote uploads)', () => {
  for (const cidr of V4) {
    it(`IPv4 ${cidr}: first and last address refused`, () => {
      for (const ip of v4Ends(cidr)) {
        expect(isPrivateHost(ip), ip).toBe(true);
        expect(addressAllowed(ip, false), ip).toBe(false);
        expect(callbackUrlProblem(`https://${ip}/cb`, false), ip).toMatch(/publicly reachable/);
        // The same address inside IPv4-mapped and IPv4-translated (::ffff:0:0:0/96) IPv6 forms.
        const [a = 0, b = 0, c = 0, d = 0] = ip.split('.').map(Number);
        const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
        for (const mapped of [`::ffff:${ip}`, `::ffff:${hex}`, `::ffff:0:${hex}`]) expect(isPrivateHost(`[${mapped}]`), mapped).toBe(true);
      }
    });
  }
  for (const cidr of V6) {
    it(`IPv6 ${cidr}: first and last address refused`, () => {
      for (const ip of v6Ends(cidr)) {
        expect(isPrivateHost(`[${ip}]`), ip).toBe(true);
        expect(addressAllowed(ip, false), ip).toBe(false);
        expect(callbackUrlProblem(`https://[${ip}]/cb`, false), ip).toMatch(/publicly reachable/);
      }
    });
  }

  it('the issue\'s examples: [::ffff:0:7f00:1], 192.0.2.1, 198.51.100.1, 203.0.113.1, 192.88.99.1', () => {
    for (const h of ['[::ffff:0:7f00:1]', '192.0.2.1', '198.51.100.1', '203.0.113.1', '192.88.99.1']) {
      expect(callbackUrlProblem(`https://${h}/cb`, false), h).toMatch(/publicly reachable/);
    }
  });

  it('public addresses stay allowed, also inside NAT64 and 6to4', () => {
    for (const ip of ['8.8.8.8', '1.1.1.1', '192.0.3.1', '198.20.0.1', '223.255.255.254', '2606:4700::1111', '2a00:1450::1', '64:ff9b::808:808', '2002:808:808::1']) {
      expect(addressAllowed(ip, false), ip).toBe(true);
    }
  });
});
