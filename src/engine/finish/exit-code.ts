import { EXIT } from '../../errors.js';
import type { JobState } from '../../store/states.js';

/** What decides the exit code beside the counts: jobs held before sending (balance, cap), jobs that failed permanently. */
export interface ExitFacts {
  /** Pending jobs this invocation left because their estimate did not fit the balance, or a credit cap. */
  held?: { balance: number; cap: number };
  /** Failed jobs the service refused for their input (a retry cannot help): exit 6 when nothing else is left. */
  permanentFailed?: number;
}

/**
 * The exit code (src/errors.ts EXIT, README "Exit codes"), the first that applies: 130 after SIGINT, 143 after
 * SIGTERM; 4 when jobs need a decision (uncertain, expired); 1 when jobs failed that a retry may fix; 3 when work
 * was left for the balance (held before sending, or a 402 mid-run); 5 when a credit cap left work (held before
 * sending, or the measured cap stopped the sending); 7 when other work is left (--only/--limit, a lost lease,
 * tasks still running); 6 when the only jobs not done failed permanently; else 0.
 */
export function exitCodeFor(counts: Record<JobState, number>, signal: AbortSignal, stop: string | null, facts: ExitFacts = {}): number {
  if (signal.aborted) return signal.reason === 'SIGTERM' ? EXIT.sigterm : EXIT.sigint;
  if (counts.uncertain + counts.expired > 0) return EXIT.incomplete;
  const permanent = Math.min(facts.permanentFailed ?? 0, counts.failed);
  if (counts.failed > permanent) return EXIT.jobsFailed;
  const left = counts.pending + counts.submitting + counts.submitted + counts.downloading;
  if (stop === 'insufficient-credits' || (left > 0 && (facts.held?.balance ?? 0) > 0)) return EXIT.budget;
  if (stop === 'credit-cap' || (left > 0 && (facts.held?.cap ?? 0) > 0)) return EXIT.capReached;
  if (left > 0 || stop !== null) return EXIT.leftPending;
  if (permanent > 0) return EXIT.failedPermanent;
  return EXIT.ok;
}
