/** Counters behind GET /__sandbox/stats. Keys are named by keyHash(), never by the key. */
export class Stats {
  readonly requests: Record<string, number> = {};
  readonly requestsByKey: Record<string, number> = {};
  readonly tasksByKey: Record<string, number> = {};
  readonly uploads = { accepted: 0, refused: 0 };
  readonly callbacks = { attempted: 0, delivered: 0, failed: 0, abandoned: 0 };

  request(endpoint: string): void {
    this.requests[endpoint] = (this.requests[endpoint] ?? 0) + 1;
  }

  keyRequest(hash: string): void {
    this.requestsByKey[hash] = (this.requestsByKey[hash] ?? 0) + 1;
  }

  taskCreated(hash: string): void {
    this.tasksByKey[hash] = (this.tasksByKey[hash] ?? 0) + 1;
  }
}
