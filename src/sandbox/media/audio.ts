import { rng } from './pattern.js';

function checkSeconds(seconds: number): void {
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 3600) {
    throw new RangeError(`seconds must be a number above 0 and at most 3600, got ${seconds}`);
  }
}

/**
 * A valid RIFF/WAVE file: PCM, 8-bit unsigned, mono, `sampleRate` Hz
 * (default 8000, so 8 KB per second). It holds round(seconds * sampleRate)
 * samples of a quiet sine tone (amplitude 12 of 127) whose pitch (220-660 Hz)
 * depends on the seed. An odd-length data chunk gets the RIFF pad byte.
 */
export function wav(seconds: number, seed: number | string, sampleRate = 8000): Buffer {
  checkSeconds(seconds);
  if (!Number.isInteger(sampleRate) || sampleRate < 1000 || sampleRate > 192000) {
    throw new RangeError(`sampleRate must be an integer from 1000 to 192000, got ${sampleRate}`);
  }
  const samples = Math.max(1, Math.round(seconds * sampleRate));
  const pad = samples & 1;
  const buf = Buffer.alloc(44 + samples + pad);
  buf.write('RIFF', 0, 'latin1');
  buf.writeUInt32LE(36 + samples + pad, 4);
  buf.write('WAVE', 8, 'latin1');
  buf.write('fmt ', 12, 'latin1');
  buf.writeUInt32LE(16, 16); // fmt chunk size
  buf.writeUInt16LE(1, 20); // PCM
  buf.writeUInt16LE(1, 22); // mono
  buf.writeUInt32LE(sampleRate, 24);
  buf.writeUInt32LE(sampleRate, 28); // byte rate = rate * channels * 1 byte
  buf.writeUInt16LE(1, 32); // block align
  buf.writeUInt16LE(8, 34); // bits per sample
  buf.write('data', 36, 'latin1');
  buf.writeUInt32LE(samples, 40); // data size excludes the pad byte
  const freq = 220 + Math.floor(rng(seed)() * 440);
  const step = (2 * Math.PI * freq) / sampleRate;
  for (let i = 0; i < samples; i++) buf[44 + i] = 128 + Math.round(12 * Math.sin(i * step));
  return buf;
}

/** MP3 parameters used by `mp3()`: MPEG-1 Layer III, 32 kbit/s, 48 kHz, mono, no CRC. */
export const MP3 = {
  sampleRate: 48000,
  bitrate: 32000,
  samplesPerFrame: 1152,
  /** 144 * bitrate / sampleRate, exact at these rates, so no padding bytes. */
  frameBytes: 96,
  /** Header FF FB 14 C0: sync, MPEG-1, Layer III, no CRC, bitrate index 1, 48 kHz, no padding, mono. */
  header: [0xff, 0xfb, 0x14, 0xc0] as const,
} as const;

/**
 * A valid MPEG-1 Layer III stream of silent frames: each 96-byte frame is the
 * 4-byte header above, 17 bytes of zero side information (main_data_begin 0,
 * part2_3_length 0, global_gain 0: no coded samples) and 75 zero bytes of
 * main data, which decoders render as silence. No ID3 or Xing tag; it is
 * constant bit rate, so duration = frames * 24 ms (also = bytes * 8 / 32000).
 * The frame count is round(seconds / 0.024), at least 1, so the duration is
 * within 12 ms of the request.
 */
export function mp3(seconds: number): Buffer {
  checkSeconds(seconds);
  const frames = Math.max(1, Math.round((seconds * MP3.sampleRate) / MP3.samplesPerFrame));
  const buf = Buffer.alloc(frames * MP3.frameBytes);
  for (let f = 0; f < frames; f++) buf.set(MP3.header, f * MP3.frameBytes);
  return buf;
}
