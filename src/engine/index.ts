/**
 * The run engine: prepare/ (validate + record, budget check), pipeline/ (submit, poll, callbacks, download;
 * acts in submit/ and fetch/), finish/ (report data, exit code); the layout is in README.md.
 */
export { runEngine, exitCodeFor, removeState, DEFAULT_STATUS_RATE, UPLOAD_REUSE_MS } from './run.js';
export type { RunOptions, RunOutcome } from './run.js';
export { EventBus } from './events.js';
export type { EngineEvent, EventListener, StopReason } from './events.js';
export type { DownloadPort, DownloadResult, ServicePort, SubmitBody, TaskStatus, TaskView, UploadCall } from './ports.js';
export { buildReportData, reportJobsAfter, reportJobsOf } from './finish/report-data.js';
export { extractResults, canonicalJson, setAtPath } from './results.js';
export { planProbes, probeOne, recordProbe } from './tools/probe.js';
export type { ProbePlan, ProbePlanEntry } from './tools/probe.js';
export { globTest, parseOnly, parseRedo, REDO_VALUES } from './prepare/select.js';
export { markJobs, type MarkAction } from './tools/marks.js';
export type { RedoState } from './prepare/select.js';
