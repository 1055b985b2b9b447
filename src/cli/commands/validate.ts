import { EXIT, formatProblem, type Problem } from '../../errors.js';
import { validateManifest } from '../../manifest/index.js';

/**
 * `genbatch validate <manifest> [--json]`: exit 0 and a one-line summary on
 * stdout when every job is valid; else exit 2 and one line per problem on
 * stderr (`job <id> (<file>:<line>) <field>: <rule>`). With --json, one object
 * `{valid, jobs, problems}` on stdout in both cases.
 */
export default async function validate(manifest: string, opts: { json?: boolean }): Promise<number> {
  const result = await validateManifest(manifest);
  const valid = result.problems.length === 0;
  if (opts.json) {
    process.stdout.write(JSON.stringify({ valid, jobs: result.jobs, problems: result.problems }) + '\n');
    return valid ? EXIT.ok : EXIT.usage;
  }
  if (valid) {
    process.stdout.write(`${manifest}: ${result.jobs} job${result.jobs === 1 ? '' : 's'}, all valid\n`);
    return EXIT.ok;
  }
  writeProblems(result.problems);
  return EXIT.usage;
}

/** One line per problem on stderr, written in chunks (100,000 problems stay fast). */
export function writeProblems(problems: Problem[]): void {
  const chunk: string[] = [];
  for (const p of problems) {
    chunk.push(formatProblem(p));
    if (chunk.length >= 1000) {
      process.stderr.write(chunk.join('\n') + '\n');
      chunk.length = 0;
    }
  }
  if (chunk.length > 0) process.stderr.write(chunk.join('\n') + '\n');
}
