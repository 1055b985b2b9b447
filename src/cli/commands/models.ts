import { CHAT_MODELS, CHAT_PRICE, inputFields, listModels, type FieldInfo, type ModelSpec } from '../../models/index.js';
import { write } from './validate.js';

/**
 * `genbatch models [--json]`: the catalogue. Per model: id, kind, family, summary,
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
  /** Other fields pass through unchecked (fields not shown by the contract). */
  open_input: boolean;
  price_basis: string;
  /** True when the contract gives a price (credits are computed per job); false: unknown unless user-supplied. */
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

function text(rows: ModelRow[]): string {
  const out: string[] = [];
  for (const r of rows) {
    out.push(`${r.id}  [${r.kind}, family ${r.family}]`);
    out.push(`  ${r.summary}`);
    out.push(`  workflows: ${r.workflows.join(', ')}`);
    out.push(`  fields: ${r.fields.map(fieldText).join('; ')}${r.open_input ? '; other fields pass through unchecked' : ''}`);
    out.push(`  price: ${r.price_basis}`);
    out.push('');
  }
  out.push(`chat models (price unknown: ${CHAT_PRICE.basis}; any other <vendor>/<model> id is accepted when the job names its protocol):`);
  const w = Math.max(...CHAT_MODELS.map((m) => m.id.length));
  for (const m of CHAT_MODELS) out.push(`  ${m.id.padEnd(w)}  ${m.protocols.join(', ')}  (${m.group}${m.older ? '; older version' : ''})`);
  return out.join('\n') + '\n';
}

export default async function models(opts: { json?: boolean }): Promise<number> {
  const rows = listModels().map(row);
  if (opts.json) {
    const chat = CHAT_MODELS.map((m) => ({ id: m.id, group: m.group, protocols: m.protocols, older: m.older, price_basis: `unknown: ${CHAT_PRICE.basis}`, price_known: false }));
    await write(process.stdout, JSON.stringify({ models: rows, chat_models: chat }, null, 2) + '\n');
  } else {
    await write(process.stdout, text(rows));
  }
  return 0;
}
