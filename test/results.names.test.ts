import { describe, expect, it } from 'vitest';
import { Namer, extractResults } from '../src/engine/results.js';

/** Our own names in out/<job id>/ are taken before server names (issue 4 audit). */
describe('result file names', () => {
  it('a server file named result.json (any case), previous-<n> or ../x is named by kind and index instead', () => {
    const files = ['result.json', 'RESULT.json', 'previous-1', 'a.png', 'a.png', '../../x.png'].map((n, i) => ({ file_url: `http://s/f${i}.png`, file_name: n, file_type: 'image' }));
    const { downloads } = extractResults({ task_id: 't', status: 'finished', files, error_message: null }, 'status', 'alpha-image-2');
    expect(downloads.map((d) => d.name)).toEqual(['image-1.json', 'image-2.json', 'image-3.png', 'image-4.png', 'image-5.png', 'image-6.png']);
  });

  it('names files by kind and index per kind; an odd file_type or format never reaches the name', () => {
    const files = [
      { file_url: 'http://s/a', file_type: 'image', format: 'PNG' },
      { file_url: 'http://s/v.mp4', file_type: 'video' },
      { file_url: 'http://s/b', file_type: 'image', content_type: 'image/jpeg' },
      { file_url: 'http://s/c', file_type: '../../etc', format: '../x', file_name: 'song.mp3' },
      { file_url: 'http://s/d', file_type: 'audio', file_name: 'x.wav' },
      { file_url: 'http://s/e', file_type: 'audio' },
    ];
    const { downloads } = extractResults({ task_id: 't', status: 'finished', files, error_message: null }, 'status', 'alpha-image-2');
    expect(downloads.map((d) => d.name)).toEqual(['image-1.png', 'video-1.mp4', 'image-2.jpg', 'file-1.mp3', 'audio-1.wav', 'audio-2.bin']);
  });

  it('names that only differ before sanitising are still unique', () => {
    const namer = new Namer();
    const a = namer.unique('dir/img.png');
    const b = namer.unique('img.png');
    expect(a).toBe('img.png');
    expect(b).toBe('img-2.png');
  });
});
