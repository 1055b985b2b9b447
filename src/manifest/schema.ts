import * as z from 'zod';
import { listModels } from '../models/index.js';
import { CHAT_MODELS } from '../models/chat.js';
import { MAX_USER_PRICE } from '../pricing/index.js';

/** MAX_USER_PRICE with thousands separators, written out (no toLocaleString at import: it loads ICU on every start-up). */
const MAX_USER_PRICE_TEXT = String(MAX_USER_PRICE).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * The shape of a YAML manifest. Model inputs are checked per job against the
 * model catalogue (src/models), not here; this schema covers the manifest's
 * own keys and feeds the committed JSON Schema (manifests/genbatch.schema.json).
 */

const str = (what: string) => z.string({ error: `must be a string (${what})` });

const input = z
  .record(z.string(), z.unknown(), { error: 'must be a mapping of model parameters' })
  .describe('Model parameters (see `genbatch models`). Strings may hold {{variable}} templates. Image fields take URLs or local image paths relative to this file.');

const jobFields = {
  model: str('a model id').describe('Model or workflow id, e.g. alpha-image-2, or a chat model id <vendor>/<model>'),
  input,
  callback_url: str('an https URL').describe('HTTPS webhook the service calls when the task finishes or fails (at most 2048 characters)'),
  protocol: str('a chat protocol').describe('Chat jobs only: chat-completions, responses, messages or gemini'),
  rehost: z.boolean({ error: 'must be true or false' }).describe('Re-host every remote http(s) image URL of the job through the service\'s URL upload before the submit (the service fetches it; the job sends the returned URL)'),
};

export const defaultsSchema = z
  .strictObject(
    {
      model: jobFields.model.optional(),
      input: input.optional(),
      callback_url: jobFields.callback_url.optional(),
      protocol: jobFields.protocol.optional(),
      rehost: jobFields.rehost.optional(),
    },
    { error: unknownKey('defaults') },
  )
  .describe('Deep-merged into every job: the job value wins; mappings merge key by key; lists are replaced');

export const rowsSchema = z
  .strictObject(
    {
      file: str('a file path').min(1, { error: 'must not be empty' }).describe('CSV (.csv, comma, RFC 4180 quotes) or TSV (.tsv, tab, no quoting) file, relative to the manifest; the first line names the columns'),
      limit: z.number({ error: 'must be a number' }).int({ error: 'must be an integer' }).min(1, { error: 'must be at least 1' }).optional().describe('Use only the first N rows'),
    },
    { error: unknownKey('rows') },
  )
  .describe('One job per row; each column is a {{column}} variable, and {{row}} is the row number (1 = first row after the header)');

export const globSchema = z
  .union([str('a glob pattern').min(1, { error: 'must not be empty' }), z.array(str('a glob pattern').min(1, { error: 'must not be empty' })).min(1, { error: 'must list at least one pattern' })], {
    error: 'must be a glob pattern or a list of patterns',
  })
  .describe('One job per matching file (fast-glob patterns relative to the manifest, sorted). Variables: {{path}} (relative to the manifest), {{name}} (file name without extension), {{ext}}, {{index}} (1-based)');

export const matrixSchema = z
  .record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'matrix keys are variable names: letters, digits and _' }),
    z.array(z.unknown(), { error: 'must be a list of values' }).min(1, { error: 'must list at least one value' }),
    { error: 'must be a mapping of variable name -> list of values' },
  )
  .describe('One job per combination of the listed values (the first key varies slowest); each key is a {{key}} variable keeping its YAML type');

export const jobSchema = z
  .strictObject(
    {
      id: str('a job id').describe('Stable job id: letters, digits, ".", "_", "-", at most 128 characters; may use {{variables}}. Derived from the job content when omitted'),
      ...jobFields,
      needs: z
        .union([str('a job id'), z.array(str('a job id'), { error: 'must be a list of job ids' })], { error: 'must be a list of job ids' })
        .describe('Ids of jobs that must be done before this one starts (order without data; references ${{ jobs.<id>.<field> }} add their job by themselves)'),
      for_each: str('a reference such as ${{ jobs.song.audio }}')
        .regex(/^\s*\$\{\{.*\}\}\s*$/s, { error: 'must be one reference to a list, e.g. ${{ jobs.song.audio }}' })
        .describe('One job per item of another job\'s list output, made once that job is done; inside, ${{ item }}, ${{ item.<field> }} and ${{ index }} (0-based); children are named <id>.<index>'),
      rows: rowsSchema,
      glob: globSchema,
      matrix: matrixSchema,
    },
    { error: unknownKey('job') },
  )
  .partial()
  .describe('One job, or with rows/glob/matrix a template expanded into one job per row x file x combination');

export const manifestSchema = z
  .strictObject(
    {
      budget: z.number({ error: 'must be a number of credits' }).min(0, { error: 'must be at least 0' }).optional().describe('Maximum credits the run is charged: run sends only the pending jobs whose known estimate fits (exit 5), estimate exits 5 when the known total exceeds it'),
      budget_per_invocation: z
        .number({ error: 'must be a number of credits' })
        .min(0, { error: 'must be at least 0' })
        .optional()
        .describe('Maximum credits one invocation of run is charged (like --max-credits-per-invocation): it sends the pending jobs that fit, in manifest order, and leaves the rest pending (exit 5)'),
      pricing: z
        .record(
          z.string(),
          z
            .number({ error: 'must be a number of credits' })
            .min(0, { error: 'must be at least 0' })
            // The bound estimate and run apply (pricing/index.ts): validate reports it here, with the line.
            .max(MAX_USER_PRICE, { error: `must be at most ${MAX_USER_PRICE_TEXT} credits per unit` }),
          { error: 'must be a mapping of model id -> credits' },
        )
        .optional()
        .describe('User-supplied prices (model id -> credits: per image for image models, times n; per request for other models) for models whose price the service does not give; labelled user-supplied in every output'),
      defaults: defaultsSchema.optional(),
      jobs: z.array(jobSchema, { error: 'must be a list of jobs' }).min(1, { error: 'must list at least one job' }).describe('The jobs'),
    },
    { error: unknownKey('manifest') },
  )
  .meta({ title: 'genbatch manifest', description: 'A batch of generation jobs for genbatch (validate, estimate, run)' });

/** The manifest without its job entries: those are checked one by one with jobSchema. */
export const headSchema = manifestSchema.extend({ jobs: z.unknown().optional() });

export type ManifestDoc = z.infer<typeof manifestSchema>;
export type JobEntry = z.infer<typeof jobSchema>;

function unknownKey(where: string) {
  return (iss: { code?: string; keys?: string[] }): string | undefined => {
    if (iss.code === 'invalid_type') return where === 'job' ? 'must be a mapping (one job: id, model, input, ...)' : `must be a mapping`;
    if (iss.code !== 'unrecognized_keys') return undefined;
    return `unknown ${where} key(s) ${(iss.keys ?? []).join(', ')}`;
  };
}

type Json = Record<string, unknown>;

/** A string holding a `{{variable}}` template or a `${{ ... }}` reference: accepted in place of any value. */
const TEMPLATED: Json = { type: 'string', pattern: '\\{\\{' };

/**
 * The JSON Schema (draft-07, for editors) of a YAML manifest. On top of the
 * zod schema: `model` lists the catalogue and chat ids (any other
 * `<vendor>/<model>` id or a template is accepted too), and one if/then
 * branch per catalogue model describes its `input` (from the model's zod
 * schema). In those branches nothing is required (defaults may supply it)
 * and any top-level field may be a template or a reference; models whose
 * schema does not convert are left out. The model's full rules are checked
 * by `genbatch validate`.
 */
export function manifestJsonSchema(): Json {
  const root = z.toJSONSchema(manifestSchema, { target: 'draft-7', io: 'input', unrepresentable: 'any' }) as Json;
  const props = root.properties as Record<string, Json>;
  const job = (props.jobs as { items: Json }).items;
  const defaults = props.defaults as Json;
  for (const target of [job, defaults]) {
    const p = target.properties as Record<string, Json>;
    if (p.model) p.model = modelSchema(p.model);
  }
  const branches: Json[] = [];
  for (const spec of listModels()) {
    const input = inputBranch(spec.input);
    if (input) branches.push({ if: { properties: { model: { const: spec.id } }, required: ['model'] }, then: { properties: { input } } });
  }
  job.allOf = branches;
  return root;
}

function modelSchema(base: Json): Json {
  const ids = [...listModels().map((m) => m.id), ...CHAT_MODELS.map((m) => m.id)];
  return {
    description: base.description,
    anyOf: [{ type: 'string', enum: ids }, { type: 'string', pattern: '^[^/\\s]+/[^/\\s]+$', description: 'A chat model outside the catalogue (<vendor>/<model>; set protocol)' }, TEMPLATED],
  };
}

/** A model's input schema for editors, or null when it cannot be converted. */
function inputBranch(schema: z.ZodType): Json | null {
  let out: Json;
  try {
    out = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' }) as Json;
  } catch {
    return null;
  }
  const text = JSON.stringify(out);
  if (text.includes('"$ref"') || text.length > 20_000) return null;
  delete out.$schema;
  delete out.required;
  const props = out.properties;
  if (props && typeof props === 'object') {
    for (const [k, v] of Object.entries(props as Record<string, Json>)) (props as Record<string, Json>)[k] = { anyOf: [v, TEMPLATED] };
  }
  return out;
}

/** The committed text of manifests/genbatch.schema.json. */
export function manifestJsonSchemaText(): string {
  return JSON.stringify(manifestJsonSchema(), null, 2) + '\n';
}
