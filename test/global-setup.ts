import { buildIfStale } from './helpers/build.js';

/**
 * Once per `vitest run`, before any test file: the CLI the tests spawn (bin/genbatch.js -> dist/bundle) is
 * rebuilt when any source is newer, so a single test file run after an edit tests the current source.
 * `npm test` has just built (pretest), so there it checks and moves on.
 */
export default function setup(): void {
  buildIfStale();
}
