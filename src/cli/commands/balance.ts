import { ServiceClient, serviceConfigFromEnv } from '../../client/index.js';

/** `genbatch balance [--json] [--base-url URL]`: the account's credit balance. */
export default async function balance(opts: { json?: boolean; baseUrl?: string }): Promise<number> {
  const config = serviceConfigFromEnv(opts);
  // A one-shot command: a short retry budget rather than the runner's long one.
  const client = new ServiceClient({ ...config, policy: { baseMs: 500, maxMs: 5_000, maxAttempts: 4 } });
  try {
    const credits = await client.balance();
    if (opts.json) process.stdout.write(JSON.stringify({ balance: credits }) + '\n');
    else process.stdout.write(`balance: ${credits} credits\n`);
    return 0;
  } finally {
    await client.close();
  }
}
