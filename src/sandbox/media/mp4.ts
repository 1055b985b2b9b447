/**
 * An ISO base media (MP4) file that file-type and browsers identify as
 * video/mp4, with an honest structure but NO coded frames:
 *   ftyp  major `isom`, minor 512, compatible isom iso2 mp41 mp42
 *   moov  mvhd (timescale 1000, duration = round(seconds * 1000) ms)
 *         trak: tkhd (track 1, duration, width x height), mdia: mdhd,
 *               hdlr `vide`, minf: vmhd, dinf/dref (self-contained url),
 *               stbl with EMPTY stsd/stts/stsc/stsz/stco (zero samples)
 *   mdat  empty
 * Players see a video track of the right size and duration with no samples;
 * it does not decode to pictures. About 600 bytes.
 */

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body]);
}

function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  const vf = Buffer.alloc(4);
  vf.writeUInt32BE(((version & 0xff) << 24) | (flags & 0xffffff), 0);
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

/** The identity transformation matrix of mvhd/tkhd (16.16 and 2.30 fixed point). */
const MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

export function mp4(seconds: number, width: number, height: number): Buffer {
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 86400) {
    throw new RangeError(`seconds must be a number above 0 and at most 86400, got ${seconds}`);
  }
  for (const [name, v] of [['width', width], ['height', height]] as const) {
    if (!Number.isInteger(v) || v < 1 || v > 16384) throw new RangeError(`${name} must be an integer from 1 to 16384, got ${v}`);
  }
  const duration = Math.max(1, Math.round(seconds * 1000));
  const ftyp = box('ftyp', Buffer.from('isom', 'latin1'), u32(512), Buffer.from('isomiso2mp41mp42', 'latin1'));
  const mvhd = fullBox(
    'mvhd', 0, 0,
    u32(0, 0, 1000, duration), // creation, modification, timescale, duration
    u32(0x00010000), u16(0x0100), Buffer.alloc(10), // rate 1.0, volume 1.0, reserved
    MATRIX, Buffer.alloc(24), u32(2), // pre_defined, next_track_ID
  );
  const tkhd = fullBox(
    'tkhd', 0, 3, // enabled | in movie
    u32(0, 0, 1, 0, duration), Buffer.alloc(8), // creation, modification, track_ID, reserved, duration, reserved
    u16(0, 0, 0, 0), // layer, alternate_group, volume (0 for video), reserved
    MATRIX, u32(width * 0x10000, height * 0x10000),
  );
  const mdhd = fullBox('mdhd', 0, 0, u32(0, 0, 1000, duration), u16(0x55c4, 0)); // language `und`
  const hdlr = fullBox('hdlr', 0, 0, u32(0), Buffer.from('vide', 'latin1'), u32(0, 0, 0), Buffer.from('VideoHandler\0', 'latin1'));
  const vmhd = fullBox('vmhd', 0, 1, u16(0, 0, 0, 0));
  const dinf = box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1)));
  const stbl = box(
    'stbl',
    fullBox('stsd', 0, 0, u32(0)),
    fullBox('stts', 0, 0, u32(0)),
    fullBox('stsc', 0, 0, u32(0)),
    fullBox('stsz', 0, 0, u32(0, 0)),
    fullBox('stco', 0, 0, u32(0)),
  );
  const trak = box('trak', tkhd, box('mdia', mdhd, hdlr, box('minf', vmhd, dinf, stbl)));
  return Buffer.concat([ftyp, box('moov', mvhd, trak), box('mdat')]);
}
