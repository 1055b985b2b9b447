/**
 * A valid minimal glTF 2.0 binary: 12-byte header (magic `glTF`, version 2,
 * total length) and one JSON chunk (padded with spaces to 4 bytes) holding
 * an asset record and one empty scene. No BIN chunk, no meshes.
 */
export function glb(): Buffer {
  const json = JSON.stringify({
    asset: { version: '2.0', generator: 'genbatch sandbox' },
    scene: 0,
    scenes: [{ name: 'empty' }],
  });
  let body = Buffer.from(json, 'utf8');
  const pad = (4 - (body.length % 4)) % 4;
  if (pad) body = Buffer.concat([body, Buffer.alloc(pad, 0x20)]);
  const out = Buffer.alloc(12 + 8 + body.length);
  out.write('glTF', 0, 'latin1');
  out.writeUInt32LE(2, 4);
  out.writeUInt32LE(out.length, 8);
  out.writeUInt32LE(body.length, 12);
  out.writeUInt32LE(0x4e4f534a, 16); // chunk type `JSON`
  body.copy(out, 20);
  return out;
}
