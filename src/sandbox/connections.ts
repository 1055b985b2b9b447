import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Caps on the sandbox's connections, so that a slowloris (many connections that send nothing, or
 * their headers a byte at a time) cannot starve it:
 * - per client address: a connection past `perClient` open from the same address is past the cap;
 * - in all: at `total` open connections, a new one makes room by closing the oldest connection that
 *   has not sent a request yet (an idle one), so a client that sends its request is served even
 *   while idle connections from many addresses fill the server; when none is idle, the new one is past the cap;
 * - past a cap: the connection is not served, but not cut blind either. Closed at once, a client that
 *   had written a submit could not know whether a task was made (genbatch marks such a job uncertain:
 *   a person must decide). So its first request is answered 503 with Retry-After: 1 and the connection
 *   closed (a 503 makes nothing: the client sends it again later); its body is read first, so the close
 *   is a clean one. Such a connection must send its request within `overMs`, and at most `overMax` of them
 *   wait at once (more are closed at once): a slowloris past the cap costs little.
 *   Many workers on one machine against one sandbox (each holds about --concurrency + 12 connections)
 *   stay under the default per-address cap up to about 20 workers; past it they are slowed, never harmed;
 * - in time: the headers of a request (the first from the moment of connection) must arrive within
 *   `headersMs`, and the whole request within `requestMs` (node's checks, every second).
 * These are the sandbox's own bounds; a keep-alive connection is closed after 30 s idle (server.ts).
 */
export interface ConnectionCaps {
  perClient: number;
  total: number;
  headersMs: number;
  requestMs: number;
  /** How long a connection past a cap may take to send its request (then it is closed). */
  overMs: number;
  /** How many connections past a cap may wait for their request at once (more are closed at once). */
  overMax: number;
}

export const DEFAULT_CONNECTION_CAPS: ConnectionCaps = { perClient: 1024, total: 2048, headersMs: 10_000, requestMs: 600_000, overMs: 2_000, overMax: 256 };

/** node http server options that make it check its connections' headers and request deadlines every second. */
export const HTTP_OPTIONS = { connectionsCheckingInterval: 1000 };

/**
 * What the caps did: connections open now, refused (past a cap: answered 503 or, past `overMax` or silent for
 * `overMs`, closed), of which `answered_503` got a 503 for their request, and closed to make room (idle, in all).
 */
export interface ConnectionCounts {
  open: number;
  refused: number;
  answered_503: number;
  evicted: number;
}

/** Whether a request's connection is past a cap (its request is to be answered 503 and the connection closed). */
export type PastCap = (socket: Socket) => boolean;

export function capConnections(server: Server, caps: ConnectionCaps, counts: ConnectionCounts): PastCap {
  server.headersTimeout = caps.headersMs;
  const perAddress = new Map<string, number>();
  /** Counted connections, with their client address. */
  const counted = new Map<Socket, string>();
  /** Counted connections that have not sent a request yet, oldest first. */
  const idle = new Set<Socket>();
  const release = (socket: Socket): void => {
    const address = counted.get(socket);
    // Stryker disable next-line ConditionalExpression: an evicted connection is released again when it closes; going on would delete an absent key: the same.
    if (address === undefined) return;
    counted.delete(socket);
    idle.delete(socket);
    counts.open = counted.size;
    const n = (perAddress.get(address) ?? 1) - 1;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: an address kept at 0 counts as one deleted (the map only stays smaller).
    if (n <= 0) perAddress.delete(address);
    else perAddress.set(address, n);
  };
  /** Connections past a cap waiting for their request (to be answered 503). */
  const over = new Set<Socket>();
  const refuse = (socket: Socket): void => {
    counts.refused++;
    if (over.size >= caps.overMax) {
      socket.destroy();
      return;
    }
    over.add(socket);
    // Stryker disable next-line ArrowFunction: node's http server destroys a socket whose timeout nothing else handles; said here explicitly.
    socket.setTimeout(caps.overMs, () => socket.destroy());
    socket.once('close', () => over.delete(socket));
  };
  server.on('connection', (socket: Socket) => {
    // Stryker disable next-line StringLiteral: remoteAddress is missing only on a socket already closed (any name counts it apart).
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
  return (socket) => over.has(socket);
}
