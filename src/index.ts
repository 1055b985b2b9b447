import type { EstimateOptions, EstimateResult } from './api/estimate.js';
import type { RunOptions, RunSummary } from './api/run.js';
import type { ValidateResult } from './api/validate.js';
import type { Sandbox, SandboxOptions } from './sandbox/index.js';

/**
 * genbatch as a library (`import { validate, estimate, run, startSandbox } from 'genbatch'`): the same
 * work as the commands of the same names, without printing. Errors are the typed errors below (each with a
 * stable `code` and the CLI's `exitCode`); nothing here exits the process.
 *
 * Each function loads its part of genbatch on first call (src/api/*.ts), so importing the package stays cheap:
 * `validate` never loads SQLite, the HTTP client or the sandbox's web server.
 */

/** Check every job of a manifest without touching the service. Problems are returned, not thrown. */
export async function validate(manifestPath: string): Promise<ValidateResult> {
  return (await import('./api/validate.js')).validate(manifestPath);
}

/** Credits per job, per model and in total, and the balance unless `offline`. Throws ManifestError for an invalid manifest. */
export async function estimate(manifestPath: string, options: EstimateOptions = {}): Promise<EstimateResult> {
  return (await import('./api/estimate.js')).estimate(manifestPath, options);
}

/** Run a manifest, checkpointed: calling it again with the same manifest and state resumes. See RunOptions. */
export async function run(manifestPath: string, options: RunOptions = {}): Promise<RunSummary> {
  return (await import('./api/run.js')).run(manifestPath, options);
}

/** Serve the sandbox (a local implementation of the service) in this process; `port: 0` picks a free port. */
export async function startSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  return (await import('./sandbox/index.js')).startSandbox(options);
}

export { defaultOutDir } from './api/paths.js';
export type { EstimateOptions, EstimateResult, RunOptions, RunSummary, ValidateResult, Sandbox, SandboxOptions };
export type { RunOutcomeName } from './api/run.js';
export type { EngineEvent, StopReason } from './engine/events.js';
export type { JobState } from './store/states.js';
export type { JobEstimate, ModelTotal, PriceSource } from './pricing/index.js';
export {
  EXIT,
  GenbatchError,
  UsageError,
  ManifestError,
  UnknownModelError,
  BudgetError,
  ApiError,
  NetworkError,
  AmbiguousSubmitError,
  BadResponseError,
  StateError,
  TransitionError,
  UnsafeResultError,
  InterruptedError,
  formatProblem,
  type Problem,
} from './errors.js';
