import type { Clock } from './clock.js';
import { MinHeap } from '../lib/heap.js';

interface Job {
  at: number;
  run: () => void;
}

/**
 * One timer for every scheduled job (callbacks and their retries), ordered by
 * virtual time in a min-heap. Advancing the clock runs what fell due.
 */
export class Scheduler {
  private readonly heap = new MinHeap<Job>();
  private readonly clock: Clock;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private closed = false;

  constructor(clock: Clock) {
    this.clock = clock;
    clock.onAdvance(() => this.kick());
  }

  get pending(): number {
    return this.heap.size;
  }

  /** Run `run` at virtual time `at` (or at once if already due, on the next turn). */
  at(at: number, run: () => void): void {
    if (this.closed) return;
    this.heap.push({ at, run });
    if (at < this.timerAt) this.arm();
  }

  /** Run every due job now and re-arm the timer. */
  kick(): void {
    if (this.closed) return;
    const due = this.heap.popDue(this.clock.now());
    for (const job of due) {
      try {
        job.run();
      } catch {
        // A job's own errors are its business; the scheduler keeps going.
      }
    }
    this.arm();
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
    const next = this.heap.peek();
    if (!next || this.closed) return;
    const delay = Math.min(2 ** 31 - 1, Math.max(0, next.at - this.clock.now()));
    this.timerAt = next.at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.kick();
    }, Math.ceil(delay));
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
