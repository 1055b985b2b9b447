import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch, ROOT } from './fixtures/manifest/cli.js';

/** `genbatch validate` run as a user would: the built CLI in a child process, from the repository root. */

const B = 'test/fixtures/manifest/broken';

beforeAll(() => ensureBuilt(), 180_000);

describe('genbatch validate on the example manifests', () => {
  const examples: Array<[string, number]> = [
    ['manifests/images.yaml', 0],
    ['manifests/video.yaml', 3],
    ['manifests/music.yaml', 2],
    ['manifests/chat.yaml', 3],
    ['manifests/prompts.csv', 4],
  ];
  for (const [file, count] of examples) {
    it(`${file} is valid`, async () => {
      const r = await genbatch(['validate', file]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^${file.replace('.', '\\.')}: \\d+ jobs, all valid\\n$`));
      if (count > 0) expect(r.stdout).toContain(`: ${count} jobs,`);
    });
  }

  it('manifests/parti.yaml makes 1632 valid jobs from manifests/data/PartiPrompts.tsv', async () => {
    const r = await genbatch(['validate', 'manifests/parti.yaml']);
    expect(r).toEqual({ code: 0, stdout: 'manifests/parti.yaml: 1632 jobs, all valid\n', stderr: '' });
  });
});

describe('genbatch validate on broken manifests', () => {
  it('malformed YAML: exit 2, the syntax problem with its line', async () => {
    const r = await genbatch(['validate', `${B}/malformed.yaml`]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.split("\n")[0]).toBe(`${B}/malformed.yaml:4: YAML syntax: Missing closing "quote`);
  });

  it('a bad CSV row: exit 2, the row number and the rule', async () => {
    const r = await genbatch(['validate', `${B}/bad-row.csv`]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `${B}/bad-row.csv:3, row 2: has 3 cells; the header has 4\n` });
  });

  it('an unknown model: exit 2, the job, line, field and a suggestion', async () => {
    const r = await genbatch(['validate', `${B}/unknown-model.yaml`]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `job typo (${B}/unknown-model.yaml:6) model: unknown model "alpha-imgae-2"; did you mean "alpha-image-2"? (see \`genbatch models\`)\n` });
  });

  it('a missing local image: exit 2, the job, line, field and the file', async () => {
    const r = await genbatch(['validate', `${B}/missing-file.yaml`]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `job edit (${B}/missing-file.yaml:6) input.image_urls[0]: local file "../no-such-image.png" does not exist\n` });
  });

  it('a missing manifest: exit 2', async () => {
    const r = await genbatch(['validate', 'no/such/manifest.yaml']);
    expect(r).toEqual({ code: 2, stdout: '', stderr: 'no/such/manifest.yaml: manifest file not found\n' });
  });

  it('reports all 20 mistakes of a manifest, each with job, position, field and rule', async () => {
    const file = 'test/fixtures/manifest/twenty-mistakes.yaml';
    const r = await genbatch(['validate', file]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trimEnd().split('\n');
    // 20 mistakes; the typo `inptu` also leaves the job without its prompt (the job is still checked from its known keys).
    expect(lines).toHaveLength(21);
    const parsed = lines.map((l) => /^job (\S+) \((\S+):(\d+)\) (\S+): (.+)$/.exec(l));
    for (const [i, m] of parsed.entries()) {
      expect(m, lines[i]).not.toBeNull();
      expect(m?.[2]).toBe(file);
    }
    // 19 jobs with one mistake each, and a 20th: a second job reusing the id m04-n; m17-typo twice (the typo, then input.prompt).
    const jobs = parsed.map((m) => m?.[1]).sort();
    expect(jobs).toEqual(
      ['m01-size', 'm02-quality', 'm03-blank-prompt', 'm04-n', 'm04-n', 'm05-refs-on-base', 'm06-edit-without-refs', 'm07-unknown-model', 'm08-no-model', 'm09-flash-extra', 'm10-missing-file', 'm11-not-an-image', 'm12-too-many', 'm13-duration', 'm14-audio-bool', 'm15-local-audio', 'm16-callback', 'm17-typo', 'm17-typo', 'm18-graph', 'm19-chat'],
    );
    const fields = parsed.map((m) => m?.[4]);
    expect(fields).toEqual(expect.arrayContaining(['input.size', 'input.quality', 'input.prompt', 'input.n', 'input.image_urls', 'model', 'input.seed', 'input.image_urls[0]', 'input.duration', 'input.audio', 'input.upload_url', 'callback_url', 'inptu', 'needs[0]', 'input.messages', 'id']));
    expect(r.stderr).toContain('input.size: custom size 4000x2000 has a longest edge over 3840');
    expect(r.stderr).toContain('needs[0]: no job with id "m01-sise" in this manifest (did you mean "m01-size"?)');
  });

  it('--json prints {valid, jobs, problems} and keeps the exit code', async () => {
    const bad = await genbatch(['validate', '--json', `${B}/unknown-model.yaml`]);
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stdout)).toEqual({
      valid: false,
      jobs: 2,
      problems: [{ job: 'typo', where: `${B}/unknown-model.yaml:6`, path: 'model', message: 'unknown model "alpha-imgae-2"; did you mean "alpha-image-2"? (see `genbatch models`)' }],
    });
    const good = await genbatch(['validate', '--json', 'manifests/video.yaml']);
    expect(good.code).toBe(0);
    expect(JSON.parse(good.stdout)).toEqual({ valid: true, jobs: 3, problems: [] });
  });
});
