import { createHash } from 'node:crypto';
import { UsageError } from '../../errors.js';

/**
 * A run's state records the service it was made against: the base URL (or `sandbox`, the in-process one of
 * `--sandbox`) and a fingerprint of the key (the first 8 hex digits of its SHA-256, never the key). Its tasks,
 * charges and results belong to that service and account: the same state given another one would report
 * sandbox results as done against a real service (or send nothing and call the run done). Refused, exit 2,
 * naming both and the way on. A state made before services were recorded adopts the current one.
 */
export interface ServiceMark {
  /** The base URL (no trailing slash), or `sandbox` for the in-process sandbox. */
  service: string;
  /** First 8 hex digits of the key's SHA-256; null for the in-process sandbox (a new key each run). */
  key: string | null;
}

/** Meta key under which a run's service is recorded (one per run: a state may hold runs of several manifests). */
export function serviceMetaKey(runId: number): string {
  return `service:${runId}`;
}

/** First 8 hex digits of the SHA-256 of the key: enough to tell two keys apart, never enough to use. */
export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 8);
}

export function serviceMark(baseUrl: string, apiKey: string, sandbox: boolean): ServiceMark {
  return sandbox ? { service: 'sandbox', key: null } : { service: baseUrl.trim().replace(/\/+$/, ''), key: keyFingerprint(apiKey) };
}

/** What the state recorded (its meta value); null when none was, or when it cannot be read (adopted as unrecorded). */
export function parseServiceMark(raw: string | null): ServiceMark | null {
  if (raw === null) return null;
  try {
    const v = JSON.parse(raw) as unknown;
    if (typeof v !== 'object' || v === null) return null;
    const { service, key } = v as Record<string, unknown>;
    if (typeof service !== 'string' || !(key === null || (typeof key === 'string' && /^[0-9a-f]{8}$/.test(key)))) return null;
    return { service, key };
  } catch {
    return null;
  }
}

function describe(m: ServiceMark): string {
  return m.service === 'sandbox' ? 'the in-process sandbox (--sandbox)' : `${m.service} (key ${m.key ?? 'unknown'})`;
}

/**
 * Refuse (UsageError, exit 2) a run or worker given a state made against another service or key. `recorded`
 * null: nothing recorded (a new run, or a state made before this check), the current service is adopted.
 */
export function checkSameService(recorded: ServiceMark | null, current: ServiceMark, state: string, command: 'run' | 'work' = 'run'): void {
  if (recorded === null) return;
  if (recorded.service === current.service && recorded.key === current.key) return;
  const on = recorded.service === 'sandbox' ? 'with --sandbox' : `against ${recorded.service} with that key`;
  const fresh = command === 'work' ? 'start a new run in another database (--state)' : 'start a run in another output folder (--out DIR) or with another state (--state PATH)';
  throw new UsageError(
    `the state ${state} was made against ${describe(recorded)}, and this ${command} is against ${describe(current)}: ` +
      `its tasks, charges and results belong to the service it was made against${recorded.service === 'sandbox' || current.service === 'sandbox' ? " (sandbox results are synthetic: they never join a real run's)" : ''}. ` +
      `Go on ${on}, or ${fresh}`,
  );
}
