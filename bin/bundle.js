// Bundles the compiled CLI (dist/cli/main.js, after `tsc`) into dist/bundle/:
// main.js plus one chunk per lazily imported command and shared code, so a
// command loads a few files instead of ~300 modules (`genbatch run`: ~110 ms less start-up CPU).
// dist/ itself stays the library output (package exports); bin/genbatch.js
// imports dist/bundle/main.js. Run by `npm run build`, `prepare` and `pretest`.
import { build } from 'esbuild';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = `${root}dist/bundle`;

// With code splitting, esbuild gives import() of a CommonJS module only `default`, not the named
// exports Node gives it (esbuild issue #3245): `const { parse } = await import('yaml')` would break.
// So import() of a package stays an import() at run time, loaded by Node from node_modules as before
// (csv-parse, file-type, fast-glob, yaml in src/; all on paths a plain YAML run does not take).
const packageImportsAtRunTime = {
  name: 'package-imports-at-run-time',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.kind === 'dynamic-import' ? { path: args.path, external: true } : undefined));
  },
};

rmSync(outdir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: { main: 'dist/cli/main.js' },
  outdir,
  bundle: true,
  // Lazily imported commands (and the sandbox, the reports, ...) become chunks loaded on first use.
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Every output file must sit directly in dist/bundle/ (two levels below the package root,
  // like dist/lib/): code that reads ../../package.json from import.meta.url relies on it (src/lib/version.ts).
  chunkNames: '[name]-[hash]',
  // Stack traces through the chained source maps point at src/*.ts (with node --enable-source-maps).
  sourcemap: 'linked',
  sourcesContent: false,
  // Loaded from node_modules at run time, as before: a native addon (better-sqlite3) and the
  // sandbox's web framework (fastify and its plugins, which load files and workers of their own).
  external: ['better-sqlite3', 'fastify', '@fastify/*'],
  plugins: [packageImportsAtRunTime],
  // Bundled CommonJS packages call require() for Node built-ins: give ES modules one.
  banner: { js: "import { createRequire as __genbatchRequire } from 'node:module';\nconst require = __genbatchRequire(import.meta.url);" },
  logLevel: 'warning',
});

// The same hazard inside the bundle: a chunk that is a CommonJS module's `export default require_x()`.
for (const f of readdirSync(outdir)) {
  if (f.endsWith('.js') && /^export default require_/m.test(readFileSync(`${outdir}/${f}`, 'utf8'))) {
    throw new Error(`dist/bundle/${f}: a CommonJS module reached by import(): its named exports would be lost`);
  }
}
