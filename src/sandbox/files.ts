import { createHash } from 'node:crypto';
import * as media from './media/index.js';

/**
 * Result files. A Blob describes a file (name, type, how to render it); its
 * bytes are generated on demand from the description (deterministic from the
 * task seed), so memory holds descriptions, not bytes. An LRU of the process keeps recently
 * rendered base files. Uploaded files (bytes given) live in each FileStore.
 */

export type RenderSpec =
  | { type: 'png' | 'jpeg'; width: number; height: number; seed: number }
  | { type: 'wav'; seconds: number; seed: number }
  | { type: 'mp3'; seconds: number }
  | { type: 'mp4'; seconds: number; width: number; height: number }
  | { type: 'glb' }
  | { type: 'text'; text: string }
  | { type: 'json'; value: unknown };

/** The task a file belongs to, as the store needs it (its id names the file's URL and seeds its bytes). */
export interface TaskRef {
  readonly id: string;
}

export interface Blob {
  /** File name, unique within its task; the last segment of its URL. */
  name: string;
  /** Format word, e.g. png, jpeg, mp4, mp3, wav, glb, txt, json. */
  format: string;
  contentType: string;
  render: RenderSpec;
  /** Byte length, filled on first render. */
  size?: number;
}

/** The File object of the contract (an entry of `files`). */
export interface FileEntry {
  file_url: string;
  file_type: string;
  label?: string;
  format?: string;
  content_type?: string;
  file_name?: string;
  file_size?: number;
  metadata?: Record<string, unknown>;
  [extra: string]: unknown;
}

export interface StoredUpload {
  bytes: Buffer;
  contentType: string;
  /** Virtual epoch ms after which the file is gone. */
  expiresAt: number;
  /** Hash of the key that uploaded it (another key may not replace it). */
  owner?: string;
}

export function render(spec: RenderSpec): Buffer {
  switch (spec.type) {
    case 'png':
      return media.png(spec.width, spec.height, spec.seed);
    case 'jpeg':
      return media.jpeg(spec.width, spec.height, spec.seed);
    case 'wav':
      return media.wav(spec.seconds, spec.seed);
    case 'mp3':
      return media.mp3(spec.seconds);
    case 'mp4':
      return media.mp4(spec.seconds, spec.width, spec.height);
    case 'glb':
      return media.glb();
    case 'text':
      return Buffer.from(spec.text, 'utf8');
    case 'json':
      return Buffer.from(JSON.stringify(spec.value), 'utf8');
  }
}

/**
 * Seeded media is rendered for `seed % SEED_VARIANTS` only and cached, so a
 * status read never pays for an encoder run per task (jpeg-js takes ~25 ms
 * per image). Images are then made unique per file by a fixed-length stamp:
 * a PNG `tEXt` chunk before IEND, a JPEG `COM` segment after SOI, holding
 * sha1(task id / file name). The bytes stay valid files of the same size class.
 */
export const SEED_VARIANTS = 16;
const STAMP_CHARS = 40;
const PNG_STAMP_BYTES = 12 + 'genbatch-sandbox'.length + 1 + STAMP_CHARS;
const JPEG_STAMP_BYTES = 4 + STAMP_CHARS;

function baseSpec(spec: RenderSpec): RenderSpec {
  return 'seed' in spec ? { ...spec, seed: spec.seed % SEED_VARIANTS } : spec;
}

function baseKey(spec: RenderSpec): string | null {
  if (spec.type === 'text' || spec.type === 'json') return null;
  return JSON.stringify(baseSpec(spec));
}

function stampBytes(spec: RenderSpec): number {
  return spec.type === 'png' ? PNG_STAMP_BYTES : spec.type === 'jpeg' ? JPEG_STAMP_BYTES : 0;
}

function stamp(base: Buffer, spec: RenderSpec, id: string): Buffer {
  const text = createHash('sha1').update(id).digest('hex');
  if (spec.type === 'png') {
    const data = Buffer.from(`genbatch-sandbox\0${text}`, 'latin1');
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write('tEXt', 4, 'latin1');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(media.crc32(head.subarray(4), data) >>> 0, 0);
    const iend = base.length - 12;
    return Buffer.concat([base.subarray(0, iend), head, data, crc, base.subarray(iend)]);
  }
  if (spec.type === 'jpeg') {
    const seg = Buffer.alloc(JPEG_STAMP_BYTES);
    seg.writeUInt16BE(0xfffe, 0);
    seg.writeUInt16BE(2 + STAMP_CHARS, 2);
    seg.write(text, 4, 'latin1');
    return Buffer.concat([base.subarray(0, 2), seg, base.subarray(2)]);
  }
  return base;
}

/** Make a Blob, content type from the format. */
export function blob(name: string, format: string, spec: RenderSpec): Blob {
  return { name, format, contentType: media.contentTypeOf(format), render: spec };
}

const CACHE_BYTES = 48 * 1024 * 1024;
/** Sizes kept before the map is cleared (a size is found again by one render). */
const MAX_SIZES = 100_000;

/**
 * Rendered base files, shared by every sandbox of the process: a base file's bytes depend on its render spec
 * alone, so sandboxes started one after another (the tests start one per file) need not encode the same
 * images again; jpeg-js builds its tables on every encode, about 80 ms even for a 128 px image.
 * `cache`: bytes by baseKey, least recently used first, at most CACHE_BYTES; `sizes`: the byte length of each
 * base file rendered (kept when its bytes are evicted).
 */
const bases = { cache: new Map<string, Buffer>(), cached: 0, sizes: new Map<string, number>() };

function baseBytes(key: string, spec: RenderSpec): Buffer {
  const hit = bases.cache.get(key);
  if (hit) {
    bases.cache.delete(key);
    bases.cache.set(key, hit);
    return hit;
  }
  const bytes = render(baseSpec(spec));
  if (bases.sizes.size >= MAX_SIZES) bases.sizes.clear();
  bases.sizes.set(key, bytes.length);
  bases.cache.set(key, bytes);
  bases.cached += bytes.length;
  for (const [k, v] of bases.cache) {
    if (bases.cached <= CACHE_BYTES) break;
    bases.cache.delete(k);
    bases.cached -= v.length;
  }
  return bytes;
}

/** What a file URL serves: `head`, then `pad` bytes of an MP4 `free` box (its header included) made as they are sent. */
export interface Served {
  head: Buffer;
  pad: number;
}

const FILL = Buffer.alloc(1024 * 1024, 0x2e);

/** The header of an MP4 `free` box of `total` bytes (header included): 32-bit size, or 64-bit largesize past 4 GiB. */
function freeBoxHeader(total: number): Buffer {
  if (total <= 0xffffffff) {
    const h = Buffer.alloc(8);
    h.writeUInt32BE(total, 0);
    h.write('free', 4, 'latin1');
    return h;
  }
  const h = Buffer.alloc(16);
  h.writeUInt32BE(1, 0);
  h.write('free', 4, 'latin1');
  h.writeBigUInt64BE(BigInt(total), 8);
  return h;
}

/** The served bytes from the start up to `limit` (all when omitted), chunk by chunk: never more than 1 MiB at once in memory. */
export function* servedChunks(s: Served, limit = s.head.length + s.pad): Generator<Buffer> {
  let left = limit;
  const take = (b: Buffer): Buffer => b.subarray(0, Math.min(b.length, left));
  if (left <= 0) return;
  yield take(s.head);
  left -= s.head.length;
  if (s.pad === 0 || left <= 0) return;
  const header = freeBoxHeader(s.pad);
  yield take(header);
  left -= header.length;
  let fill = Math.min(s.pad - header.length, left);
  while (fill > 0) {
    const n = Math.min(fill, FILL.length);
    yield FILL.subarray(0, n);
    fill -= n;
  }
}

export class FileStore {
  private readonly base: () => string;
  private readonly uploads = new Map<string, StoredUpload>();

  /** Served size of every MP4 (SandboxOptions.videoBytes), or null. */
  private readonly videoBytes: number | null;

  constructor(baseUrl: () => string, videoBytes: number | null = null) {
    this.base = baseUrl;
    this.videoBytes = videoBytes;
  }

  /** Public URL of a task's file (no authentication needed to download, as with a CDN link). */
  url(task: TaskRef, b: Blob): string {
    return `${this.base()}/files/${task.id}/${encodeURIComponent(b.name)}`;
  }

  /** The file's bytes: deterministic from its render spec, the task id and its name. */
  bytes(task: TaskRef, b: Blob): Buffer {
    const key = baseKey(b.render);
    if (key === null) return render(b.render);
    return stamp(baseBytes(key, b.render), b.render, `${task.id}/${b.name}`);
  }

  /** What the file's URL serves: its bytes, padded to videoBytes for an MP4 when that option is set. */
  served(task: TaskRef, b: Blob): Served {
    const head = this.bytes(task, b);
    return { head, pad: this.padOf(b.render, head.length) };
  }

  /** Padding after a file of `size` bytes: up to videoBytes for an MP4 with room for the box header, else 0. */
  private padOf(spec: RenderSpec, size: number): number {
    if (spec.type !== 'mp4' || this.videoBytes === null) return 0;
    const pad = this.videoBytes - size;
    return pad >= (pad > 0xffffffff ? 16 : 8) ? pad : 0;
  }

  /** True byte length (as served), without rendering when a file of the same base was rendered before. */
  size(task: TaskRef, b: Blob): number {
    if (b.size !== undefined) return b.size + this.padOf(b.render, b.size);
    const key = baseKey(b.render);
    if (key === null) b.size = render(b.render).length;
    else b.size = (bases.sizes.get(key) ?? baseBytes(key, b.render).length) + stampBytes(b.render);
    return b.size + this.padOf(b.render, b.size);
  }


  /** The contract's File object for a blob, with true size and type. */
  entry(task: TaskRef, b: Blob, fileType: string, extra: Partial<FileEntry> = {}): FileEntry {
    return {
      file_url: this.url(task, b),
      file_type: fileType,
      format: b.format,
      content_type: b.contentType,
      file_name: b.name,
      file_size: this.size(task, b),
      ...extra,
    };
  }

  /**
   * Store uploaded bytes under `relPath` (e.g. `temp/<upload_path>/<name>`); returns its URL.
   * `owner` (a key hash): an unexpired upload of another owner at that path is never replaced: returns null.
   */
  putUpload(relPath: string, bytes: Buffer, contentType: string, expiresAt: number, owner?: string, now = 0): string | null {
    const path = relPath.replace(/^\/+/, '');
    const old = this.uploads.get(path);
    if (old && old.owner !== owner && now < old.expiresAt) return null;
    this.uploads.set(path, owner === undefined ? { bytes, contentType, expiresAt } : { bytes, contentType, expiresAt, owner });
    return `${this.base()}/${path.split('/').map(encodeURIComponent).join('/')}`;
  }

  /** An uploaded file by its path; expired uploads are deleted and reported as 'expired'. */
  getUpload(relPath: string, now: number): StoredUpload | 'expired' | undefined {
    const u = this.uploads.get(relPath);
    if (!u) return undefined;
    if (now >= u.expiresAt) {
      this.uploads.delete(relPath);
      return 'expired';
    }
    return u;
  }

  /** Number of uploads stored (expired ones included until read). */
  get uploadCount(): number {
    return this.uploads.size;
  }
}
