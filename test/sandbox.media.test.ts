import { inflateSync } from 'node:zlib';
import { fileTypeFromBuffer } from 'file-type';
import jpegJs from 'jpeg-js';
import { describe, expect, it } from 'vitest';
import { MP3, contentTypeOf, crc32, glb, jpeg, lrc, mp3, mp4, png, wav } from '../src/sandbox/media/index.js';

/** Walks PNG chunks, checking every CRC; returns the chunks by type. */
function pngChunks(buf: Buffer): Map<string, Buffer[]> {
  expect(buf.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const out = new Map<string, Buffer[]>();
  let p = 8;
  while (p < buf.length) {
    const len = buf.readUInt32BE(p);
    const type = buf.subarray(p + 4, p + 8);
    const data = buf.subarray(p + 8, p + 8 + len);
    expect(buf.readUInt32BE(p + 8 + len)).toBe(crc32(type, data));
    const key = type.toString('latin1');
    out.set(key, [...(out.get(key) ?? []), data]);
    p += 12 + len;
  }
  expect(p).toBe(buf.length);
  return out;
}

/** Finds a box by path of types inside an ISO BMFF buffer (top-down, first match). */
function findBox(buf: Buffer, path: string[]): Buffer | null {
  let start = 0;
  let end = buf.length;
  for (const want of path) {
    let found: Buffer | null = null;
    for (let p = start; p + 8 <= end; ) {
      const size = buf.readUInt32BE(p);
      if (size < 8) return null;
      if (buf.toString('latin1', p + 4, p + 8) === want) {
        found = buf.subarray(p, p + size);
        start = p + 8;
        end = p + size;
        break;
      }
      p += size;
    }
    if (!found) return null;
  }
  return buf.subarray(start - 8, end);
}

describe('sandbox media generators', () => {
  it('png: detected as image/png, header dimensions match, pixels inflate to the right size, CRCs valid', async () => {
    const buf = png(97, 33, 1);
    expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'png', mime: 'image/png' });
    const chunks = pngChunks(buf);
    const ihdr = chunks.get('IHDR')![0]!;
    expect([ihdr.readUInt32BE(0), ihdr.readUInt32BE(4), ihdr[8], ihdr[9]]).toEqual([97, 33, 8, 2]);
    const raw = inflateSync(Buffer.concat(chunks.get('IDAT')!));
    expect(raw.length).toBe(33 * (1 + 97 * 3));
    expect(chunks.has('IEND')).toBe(true);
  });

  it('jpeg: detected as image/jpeg, SOF0 dimensions match, decodes with jpeg-js', async () => {
    const buf = jpeg(120, 45, 3);
    expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'jpg', mime: 'image/jpeg' });
    const sof = buf.indexOf(Buffer.from([0xff, 0xc0]));
    expect(sof).toBeGreaterThan(0);
    expect([buf.readUInt16BE(sof + 7), buf.readUInt16BE(sof + 5)]).toEqual([120, 45]);
    const decoded = jpegJs.decode(buf, { useTArray: true });
    expect([decoded.width, decoded.height]).toEqual([120, 45]);
  });

  it('images are deterministic per seed and differ between seeds', () => {
    expect(png(64, 48, 5).equals(png(64, 48, 5))).toBe(true);
    expect(png(64, 48, 5).equals(png(64, 48, 6))).toBe(false);
    expect(png(64, 48, 'task-a').equals(png(64, 48, 'task-b'))).toBe(false);
    expect(jpeg(64, 48, 5).equals(jpeg(64, 48, 5))).toBe(true);
    expect(jpeg(64, 48, 5).equals(jpeg(64, 48, 6))).toBe(false);
  });

  it('rejects impossible dimensions', () => {
    expect(() => png(0, 10, 1)).toThrow(/width/);
    expect(() => jpeg(10, 1.5, 1)).toThrow(/height/);
  });

  it('wav: detected as audio/wav, header duration equals the request', async () => {
    for (const [seconds, rate] of [[2, 8000], [1.5, 8000], [0.0001875, 16000]] as const) {
      const buf = wav(seconds, 9, rate);
      expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'wav', mime: 'audio/wav' });
      expect(buf.toString('latin1', 0, 4)).toBe('RIFF');
      expect(buf.readUInt32LE(4)).toBe(buf.length - 8);
      expect(buf.readUInt16LE(20)).toBe(1); // PCM
      const byteRate = buf.readUInt32LE(28);
      expect(buf.readUInt32LE(24)).toBe(rate);
      expect(buf.toString('latin1', 36, 40)).toBe('data');
      const dataBytes = buf.readUInt32LE(40);
      expect(dataBytes / byteRate).toBeCloseTo(seconds, 6);
    }
    expect(wav(1, 1).equals(wav(1, 1))).toBe(true);
    expect(wav(1, 1).equals(wav(1, 2))).toBe(false);
  });

  it('mp3: detected as audio/mpeg, every frame header valid, duration from frame count within half a frame', async () => {
    for (const seconds of [1, 2.5, 30]) {
      const buf = mp3(seconds);
      expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'mp3', mime: 'audio/mpeg' });
      let frames = 0;
      for (let p = 0; p < buf.length; p += MP3.frameBytes) {
        // sync 11 bits, MPEG-1 (11), Layer III (01); bitrate index 1 = 32 kbit/s; rate index 1 = 48 kHz
        expect(buf.readUInt16BE(p) & 0xfffe).toBe(0xfffa);
        expect(buf[p + 2]! >> 4).toBe(1);
        expect((buf[p + 2]! >> 2) & 3).toBe(1);
        frames++;
      }
      expect(frames * MP3.frameBytes).toBe(buf.length);
      const duration = (frames * 1152) / 48000;
      expect(Math.abs(duration - seconds)).toBeLessThanOrEqual(0.012);
      expect((buf.length * 8) / MP3.bitrate).toBeCloseTo(duration, 9);
    }
  });

  it('mp4: detected as video/mp4, mvhd duration and tkhd size match', async () => {
    const buf = mp4(5, 1280, 720);
    expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'mp4', mime: 'video/mp4' });
    expect(buf.toString('latin1', 8, 12)).toBe('isom');
    const mvhd = findBox(buf, ['moov', 'mvhd'])!;
    expect(mvhd).not.toBeNull();
    expect(mvhd.readUInt32BE(24) / mvhd.readUInt32BE(20)).toBe(5);
    const tkhd = findBox(buf, ['moov', 'trak', 'tkhd'])!;
    expect([tkhd.readUInt32BE(tkhd.length - 8) / 0x10000, tkhd.readUInt32BE(tkhd.length - 4) / 0x10000]).toEqual([1280, 720]);
    const hdlr = findBox(buf, ['moov', 'trak', 'mdia', 'hdlr'])!;
    expect(hdlr.toString('latin1', 16, 20)).toBe('vide');
    expect(findBox(buf, ['mdat'])).not.toBeNull();
  });

  it('glb: detected as model/gltf-binary, header length and JSON chunk valid', async () => {
    const buf = glb();
    expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'glb', mime: 'model/gltf-binary' });
    expect(buf.readUInt32LE(8)).toBe(buf.length);
    const jsonLen = buf.readUInt32LE(12);
    expect(jsonLen % 4).toBe(0);
    expect(buf.readUInt32LE(16)).toBe(0x4e4f534a);
    const doc = JSON.parse(buf.toString('utf8', 20, 20 + jsonLen)) as { asset: { version: string }; scenes: unknown[] };
    expect(doc.asset.version).toBe('2.0');
    expect(doc.scenes).toHaveLength(1);
  });

  it('lrc and contentTypeOf', () => {
    expect(lrc([{ word: '[Verse]', start_s: 0, end_s: 0.5 }, { word: 'hello', start_s: 61.234, end_s: 62 }])).toBe(
      '[00:00.00][Verse]\n[01:01.23]hello\n',
    );
    expect(contentTypeOf('PNG')).toBe('image/png');
    expect(contentTypeOf('.jpg')).toBe('image/jpeg');
    expect(contentTypeOf('mp3')).toBe('audio/mpeg');
    expect(contentTypeOf('mp4')).toBe('video/mp4');
    expect(contentTypeOf('glb')).toBe('model/gltf-binary');
    expect(contentTypeOf('weird')).toBe('application/octet-stream');
  });
});
