import type { ChatClient, ServiceClient } from '../../client/index.js';
import { localImageRefs, type Manifest, type ManifestJob } from '../../manifest/index.js';
import { findModel } from '../../models/index.js';
import { priceClass, priceJob, probe, type BalanceAnswer, type ObservedPrices, type PriceBook, type PriceClass, type ProbeOutcome, type UserPrices } from '../../pricing/index.js';
import type { Problem } from '../../errors.js';
import { chatRequestOf } from '../submit/chat.js';
import { setAtPath } from '../results.js';

/**
 * `genbatch prices probe`: for each price class of a manifest whose price is unknown, one task
 * run alone (src/pricing/probe.ts says how the balance is read), and the price it measured kept in
 * the price book. Classes are found in manifest order; the first job of a class that can run on
 * its own (its input made from no other job's results) represents it.
 */

export interface ProbePlanEntry {
  cls: PriceClass;
  /** The job sent to measure the class. */
  job: ManifestJob;
  /** Jobs of the manifest in this class. */
  jobs: number;
}

export interface ProbePlan {
  classes: ProbePlanEntry[];
  /** Classes of unknown price that no job can represent alone (made from other jobs' results). */
  notAlone: Array<{ cls: PriceClass; jobs: number }>;
  problems: Problem[];
  jobs: number;
}

const REF = /\$\{\{/;

export async function planProbes(manifest: Manifest, userPrices: UserPrices | null, observed: ObservedPrices | null): Promise<ProbePlan> {
  const plan: ProbePlan = { classes: [], notAlone: [], problems: [...manifest.problems], jobs: 0 };
  const byKey = new Map<string, ProbePlanEntry>();
  const lonely = new Map<string, { cls: PriceClass; jobs: number }>();
  for await (const job of manifest.jobs()) {
    plan.jobs++;
    if (job.problems.length > 0) {
      plan.problems.push(...job.problems);
      continue;
    }
    if (job.for_each !== undefined) continue;
    const price = priceJob(job, userPrices, observed);
    if (price.credits !== null || price.observedFree === true) continue; // a class learned free is not probed again
    const cls = priceClass(job);
    const known = byKey.get(cls.key);
    if (known) {
      known.jobs++;
      continue;
    }
    if (REF.test(JSON.stringify(job.input))) {
      const l = lonely.get(cls.key) ?? { cls, jobs: 0 };
      l.jobs++;
      lonely.set(cls.key, l);
      continue;
    }
    const entry = { cls, job, jobs: 1 + (lonely.get(cls.key)?.jobs ?? 0) };
    lonely.delete(cls.key);
    byKey.set(cls.key, entry);
    plan.classes.push(entry);
  }
  plan.notAlone = [...lonely.values()];
  return plan;
}

export interface ProbeDeps {
  client: ServiceClient;
  chat: ChatClient;
  /** Multiplies every wait (1 against the real service). */
  timeScale: number;
  sleep: (ms: number) => Promise<void>;
}

/** Local images of the job uploaded (once per file), their URLs put in a copy of the input. */
async function inputWithUploads(job: ManifestJob, d: ProbeDeps, uploaded: Map<string, string>): Promise<Record<string, unknown>> {
  const input = structuredClone(job.input);
  for (const ref of localImageRefs(job)) {
    let url = uploaded.get(ref.file);
    if (url === undefined) {
      url = (await d.client.uploadStream(ref.file)).file_url;
      uploaded.set(ref.file, url);
    }
    setAtPath(input, ref.path, url); // paths are `input.<field>`: setAtPath reads them inside the input
  }
  return input;
}

/** Measure one class: its representative task run alone. */
export async function probeOne(entry: ProbePlanEntry, d: ProbeDeps, uploaded: Map<string, string>): Promise<ProbeOutcome & { taskId: string | null }> {
  const job = entry.job;
  const during: BalanceAnswer[] = [];
  let taskId: string | null = null;
  const input = job.kind === 'submit' ? await inputWithUploads(job, d, uploaded) : job.input;
  const outcome = await probe(
    {
      balance: () => d.client.balanceAnswer(),
      sleep: d.sleep,
      settleMs: Math.max(50, 2_000 * d.timeScale),
      start: async () => {
        if (job.kind === 'chat') {
          const spec: Parameters<typeof chatRequestOf>[0] = { model: job.model, input: job.input, refs: [] };
          if (job.protocol !== undefined) spec.protocol = job.protocol;
          await d.chat.call(chatRequestOf(spec));
          return { wait: null };
        }
        const spec = findModel(job.model);
        const submitted = await d.client.submit({ model: job.model, input });
        taskId = submitted.task_id;
        const id = taskId;
        return {
          wait: async () => {
            const [min] = spec?.typicalSeconds ?? [2, 60];
            await d.sleep(min * 1000 * d.timeScale);
            for (;;) {
              const t = spec?.resultEndpoint === 'music' ? await d.client.musicDetail(id) : await d.client.status(id);
              during.push(await d.client.balanceAnswer());
              if (t.status === 'finished' || t.status === 'failed') return t.status;
              await d.sleep(Math.max(100, 2_000 * d.timeScale));
            }
          },
        };
      },
    },
    () => during,
  );
  return { ...outcome, taskId };
}

/** Record a measured price in the book (saved at once, so a probe stopped later keeps what it learned). */
export function recordProbe(book: PriceBook, baseUrl: string, entry: ProbePlanEntry, credits: number, at: string): void {
  book.record(baseUrl, entry.cls, credits, at);
  book.save();
}
