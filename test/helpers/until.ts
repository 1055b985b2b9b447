/** `fn()`'s first value that is not null, asked every 50 ms for up to 30 s; else an error naming `what`. */
export async function until<T>(what: string, fn: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}
