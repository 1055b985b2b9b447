import { describe, expect, it } from 'vitest';
import { callbackUrlProblem, isLoopbackHost, isPrivateHost } from '../src/lib/address.js';

describe('sandbox address checks', () => {
  it('knows loopback hosts', () => {
    for (const h of ['localhost', 'api.localhost', '127.0.0.1', '127.9.9.9', '[::1]', '::1', '::ffff:127.0.0.1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['example.com', '10.0.0.1', '128.0.0.1', '::2']) expect(isLoopbackHost(h), h).toBe(false);
  });

  it('refuses private, link-local, reserved and internal-looking hosts', () => {
    const refused = ['10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '198.18.0.1', 'fc00::1', 'fd12::1', 'fe80::1', '::ffff:10.0.0.1', 'intranet', 'db.internal', 'printer.local', 'router.home.arpa'];
    for (const h of refused) expect(isPrivateHost(h), h).toBe(true);
    for (const h of ['example.com', '8.8.8.8', '172.32.0.1', '2001:4860::8888', 'hooks.example.org']) expect(isPrivateHost(h), h).toBe(false);
  });

  it('accepts only public HTTPS callback URLs up to 2048 characters', () => {
    expect(callbackUrlProblem('https://hooks.example.com/cb?x=1', false)).toBeNull();
    expect(callbackUrlProblem('http://hooks.example.com/cb', false)).toMatch(/HTTPS/);
    expect(callbackUrlProblem('ftp://hooks.example.com/cb', false)).toMatch(/HTTPS/);
    expect(callbackUrlProblem('not a url', false)).toMatch(/HTTPS/);
    expect(callbackUrlProblem(`https://example.com/${'a'.repeat(2028)}`, false)).toBeNull();
    expect(callbackUrlProblem(`https://example.com/${'a'.repeat(2029)}`, false)).toMatch(/2048/);
    expect(callbackUrlProblem('https://user:pw@example.com/', false)).toMatch(/credentials/);
    expect(callbackUrlProblem('https://192.168.0.10/cb', false)).toMatch(/publicly reachable/);
  });

  it('accepts loopback http only with allowLoopback, and never other private hosts', () => {
    expect(callbackUrlProblem('http://127.0.0.1:8080/cb', false)).not.toBeNull();
    expect(callbackUrlProblem('http://127.0.0.1:8080/cb', true)).toBeNull();
    expect(callbackUrlProblem('http://localhost:8080/cb', true)).toBeNull();
    expect(callbackUrlProblem('https://[::1]:8443/cb', true)).toBeNull();
    expect(callbackUrlProblem('http://10.0.0.1/cb', true)).toMatch(/HTTPS/);
    expect(callbackUrlProblem('https://10.0.0.1/cb', true)).toMatch(/publicly reachable/);
  });
});

describe('IPv6 forms that hide an IPv4 address', () => {
  it('refuses IPv4-compatible, mapped (hex), NAT64, 6to4 and other special IPv6 ranges, as the URL parser writes them', () => {
    const hosts = ['[::127.0.0.1]', '[::7f00:1]', '[::ffff:7f00:1]', '[2002:7f00:1::]', '[2002:a00:1::1]', '[64:ff9b::7f00:1]', '[64:ff9b::a9fe:a9fe]', '[64:ff9b:1::1]', '[2001::1]', '[2001:db8::1]', '[100::1]', '[::8.8.8.8]', '[ff02::1]', '[fec0::1]'];
    for (const h of hosts) expect(isPrivateHost(new URL(`https://${h}/`).hostname), h).toBe(true);
    for (const h of ['[2002:808:808::1]', '[64:ff9b::808:808]', '[::ffff:808:808]', '[2606:4700::1111]']) expect(isPrivateHost(new URL(`https://${h}/`).hostname), h).toBe(false);
    expect(callbackUrlProblem('https://[::127.0.0.1]/cb', false)).toMatch(/publicly reachable/);
    expect(callbackUrlProblem('https://[64:ff9b::7f00:1]/cb', false)).toMatch(/publicly reachable/);
    expect(callbackUrlProblem('https://[2002:7f00:1::]/cb', false)).toMatch(/publicly reachable/);
    expect(isLoopbackHost('[::127.0.0.1]')).toBe(true);
    expect(isLoopbackHost('[::7f00:1]')).toBe(true);
    expect(isLoopbackHost('[2002:7f00:1::]')).toBe(false);
  });
});
