/**
 * Whether manifests are confined to their folder: `--confine`, or GENBATCH_CONFINE
 * set to anything but empty, 0, false, no or off (a pipeline can set it once for
 * every command). See src/manifest/confine.ts.
 */
export function confineWanted(flag: boolean | undefined): boolean {
  if (flag === true) return true;
  const env = process.env.GENBATCH_CONFINE;
  return env !== undefined && env.trim() !== '' && !/^(0|false|no|off)$/i.test(env.trim());
}

export const CONFINE_HELP = "every file the manifest names (rows files, glob patterns and matches, local images) must be inside the manifest's folder, symbolic links resolved (default $GENBATCH_CONFINE); for manifests written by others";
