/**
 * Which waited-on task gets the next status read when reads are scarce (`--status-rate`): the one
 * most likely finished by now, judged by its model's typical time since it was sent.
 *
 * A model's typical time [min, max] is read as durations spread evenly between the two (as the
 * sandbox draws them). A task read as still running at `runningAtMs` after it was sent has not
 * finished by then, so the chance counts only what is left after that point. A task already past
 * its typical maximum when it was last seen running is taken to finish within one more typical
 * spread (max - min) after that read: the typical time says nothing more about it.
 *
 * @param elapsedMs   now minus the time the task was sent
 * @param runningAtMs elapsed time of the last read that found it unfinished (0 when never read)
 * @param typicalMs   the model's typical [min, max] duration, in ms (already time-scaled)
 * @returns a number in [0, 1]
 */
export function chanceFinished(elapsedMs: number, runningAtMs: number, typicalMs: readonly [number, number]): number {
  const [min, max] = typicalMs;
  const spread = Math.max(1, max - min);
  const shareDone = (e: number): number => Math.min(1, Math.max(0, (e - min) / spread));
  const before = shareDone(runningAtMs);
  if (before < 1) return (shareDone(elapsedMs) - before) / (1 - before);
  return Math.min(1, Math.max(0, (elapsedMs - runningAtMs) / spread));
}
