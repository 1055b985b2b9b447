import { validate as validateManifest } from '../../api/validate.js';
import { EXIT, formatProblem, type Problem } from '../../errors.js';
import { confineWanted } from '../confine.js';

/**
 * `genbatch validate <manifest> [--json]`: exit 0 and a one-line summary on
 * stdout when every job is valid; else exit 2 and one line per problem on
 * stderr (`job <id> (<file>:<line>) <field>: <rule>`). With --json, one object
 * `{valid, jobs, problems}` on stdout in both cases.
 */
export default async function validate(manifest: string, opts: { json?: boolean; confine?: boolean }): Promise<number> {
  const result = await validateManifest(manifest, { confine: confineWanted(opts.confine) });
  const valid = result.valid;
  if (opts.json) {
    await write(process.stdout, JSON.stringify(result) + '\n');
    return valid ? EXIT.ok : EXIT.usage;
  }
  if (valid) {
    await write(process.stdout, `${manifest}: ${result.jobs} job${result.jobs === 1 ? '' : 's'}, all valid\n`);
    return EXIT.ok;
  }
  await writeProblems(result.problems);
  return EXIT.usage;
}

/** One line per problem on stderr, written in chunks (100,000 problems stay fast). */
export async function writeProblems(problems: Problem[]): Promise<void> {
  const chunk: string[] = [];
  for (const p of problems) {
    chunk.push(formatProblem(p));
    if (chunk.length >= 1000) {
      await write(process.stderr, chunk.join('\n') + '\n');
      chunk.length = 0;
    }
  }
  if (chunk.length > 0) await write(process.stderr, chunk.join('\n') + '\n');
}

/**
 * Write and wait until the stream has taken it: on a pipe, a large write is
 * queued, and the process exit that follows the command would cut it short.
 */
export function write(stream: NodeJS.WriteStream, text: string): Promise<void> {
  return new Promise((resolve, reject) => stream.write(text, (err) => (err ? reject(err) : resolve())));
}
