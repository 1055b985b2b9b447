import { formatDuration } from '../report/format.js';

/**
 * Jobs finished per second and the time left at that pace, for the progress
 * bars and the plain progress line. Counts are sampled by the caller (each
 * redraw or plain line); the rate is over the last `windowMs` once that window
 * has seen enough jobs finish, else over the whole invocation (a run of slow
 * video jobs finishes a few a minute: a short window would read 0 most of the time).
 */
export class Rate {
  private readonly samples: Array<{ t: number; n: number }> = [];
  private first: { t: number; n: number } | null = null;

  constructor(
    private readonly windowMs = 30_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Record the number of jobs finished so far (whole run: the jobs finished before this invocation are the baseline). */
  sample(finished: number): void {
    const s = { t: this.now(), n: finished };
    this.first ??= s;
    this.samples.push(s);
    // Keep one sample at least windowMs old, so the window always spans windowMs once the run is that old.
    while (this.samples.length > 2 && s.t - this.samples[1]!.t >= this.windowMs) this.samples.shift();
  }

  /** Jobs per second, or null until some job finished in this invocation and a second has passed. */
  perSecond(): number | null {
    const last = this.samples[this.samples.length - 1];
    if (!last || !this.first || last.n <= this.first.n || last.t - this.first.t < 1000) return null;
    const w = this.samples[0]!;
    if (last.n - w.n >= 10 && last.t - w.t >= 1000) return ((last.n - w.n) * 1000) / (last.t - w.t);
    return ((last.n - this.first.n) * 1000) / (last.t - this.first.t);
  }

  /** Seconds since the first sample. */
  elapsedS(): number {
    return this.first ? (this.now() - this.first.t) / 1000 : 0;
  }
}

/** `12.3 jobs/s`, or `4.5 jobs/min` below one a second; `- jobs/s` when not known yet. */
export function formatRate(perS: number | null): string {
  if (perS === null) return '- jobs/s';
  if (perS >= 1) return `${perS >= 100 ? Math.round(perS) : perS.toFixed(1)} jobs/s`;
  return `${(perS * 60).toFixed(1)} jobs/min`;
}

/** `ETA 1m 05s` for `left` jobs at `perS`; `ETA -` when the pace is not known yet. */
export function formatEta(left: number, perS: number | null): string {
  if (left <= 0) return 'ETA 0s';
  return perS === null || perS <= 0 ? 'ETA -' : `ETA ${formatDuration(Math.round(left / perS))}`;
}
