import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import { fileTypeFromBuffer } from 'file-type';
import jpegJs from 'jpeg-js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MP3, MP4_FPS, contentTypeOf, crc32, glb, jpeg, lrc, mp3, mp4, png, wav } from '../src/sandbox/media/index.js';
import { toolPresent } from './helpers/tools.js';

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

  it('mp4: detected as video/mp4; mvhd, tkhd, avc1 and sample tables agree with the request', async () => {
    for (const [seconds, w, h] of [[5, 1280, 720], [2.35, 1920, 1080], [0.05, 64, 48]] as const) {
      const buf = mp4(seconds, w, h, 'seed');
      expect(await fileTypeFromBuffer(buf)).toEqual({ ext: 'mp4', mime: 'video/mp4' });
      expect(buf.toString('latin1', 8, 12)).toBe('isom');
      const mvhd = findBox(buf, ['moov', 'mvhd'])!;
      expect(mvhd.readUInt32BE(24) / mvhd.readUInt32BE(20)).toBeCloseTo(seconds, 6); // duration / timescale
      const tkhd = findBox(buf, ['moov', 'trak', 'tkhd'])!;
      expect([tkhd.readUInt32BE(tkhd.length - 8) / 0x10000, tkhd.readUInt32BE(tkhd.length - 4) / 0x10000]).toEqual([w, h]);
      expect(findBox(buf, ['moov', 'trak', 'mdia', 'hdlr'])!.toString('latin1', 16, 20)).toBe('vide');
      const stbl = ['moov', 'trak', 'mdia', 'minf', 'stbl'];
      const stsd = findBox(buf, [...stbl, 'stsd'])!;
      expect(stsd.toString('latin1', 20, 24)).toBe('avc1');
      expect([stsd.readUInt16BE(16 + 32), stsd.readUInt16BE(16 + 34)]).toEqual([w, h]);
      const avcC = stsd.indexOf('avcC', 0, 'latin1');
      expect(stsd[avcC + 5]).toBe(66); // Baseline profile
      const stts = findBox(buf, [...stbl, 'stts'])!;
      let samples = 0;
      let ticks = 0;
      for (let i = 0; i < stts.readUInt32BE(12); i++) {
        samples += stts.readUInt32BE(16 + i * 8);
        ticks += stts.readUInt32BE(16 + i * 8) * stts.readUInt32BE(20 + i * 8);
      }
      expect(ticks / findBox(buf, ['moov', 'trak', 'mdia', 'mdhd'])!.readUInt32BE(20)).toBeCloseTo(seconds, 6);
      expect(samples).toBe(Math.ceil(seconds * MP4_FPS - 1e-9));
      const stsz = findBox(buf, [...stbl, 'stsz'])!;
      expect(stsz.readUInt32BE(16)).toBe(samples);
      let bytes = 0;
      for (let i = 0; i < samples; i++) bytes += stsz.readUInt32BE(20 + i * 4);
      const mdat = findBox(buf, ['mdat'])!;
      expect(mdat.length - 8).toBe(bytes);
      const stco = findBox(buf, [...stbl, 'stco'])!;
      expect(stco.readUInt32BE(16)).toBe(buf.length - bytes); // the one chunk starts at the mdat payload
      expect(buf[stco.readUInt32BE(16) + 4]! & 0x1f).toBe(5); // first sample is an IDR NAL unit
    }
    expect(mp4(1, 64, 64, 1).equals(mp4(1, 64, 64, 1))).toBe(true);
    expect(mp4(1, 64, 64, 1).equals(mp4(1, 64, 64, 2))).toBe(false);
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

/** Extra check where ffmpeg is installed (it is not a project dependency): every file decodes without error. */
const hasFfmpeg = toolPresent('ffprobe', spawnSync('ffprobe', ['-version']).status === 0, 'apt-get install ffmpeg');
describe.skipIf(!hasFfmpeg)('sandbox media decode with ffmpeg (only where ffmpeg is installed)', () => {
  it('decodes mp4, mp3, wav, png and jpeg strictly, with the requested duration and size', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'genbatch-media-'));
    try {
      const files: Array<[string, Buffer, { codec: string; width?: number; height?: number; duration?: string }]> = [
        ['v.mp4', mp4(2.5, 1920, 1080, 3), { codec: 'h264', width: 1920, height: 1080, duration: '2.500000' }],
        ['a.mp3', mp3(3), { codec: 'mp3', duration: '3.000000' }],
        ['a.wav', wav(1.25, 2), { codec: 'pcm_u8', duration: '1.250000' }],
        ['i.png', png(40, 30, 1), { codec: 'png', width: 40, height: 30 }],
        ['i.jpg', jpeg(40, 30, 1), { codec: 'mjpeg', width: 40, height: 30 }],
      ];
      const Probe = z.object({
        streams: z.array(z.object({ codec_name: z.string(), width: z.number().optional(), height: z.number().optional() })),
        format: z.object({ duration: z.string().optional() }),
      });
      for (const [name, buf, want] of files) {
        const path = join(dir, name);
        await writeFile(path, buf);
        const decode = spawnSync('ffmpeg', ['-v', 'error', '-err_detect', 'explode', '-i', path, '-f', 'null', '-'], { encoding: 'utf8' });
        expect(decode.status, decode.stderr).toBe(0);
        expect(decode.stderr).toBe('');
        const probe = spawnSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name,width,height:format=duration', '-of', 'json', path], { encoding: 'utf8' });
        const info = Probe.parse(JSON.parse(probe.stdout));
        expect(info.streams).toHaveLength(1);
        const got = { codec: info.streams[0]!.codec_name, width: info.streams[0]!.width, height: info.streams[0]!.height, duration: info.format.duration };
        expect(got).toMatchObject(want);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
