import { ServiceClient } from '../../src/client/index.js';

/** The balance of `key` at `baseUrl` now, read through genbatch's own client (a client of its own, closed after). */
export async function keyBalance(baseUrl: string, key: string): Promise<number> {
  const client = new ServiceClient({ baseUrl, apiKey: key });
  try {
    return await client.balance();
  } finally {
    await client.close();
  }
}
