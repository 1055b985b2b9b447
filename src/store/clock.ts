/** The timestamp written to the state file's *_at text columns. */
export const nowIso = (): string => new Date().toISOString();
