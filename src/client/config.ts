import { UsageError } from '../errors.js';
import { holdsKey } from './redact.js';

export interface ServiceConfig {
  baseUrl: string;
  apiKey: string;
}

/**
 * Key and base URL for commands that talk to the service: the key only from
 * GENBATCH_API_KEY (never a flag, so it stays out of shell history and `ps`),
 * the base URL from --base-url or else GENBATCH_BASE_URL. The library API may pass
 * `apiKey` (a program's own setting, not a command line): it wins over the variable.
 */
export function serviceConfigFromEnv(opts: { baseUrl?: string; apiKey?: string }, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const apiKey = (opts.apiKey ?? env.GENBATCH_API_KEY)?.trim();
  if (!apiKey) throw new UsageError('GENBATCH_API_KEY is not set: export your API key in this variable');
  const baseUrl = (opts.baseUrl ?? env.GENBATCH_BASE_URL ?? '').trim();
  if (!baseUrl) throw new UsageError('no service base URL: pass --base-url URL or set GENBATCH_BASE_URL');
  // The two variables swapped, or the key put in the URL (http://user:KEY@host): the base URL is echoed in messages,
  // the --json start event and the state file, so one that holds the key is refused without being shown.
  if (holdsKey(baseUrl, apiKey)) {
    throw new UsageError('--base-url / GENBATCH_BASE_URL holds the API key: give the service address alone; the key goes in GENBATCH_API_KEY only (it is sent as a Bearer header)');
  }
  if (!/^https?:\/\/[^\s/]+/i.test(baseUrl)) throw new UsageError(`--base-url / GENBATCH_BASE_URL must be an http:// or https:// URL, got "${baseUrl}"`);
  return { baseUrl, apiKey };
}
