import { fetch, type Dispatcher } from 'undici';
import type { Clock } from './clock.js';
import type { Scheduler } from './scheduler.js';
import type { Stats } from './stats.js';
import type { TaskRecord } from './tasks.js';

/** Retry delays after a failed delivery, in seconds (scaled by timeScale): 3 retries, then none. */
export const RETRY_DELAYS_S = [1, 2, 4] as const;

/** Deliveries in flight at once; the rest wait their turn (a clock jump can make thousands due together). */
export const MAX_IN_FLIGHT = 64;

interface Attempt {
  task: TaskRecord;
  url: string;
  payload: string;
  retry: number;
  final: boolean;
}

/**
 * Completion callbacks: POST the status body as JSON to the task's callback_url
 * when it reaches finished or failed. A 2xx answer is success; otherwise (or
 * no answer within the timeout) retried after 1, 2, 4 s x timeScale. The host is
 * resolved at each attempt and every address checked (guard.ts): a name that resolves
 * to a private address gets no request; the attempt counts as failed.
 */
export class Callbacks {
  private readonly inflight = new Set<AbortController>();
  private readonly waiting: Attempt[] = [];
  private closed = false;
  private readonly scheduler: Scheduler;
  private readonly clock: Clock;
  private readonly stats: Stats;
  private readonly timeScale: number;
  private readonly timeoutMs: number;
  private readonly dispatcher: Dispatcher | undefined;

  constructor(scheduler: Scheduler, clock: Clock, stats: Stats, o: { timeScale: number; timeoutMs: number; dispatcher?: Dispatcher }) {
    this.scheduler = scheduler;
    this.clock = clock;
    this.stats = stats;
    this.timeScale = o.timeScale;
    this.timeoutMs = o.timeoutMs;
    this.dispatcher = o.dispatcher;
  }

  /**
   * POST `body()` (evaluated at the first attempt) to the task's callback URL at virtual time `at`.
   * `final`: the completion callback (marks task.callbackDelivered on success).
   */
  schedule(task: TaskRecord, at: number, body: () => unknown, final = true): void {
    const url = task.callbackUrl;
    if (!url) return;
    this.scheduler.at(at, () => this.start({ task, url, payload: JSON.stringify(body()), retry: 0, final }));
  }

  private start(a: Attempt): void {
    if (this.closed) return;
    if (this.inflight.size >= MAX_IN_FLIGHT) {
      this.waiting.push(a);
      return;
    }
    void this.attempt(a).finally(() => {
      const next = this.waiting.shift();
      if (next) this.start(next);
    });
  }

  private async attempt({ task, url, payload, retry, final }: Attempt): Promise<void> {
    this.stats.callbacks.attempted++;
    task.callbackAttempts++;
    const ac = new AbortController();
    this.inflight.add(ac);
    const timer = setTimeout(() => ac.abort(), this.timeoutMs);
    let ok = false;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'genbatch-sandbox-callback' },
        body: payload,
        redirect: 'manual',
        signal: ac.signal,
        ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
      });
      ok = res.status >= 200 && res.status < 300;
      await res.body?.cancel().catch(() => undefined);
    } catch {
      ok = false;
    } finally {
      clearTimeout(timer);
      this.inflight.delete(ac);
    }
    if (ok) {
      this.stats.callbacks.delivered++;
      if (final) task.callbackDelivered = true;
      return;
    }
    this.stats.callbacks.failed++;
    const delayS = RETRY_DELAYS_S[retry];
    if (delayS === undefined) {
      this.stats.callbacks.abandoned++;
      return;
    }
    const at = this.clock.now() + delayS * 1000 * this.timeScale;
    this.scheduler.at(at, () => this.start({ task, url, payload, retry: retry + 1, final }));
  }

  /** Deliveries waiting for a free slot. */
  get queued(): number {
    return this.waiting.length;
  }

  close(): void {
    this.closed = true;
    this.waiting.length = 0;
    for (const ac of this.inflight) ac.abort();
    this.inflight.clear();
  }
}
