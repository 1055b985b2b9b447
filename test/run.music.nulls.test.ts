import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, bytes, json, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Music result items whose descriptive fields are null (image_url, title, tags, duration,
 * prompt: src/models/music/results.ts accepts them "missing or null") and whose JSON-string
 * field comes already parsed: the run reads them, saves the audio and ends. Before, the
 * client's music schema refused them, and the job was polled for ever (the run never ended).
 */
const KEY = 'sk-music-nulls-0123456789';
const MP3 = Buffer.from('ID3\u0004\u0000\u0000\u0000\u0000\u0000\u0000fake mp3 frames', 'latin1');
const t = tempDir('genbatch-music-nulls-');
let service: FakeService;
let base = '';
let detailReads = 0;

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, _body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url.startsWith('/files/')) return bytes(res, 'audio/mpeg', MP3);
    if (url === '/api/generate/submit') return json(res, 200, submitted('m-1'));
    if (url.startsWith('/api/generate/detail/music') || url.startsWith('/api/generate/status/')) {
      detailReads++;
      const item = { audio_id: 'a-1', audio_url: `${base}/files/a-1.mp3`, image_url: null, title: null, tags: null, duration: null, prompt: null };
      return json(res, 200, { code: 200, data: { task_id: 'm-1', status: 'finished', files: [item], created_time: '2026-01-01T00:00:00', error_message: null } });
    }
    json(res, 404, { detail: 'not found' });
  });
  base = service.base;
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('music result items with null descriptive fields', () => {
  it('are read (the track is saved) instead of being polled for ever', async () => {
    const manifest = join(t.dir, 'song.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: song', '    model: generate-music', '    input:', '      custom_mode: false', '      prompt: "a calm piano song"', '      mv: V4_5'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    // Before the fix the run never ends: it is killed after 15 s.
    const { code } = await runCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'], { GENBATCH_API_KEY: KEY }, undefined, 15_000);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    expect(code).toBe(0);
    expect(readFileSync(join(out, 'song', 'audio.mp3')).equals(MP3)).toBe(true);
    expect(detailReads).toBeLessThan(5);
  }, 30_000);
});
