/**
 * What a job asked for, as the reports show it: one prompt text and the
 * variables of a rows or matrix job.
 */

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Input fields read as the prompt when there is no `prompt` (music: style, then title; lyrics tools: content, text). */
const PROMPT_FIELDS = ['prompt', 'style', 'title', 'tags', 'content', 'text'] as const;

/** The text of a chat message's content: a string, or the text parts of a list (`{type: "text", text}`, Gemini `{text}`). */
function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  const parts = content.flatMap((p) => (typeof p === 'string' ? [p] : isObject(p) && typeof p.text === 'string' ? [p.text] : []));
  return parts.length > 0 ? parts.join('\n') : null;
}

/**
 * The prompt of a job's input: for a chat job (`messages`) the last user message; else the first non-empty
 * text of `prompt`, `style`, `title`, `tags`, `content`, `text` (a music job without a prompt, e.g. instrumental
 * in custom mode, shows its style). Null when there is none.
 */
export function promptOf(input: unknown): string | null {
  if (!isObject(input)) return null;
  if (Array.isArray(input.messages)) {
    for (let i = input.messages.length - 1; i >= 0; i--) {
      const m: unknown = input.messages[i];
      if (isObject(m) && m.role === 'user') {
        const text = contentText(m.content);
        if (text !== null && text.trim() !== '') return text;
      }
    }
  }
  for (const k of PROMPT_FIELDS) {
    const v = input[k];
    if (typeof v === 'string' && v.trim() !== '') return v;
  }
  return null;
}

/** `, matrix k=v, k2=v2` at the end of `where` (the manifest writes matrix variables last; keys are variable names). */
const MATRIX = /, matrix ((?:[A-Za-z_][A-Za-z0-9_]*=.*))$/;
/** `prompts.tsv:row 17` or, with the file line, `prompts.tsv:18, row 17`. */
const ROW = /(?::|:\d+, )row (\d+)(?:,|$)/;

/**
 * The variables of a rows or matrix job, read from its `where` as the manifest records it
 * (`manifest.yaml:12, prompts.tsv:18, row 17, matrix mood=rainy, size=1:1`): `row` (the rows file's row
 * or a CSV manifest's row) and each matrix variable, its value as `where` shows it (a value over
 * 24 characters is cut to 21 and "..."). Empty for other jobs.
 */
export function varsOf(where: string): Record<string, string> {
  const vars: Record<string, string> = {};
  const m = MATRIX.exec(where);
  const row = ROW.exec(m ? where.slice(0, m.index) : where);
  if (row) vars.row = row[1]!;
  if (m) {
    for (const pair of m[1]!.split(/, (?=[A-Za-z_][A-Za-z0-9_]*=)/)) {
      const eq = pair.indexOf('=');
      vars[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
  }
  return vars;
}

/** `mood=rainy, row=17` (the variables in one line; '' when there are none). */
export function varsText(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}
