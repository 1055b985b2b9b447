/**
 * The type a result's bytes are stored (bucket) and served (view) with. The service's Content-Type is never
 * passed on: a result it labels `text/html` (or a file named `.html`, `.svg`, ...) would run as a page on the
 * origin that serves it (the bucket beside report.html, the view). Media are stored and served by the type
 * their first bytes show (`file-type`: image/*, audio/*, video/*, never SVG or XML); everything else (text,
 * HTML, SVG, XML, JSON, PDF, unknown) is `application/octet-stream` with `Content-Disposition: attachment`.
 */

/** How many leading bytes the type is read from (what `file-type` needs for the formats it knows). */
export const SNIFF_BYTES = 4100;

export interface InertType {
  contentType: string;
  /** `attachment`, or null for media shown in place. */
  disposition: string | null;
}

const MEDIA = /^(image|audio|video)\/[a-z0-9.+-]+$/;
const DOWNLOAD: InertType = { contentType: 'application/octet-stream', disposition: 'attachment' };

/** The stored/served type of content whose first bytes are `head` (at least SNIFF_BYTES of it, or all of it). */
export async function inertType(head: Uint8Array): Promise<InertType> {
  if (head.length === 0) return DOWNLOAD;
  const { fileTypeFromBuffer } = await import('file-type');
  const found = await fileTypeFromBuffer(head.subarray(0, SNIFF_BYTES)).catch(() => undefined);
  if (found && MEDIA.test(found.mime) && !/svg|xml/.test(found.mime)) return { contentType: found.mime, disposition: null };
  return DOWNLOAD;
}

/** The HTTP headers of inertType (the view's /files/). */
export function inertHeaders(t: InertType): Record<string, string> {
  return t.disposition === null ? { 'content-type': t.contentType } : { 'content-type': t.contentType, 'content-disposition': t.disposition };
}
