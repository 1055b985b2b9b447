import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { MUSIC_RESULT_FIELDS, MUSIC_RESULT_SCHEMAS, MUSIC_WORKFLOWS, STEM_SPLIT_KEYS, musicResultUrls, parseTimestampedLyrics, type MusicWorkflow } from '../src/models/music/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

const open: Sandbox[] = [];
const servers: Server[] = [];

async function sandbox(timeScale = 0.0001): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 100000, k2: 100000 }, timeScale, seed: 11, allowLoopback: true });
  open.push(sb);
  return sb;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(sb: Sandbox, method: string, path: string, key: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(sb.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Json };
}

async function submit(sb: Sandbox, model: string, input: Record<string, unknown>, key = 'k1', extra: Record<string, unknown> = {}) {
  return call(sb, 'POST', '/api/generate/submit', key, { model, input, ...extra });
}

async function submitOk(sb: Sandbox, model: string, input: Record<string, unknown>, key = 'k1'): Promise<string> {
  const r = await submit(sb, model, input, key);
  if (r.status !== 200) throw new Error(`${model}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.data.task_id as string;
}

/** Finish every pending task (clock moved past the longest typical time), then read the detail. */
async function finished(sb: Sandbox, id: string, key = 'k1'): Promise<Json[]> {
  sb.clock.advance(200);
  const r = await call(sb, 'GET', `/api/generate/detail/music?task_id=${id}`, key);
  expect(r.status).toBe(200);
  expect(r.body.data.status).toBe('finished');
  return r.body.data.files as Json[];
}

async function bytes(url: string): Promise<{ status: number; type: string; buf: Buffer }> {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type') ?? '', buf: Buffer.from(await res.arrayBuffer()) };
}

/** Magic bytes of the formats the sandbox serves. */
function kindOf(buf: Buffer): string {
  if (buf.subarray(0, 2).equals(Buffer.from([0xff, 0xfb]))) return 'mp3';
  if (buf.subarray(0, 4).toString('latin1') === 'RIFF' && buf.subarray(8, 12).toString('latin1') === 'WAVE') return 'wav';
  if (buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
  if (buf[0] === 0xff && buf[1] === 0xd8) return 'jpeg';
  if (buf.subarray(4, 8).toString('latin1') === 'ftyp') return 'mp4';
  if (buf[0] === 0x7b || buf[0] === 0x5b) return 'json';
  return 'text';
}

const VOCAL_SONG = { custom_mode: true, instrumental: false, mv: 'V5', prompt: '[Verse]\nwalking down the river road\n[Chorus]\nhome again tonight', style: 'folk', title: 'River Road' };
const INSTRUMENTAL = { custom_mode: true, instrumental: true, mv: 'V5', style: 'ambient', title: 'Drift' };

async function track(sb: Sandbox, input: Record<string, unknown> = VOCAL_SONG, key = 'k1') {
  const task = await submitOk(sb, 'generate-music', input, key);
  const files = await finished(sb, task, key);
  return { task, files, audio: files[0]?.audio_id as string };
}

describe('sandbox music: generate-music', () => {
  it('returns several variations with the documented track fields and real MP3 and image bytes', async () => {
    const sb = await sandbox();
    const { files } = await track(sb);
    expect(files).toHaveLength(2);
    const ids = new Set<string>();
    for (const item of files) {
      expect(MUSIC_RESULT_SCHEMAS['generate-music'].safeParse(item).success).toBe(true);
      expect(item).toMatchObject({ title: 'River Road', tags: 'folk', prompt: VOCAL_SONG.prompt, file_type: 'audio', file_url: item.audio_url });
      ids.add(item.audio_id as string);
      const audio = await bytes(item.audio_url as string);
      expect(audio.status).toBe(200);
      expect(audio.type).toBe('audio/mpeg');
      expect(kindOf(audio.buf)).toBe('mp3');
      expect(audio.buf.length).toBe(item.file_size);
      // CBR 32 kbit/s: duration = bytes * 8 / 32000, within one 24 ms frame of the stated duration.
      expect(Math.abs((audio.buf.length * 8) / 32000 - (item.duration as number))).toBeLessThanOrEqual(0.024);
      const cover = await bytes(item.image_url as string);
      expect(cover.status).toBe(200);
      expect(['png', 'jpeg']).toContain(kindOf(cover.buf));
    }
    expect(ids.size).toBe(2);
  });
});

describe('sandbox music: every workflow', () => {
  it('answers each workflow with its documented fields, every URL serving real bytes', async () => {
    const sb = await sandbox();
    const song = await track(sb);
    const audioUrl = song.files[0]?.audio_url as string;
    const ref = { task_id: song.task, audio_id: song.audio };
    const inputs: Record<MusicWorkflow, Record<string, unknown>> = {
      'generate-music': { custom_mode: false, prompt: 'a calm song about rain' },
      'extend-music': { default_param_flag: true, audio_id: song.audio, prompt: 'more words here', style: 'folk', title: 'River Road II', continue_at: 20 },
      'upload-and-cover-audio': { upload_url: audioUrl, custom_mode: false, prompt: 'jazz version' },
      'upload-and-extend-audio': { upload_url: audioUrl, default_param_flag: false },
      'add-instrumental': { upload_url: audioUrl, title: 'Backing', tags: 'piano', negative_tags: 'metal' },
      'add-vocals': { upload_url: audioUrl, prompt: 'sing along now', title: 'Voices', style: 'soul', negative_tags: 'rap' },
      'replace-section': { ...ref, prompt: 'new bridge', tags: 'folk', title: 'River Road', infill_start_s: 10, infill_end_s: 20.5 },
      'boost-music-style': { content: 'lofi, chill' },
      'generate-lyrics': { prompt: 'a song about the sea' },
      'get-timestamped-lyrics': ref,
      'convert-to-wav': ref,
      'create-music-video': { ...ref, author: 'me' },
      'generate-music-cover': { task_id: song.task },
      'generate-persona': { ...ref, name: 'Singer', description: 'warm folk voice' },
      'separate-vocals': ref,
      'stem-split': ref,
      'upload-and-separate-vocals': { audio_url: audioUrl },
    };
    const ids: Partial<Record<MusicWorkflow, string>> = {};
    for (const wf of MUSIC_WORKFLOWS) ids[wf] = await submitOk(sb, wf, inputs[wf]);
    sb.clock.advance(200);
    const expectedKinds: Partial<Record<MusicWorkflow, string[]>> = {
      'convert-to-wav': ['wav'],
      'create-music-video': ['mp4'],
      'stem-split': Array(12).fill('mp3'),
      'separate-vocals': ['mp3', 'mp3'],
      'upload-and-separate-vocals': Array(7).fill('mp3'),
    };
    for (const wf of MUSIC_WORKFLOWS) {
      const files = await finished(sb, ids[wf] as string);
      expect(files.length, wf).toBeGreaterThanOrEqual(1);
      for (const item of files) {
        const parsed = MUSIC_RESULT_SCHEMAS[wf].safeParse(item);
        expect(parsed.success, `${wf}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
        for (const f of MUSIC_RESULT_FIELDS[wf]) {
          expect(item[f.name], `${wf}.${f.name}`).toBeDefined();
          const want = f.type === 'number' ? 'number' : 'string';
          expect(typeof item[f.name], `${wf}.${f.name}`).toBe(want);
        }
        expect(typeof item.file_url, wf).toBe('string');
        const urls = musicResultUrls(wf, item);
        const kinds: string[] = [];
        for (const u of urls) {
          const got = await bytes(u.url);
          expect(got.status, `${wf} ${u.name}`).toBe(200);
          expect(got.buf.length).toBeGreaterThan(0);
          kinds.push(kindOf(got.buf));
        }
        if (expectedKinds[wf]) expect(kinds, wf).toEqual(expectedKinds[wf]);
        const main = await bytes(item.file_url as string);
        expect(main.buf.length, wf).toBe(item.file_size);
      }
    }
    // JSON-string fields are strings, to be parsed by the client.
    const [stem] = await finished(sb, ids['stem-split'] as string);
    expect(typeof stem?.stem_split).toBe('string');
    expect(Object.keys(JSON.parse(stem?.stem_split as string) as Json).sort()).toEqual([...STEM_SPLIT_KEYS].sort());
    const [cover] = await finished(sb, ids['generate-music-cover'] as string);
    const covers = JSON.parse(cover?.generate_cover as string) as Json[];
    expect(covers.length).toBeGreaterThanOrEqual(1);
    expect(covers.every((c) => c.file_type === 'image')).toBe(true);
    const [sep] = await finished(sb, ids['separate-vocals'] as string);
    expect(Object.keys(JSON.parse(sep?.separate_vocals as string) as Json)).toEqual(['vocal_url', 'instrumental_url']);
    const [removal] = await finished(sb, ids['upload-and-separate-vocals'] as string);
    expect(Object.keys(JSON.parse(removal?.vocal_removal as string) as Json)).toEqual(expect.arrayContaining(['bass', 'drums', 'piano', 'guitar', 'vocals', 'other']));
    // Lyrics, style and persona.
    const lyrics = await finished(sb, ids['generate-lyrics'] as string);
    expect(lyrics.length).toBeGreaterThanOrEqual(2);
    expect(lyrics[0]?.text).toContain('[Verse]');
    expect(typeof lyrics[0]?.title).toBe('string');
    expect((await finished(sb, ids['boost-music-style'] as string))[0]?.style).toContain('lofi');
    expect((await finished(sb, ids['generate-persona'] as string))[0]?.persona_id).toMatch(/^persona-/);
    // The WAV lasts as long as the track.
    const [wav] = await finished(sb, ids['convert-to-wav'] as string);
    const wavBytes = (await bytes(wav?.wav_url as string)).buf;
    expect(Math.abs((wavBytes.readUInt32LE(40) / 8000) - (song.files[0]?.duration as number))).toBeLessThan(0.01);
  });

  it('holds word timings with section markers, a waveform, hoot_cer and is_streamed in timestampe_lyrics', async () => {
    const sb = await sandbox();
    const song = await track(sb);
    const id = await submitOk(sb, 'get-timestamped-lyrics', { task_id: song.task, audio_id: song.audio });
    const [item] = await finished(sb, id);
    expect(typeof item?.timestampe_lyrics).toBe('string');
    const content = parseTimestampedLyrics(item?.timestampe_lyrics);
    expect(content).not.toBeNull();
    const words = content?.aligned_words ?? [];
    expect(words.map((w) => w.word).join(' ')).toContain('walking');
    expect(words[0]?.word.startsWith('[Verse]')).toBe(true);
    expect(words.some((w) => w.word.startsWith('[Chorus]'))).toBe(true);
    for (const w of words) {
      expect(w.end_s).toBeGreaterThan(w.start_s);
      expect(w.end_s).toBeLessThanOrEqual(song.files[0]?.duration as number);
      expect(typeof w.success).toBe('boolean');
      expect(w.palign).toBeGreaterThanOrEqual(0);
    }
    expect(content?.waveform_data.length).toBeGreaterThan(0);
    expect(typeof content?.hoot_cer).toBe('number');
    expect(content?.is_streamed).toBe(false);
  });
});

describe('sandbox music: rules of workflows that act on a track', () => {
  it('answers 404 for an unknown task or track, 403 for another key\'s, 400 while the task runs', async () => {
    // Time scale 0.01: a generate-music task runs 0.3 s or more of real time, so it is still
    // running at the next request (at 0.0001 it took 3-12 ms and, on a busy machine, had finished).
    const sb = await sandbox(0.01);
    const song = await track(sb);
    const unknownTask = await submit(sb, 'convert-to-wav', { task_id: 'nope', audio_id: song.audio });
    expect(unknownTask).toMatchObject({ status: 404, body: { code: 404, error: { type: 'resource_not_found_error', message: expect.stringContaining('input.task_id') } } });
    const unknownTrack = await submit(sb, 'convert-to-wav', { task_id: song.task, audio_id: 'nope' });
    expect(unknownTrack).toMatchObject({ status: 404, body: { error: { message: expect.stringContaining('input.audio_id') } } });
    const other = await submit(sb, 'convert-to-wav', { task_id: song.task, audio_id: song.audio }, 'k2');
    expect(other).toMatchObject({ status: 403, body: { error: { type: 'permission_denied_error' } } });
    const extendOther = await submit(sb, 'extend-music', { default_param_flag: false, audio_id: song.audio }, 'k2');
    expect(extendOther.status).toBe(403);
    expect((await submit(sb, 'extend-music', { default_param_flag: false, audio_id: 'nope' })).status).toBe(404);
    const coverOther = await submit(sb, 'generate-music-cover', { task_id: song.task }, 'k2');
    expect(coverOther.status).toBe(403);
    // A task still running has no tracks to act on yet.
    const pending = await submitOk(sb, 'generate-music', VOCAL_SONG);
    const early = await submit(sb, 'generate-music-cover', { task_id: pending });
    expect(early).toMatchObject({ status: 400, body: { error: { type: 'validation_error', message: expect.stringContaining('not finished') } } });
    // A lyrics task has no tracks.
    const lyrics = await submitOk(sb, 'generate-lyrics', { prompt: 'sea' });
    sb.clock.advance(200);
    expect((await submit(sb, 'stem-split', { task_id: lyrics, audio_id: 'x' })).status).toBe(400);
  });

  it('answers 409 to a second video, persona, WAV, split or cover of the same track or task', async () => {
    const sb = await sandbox();
    const song = await track(sb);
    const ref = { task_id: song.task, audio_id: song.audio };
    const cases: Array<[string, Record<string, unknown>]> = [
      ['create-music-video', ref],
      ['generate-persona', { ...ref, name: 'n', description: 'd' }],
      ['convert-to-wav', ref],
      ['separate-vocals', ref],
      ['stem-split', ref],
      ['generate-music-cover', { task_id: song.task }],
    ];
    for (const [model, input] of cases) {
      expect((await submit(sb, model, input)).status, model).toBe(200);
      const again = await submit(sb, model, input);
      expect(again, model).toMatchObject({ status: 409, body: { code: 409, error: { message: expect.stringContaining('once per') } } });
    }
    // Still 409 after the first one finished; the other variation is a different track.
    sb.clock.advance(200);
    expect((await submit(sb, 'create-music-video', ref)).status).toBe(409);
    const second = song.files[1]?.audio_id as string;
    expect((await submit(sb, 'create-music-video', { task_id: song.task, audio_id: second })).status).toBe(200);
  });

  it('refuses timestamped lyrics of an instrumental track (400 on input.audio_id, nothing charged)', async () => {
    const sb = await sandbox();
    const inst = await track(sb, INSTRUMENTAL);
    const before = (await call(sb, 'GET', '/api/user/balance', 'k1')).body.data.balance as number;
    const r = await submit(sb, 'get-timestamped-lyrics', { task_id: inst.task, audio_id: inst.audio });
    expect(r).toMatchObject({ status: 400, body: { error: { type: 'validation_error', message: expect.stringMatching(/^input\.audio_id: .*no vocals/) } } });
    expect((await call(sb, 'GET', '/api/user/balance', 'k1')).body.data.balance).toBe(before);
  });

  it('keeps replace-section and extend-music inside the track', async () => {
    const sb = await sandbox();
    const song = await track(sb);
    const seconds = song.files[0]?.duration as number;
    const base = { task_id: song.task, audio_id: song.audio, prompt: 'p', tags: 't', title: 'x' };
    const outside = await submit(sb, 'replace-section', { ...base, infill_start_s: 5, infill_end_s: Math.ceil(seconds) + 1 });
    expect(outside).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('input.infill_end_s: must be inside the track') } } });
    const id = await submitOk(sb, 'replace-section', { ...base, infill_start_s: 5, infill_end_s: Math.floor(seconds) });
    const [item] = await finished(sb, id);
    expect(item?.duration).toBe(seconds);
    const far = await submit(sb, 'extend-music', { default_param_flag: true, audio_id: song.audio, prompt: 'p', style: 's', title: 't', continue_at: Math.ceil(seconds) + 5 });
    expect(far.status).toBe(400);
  });

  it('accepts a persona_id only once its persona exists, for the same key', async () => {
    const sb = await sandbox();
    const song = await track(sb);
    const withPersona = (persona: string) => ({ ...VOCAL_SONG, persona_id: persona });
    expect((await submit(sb, 'generate-music', withPersona('persona-nope'))).status).toBe(404);
    const pid = await submitOk(sb, 'generate-persona', { task_id: song.task, audio_id: song.audio, name: 'n', description: 'd' });
    const persona = (await finished(sb, pid))[0]?.persona_id as string;
    expect((await submit(sb, 'generate-music', withPersona(persona))).status).toBe(200);
    expect((await submit(sb, 'generate-music', withPersona(persona), 'k2')).status).toBe(403);
  });

  it('limits uploaded audio to 8 minutes (1 minute for V4_5ALL) when the sandbox knows its length', async () => {
    const sb = await sandbox();
    const long = 'https://example.com/a.mp3?sandbox_duration_s=500';
    const r = await submit(sb, 'upload-and-cover-audio', { upload_url: long, custom_mode: false, prompt: 'p' });
    expect(r).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('at most 8 minutes') } } });
    const song = await track(sb);
    const short = await submit(sb, 'upload-and-cover-audio', { upload_url: song.files[0]?.audio_url, custom_mode: false, prompt: 'p', mv: 'V4_5ALL' });
    expect(short).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('1 minute') } } });
  });
});

describe('sandbox music: callbacks', () => {
  async function receiver(): Promise<{ url: string; bodies: Json[] }> {
    const bodies: Json[] = [];
    const server = createServer((req, res) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString('utf8')));
      req.on('end', () => {
        bodies.push(JSON.parse(data) as Json);
        res.writeHead(200).end();
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const addr = server.address();
    return { url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/cb`, bodies };
  }

  async function until(check: () => boolean): Promise<void> {
    for (let i = 0; i < 400 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  }

  it('sends add-instrumental callbacks at three stages and omits progress from music callbacks', async () => {
    const sb = await sandbox();
    const rx = await receiver();
    const song = await track(sb);
    const r = await submit(sb, 'add-instrumental', { upload_url: song.files[0]?.audio_url, title: 'B', tags: 'piano', negative_tags: 'metal' }, 'k1', { callback_url: rx.url });
    const id = r.body.data.task_id as string;
    const g = await submit(sb, 'generate-music', { custom_mode: false, prompt: 'rain' }, 'k1', { callback_url: rx.url });
    const gid = g.body.data.task_id as string;
    sb.clock.advance(200);
    await until(() => rx.bodies.length >= 4);
    const mine = rx.bodies.filter((b) => b.data.task_id === id);
    expect(mine).toHaveLength(3);
    expect(mine.map((b) => b.data.callback_type ?? b.data.status).sort()).toEqual(['finished', 'first', 'text']);
    const final = mine.find((b) => b.data.status === 'finished');
    expect(final?.data.files).toHaveLength(2);
    const first = mine.find((b) => b.data.callback_type === 'first');
    expect(first?.data.files[0].audio_id).toBe(final?.data.files[0].audio_id);
    const other = rx.bodies.filter((b) => b.data.task_id === gid);
    expect(other).toHaveLength(1);
    for (const b of rx.bodies) {
      expect(b.code).toBe(200);
      expect('progress' in b.data).toBe(false);
    }
    // The status endpoint still shows progress.
    expect((await call(sb, 'GET', `/api/generate/detail/music?task_id=${gid}`, 'k1')).body.data.progress).toBe(100);
  });
});
