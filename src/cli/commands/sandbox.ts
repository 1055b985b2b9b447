import { UsageError } from '../../errors.js';
import { parseKeys, startSandbox } from '../../sandbox/index.js';

interface SandboxFlags {
  port: number;
  host: string;
  publicUrl?: string;
  keys?: string;
  timeScale: number;
  seed?: number;
  faults?: string;
  failureRate: number;
  allowLoopback?: boolean;
}

/** `genbatch sandbox`: serve the sandbox until SIGINT or SIGTERM; prints the base URL and the keys. */
export default async function sandbox(opts: SandboxFlags): Promise<number> {
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) throw new UsageError(`--port expects an integer from 0 to 65535, got ${opts.port}`);
  if (opts.failureRate > 1) throw new UsageError(`--failure-rate expects a number from 0 to 1, got ${opts.failureRate}`);
  const sb = await startSandbox({
    port: opts.port,
    host: opts.host,
    ...(opts.publicUrl !== undefined ? { publicUrl: opts.publicUrl } : {}),
    ...(opts.keys !== undefined ? { keys: parseKeys(opts.keys) } : {}),
    timeScale: opts.timeScale,
    ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    ...(opts.faults !== undefined ? { faults: opts.faults } : {}),
    failureRate: opts.failureRate,
    allowLoopback: opts.allowLoopback === true,
  });
  process.stdout.write(`genbatch sandbox listening on ${sb.localUrl}\n`);
  if (sb.url !== sb.localUrl) process.stdout.write(`file URLs: ${sb.url}\n`);
  for (const key of sb.keys) process.stdout.write(`key: ${key}\n`);
  process.stdout.write(`try: curl -s -H "Authorization: Bearer ${sb.keys[0] ?? ''}" ${sb.localUrl}/api/user/balance\n`);
  process.stdout.write('press Ctrl+C to stop\n');
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  await sb.close();
  process.stderr.write(`genbatch sandbox stopped (${signal})\n`);
  return 0;
}
