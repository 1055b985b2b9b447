import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { manifestJsonSchemaText } from './schema.js';

/**
 * Regenerate manifests/genbatch.schema.json from the zod schema of a manifest:
 * `npx tsc -p . && node dist/manifest/write-schema.js`. A test fails when the
 * committed file differs from the generated one.
 */
const target = fileURLToPath(new URL('../../manifests/genbatch.schema.json', import.meta.url));
writeFileSync(target, manifestJsonSchemaText());
process.stdout.write(`wrote ${target}\n`);
