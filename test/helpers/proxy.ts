import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 and a free port to `targetPort`: it passes bytes both ways untouched until told
 * to cut. `cutAfter(n)` destroys the connection (both sides, no FIN: a reset seen by the client) that
 * carries byte n + 1 counted from that call in the given direction ('up': client to server, the request
 * bodies of an upload; 'down': server to client), `times` times (1 unless given), the count starting again
 * after each cut. Bytes before the cut are forwarded, bytes after it never reach the other side.
 */
export interface TcpProxy {
  port: number;
  /** http://127.0.0.1:PORT */
  url: string;
  cutAfter(bytes: number, o?: { direction?: 'up' | 'down'; times?: number }): void;
  /** Connections cut so far. */
  readonly cuts: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Bytes forwarded so far in each direction. */
  readonly bytes: { up: number; down: number };
  stop(): Promise<void>;
}

export async function startProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const bytes = { up: 0, down: 0 };
  let armed: { direction: 'up' | 'down'; left: number; times: number; bytes: number } | null = null;
  let cuts = 0;
  let connections = 0;

  const server = createServer((client) => {
    connections++;
    const upstream = createConnection({ port: targetPort, host: targetHost });
    sockets.add(client).add(upstream);
    const cut = (): void => {
      cuts++;
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    };
    const pass = (from: Socket, to: Socket, direction: 'up' | 'down') => (chunk: Buffer): void => {
      if (from.destroyed || to.destroyed) return;
      const a = armed;
      if (a && a.direction === direction && chunk.length > a.left) {
        if (a.left > 0) to.write(chunk.subarray(0, a.left));
        bytes[direction] += a.left;
        a.times--;
        armed = a.times > 0 ? { ...a, left: a.bytes } : null;
        // Let the bytes before the cut leave before the reset.
        setImmediate(cut);
        from.pause();
        return;
      }
      if (a && a.direction === direction) a.left -= chunk.length;
      bytes[direction] += chunk.length;
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    };
    client.on('data', pass(client, upstream, 'up'));
    upstream.on('data', pass(upstream, client, 'down'));
    const close = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    cutAfter(n, o = {}) {
      const times = o.times ?? 1;
      armed = times > 0 ? { direction: o.direction ?? 'up', left: n, times, bytes: n } : null;
    },
    get cuts() {
      return cuts;
    },
    get connections() {
      return connections;
    },
    bytes,
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
