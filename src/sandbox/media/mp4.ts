import { encodeFlat, rgbToYcc } from './h264.js';
import { rng } from './pattern.js';

/**
 * A playable MP4 (ISO base media, brands isom/iso2/avc1/mp41) holding one
 * H.264 video track and no audio:
 *   ftyp  major `isom`
 *   moov  mvhd + trak (tkhd width x height, mdhd, hdlr `vide`, vmhd, dref,
 *         stbl: avc1 + avcC, stts, stss, stsc, stsz, stco)  -- before mdat ("fast start")
 *   mdat  the pictures: 10 per second, the first an IDR picture of one flat
 *         seeded colour, the others skipped P pictures repeating it (see h264.ts)
 * The duration is exactly round(seconds * 1000) ms (the last picture is
 * shortened when needed). A 5 s 1280x720 video is about 4 KB.
 */

/** Pictures per second in the generated video. */
export const MP4_FPS = 10;
const TIMESCALE = 1000;

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body]);
}

function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  const vf = Buffer.alloc(4);
  vf.writeUInt32BE((((version & 0xff) << 24) | (flags & 0xffffff)) >>> 0, 0);
  return box(type, vf, ...payload);
}

function u32(...values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeUInt32BE(v >>> 0, i * 4));
  return b;
}

function u16(...values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 2);
  values.forEach((v, i) => b.writeUInt16BE(v & 0xffff, i * 2));
  return b;
}

const u8 = (...values: number[]): Buffer => Buffer.from(values);

/** The identity transformation matrix of mvhd/tkhd (16.16 and 2.30 fixed point). */
const MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

/** Samples prefixed with their 4-byte length (avcC lengthSizeMinusOne = 3). */
function sample(nalUnit: Buffer): Buffer {
  return Buffer.concat([u32(nalUnit.length), nalUnit]);
}

export function mp4(seconds: number, width: number, height: number, seed: number | string = 0): Buffer {
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 86400) {
    throw new RangeError(`seconds must be a number above 0 and at most 86400, got ${seconds}`);
  }
  for (const [name, v] of [['width', width], ['height', height]] as const) {
    if (!Number.isInteger(v) || v < 2 || v > 8192) throw new RangeError(`${name} must be an integer from 2 to 8192, got ${v}`);
  }
  const r = rng(seed);
  const avc = encodeFlat(width, height, rgbToYcc(r() * 255, r() * 255, r() * 255));

  const duration = Math.max(1, Math.round(seconds * TIMESCALE));
  const delta = TIMESCALE / MP4_FPS;
  const count = Math.ceil(duration / delta);
  const lastDelta = duration - (count - 1) * delta;
  const samples = [sample(avc.idr)];
  for (let i = 1; i < count; i++) samples.push(sample(avc.skip(i)));

  const ftyp = box('ftyp', Buffer.from('isom', 'latin1'), u32(512), Buffer.from('isomiso2avc1mp41', 'latin1'));
  const moovWith = (chunkOffset: number): Buffer => {
    const mvhd = fullBox(
      'mvhd', 0, 0,
      u32(0, 0, TIMESCALE, duration), // creation, modification, timescale, duration
      u32(0x00010000), u16(0x0100), Buffer.alloc(10), // rate 1.0, volume 1.0, reserved
      MATRIX, Buffer.alloc(24), u32(2), // pre_defined, next_track_ID
    );
    const tkhd = fullBox(
      'tkhd', 0, 3, // enabled | in movie
      u32(0, 0, 1, 0, duration), Buffer.alloc(8), // creation, modification, track_ID, reserved, duration, reserved
      u16(0, 0, 0, 0), // layer, alternate_group, volume (0 for video), reserved
      MATRIX, u32(width * 0x10000, height * 0x10000),
    );
    const mdhd = fullBox('mdhd', 0, 0, u32(0, 0, TIMESCALE, duration), u16(0x55c4, 0)); // language `und`
    const hdlr = fullBox('hdlr', 0, 0, u32(0), Buffer.from('vide', 'latin1'), u32(0, 0, 0), Buffer.from('VideoHandler\0', 'latin1'));
    const vmhd = fullBox('vmhd', 0, 1, u16(0, 0, 0, 0));
    const dinf = box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1)));
    const avcC = box(
      'avcC',
      u8(1, avc.sps[1]!, avc.sps[2]!, avc.sps[3]!, 0xff, 0xe1), // version, profile, compat, level, 4-byte lengths, 1 SPS
      u16(avc.sps.length), avc.sps,
      u8(1), u16(avc.pps.length), avc.pps,
    );
    const name = Buffer.alloc(32);
    name.write('\x0fgenbatch-sandbox', 0, 'latin1');
    const avc1 = box(
      'avc1',
      Buffer.alloc(6), u16(1), // reserved, data_reference_index
      Buffer.alloc(16), // pre_defined, reserved, pre_defined[3]
      u16(avc.width, avc.height),
      u32(0x00480000, 0x00480000, 0), u16(1), // 72 dpi, reserved, frame_count
      name, u16(0x0018, 0xffff), // compressorname, depth, pre_defined -1
      avcC,
    );
    const stts = count > 1 && lastDelta !== delta
      ? fullBox('stts', 0, 0, u32(2, count - 1, delta, 1, lastDelta))
      : fullBox('stts', 0, 0, u32(1, count, count > 1 ? delta : lastDelta));
    const stbl = box(
      'stbl',
      fullBox('stsd', 0, 0, u32(1), avc1),
      stts,
      fullBox('stss', 0, 0, u32(1, 1)), // only the first picture is a sync sample
      fullBox('stsc', 0, 0, u32(1, 1, count, 1)), // all samples in chunk 1
      fullBox('stsz', 0, 0, u32(0, count), u32(...samples.map((s) => s.length))),
      fullBox('stco', 0, 0, u32(1, chunkOffset)),
    );
    const trak = box('trak', tkhd, box('mdia', mdhd, hdlr, box('minf', vmhd, dinf, stbl)));
    return box('moov', mvhd, trak);
  };
  const moovSize = moovWith(0).length;
  const moov = moovWith(ftyp.length + moovSize + 8);
  return Buffer.concat([ftyp, moov, box('mdat', ...samples)]);
}
