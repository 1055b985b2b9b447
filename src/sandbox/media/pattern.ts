/**
 * Seeded, deterministic pixel pattern shared by the PNG and JPEG generators:
 * a two-colour linear gradient along a seeded angle, overlaid with a faint
 * checkerboard of seeded cell size. Different seeds give visibly different images.
 */

/** Turns a number or string seed into a 32-bit unsigned integer (FNV-1a for strings). */
export function seedToInt(seed: number | string): number {
  if (typeof seed === 'number') {
    if (!Number.isFinite(seed)) throw new RangeError(`seed must be a finite number, got ${seed}`);
    return (Math.trunc(seed) >>> 0) ^ 0x9e3779b9;
  }
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) {
    h ^= seed.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: a small, fast, seeded PRNG returning numbers in [0, 1). */
export function rng(seed: number | string): () => number {
  let a = seedToInt(seed);
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function checkDimensions(width: number, height: number): void {
  for (const [name, v] of [['width', width], ['height', height]] as const) {
    if (!Number.isInteger(v) || v < 1 || v > 16384) {
      throw new RangeError(`${name} must be an integer from 1 to 16384, got ${v}`);
    }
  }
}

/**
 * Fills `out` with pixels of `channels` bytes (3 = RGB, 4 = RGBA with alpha 255).
 * `rowPrefix` bytes are left at the start of each row (PNG's filter byte).
 */
export function paint(width: number, height: number, seed: number | string, channels: 3 | 4, rowPrefix: number): Buffer {
  const r = rng(seed);
  const c1 = [r() * 255, r() * 255, r() * 255];
  const c2 = [r() * 255, r() * 255, r() * 255];
  const angle = r() * Math.PI * 2;
  const cell = 8 + Math.floor(r() * 56);
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  // Project the four corners to normalise t into [0, 1].
  const proj = [0, (width - 1) * cos, (height - 1) * sin, (width - 1) * cos + (height - 1) * sin];
  const lo = Math.min(...proj);
  const span = Math.max(...proj) - lo || 1;
  const stride = rowPrefix + width * channels;
  const out = Buffer.alloc(stride * height);
  const [r1, g1, b1] = c1 as [number, number, number];
  const [dr, dg, db] = [c2[0]! - r1, c2[1]! - g1, c2[2]! - b1];
  // Per-column parts, computed once: projection on the gradient axis and checker parity.
  const xProj = new Float64Array(width);
  const xCell = new Uint8Array(width);
  for (let x = 0; x < width; x++) {
    xProj[x] = x * cos;
    xCell[x] = Math.floor(x / cell) & 1;
  }
  for (let y = 0; y < height; y++) {
    let p = y * stride + rowPrefix;
    const base = y * sin - lo;
    const cy = Math.floor(y / cell) & 1;
    for (let x = 0; x < width; x++) {
      const t = (xProj[x]! + base) / span;
      const shade = xCell[x] === cy ? 1 : 0.85;
      out[p++] = (r1 + dr * t) * shade;
      out[p++] = (g1 + dg * t) * shade;
      out[p++] = (b1 + db * t) * shade;
      if (channels === 4) out[p++] = 255;
    }
  }
  return out;
}
