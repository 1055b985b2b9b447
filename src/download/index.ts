/** The runner's safe downloader: clean names, contained paths, verified and atomic files. */
export { sanitizeName, safeJoin, nameFromUrl, numberedName, MAX_NAME_BYTES } from './names.js';
export { place } from './place.js';
export {
  downloadFile,
  fsyncDir,
  writeNewFileSynced,
  fillSyncClose,
  tmpSuffix,
  cleanupPartials,
  verifyFile,
  sha256OfFile,
  isGone,
  DEFAULT_MAX_BYTES,
  DEFAULT_PACE,
  type DownloadPace,
  type DownloadOptions,
  type DownloadResult,
} from './download.js';
export { downloadToStore, type BodyToStore } from './to-bucket.js';
export { BodyCheck } from './check.js';
