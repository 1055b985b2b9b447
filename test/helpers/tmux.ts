import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, cliEnv } from './cli.js';

/** Whether tmux can be run here (the terminal tests need it: a real pseudo-terminal with a screen to read back). */
export function hasTmux(): boolean {
  return spawnSync('tmux', ['-V'], { encoding: 'utf8' }).status === 0;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `genbatch <args>` in a tmux window of `cols` x `rows`, on a tmux server of its own (its own socket, removed by close()),
 * with the environment a CLI child gets (cliEnv). When the command ends, the window shows `EXIT <code>`.
 */
export class TmuxCli {
  private readonly socket = join(tmpdir(), `genbatch-tmux-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);

  constructor(args: string[], cols: number, rows: number, env: Record<string, string> = {}, cwd?: string) {
    const cmd = `${[process.execPath, BIN, ...args].map(quote).join(' ')}; echo "EXIT $?"; sleep 3600`;
    this.tmux(['new-session', '-d', '-s', 'g', '-x', String(cols), '-y', String(rows), ...(cwd ? ['-c', cwd] : []), cmd], cliEnv(env));
  }

  private tmux(args: string[], env?: Record<string, string>): string {
    const r = spawnSync('tmux', ['-S', this.socket, ...args], { encoding: 'utf8', ...(env ? { env } : {}) });
    if (r.status !== 0) throw new Error(`tmux ${args[0]}: ${r.stderr}`);
    return r.stdout;
  }

  /** Everything the window shows and has scrolled off, one line per written line (wrapped lines joined, trailing spaces cut). */
  text(): string {
    return this.capture(['-S', '-', '-E', '-']);
  }

  /** What the window shows now, row by row as the terminal draws it (trailing spaces cut). */
  rows(): string {
    return this.capture([], false);
  }

  private capture(range: string[], join = true): string {
    return this.tmux(['capture-pane', '-p', ...(join ? ['-J'] : []), ...range, '-t', 'g'])
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n')
      .trimEnd();
  }

  keys(...keys: string[]): void {
    this.tmux(['send-keys', '-t', 'g', ...keys]);
  }

  resize(cols: number, rows: number): void {
    this.tmux(['resize-window', '-t', 'g', '-x', String(cols), '-y', String(rows)]);
  }

  /** Waits until `test(text())` (or `test(rows())` with `onScreen`) holds; throws with what it shows after `timeoutMs`. */
  async waitFor(test: (text: string) => boolean, what: string, timeoutMs = 30_000, onScreen = false): Promise<string> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const t = onScreen ? this.rows() : this.text();
      if (test(t)) return t;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; the terminal shows:\n${t}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The exit code printed once the command ended. */
  async exitCode(timeoutMs = 30_000): Promise<number> {
    const t = await this.waitFor((s) => /^EXIT \d+$/m.test(s), 'the command to end', timeoutMs);
    return Number(/^EXIT (\d+)$/m.exec(t)![1]);
  }

  close(): void {
    spawnSync('tmux', ['-S', this.socket, 'kill-server']);
    rmSync(this.socket, { force: true });
  }
}
