import { Command, CommanderError, Option } from 'commander';
import { EXIT, GenbatchError, isFileSystemError } from '../errors.js';
import { CONFINE_HELP } from './confine.js';
import { int, num } from './flags.js';
import { parseUncertain } from '../engine/prepare/uncertain.js';

/**
 * The CLI entry. Commands are loaded lazily, one module each under ./commands/,
 * and return an exit code. Only this file calls process.exit.
 * Errors go to stderr, data to stdout.
 */

/** --state of the commands that read a run. */
/** Where a database password is safe: not in a flag (hidden from `ps` once genbatch starts, not before). */
const PASSWORD_HELP = '; a password is safer in the environment: GENBATCH_STATE, PGPASSWORD or ~/.pgpass';
const STATE_HELP = 'state file, or a PostgreSQL database: postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: $GENBATCH_STATE)' + PASSWORD_HELP;

type Action = (...args: unknown[]) => Promise<number>;
/** A named export of a command module (a command with subcommands keeps them in one module). */
const lazyNamed = (name: string, fn: string): Action => async (...args: unknown[]) => {
  const mod = (await import(`./commands/${name}.js`)) as Record<string, Action>;
  return mod[fn]!(...args.slice(0, -1));
};
const lazy = (name: string): Action => async (...args: unknown[]) => {
  const mod = (await import(`./commands/${name}.js`)) as { default: Action };
  return mod.default(...args.slice(0, -1));
};

/** A repeatable option: every value, in order. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function buildProgram(setCode: (code: number) => void): Command {
  const program = new Command('genbatch')
    .description('Batch runner for an asynchronous media-generation service, with a local sandbox')
    .version('0.1.0')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    .showHelpAfterError('(run with --help for usage)');
  const wrap = (action: Action) => async (...args: unknown[]) => setCode(await action(...args));

  program
    .command('validate')
    .description('check every job of a manifest; exit 2 and one line per problem when any job is invalid')
    .argument('<manifest>', 'YAML, CSV, TSV or JSONL manifest')
    .option('--json', 'print problems as JSON')
    .option('--confine', CONFINE_HELP)
    .action(wrap(lazy('validate')));

  program
    .command('estimate')
    .description('credits per job, per model and in total; compares with the balance unless --offline')
    .argument('<manifest>', 'YAML, CSV, TSV or JSONL manifest')
    .option('--json', 'print one JSON object')
    .option('--offline', 'do not read the balance')
    .option('--max-credits <n>', 'the cap a run would have: shown with the estimate (exit 5 when the estimate exceeds it, as run; 3 when the balance does)', num('--max-credits'))
    .option('--prices <file>', 'user-supplied prices (YAML or JSON: model id -> credits), or a price book of observed prices (default book: $GENBATCH_PRICE_BOOK, else ~/.config/genbatch/prices.json)')
    .option('--max-credits-per-invocation <n>', 'the per-invocation cap a run would have: with a state, what the next run sends under it', num('--max-credits-per-invocation'))
    .option('--state <path>', 'a state file of earlier runs of this manifest: say what the next run keeps, sends again and sends (default: $GENBATCH_STATE, else the run\'s default state when it exists)')
    .option('--out <dir>', 'the output folder of earlier runs: its state.db, as --state')
    .option('--max-changed <n>', 'the guard a run would have on re-sending done jobs (default 10): exit 4 when a run would stop at it', int('--max-changed', 0))
    .option('--base-url <url>', 'service base URL (default $GENBATCH_BASE_URL)')
    .option('--confine', CONFINE_HELP)
    .action(wrap(lazy('estimate')));

  program
    .command('models')
    .description('list the model catalogue: ids, kind, workflows, fields, price basis')
    .argument('[model]', 'a model id, or the start of ids (e.g. alpha-image, motion-1.6/): only those models')
    .addOption(new Option('--kind <kind>', 'only models of this kind (audio: every music and audio workflow)').choices(['image', 'video', 'audio', 'music', 'lyrics', 'chat']))
    .option('--json', 'print JSON')
    .action(wrap(lazy('models')));

  program
    .command('run')
    .description('validate, estimate, upload, submit, wait, download and report, checkpointed in SQLite')
    .argument('<manifest>', 'YAML, CSV, TSV or JSONL manifest')
    .option('--sandbox', 'start the sandbox in-process with a fresh key and run against it')
    .option('--out <dir>', 'output folder (default: <manifest dir>/genbatch-out/<manifest name>, or <manifest name>.sandbox with --sandbox), or s3://bucket/prefix: results and reports in an S3-compatible bucket (AWS_* environment and profiles; path-style with a custom endpoint unless GENBATCH_S3_VIRTUAL_HOSTS=1)')
    .option('--state <path|url>', 'state file, or a PostgreSQL database: postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: $GENBATCH_STATE, else <out>/state.db; with --out s3://...: <manifest dir>/genbatch-state/<manifest name>.db)' + PASSWORD_HELP)
    .option(
      '--concurrency <n>',
      'submit requests (and chat calls) in flight at once; the tasks being waited on are capped apart, at 50 x N (at least 500), and downloads at 2 x N',
      int('--concurrency', 1),
      8,
    )
    .option('--yes', 'proceed although some prices are unknown')
    .option('--max-credits <n>', 'cap on what the run is charged over its invocations: only the pending jobs whose known estimate fits are sent, in manifest order; no job is sent that would take the charge past it (exit 5, jobs left pending)', num('--max-credits'))
    .option('--max-credits-per-invocation <n>', "cap on what this invocation is charged (the manifest's budget_per_invocation): only the jobs it sends count; the pending jobs that fit are sent in manifest order, the rest stay pending (exit 5)", num('--max-credits-per-invocation'))
    .option('--json', 'write NDJSON events to stdout; the last line is the summary object (README "The --json summary")')
    .option('--base-url <url>', 'service base URL (default $GENBATCH_BASE_URL)')
    .option('--prices <file>', 'user-supplied prices (model id -> credits), or a price book (see estimate --help)')
    .addOption(
      new Option('--uncertain <policy>', 'what to do with submits of unknown outcome: skip, resubmit, or resubmit-after=DURATION (e.g. 24h: sent again once uncertain that long; a charge may double)')
        .argParser((v: string) => (parseUncertain(v), v))
        .default('skip'),
    )
    .option('--callback-url <url>', 'public URL that reaches the --listen receiver')
    .option('--listen <host:port>', 'start a callback receiver here')
    .option(
      '--time-scale <s>',
      "multiply the run's own waits (poll interval, first poll, retry backoff, upload window) and, with --sandbox, every sandbox duration; against a sandbox started elsewhere, give its --time-scale (default: 0.02 with --sandbox, else 1)",
      num('--time-scale', 0, true),
    )
    .option('--learn-prices', 'first send one job of each price class of unknown price alone and keep what the balance says it cost in the price book (no extra task; see prices probe)')
    .option('--status-rate <n>', 'status reads per second at most (default 10, in the service\'s time: divided by --time-scale)')
    .option('--request-timeout <seconds>', 'the most one API request may take, headers and body (default 60, or $GENBATCH_REQUEST_TIMEOUT; a chat call: 300)')
    .option('--redo <states>', 'send again the jobs that ended in these states: failed (not those the service refused for their input: failed-permanent), expired, rejected (done jobs marked rejected by genbatch mark; a new seed when the model has one and the manifest gives none), changed (done jobs whose spec changed, past the --max-changed guard) as a comma list; other done jobs are untouched, earlier files go to <job>/previous-<n>/')
    .option('--only <ids>', 'send only the pending jobs whose id matches (globs with * and ?; repeatable, comma separated); a chosen job takes the pending jobs it needs along', collect)
    .option('--limit <n>', 'send at most N pending jobs, in manifest order', int('--limit', 1))
    .option('--max-changed <n>', 'stop before sending when a manifest edit would send more than N done jobs again (default 10; --redo changed or --yes goes on)', int('--max-changed', 0))
    .option('--keep-changed', 'done jobs whose spec changed keep their results, marked changed-not-sent (--redo changed sends them later)')
    .addHelpText('after', '\nWith --only or --limit, the other pending jobs stay pending for a later run (the same\ncommand without them sends them); the estimate and the --max-credits, budget and\nbalance checks cover only the jobs sent; jobs left pending make the exit code 7\n(left pending).')
    .option('--confine', CONFINE_HELP)
    .option('--notify <url>', 'when the run ends, whichever way, POST a JSON summary there (a `text` line for chat webhooks, the counts as fields); a failed POST is a warning')
    .action(wrap(lazy('run')));

  program
    .command('work')
    .description('join a run kept in PostgreSQL without its manifest (made by genbatch run <manifest> --state postgres://...): claim its jobs beside any other worker, on this machine or others')
    .option('--state <url>', 'the PostgreSQL database that holds the run: postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: $GENBATCH_STATE)' + PASSWORD_HELP)
    .option('--run <name>', "the run to join, by its name (the manifest's file name, with or without its extension) or its manifest's path; needed when the database holds several")
    .option('--until-empty', 'exit once the run has nothing left that this worker can do (else wait for more work until stopped)')
    .option('--out <dir>', "output folder, storage every worker sees (default: the run's output folder, which must be there on this machine)")
    .option('--base-url <url>', 'service base URL (default $GENBATCH_BASE_URL)')
    .option('--concurrency <n>', 'submit requests (and chat calls) in flight at once in this worker', int('--concurrency', 1), 8)
    .option('--yes', 'proceed although some prices are unknown')
    .option('--json', 'write NDJSON events to stdout')
    .option('--callback-url <url>', 'public URL that reaches the --listen receiver')
    .option('--listen <host:port>', 'start a callback receiver here')
    .option('--time-scale <s>', "multiply the worker's own waits (against a sandbox started with the same --time-scale)", num('--time-scale', 0, true))
    .option('--status-rate <n>', "status reads per second at most, shared by every worker of the API key (default 10, in the service's time)")
    .option('--request-timeout <seconds>', 'the most one API request may take (default 60, or $GENBATCH_REQUEST_TIMEOUT; a chat call: 300)')
    .action(wrap(lazy('work')));

  program
    .command('status')
    .description('jobs by state from a state file, and jobs stuck (sent more than 1 h ago, not finished) with their last error')
    .argument('[manifest]', "manifest whose default state file to read (default: the run of this folder, ./genbatch-out/<manifest name>/state.db or ./state.db)")
    .option('--state <path|url>', STATE_HELP)
    .option('--out <dir>', 'output folder of the run (its state file is <dir>/state.db), or s3://bucket/prefix (its state file: beside the manifest)')
    .option('--jobs', 'list every job: id, state, model, task_id, attempts, error (tab-separated, with a header row)')
    .option('--json', 'print JSON')
    .option('--include-removed', 'also the jobs no longer in the manifest (kept in the state; left out by default)')
    .action(wrap(lazy('status')));

  program
    .command('report')
    .description('rewrite report.json, report.csv, report.md and report.html from the state')
    .argument('[manifest]', "manifest whose default state file to read (default: the run of this folder, as for status)")
    .option('--state <path|url>', STATE_HELP)
    .option('--out <dir>', 'where the reports go: a folder or s3://bucket/prefix (default: the run\'s output; a run to a bucket: name the manifest or --state)')
    .option('--invocation <n>', 'print one invocation of the run instead (a number, or last): its balance readings, its charge (measured, reconstructed or unknown) and the jobs it last sent; the reports are not rewritten')
    .option('--json', 'with --invocation: print it as one JSON object')
    .option('--include-removed', 'also the jobs no longer in the manifest (kept in the state; left out by default)')
    .action(wrap(lazy('report')));

  program
    .command('prune')
    .description("remove earlier result generations (out/<job>/previous-<n>/) beyond the newest K per job, and with --removed the results of jobs no longer in the manifest; only files the state records, never through a link or outside the output folder")
    .argument('<manifest>', 'the manifest of the run (its state and output folder are found as for run)')
    .option('--state <path>', STATE_HELP)
    .option('--out <dir>', 'output folder of the run (its state file is <dir>/state.db)')
    .option('--keep <k>', 'previous-<n>/ generations kept per job, the newest (default 3)', int('--keep', 0))
    .option('--removed', 'also remove the result files (and earlier generations) of jobs the manifest no longer names')
    .option('--dry-run', 'list what would be removed; remove nothing')
    .option('--json', 'print the outcome as one JSON object')
    .action(wrap(lazy('prune')));

  program
    .command('mark')
    .description('review marks, kept in the state file: approve or reject done jobs (ids or globs, as run --only), or clear their marks')
    .argument('[manifest]', "manifest whose default state file to use (default: the run of this folder, as for status)")
    .option('--state <path|url>', STATE_HELP)
    .option('--out <dir>', 'output folder of the run (its state file is <dir>/state.db), or s3://bucket/prefix (its state file: beside the manifest)')
    .option('--approve <ids...>', 'mark these done jobs approved (ids or globs with * and ?; comma lists too)')
    .option('--reject <ids...>', 'mark these done jobs rejected (run --redo rejected makes them again)')
    .option('--clear <ids...>', 'remove the current mark of these jobs (kept in their history)')
    .option('--note <text>', 'a note kept with the mark')
    .action(wrap(lazy('mark')));

  program
    .command('export')
    .description('copy (hard-link where it can) the chosen results into a folder as a data set, with a metadata.jsonl that Hugging Face datasets loads as an ImageFolder/AudioFolder')
    .argument('[manifest]', "manifest whose default state file to use (default: the run of this folder, as for status)")
    .option('--state <path|url>', STATE_HELP)
    .option('--out <dir>', 'output folder of the run (its state file is <dir>/state.db), or s3://bucket/prefix (its state file: beside the manifest)')
    .option('--to <dir>', 'the folder, or s3://bucket/prefix, to export into (files at <job id>/<file name>; bucket to bucket: copied server-side)')
    .option('--only <which>', 'approved: the approved results only; done: every done result, rejected ones too (default: every done result not marked rejected)')
    .option('--format <format>', 'imagefolder (metadata.jsonl), jsonl (export.jsonl) or csv (export.csv)', 'imagefolder')
    .option('--include-removed', 'also the jobs no longer in the manifest (kept in the state; left out by default)')
    .action(wrap(lazy('export')));

  program
    .command('view')
    .description('a local web app over the state file and output folder: the gallery, live during a run, job details, review marks (prints its URL, with a token, on its first line; runs until Ctrl+C)')
    .argument('[manifest]', "manifest whose default state file to use (default: the run of this folder, as for status)")
    .option('--state <path|url>', STATE_HELP)
    .option('--out <dir>', 'output folder of the run (its state file is <dir>/state.db), or s3://bucket/prefix (its state file: beside the manifest)')
    .option('--port <n>', 'port to listen on (0: any free port)', int('--port', 0, 65535), 8788)
    .option('--host <address>', 'address to bind (another than 127.0.0.1 lets other machines reach the view; they still need the token to change anything)', '127.0.0.1')
    .option('--open', 'open the URL in the default browser')
    .option('--include-removed', 'also the jobs no longer in the manifest (kept in the state; left out by default)')
    .action(wrap(lazy('view')));

  program
    .command('balance')
    .description('print the account balance in credits')
    .option('--json', 'print JSON')
    .option('--base-url <url>', 'service base URL (default $GENBATCH_BASE_URL)')
    .action(wrap(lazy('balance')));

  program
    .command('sandbox')
    .description('start the local sandbox service and serve until stopped')
    .option('--port <n>', 'port', int('--port', 0, 65535), 8787)
    .option('--host <host>', 'host', '127.0.0.1')
    .option('--public-url <url>', 'base of file and upload URLs, e.g. https://sandbox.example.com (default: from the bound address)')
    .option('--keys <list>', 'key=credits,key2=credits (default: one generated key with 10000 credits)')
    .option('--time-scale <s>', 'multiply every duration (0.01: a 60 s task takes 0.6 s)', num('--time-scale'), 1)
    .option('--seed <n>', 'seed for every random draw', int('--seed'))
    .option('--faults <spec>', 'fault injection, e.g. "submit:500=0.1,status:429=0.05"')
    .option('--failure-rate <r>', 'share of tasks that fail, 0 to 1 (default: 0)')
    .option('--partial-rate <r>', 'share of n > 1 tasks returning fewer outputs (rest refunded), 0 to 1 (default: 0)')
    .option('--price-factor <f>', 'charge every task and chat call f times its price, a number >= 0 (default: 1)')
    .option('--allow-loopback', 'allow loopback callback and upload URLs')
    .option('--banned-words <list>', 'comma-separated words refused at submit with content_moderation_error ("": none; default: forbidden)')
    .option('--policy-words <list>', 'comma-separated words whose tasks fail with a content-policy message ("": none; default: unsafe-output)')
    .option('--slow-ms <ms>', 'delay of a slow fault, not scaled (default: 2000)')
    .option('--retry-after <s>', 'Retry-After seconds of a 429 fault (default: 1)')
    .option('--image-edge <px>', 'longest edge of served images, >= 8 (default: 128)')
    .option('--video-bytes <n>', 'serve every video result padded to exactly n bytes, made as it is sent (to try large files; default: as generated)')
    .option('--callback-timeout-ms <ms>', 'how long a callback receiver may take to answer (default: 10000 x time scale, at least 1000)')
    .option('--clock-start <when>', 'virtual clock start: epoch ms or ISO date, e.g. 2026-01-01T00:00:00Z (default: now)')
    .option('--max-connections <n>', 'open connections in all; past it the oldest that sent nothing yet is closed (default: 2048)')
    .option('--max-connections-per-client <n>', 'open connections from one address; a request on one past it is answered 503 with Retry-After: 1 (default: 1024)')
    .option('--admin-token <token>', 'token the /__sandbox/ endpoints require in X-Sandbox-Admin-Token, 16+ characters (default: random, printed; or GENBATCH_SANDBOX_ADMIN_TOKEN); clock and faults answer without it from loopback when --host is loopback; tasks and stats need it always')
    .action(wrap(lazy('sandbox')));

  const prices = program
    .command('prices')
    .description('prices the service does not publish: measured on the account (probe), kept in a price book, used by estimate and run');
  prices
    .command('probe')
    .description('for each price class of unknown price in the manifest, run one task alone and record what the balance says it cost')
    .argument('<manifest>', 'YAML, CSV, TSV or JSONL manifest')
    .option('--yes', 'run the probes (without it: list them and send nothing)')
    .option('--max-credits <n>', 'start no probe once this many credits are spent', num('--max-credits'))
    .option('--base-url <url>', 'service base URL (default $GENBATCH_BASE_URL)')
    .option('--prices <file>', 'the price book file (default $GENBATCH_PRICE_BOOK, else $XDG_CONFIG_HOME/genbatch/prices.json)')
    .option('--time-scale <s>', 'multiply the waits (against a sandbox started with the same --time-scale)', num('--time-scale', 0, true))
    .option('--json', 'print the outcome of each probe as JSON on stdout')
    .action(wrap(lazyNamed('prices', 'probeCommand')));
  prices
    .command('list')
    .description('the observed prices: per service and price class, with how often, when and how far apart they were seen')
    .option('--base-url <url>', 'only this service')
    .option('--prices <file>', 'the price book file')
    .option('--json', 'print JSON')
    .action(wrap(lazyNamed('prices', 'listCommand')));
  prices
    .command('forget')
    .description('remove observed prices: of the named models, of one service (--base-url), or all (--all)')
    .argument('[models...]', 'model ids')
    .option('--base-url <url>', 'only this service')
    .option('--all', 'every observed price')
    .option('--prices <file>', 'the price book file')
    .action(wrap(lazyNamed('prices', 'forgetCommand')));

  return program;
}

export async function main(argv: string[]): Promise<number> {
  let code: number = EXIT.ok;
  const program = buildProgram((c) => (code = c));
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT.ok;
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof GenbatchError) {
      process.stderr.write(`genbatch: ${err.message}\n`);
      return err.exitCode;
    }
    if (isFileSystemError(err)) {
      process.stderr.write(`genbatch: a file or folder could not be used: ${err.message}\n`);
      return EXIT.io;
    }
    process.stderr.write(`genbatch: internal error (a bug; please report it): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.internal;
  }
}

/** Resolve once everything written so far to a stream has been handed to the OS (pipes may queue). */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()));
}

/**
 * A reader that closes early (`genbatch validate big.csv 2>&1 | head -1`) is not a failure:
 * from the first EPIPE on, output to that stream is dropped quietly (writes still call back,
 * without an error) and the command finishes with its own exit code. Other stream errors still throw.
 */
function dropOutputAfterEpipe(stream: NodeJS.WriteStream): void {
  let closed = false;
  const isEpipe = (err: unknown) => err instanceof Error && (err as NodeJS.ErrnoException).code === 'EPIPE';
  stream.on('error', (err) => {
    if (isEpipe(err) || closed) closed = true;
    else throw err;
  });
  const write = stream.write.bind(stream) as (chunk: unknown, encoding: BufferEncoding | undefined, cb: (err?: Error | null) => void) => boolean;
  const patched = (chunk: unknown, encodingOrCb?: BufferEncoding | ((err?: Error | null) => void), cb?: (err?: Error | null) => void): boolean => {
    const done = typeof encodingOrCb === 'function' ? encodingOrCb : cb;
    const encoding = typeof encodingOrCb === 'string' ? encodingOrCb : undefined;
    if (closed) {
      if (done) process.nextTick(done);
      return true;
    }
    return write(chunk, encoding, (err) => {
      if (err && (isEpipe(err) || closed)) {
        closed = true;
        done?.();
      } else done?.(err);
    });
  };
  stream.write = patched as typeof stream.write;
}

// Run when executed as the entry point.
dropOutputAfterEpipe(process.stdout);
dropOutputAfterEpipe(process.stderr);
const code = await main(process.argv);
process.exitCode = code;
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
if (process.env.GENBATCH_NO_EXIT !== '1') process.exit(code);
