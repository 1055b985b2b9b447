/** A binary min-heap ordered by `at` (milliseconds). Shared by the engine (poll schedule) and the sandbox (refunds, callbacks). */
export class MinHeap<T extends { at: number }> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = a[p] as T;
      if (parent.at <= item.at) break;
      a[i] = parent;
      i = p;
    }
    a[i] = item;
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const c = r < a.length && (a[r] as T).at < (a[l] as T).at ? r : l;
      if ((a[c] as T).at >= last.at) break;
      a[i] = a[c] as T;
      i = c;
    }
    a[i] = last;
    return top;
  }

  /** Pop every item due at or before `now`, in order. */
  popDue(now: number): T[] {
    const out: T[] = [];
    while (this.items.length > 0 && (this.items[0] as T).at <= now) out.push(this.pop() as T);
    return out;
  }
}
