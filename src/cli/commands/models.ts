import { UsageError } from '../../errors.js';
import { nearest } from '../../lib/nearest.js';
import { CHAT_MODELS, CHAT_PRICE, inputFields, listModels, type ChatModel, type FieldInfo, type ModelSpec } from '../../models/index.js';
import { write } from './validate.js';

/**
 * `genbatch models [id|prefix] [--kind K] [--json]`: the catalogue, or the models whose id is the one given
 * (or starts with it) and whose kind is K. Per model: id, kind, family, summary,
 * workflows, input fields (from the zod schema: name, type or allowed values,
 * required, default) and the price basis; then the chat models with their
 * protocols (price unknown). --json prints one object with all of it.
 */

interface ModelRow {
  id: string;
  kind: string;
  family: string;
  summary: string;
  workflows: readonly string[];
  fields: FieldInfo[];
  /** Other fields pass through unchecked (fields not documented by the service). */
  open_input: boolean;
  price_basis: string;
  /** True when the service gives a price (credits are computed per job); false: unknown unless user-supplied. */
  price_known: boolean;
}

function row(spec: ModelSpec): ModelRow {
  const { fields, open } = inputFields(spec);
  return {
    id: spec.id,
    kind: spec.kind,
    family: spec.family,
    summary: spec.summary,
    workflows: spec.workflows,
    fields,
    open_input: open,
    price_basis: spec.priceBasis,
    price_known: !spec.priceBasis.startsWith('unknown'),
  };
}

function fieldText(f: FieldInfo): string {
  if (!f.accepted) return `${f.name}: not accepted`;
  const values = f.enum !== undefined ? f.enum.map(String).join('|') : f.type;
  const notes = [f.required ? 'required' : '', f.default !== undefined ? `default ${JSON.stringify(f.default)}` : ''].filter(Boolean);
  return `${f.name} (${values}${notes.length > 0 ? `; ${notes.join(', ')}` : ''})`;
}

function text(rows: ModelRow[], chatModels: readonly ChatModel[]): string {
  const out: string[] = [];
  for (const r of rows) {
    out.push(`${r.id}  [${r.kind}, family ${r.family}]`);
    out.push(`  ${r.summary}`);
    out.push(`  workflows: ${r.workflows.join(', ')}`);
    out.push(`  fields: ${r.fields.map(fieldText).join('; ')}${r.open_input ? '; other fields pass through unchecked' : ''}`);
    out.push(`  price: ${r.price_basis}`);
    out.push('');
  }
  if (chatModels.length === 0) return out.join('\n');
  out.push(`chat models (price unknown: ${CHAT_PRICE.basis}; any other <vendor>/<model> id is accepted when the job names its protocol):`);
  const w = Math.max(...chatModels.map((m) => m.id.length));
  for (const m of chatModels) out.push(`  ${m.id.padEnd(w)}  ${m.protocols.join(', ')}  (${m.group}${m.older ? '; older version' : ''})`);
  return out.join('\n') + '\n';
}

/** `--kind` values (commander checks the choices, src/cli/main.ts): a model kind, or `audio` for every music and audio workflow (kinds music, lyrics and audio). */
type KindFilter = 'image' | 'video' | 'audio' | 'music' | 'lyrics' | 'chat';

function kindMatches(kind: string, filter: KindFilter | undefined): boolean {
  if (filter === undefined) return true;
  if (filter === 'audio') return kind === 'audio' || kind === 'music' || kind === 'lyrics';
  return kind === filter;
}

/** An exact id (case-insensitive) names that model alone; otherwise every id starting with the text. */
function idMatcher(query: string | undefined, ids: readonly string[]): (id: string) => boolean {
  if (query === undefined) return () => true;
  const q = query.toLowerCase();
  if (ids.some((id) => id.toLowerCase() === q)) return (id) => id.toLowerCase() === q;
  return (id) => id.toLowerCase().startsWith(q);
}

export default async function models(query: string | undefined, opts: { json?: boolean; kind?: KindFilter }): Promise<number> {
  const specs = listModels();
  const matches = idMatcher(query, [...specs.map((s) => s.id), ...CHAT_MODELS.map((m) => m.id)]);
  const rows = specs.filter((s) => kindMatches(s.kind, opts.kind) && matches(s.id)).map(row);
  const chatModels = CHAT_MODELS.filter((m) => kindMatches('chat', opts.kind) && matches(m.id));
  if (rows.length === 0 && chatModels.length === 0) {
    const near = query === undefined ? null : nearest(query, [...specs.map((s) => s.id), ...CHAT_MODELS.map((m) => m.id)]);
    const what = [query === undefined ? '' : `starts with "${query}"`, opts.kind === undefined ? '' : `is of kind ${opts.kind}`].filter(Boolean).join(' and ');
    throw new UsageError(`no model id ${what}${near ? `; did you mean "${near}"?` : ''} (genbatch models lists them all)`);
  }
  if (opts.json) {
    const chat = chatModels.map((m) => ({ id: m.id, group: m.group, protocols: m.protocols, older: m.older, price_basis: `unknown: ${CHAT_PRICE.basis}`, price_known: false }));
    await write(process.stdout, JSON.stringify({ models: rows, chat_models: chat }, null, 2) + '\n');
  } else {
    await write(process.stdout, text(rows, chatModels));
  }
  return 0;
}
