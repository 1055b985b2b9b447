import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { spawnCli } from './cli.js';

/** `genbatch view ... --port 0` in its own process; URL, port and token read from its first line. */
export interface ViewProcess {
  url: string;
  base: string;
  port: number;
  token: string;
  child: ChildProcess;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

export function startViewProcess(args: string[], env: Record<string, string> = {}): Promise<ViewProcess> {
  const child = spawnCli(['view', ...args, '--port', '0'], env);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`view did not start: ${out}${err}`)), 30_000);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    child.on('exit', (code) => reject(new Error(`view exited with ${String(code)}: ${out}${err}`)));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^(http:\/\/127\.0\.0\.1:(\d+))\/\?token=([\w-]+)\n/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        url: `${m[1]}/?token=${m[3]}`,
        base: m[1]!,
        port: Number(m[2]),
        token: m[3]!,
        child,
        stop: async () => {
          if (child.exitCode === null) child.kill('SIGTERM');
          return exited;
        },
      });
    });
  });
}

/** A raw HTTP request (node:http, so that the Host header can be anything), the status and body. */
export function rawRequest(port: number, path: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: opts.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}
