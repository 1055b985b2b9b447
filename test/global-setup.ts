import { buildIfStale } from './helpers/build.js';

/**
 * Once per `vitest run`, before any test file: the CLI the tests spawn (bin/genbatch.js -> dist/bundle) is
 * rebuilt when any source is newer, so a single test file run after an edit tests the current source.
 * After `npm install` (its prepare script builds) it checks and moves on: `npm test` needs no build of its own.
 */
export default function setup(): void {
  buildIfStale();
}
