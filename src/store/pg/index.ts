/** The PostgreSQL state: any number of workers on one run (see README.md). */
export { idleInTransactionMs, inTx, openPool, stateError } from './db.js';
export type { Client, Pool, Queryable } from './db.js';
export { migrate, MIRRORED_TABLES, NOW_ISO } from './schema.js';
export { PgWorkStore, keyFingerprint } from './work-store.js';
export type { PgWorkStoreOptions } from './work-store.js';
export { syncOnce } from './sync-lock.js';
export type { SyncOutcome } from './sync-lock.js';
export { WorkingCopy, ensureRun } from './working-copy.js';
export type { WriteBack } from './working-copy.js';
export { newWorkerId, registerWorker } from './workers.js';
export type { WorkerIdentity } from './workers.js';
export { budgetOf, budgetRow, pgCap, PgLedger, setBudgetCap } from './budget.js';
export type { PgCap } from './budget.js';
