import type { ServiceClient } from '../../src/client/index.js';
import { cleanupPartials, downloadFile, fsyncDir, isGone, sanitizeName } from '../../src/download/index.js';
import type { DownloadPort, ServicePort } from '../../src/engine/ports.js';

/** The service as a pipeline sees it, straight over `client` (no retries or limits beyond the client's own). */
export function servicePortOf(client: ServiceClient): ServicePort {
  return {
    submit: (body, signal) => client.submit(body, signal ? { signal } : {}),
    status: (taskId, signal) => client.status(taskId, signal ? { signal } : {}),
    musicDetail: (taskId, signal) => client.musicDetail(taskId, signal ? { signal } : {}),
    balance: () => client.balance(),
    uploadStream: (file, o) => client.uploadStream(file, o),
    uploadBase64: (data, o) => client.uploadBase64(data, o),
  };
}

/** Downloads as a pipeline does them, without the run's retry layer. */
export const plainDownload: DownloadPort = { downloadFile, isGone, cleanupPartials, syncDir: fsyncDir, sanitizeName: (n) => sanitizeName(n, 'job') };
