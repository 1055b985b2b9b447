/** The state file (SQLite): jobs, their states and files, uploads, the writer lease. */
export { Store, nowIso } from './store.js';
export type { FileRow, InvocationRow, JobInput, JobPatch, JobRow, RunRow, SummaryRow, SyncResult, TakenJob } from './store.js';
export { ACTIVE_STATES, FINAL_STATES, JOB_STATES, PARENT_FAILED_STATES, TRANSITIONS, isJobState } from './states.js';
export type { ChildInput } from './graph.js';
export type { ChatTotals } from './reads.js';
export type { JobState } from './states.js';
export { pidAlive } from '../lib/pid.js';
export { MARK_STATES } from './marks.js';
export type { Mark, MarkEvent, MarkState } from './marks.js';
export type { CapLedger, CapTotals, Claim, FileGot, JobWithFiles, MoveOptions, Moved, NewFile, ReleaseUploadSlot, SideMove, TakenOver, UploadOutcome, WorkStore } from './port.js';
export { SqliteWorkStore } from './sqlite-work.js';
export { GroupCommit } from './group-commit.js';
