import * as z from 'zod';

/**
 * zod schemas of the service's answers (the `data` of the success envelope).
 * Every body is parsed, never cast. Unknown fields of file entries are kept
 * (loose objects); unknown fields of a task are dropped.
 */

export const TaskStatusSchema = z.enum(['not_started', 'running', 'finished', 'failed']);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

/**
 * An entry of `files` on the status endpoint. Choice: an optional field may also be
 * null (what a service that serialises its absent optionals as null sends); it is then
 * read as absent. Refusing it would refuse the whole status answer, and its job would
 * be polled for ever.
 */
export const ResultFileSchema = z.looseObject({
  file_url: z.string().min(1),
  file_type: z.string().min(1),
  label: z.string().nullish(),
  format: z.string().nullish(),
  content_type: z.string().nullish(),
  file_name: z.string().nullish(),
  file_size: z.number().int().nonnegative().nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
});
export type ResultFile = z.infer<typeof ResultFileSchema>;

/** A descriptive or text field of a music item: the documented string, or null (read as absent by the results parser). */
const musicText = z.string().nullish();
/** A JSON-string field: the documented string, or (leniently) the value already parsed, as src/models/music/results.ts accepts it. */
const musicJson = z.union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())]).nullish();

/**
 * An entry of `files` on the music detail endpoint. Entries are keyed by
 * workflow (audio_url, wav_url, text, stem_split ...), so `file_url` is
 * optional here; the documented fields are typed, any other field is kept.
 * Choice: this schema is no stricter than the per-workflow result schemas
 * (src/models/music/results.ts), which decide what an item must hold: a field
 * may be null, and a JSON-string field may come already parsed. A status
 * answer refused here is never read, so its job would be polled for ever.
 */
export const MusicFileSchema = z.looseObject({
  file_url: musicText,
  file_type: musicText,
  file_name: musicText,
  file_size: z.number().int().nonnegative().nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  audio_id: musicText,
  audio_url: musicText,
  image_url: musicText,
  title: musicText,
  tags: musicText,
  duration: z.number().nullish(),
  prompt: musicText,
  timestampe_lyrics: musicJson,
  text: musicText,
  style: musicText,
  wav_url: musicText,
  separate_vocals: musicJson,
  vocal_removal: musicJson,
  stem_split: musicJson,
  generate_cover: musicJson,
  persona_id: musicText,
  video_url: musicText,
});
export type MusicFile = z.infer<typeof MusicFileSchema>;

const taskShape = {
  task_id: z.string().min(1),
  status: TaskStatusSchema,
  created_time: z.string(),
  progress: z.number().min(0).max(100).optional(),
  error_message: z.string().nullable().optional().transform((v) => v ?? null),
};

/** Choice: a missing or null `files` (the contract: "empty until finished") is read as []. */
const filesOf = <T extends z.ZodType>(entry: T) => z.array(entry).nullish().transform((v) => v ?? []);

export const TaskSchema = z.object({ ...taskShape, files: filesOf(ResultFileSchema) });
export type Task = z.infer<typeof TaskSchema>;

export const MusicTaskSchema = z.object({ ...taskShape, files: filesOf(MusicFileSchema) });
export type MusicTask = z.infer<typeof MusicTaskSchema>;

/** Longest task id taken from a submit answer (real ones are a few dozen characters). */
export const TASK_ID_MAX = 256;
/** Control characters and bidi overrides (as errors.ts shows them escaped), never in a task id taken. */
const TASK_ID_INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/**
 * A submit answer's task id is stored, printed (`status --jobs`, warnings) and put in every status URL, so it
 * is bounded and visible: one of 300,000 characters or with terminal escapes is an answer that cannot be
 * used (the job is uncertain: a task may exist), never a task followed for a day.
 */
const taskIdTaken = z
  .string()
  .min(1)
  .max(TASK_ID_MAX, { error: `is longer than ${TASK_ID_MAX} characters` })
  .refine((id) => !TASK_ID_INVISIBLE.test(id), { error: 'holds control characters' });

export const SubmitResultSchema = z.object({
  task_id: taskIdTaken,
  status: TaskStatusSchema,
  created_time: z.string(),
});
export type SubmitResult = z.infer<typeof SubmitResultSchema>;

/** Upload record: `file_url` required; `download_url` and anything else kept when present. */
export const UploadRecordSchema = z.looseObject({
  file_url: z.string().min(1),
  download_url: z.string().optional(),
});
export type UploadRecord = z.infer<typeof UploadRecordSchema>;

/** The success envelope `{code, data}`; `code`, when present, must be 200. */
export const EnvelopeSchema = z.object({ code: z.number().optional(), data: z.unknown() });

/** Error bodies: `{code, error:{message, type}}` or `{detail}` (a string, or a list of validation items). */
export const ErrorBodySchema = z.union([
  z.object({ code: z.number().optional(), error: z.object({ message: z.string(), type: z.string().optional() }) }),
  z.object({ detail: z.union([z.string(), z.array(z.unknown()), z.record(z.string(), z.unknown())]) }),
]);

/** Preferred names for the balance, in order, when `data` is an object with several numbers. */
export const BALANCE_FIELDS = ['balance', 'credits', 'remaining', 'available', 'remaining_credits', 'available_credits', 'credit'] as const;

/** zod issues as one line: `files[0].file_url: expected string`. */
export function issuesText(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p))).join('.').replace(/\.\[/g, '[') : '(root)'}: ${i.message}`)
    .join('; ');
}

/*
 * Exact fast paths for the answers of every job (submit, status). zod stays
 * the validator: a fast path accepts only a body in the plain documented
 * shape, and then returns exactly what the zod schema returns for it (same
 * values, same keys in the same order, new objects where zod makes new
 * ones); for anything else it returns undefined and the zod schema decides
 * (and words the error). The input is always the output of JSON.parse, so
 * numbers are finite and no value is undefined. test/client.schemas-fast.test.ts
 * checks each against its zod schema on many generated bodies.
 * Why: inside a run, zod's generic parse machinery cost ~15 us per job
 * (submit + status) and its own warm-up, against ~1.5 us for these.
 */

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isTaskStatus(v: unknown): v is TaskStatus {
  return v === 'not_started' || v === 'running' || v === 'finished' || v === 'failed';
}

/** `data` of the success envelope `{code, data}` when EnvelopeSchema accepts it and `code`, if any, is 200; undefined otherwise. */
export function fastEnvelopeData(raw: unknown): unknown {
  if (!isObject(raw)) return undefined;
  const code = raw.code;
  if (code !== undefined && code !== 200) return undefined;
  return raw.data;
}

/** SubmitResultSchema's output, or undefined: let zod decide. */
export function fastSubmitResult(d: unknown): SubmitResult | undefined {
  if (!isObject(d)) return undefined;
  const task_id = d.task_id;
  const status = d.status;
  const created_time = d.created_time;
  if (typeof task_id !== 'string' || task_id.length === 0 || !isTaskStatus(status) || typeof created_time !== 'string') return undefined;
  if (task_id.length > TASK_ID_MAX || TASK_ID_INVISIBLE.test(task_id)) return undefined;
  return { task_id, status, created_time };
}

const RESULT_FILE_KEYS = new Set(Object.keys(ResultFileSchema.shape));
const RESULT_FILE_STRINGS = ['label', 'format', 'content_type', 'file_name'] as const;

/** ResultFileSchema's output, or undefined: let zod decide. */
function fastResultFile(e: unknown): ResultFile | undefined {
  if (!isObject(e)) return undefined;
  const file_url = e.file_url;
  const file_type = e.file_type;
  if (typeof file_url !== 'string' || file_url.length === 0 || typeof file_type !== 'string' || file_type.length === 0) return undefined;
  // Keys in the shape's order, then the unknown ones in the input's order, as zod builds them.
  const out: Record<string, unknown> = { file_url, file_type };
  for (const k of RESULT_FILE_STRINGS) {
    if (k in e) {
      const v = e[k];
      if (typeof v !== 'string') return undefined;
      out[k] = v;
    }
  }
  if ('file_size' in e) {
    const v = e.file_size;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return undefined;
    out.file_size = v;
  }
  if ('metadata' in e) {
    const m = e.metadata;
    if (!isObject(m)) return undefined;
    const copy: Record<string, unknown> = {};
    for (const k in m) {
      // zod's own handling of these keys decides.
      if (k === '__proto__' || k === 'constructor') return undefined;
      copy[k] = m[k];
    }
    out.metadata = copy;
  }
  for (const k in e) {
    if (RESULT_FILE_KEYS.has(k)) continue;
    if (k === '__proto__') return undefined;
    out[k] = e[k];
  }
  return out as ResultFile;
}

/** TaskSchema's output, or undefined: let zod decide. */
export function fastTask(d: unknown): Task | undefined {
  if (!isObject(d)) return undefined;
  const task_id = d.task_id;
  const status = d.status;
  const created_time = d.created_time;
  if (typeof task_id !== 'string' || task_id.length === 0 || !isTaskStatus(status) || typeof created_time !== 'string') return undefined;
  const out: Record<string, unknown> = { task_id, status, created_time };
  if ('progress' in d) {
    const p = d.progress;
    if (typeof p !== 'number' || !Number.isFinite(p) || !(p >= 0 && p <= 100)) return undefined;
    out.progress = p;
  }
  const em = d.error_message;
  if (em === undefined || em === null) out.error_message = null;
  else if (typeof em === 'string') out.error_message = em;
  else return undefined;
  const f = d.files;
  if (f === undefined || f === null) out.files = [];
  else if (Array.isArray(f)) {
    const files: ResultFile[] = [];
    for (const item of f) {
      const entry = fastResultFile(item);
      if (entry === undefined) return undefined;
      files.push(entry);
    }
    out.files = files;
  } else return undefined;
  return out as Task;
}
