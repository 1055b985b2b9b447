import { describe, expect, it } from 'vitest';
import { Namer, extractResults } from '../src/engine/results.js';

/** Our own names in out/<job id>/ are taken before server names (issue 4 audit). */
describe('result file names', () => {
  it('a server file named result.json (any case) or previous-<n> never gets our names', () => {
    const files = ['result.json', 'RESULT.json', 'previous-1', 'a.png', 'a.png', '../../x.png'].map((n, i) => ({ file_url: `http://s/f${i}.png`, file_name: n, file_type: 'image' }));
    const { downloads } = extractResults({ task_id: 't', status: 'finished', files, error_message: null }, 'status', 'alpha-image-2');
    const names = downloads.map((d) => d.name);
    expect(names).not.toContain('result.json');
    expect(names.map((n) => n.toLowerCase()).filter((n) => n === 'result.json')).toEqual([]);
    expect(names).not.toContain('previous-1');
    expect(new Set(names.map((n) => n.toLowerCase())).size).toBe(names.length);
    expect(names[3]).toBe('a.png');
    expect(names[4]).toBe('a-2.png');
    expect(names[5]).toBe('x.png');
  });

  it('names that only differ before sanitising are still unique', () => {
    const namer = new Namer();
    const a = namer.unique('dir/img.png');
    const b = namer.unique('img.png');
    expect(a).toBe('img.png');
    expect(b).toBe('img-2.png');
  });
});
