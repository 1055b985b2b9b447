import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { GenbatchError } from '../../errors.js';
import type { WorkStore } from '../../store/index.js';
import type { EngineEvent } from '../events.js';
import type { ServicePort, UploadCall } from '../ports.js';

/** Where an image comes from: a local file (stream upload), a Data URL (base64 upload), a remote URL to re-host (URL upload). */
export type UploadSource = 'file' | 'data' | 'url';

/**
 * Uploads of job images: a local file through the stream endpoint, a Data URL
 * through the base64 endpoint, a remote URL of a job with `rehost: true`
 * through the URL endpoint. One upload per key at a time; an earlier upload to
 * the same service is reused while younger than `maxAgeMs`, across jobs and
 * runs. The key (`sha`) is the sha256 of the file's bytes, of the Data URL's
 * text, or of the remote URL's text: a re-hosted URL is deduplicated by URL
 * and service base URL (choice: the remote content is not fetched by us, so
 * two URLs serving the same bytes are two uploads). No `file_name` is sent,
 * so every upload gets a unique service-made name and a URL is never
 * overwritten by a later upload. The 5-per-minute limit is the client's
 * (UploadLimiter), and with a store shared by many workers also the store's
 * (WorkStore.acquireUploadSlot, a slot taken by the client for every try).
 */
export class Uploader {
  private readonly inFlight = new Map<string, Promise<string>>();
  /** Every upload's signal and the store's shared upload window (a slot per try). */
  private readonly call: UploadCall;

  constructor(
    private readonly store: WorkStore,
    private readonly service: ServicePort,
    private readonly o: { baseUrl: string; maxAgeMs: number; signal: AbortSignal; emit: (e: EngineEvent) => void },
  ) {
    this.call = { signal: o.signal, slot: (signal) => store.acquireUploadSlot(signal) };
  }

  /** The service URL for this file, Data URL or remote URL (`sha` as recorded at validation). */
  async url(fileOrData: string, sha: string, source: UploadSource): Promise<string> {
    const shown = source === 'data' ? `data URL (${fileOrData.length} characters)` : fileOrData;
    // Joins an upload of the same content in flight (no event: that upload reports itself).
    const joined = this.inFlight.get(sha);
    if (joined) return joined;
    const known = await this.store.findUpload(this.o.baseUrl, sha, this.o.maxAgeMs);
    if (known) {
      this.o.emit({ type: 'upload', file: shown, sha256: sha, url: known, reused: true });
      return known;
    }
    let p = this.inFlight.get(sha);
    if (!p) {
      p = (async () => {
        let res: { file_url: string };
        if (source === 'data') {
          res = await this.service.uploadBase64(fileOrData, this.call);
        } else if (source === 'url') {
          if (!this.service.uploadUrl) throw new GenbatchError('GB_UPLOAD_UNAVAILABLE', `cannot re-host ${fileOrData}: this service port has no URL upload`);
          res = await this.service.uploadUrl(fileOrData, this.call);
        } else {
          // The content may have changed since validation: upload only bytes whose hash we recorded.
          const now = await hashFile(fileOrData);
          if (now !== sha) throw new GenbatchError('GB_INPUT_CHANGED', `${fileOrData} changed since the manifest was checked; rerun`);
          // No file_name: the service then makes a unique name. A given name is a path at the service
          // (`temp/<name>`), so a second image of the same name (another folder, another run) would
          // replace this one under the URL that jobs, and the reuse record, still point to.
          res = await this.service.uploadStream(fileOrData, this.call);
        }
        await this.store.recordUpload(this.o.baseUrl, sha, res.file_url);
        this.o.emit({ type: 'upload', file: shown, sha256: sha, url: res.file_url, reused: false });
        return res.file_url;
      })().finally(() => this.inFlight.delete(sha));
      this.inFlight.set(sha, p);
    }
    return p;
  }
}

export function hashFile(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file)
      .on('data', (c) => h.update(c))
      .on('error', reject)
      .on('end', () => resolve(h.digest('hex')));
  });
}
