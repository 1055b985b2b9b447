import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Caps on the sandbox's connections, so that a slowloris (many connections that send nothing, or
 * their headers a byte at a time) cannot starve it:
 * - per client address: a connection past `perClient` open from the same address is closed at once;
 * - in all: at `total` open connections, a new one makes room by closing the oldest connection that
 *   has not sent a request yet (an idle one), so a client that sends its request is served even
 *   while idle connections from many addresses fill the server; when none is idle, the new one is closed;
 * - in time: the headers of a request (the first from the moment of connection) must arrive within
 *   `headersMs`, and the whole request within `requestMs` (node's checks, every second).
 * These are the sandbox's own bounds; a keep-alive connection is closed after 30 s idle (server.ts).
 */
export interface ConnectionCaps {
  perClient: number;
  total: number;
  headersMs: number;
  requestMs: number;
}

export const DEFAULT_CONNECTION_CAPS: ConnectionCaps = { perClient: 256, total: 1000, headersMs: 10_000, requestMs: 600_000 };

/** node http server options that make it check its connections' headers and request deadlines every second. */
export const HTTP_OPTIONS = { connectionsCheckingInterval: 1000 };

/** What the caps did: connections open now, refused (past a cap) and closed to make room (idle, in all). */
export interface ConnectionCounts {
  open: number;
  refused: number;
  evicted: number;
}

export function capConnections(server: Server, caps: ConnectionCaps, counts: ConnectionCounts): void {
  server.headersTimeout = caps.headersMs;
  const perAddress = new Map<string, number>();
  /** Counted connections, with their client address. */
  const counted = new Map<Socket, string>();
  /** Counted connections that have not sent a request yet, oldest first. */
  const idle = new Set<Socket>();
  const release = (socket: Socket): void => {
    const address = counted.get(socket);
    if (address === undefined) return;
    counted.delete(socket);
    idle.delete(socket);
    counts.open = counted.size;
    const n = (perAddress.get(address) ?? 1) - 1;
    if (n <= 0) perAddress.delete(address);
    else perAddress.set(address, n);
  };
  const refuse = (socket: Socket): void => {
    counts.refused++;
    socket.destroy();
  };
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const mine = perAddress.get(address) ?? 0;
    if (mine >= caps.perClient) return refuse(socket);
    if (counted.size >= caps.total) {
      const oldest = idle.values().next();
      if (oldest.done === true) return refuse(socket);
      release(oldest.value);
      oldest.value.destroy();
      counts.evicted++;
    }
    counted.set(socket, address);
    counts.open = counted.size;
    perAddress.set(address, mine + 1);
    idle.add(socket);
    socket.once('close', () => release(socket));
  });
  server.on('request', (req) => {
    idle.delete(req.socket);
  });
}
