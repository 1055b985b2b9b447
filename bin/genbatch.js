#!/usr/bin/env node
// Entry point: the bundled CLI, dist/bundle/main.js (built by `npm install` via the prepare
// script: tsc into dist/, then bin/bundle.js). When the bundle is missing or older than tsc's
// dist/cli/main.js (only tsc was run since), the unbundled CLI runs instead: same code, slower start.
import { statSync } from 'node:fs';

const bundle = new URL('../dist/bundle/main.js', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);
const mtime = (url) => statSync(url, { throwIfNoEntry: false })?.mtimeMs ?? -1;
const b = mtime(bundle);
await import(b >= 0 && b >= mtime(compiled) ? bundle.href : compiled.href);
