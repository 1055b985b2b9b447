import type { ChildProcess } from 'node:child_process';
import { ADMIN_HEADER, printedAdminToken } from './admin.js';
import { spawnCli } from './cli.js';

/** One task as GET /__sandbox/tasks lists it. */
export interface SandboxTask {
  task_id: string;
  model: string;
  state: string;
  callback_url: string | null;
  callback_attempts: number;
  callback_delivered: boolean;
}

/** A sandbox served by `genbatch sandbox --port 0` in its own process; URL, key and admin token read from its stdout. */
export interface SandboxProcess {
  url: string;
  key: string;
  child: ChildProcess;
  stats(): Promise<{ tasks_total: number; requests: Record<string, number>; faults_injected: Record<string, number>; uploads: Record<string, number> }>;
  tasks(): Promise<SandboxTask[]>;
  stop(): Promise<void>;
}

export function startSandboxProcess(args: string[] = []): Promise<SandboxProcess> {
  const child = spawnCli(['sandbox', '--port', '0', ...args]);
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`sandbox did not start: ${out}`)), 30_000);
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => reject(new Error(`sandbox exited with ${String(code)}: ${out}`)));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      const key = /^key: (\S+)$/m.exec(out)?.[1];
      if (!url || !key || !/^admin token /m.test(out)) return;
      clearTimeout(timer);
      // stats and tasks need the admin token even from loopback; a chosen one ("(as given)") is sent by the test itself.
      const token = printedAdminToken(out);
      const get = async <T>(path: string): Promise<T> => (await (await fetch(url + path, token === null ? {} : { headers: { [ADMIN_HEADER]: token } })).json()) as T;
      resolve({
        url,
        key,
        child,
        stats: () => get('/__sandbox/stats'),
        tasks: async () => (await get<{ tasks: SandboxTask[] }>('/__sandbox/tasks')).tasks,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.removeAllListeners('exit');
            child.on('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
  });
}
