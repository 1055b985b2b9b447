import { Accounts } from './accounts.js';
import { Callbacks } from './callbacks.js';
import { Clock, isoNoZone } from './clock.js';
import type { Agent } from 'undici';
import { extensionFor } from './extensions.js';
import { guardedAgent } from './guard.js';
import { Faults } from './faults.js';
import { FileStore } from './files.js';
import type { ExtensionHost } from './hooks.js';
import type { ResolvedOptions } from './options.js';
import { genericResult } from './results.js';
import { Rng, mixSeed } from './rng.js';
import { Scheduler } from './scheduler.js';
import { Stats } from './stats.js';
import { progressAt, stateAt, TaskStore, type TaskRecord, type TaskResult } from './tasks.js';

/**
 * Everything a route module or an extension needs, in one object:
 * options, clock, accounts, tasks, files, stats, faults, scheduler,
 * callbacks and the seeded Rng for new tasks.
 */
export class SandboxContext implements ExtensionHost {
  readonly options: ResolvedOptions;
  /** Base URL without a trailing slash, e.g. http://127.0.0.1:8787 (set once listening). */
  baseUrl = '';
  readonly clock: Clock;
  readonly accounts: Accounts;
  readonly tasks = new TaskStore();
  readonly files: FileStore;
  readonly stats = new Stats();
  readonly faults: Faults;
  readonly scheduler: Scheduler;
  readonly callbacks: Callbacks;
  /** Source of per-task seeds (and task ids when seeded). */
  readonly rng: Rng;
  /** Dispatcher of outgoing requests (callbacks, upload/url): connects only to allowed addresses. */
  readonly outgoing: Agent;

  constructor(options: ResolvedOptions) {
    this.options = options;
    this.clock = new Clock(options.clockStart);
    this.accounts = new Accounts(options.keys);
    this.files = new FileStore(() => this.baseUrl, options.videoBytes);
    this.faults = new Faults(options.faults, new Rng(mixSeed(options.seed, 0xfa17)));
    this.scheduler = new Scheduler(this.clock);
    this.outgoing = guardedAgent(options.resolveHost, options.allowLoopback);
    this.callbacks = new Callbacks(this.scheduler, this.clock, this.stats, {
      timeScale: options.timeScale,
      timeoutMs: options.callbackTimeoutMs,
      dispatcher: this.outgoing,
    });
    this.rng = new Rng(options.seed);
  }

  now(): number {
    return this.clock.now();
  }

  /** The task's result if it has finished (built once, then cached on the task); null otherwise. */
  resultOf(task: TaskRecord, now = this.now()): TaskResult | null {
    if (stateAt(task, now) !== 'finished') return null;
    if (!task.result) {
      const ext = extensionFor(task.spec);
      task.result = ext?.result ? ext.result(this, task) : genericResult(task, this.files, this.options.imageEdge);
    }
    return task.result;
  }

  /** What the file URLs serve: the result once finished, else what a staged callback already handed out (or null). */
  servedResult(task: TaskRecord, now = this.now()): TaskResult | null {
    return this.resultOf(task, now) ?? extensionFor(task.spec)?.earlyResult?.(this, task, now) ?? null;
  }

  /**
   * The Task object of the status endpoint, the music detail endpoint and callbacks.
   * Music workflows (resultEndpoint 'music') omit `progress` in callbacks (`forCallback`).
   */
  taskData(task: TaskRecord, now = this.now(), forCallback = false): Record<string, unknown> {
    const status = stateAt(task, now);
    const result = status === 'finished' ? this.resultOf(task, now) : null;
    const data: Record<string, unknown> = {
      task_id: task.id,
      status,
      files: result ? result.files : [],
      created_time: isoNoZone(task.createdAt),
    };
    if (!(forCallback && task.spec.resultEndpoint === 'music')) data.progress = progressAt(task, now);
    data.error_message = status === 'failed' ? task.errorMessage : null;
    return data;
  }

  close(): void {
    this.scheduler.close();
    this.callbacks.close();
    void this.outgoing.destroy().catch(() => undefined);
  }
}
