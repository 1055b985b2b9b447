import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { solidPng } from './png.js';

/**
 * A YAML manifest of `n` jobs of five kinds, in a repeating cycle of ten:
 * 4 plain text-to-image (alpha-image-2), 2 edits of local PNGs (uploads;
 * `images` distinct files written next to the manifest, each used by several
 * jobs), 1 dream-4 with n: 2 (two files), 1 generate-music (music detail
 * endpoint, several files), 1 motion video, 1 more plain image. Some models have
 * no contract price: run with --yes.
 */
export function mixedManifest(dir: string, name: string, n: number, images = 6): { path: string; kinds: Record<string, number> } {
  for (let k = 0; k < images; k++) writeFileSync(join(dir, `${name}-ref-${k}.png`), solidPng(8, 8, [(k * 41) % 256, (k * 89 + 30) % 256, 200 - k]));
  const lines = ['jobs:'];
  const kinds: Record<string, number> = { image: 0, edit: 0, multi: 0, music: 0, video: 0 };
  for (let i = 0; i < n; i++) {
    const id = `${name}-${String(i).padStart(4, '0')}`;
    const slot = i % 10;
    if (slot === 4 || slot === 5) {
      lines.push(`  - id: ${id}`, '    model: alpha-image-2-edit', '    input:', `      prompt: "Edit ${i}: make it a sunset"`, `      image_urls: ["${name}-ref-${kinds.edit! % images}.png"]`);
      kinds.edit!++;
    } else if (slot === 6) {
      kinds.multi!++;
      lines.push(`  - id: ${id}`, '    model: dream-4', '    input:', `      prompt: "Two owls number ${i}"`, '      n: 2');
    } else if (slot === 7) {
      kinds.music!++;
      lines.push(`  - id: ${id}`, '    model: generate-music', '    input:', '      custom_mode: false', '      instrumental: true', `      prompt: "Calm piano piece number ${i}"`);
    } else if (slot === 8) {
      kinds.video!++;
      lines.push(`  - id: ${id}`, '    model: motion-1.6/standard', '    input:', `      prompt: "Waves number ${i} at sunset"`, '      duration: 5');
    } else {
      kinds.image!++;
      lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "Picture number ${i} of a quiet harbour"`);
    }
  }
  const path = join(dir, `${name}.yaml`);
  writeFileSync(path, lines.join('\n') + '\n');
  return { path, kinds };
}
