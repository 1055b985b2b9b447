import { z } from 'zod';

/**
 * zod schemas of the service's answers (the `data` of the success envelope).
 * Every body is parsed, never cast. Unknown fields of file entries are kept
 * (loose objects); unknown fields of a task are dropped.
 */

export const TaskStatusSchema = z.enum(['not_started', 'running', 'finished', 'failed']);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

/** An entry of `files` on the status endpoint. */
export const ResultFileSchema = z.looseObject({
  file_url: z.string().min(1),
  file_type: z.string().min(1),
  label: z.string().optional(),
  format: z.string().optional(),
  content_type: z.string().optional(),
  file_name: z.string().optional(),
  file_size: z.number().int().nonnegative().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});
export type ResultFile = z.infer<typeof ResultFileSchema>;

/**
 * An entry of `files` on the music detail endpoint. Entries are keyed by
 * workflow (audio_url, wav_url, text, stem_split ...), so `file_url` is
 * optional here; the documented fields are typed, any other field is kept.
 */
export const MusicFileSchema = z.looseObject({
  file_url: z.string().optional(),
  file_type: z.string().optional(),
  file_name: z.string().optional(),
  file_size: z.number().int().nonnegative().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  audio_id: z.string().optional(),
  audio_url: z.string().optional(),
  image_url: z.string().optional(),
  title: z.string().optional(),
  tags: z.string().optional(),
  duration: z.number().optional(),
  prompt: z.string().optional(),
  timestampe_lyrics: z.string().optional(),
  text: z.string().optional(),
  style: z.string().optional(),
  wav_url: z.string().optional(),
  separate_vocals: z.string().optional(),
  vocal_removal: z.string().optional(),
  stem_split: z.string().optional(),
  generate_cover: z.string().optional(),
  persona_id: z.string().optional(),
  video_url: z.string().optional(),
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

export const SubmitResultSchema = z.object({
  task_id: z.string().min(1),
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
