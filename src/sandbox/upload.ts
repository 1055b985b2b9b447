import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isoNoZone } from './clock.js';
import type { SandboxContext } from './context.js';
import { requestKey } from './accounts.js';
import { authenticate, authMessage, isObject, sendError } from './http.js';
import { dataField, decodeData } from './uploads/base64.js';
import { detectImage } from './uploads/image.js';
import { UploadRateLimit } from './uploads/limiter.js';
import { cleanFileName, cleanUploadPath, generatedName } from './uploads/names.js';
import { invalid, Refused } from './uploads/refused.js';
import { download } from './uploads/remote.js';

/**
 * POST /api/common/upload/{stream,base64,url}: one JPEG, PNG, GIF or WebP image
 * per request (type detected from the bytes), stored under `temp/<upload_path>/`
 * and served back at GET /temp/... until 72 hours after upload on the sandbox
 * clock (then 410, then 404).
 *
 * Answer: `{code: 200, data: {file_url, download_url, file_name, file_size,
 * content_type, upload_path, expires_at}}`; file_url and download_url are
 * identical; the fields after them are a sandbox choice (the contract does not
 * show them); upload_path is the stored folder (`temp` or `temp/<path>`),
 * expires_at is `YYYY-MM-DDThh:mm:ss` (UTC, no zone, like created_time).
 *
 * Limits: 5 requests per minute per key across the three endpoints (the
 * minute scaled by timeScale), then 429 rate_limit_error with Retry-After;
 * at most 20 MiB per image (413 content_too_long_error, sandbox choice);
 * upload/url gives up after 10 s x timeScale, at least 1 s (408 timeout_error).
 * Names: a path is never shared between keys: an upload to a path that holds
 * another key's unexpired upload is refused with 409 conflict_error (the
 * contract's `temp/<path>` rule leaves no room for a per-key folder); the same
 * key re-uploading a path replaces its own file. A `file_name` whose extension
 * is not the detected type's is corrected (`ref.png` holding a GIF: `ref.gif`).
 * Errors: 400 validation_error for missing or invalid fields, 400
 * file_format_error for data that is not a usable image, 422 for a stream
 * upload without `file`. Stats: every upload request answered with an error
 * (401, 429, body parsing errors and faults included) counts as refused; each stored image as accepted;
 * a 429 of the rate limit (not an injected fault) also counts as rate_limited.
 */

export const UPLOAD_TTL_MS = 72 * 3600 * 1000;
export const UPLOADS_PER_WINDOW = 5;
export const UPLOAD_WINDOW_MS = 60_000;
export const MAX_UPLOAD_BYTES = 20 * 1024 * 1024;

interface UploadInput {
  bytes: Buffer;
  /** Field the bytes came from, for messages. */
  field: string;
  uploadPath: unknown;
  uploadPathField: string;
  fileName: unknown;
  fileNameField: string;
}

function first(body: Record<string, unknown>, names: string[]): { value: unknown; field: string } {
  for (const n of names) if (body[n] !== undefined && body[n] !== null) return { value: body[n], field: n };
  return { value: undefined, field: names[0] ?? '' };
}

/** A multipart parsing error as a refusal: too large (413), a second file (400), anything else malformed (400). */
function multipartRefusal(err: unknown): Refused {
  if (err instanceof Refused) return err;
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  if (code === 'FST_REQ_FILE_TOO_LARGE') return new Refused(413, 'content_too_long_error', `file: the image is larger than the limit of ${MAX_UPLOAD_BYTES} bytes`);
  if (code === 'FST_FILES_LIMIT') return invalid('file: one image per request (got more than one file)');
  return invalid(`body: malformed multipart/form-data (${err instanceof Error ? err.message : String(err)})`);
}

export function uploadRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const limit = new UploadRateLimit(UPLOADS_PER_WINDOW, UPLOAD_WINDOW_MS * ctx.options.timeScale);
  const timeoutMs = Math.max(1000, 10_000 * ctx.options.timeScale);

  async function store(input: UploadInput, owner: string) {
    const type = await detectImage(input.bytes, input.field);
    const folder = cleanUploadPath(input.uploadPath, input.uploadPathField);
    const now = ctx.now();
    const name = cleanFileName(input.fileName, input.fileNameField, type.ext) ?? generatedName(now, type.ext);
    const dir = folder ? `temp/${folder}` : 'temp';
    const expiresAt = now + UPLOAD_TTL_MS;
    const url = ctx.files.putUpload(`${dir}/${name}`, input.bytes, type.mime, expiresAt, owner, now);
    if (url === null) {
      throw new Refused(409, 'conflict_error', `${input.fileNameField}: ${dir}/${name} is already used by an upload of another API key; choose another file_name or upload_path`);
    }
    return {
      code: 200,
      data: { file_url: url, download_url: url, file_name: name, file_size: input.bytes.length, content_type: type.mime, upload_path: dir, expires_at: isoNoZone(expiresAt) },
    };
  }

  /**
   * The rate limit, before the body is read (after the server's key check): every request
   * with a valid key takes a slot, a malformed one too, as at a gateway.
   */
  const admit = async (req: FastifyRequest, reply: FastifyReply) => {
    const key = requestKey(req.headers);
    const account = key === null ? undefined : ctx.accounts.get(key);
    if (!account) return;
    const waitMs = limit.take(account.hash, ctx.now());
    if (waitMs === null) return;
    ctx.stats.uploads.rate_limited++;
    reply.header('retry-after', String(Math.max(1, Math.ceil(waitMs / 1000))));
    return sendError(reply, 429, `upload rate limit: at most ${UPLOADS_PER_WINDOW} uploads per minute per API key; retry after ${Math.ceil(waitMs / 1000)} s`, 'error', 'rate_limit_error');
  };

  /** Every error answer of an upload route (401, 429, body parsing, faults included) counts as refused. */
  const count = async (_req: FastifyRequest, reply: FastifyReply) => {
    if (reply.statusCode >= 400) ctx.stats.uploads.refused++;
  };

  /** `read` and store; every refusal in the error shape. */
  const handle = (read: (req: FastifyRequest) => Promise<UploadInput>) => async (req: FastifyRequest, reply: FastifyReply) => {
    const account = authenticate(ctx, req);
    if (!account) return sendError(reply, 401, authMessage(req));
    try {
      const body = await store(await read(req), account.hash);
      ctx.stats.uploads.accepted++;
      return body;
    } catch (err) {
      if (err instanceof Refused) return sendError(reply, err.status, err.message, 'error', err.type);
      return sendError(reply, 500, 'internal error');
    }
  };

  const config = { endpoint: 'upload' };
  const hooks = { config, onRequest: admit, onResponse: count };

  app.post(
    '/api/common/upload/base64',
    hooks,
    handle(async (req) => {
      const body: unknown = req.body;
      if (!isObject(body)) throw invalid('body: must be a JSON object {base64_data, upload_path?, file_name?}');
      const { field, value } = dataField(body);
      const { bytes } = decodeData(field, value);
      if (bytes.length > MAX_UPLOAD_BYTES) throw new Refused(413, 'content_too_long_error', `${field}: the image is larger than the limit of ${MAX_UPLOAD_BYTES} bytes`);
      const path = first(body, ['upload_path', 'uploadPath']);
      const name = first(body, ['file_name', 'fileName']);
      return { bytes, field, uploadPath: path.value, uploadPathField: path.field, fileName: name.value, fileNameField: name.field };
    }),
  );

  app.post(
    '/api/common/upload/url',
    hooks,
    handle(async (req) => {
      const body: unknown = req.body;
      if (!isObject(body)) throw invalid('body: must be a JSON object {file_url, upload_path?, file_name?}');
      const url = body.file_url;
      if (url === undefined || url === null || url === '') throw invalid('file_url: is required (a public http or https URL)');
      if (Array.isArray(url)) throw invalid('file_url: one image per request (got an array)');
      if (typeof url !== 'string') throw invalid('file_url: must be a string URL');
      const bytes = await download('file_url', url, {
        allowLoopback: ctx.options.allowLoopback,
        timeoutMs,
        maxBytes: MAX_UPLOAD_BYTES,
        resolveHost: ctx.options.resolveHost,
        dispatcher: ctx.outgoing,
      });
      const path = first(body, ['upload_path', 'uploadPath']);
      const name = first(body, ['file_name', 'fileName']);
      return { bytes, field: 'file_url', uploadPath: path.value, uploadPathField: path.field, fileName: name.value, fileNameField: name.field };
    }),
  );

  // The stream upload lives in its own scope, where @fastify/multipart parses multipart/form-data.
  void app.register(async (scope) => {
    await scope.register(multipart, { limits: { fileSize: MAX_UPLOAD_BYTES, files: 1, fields: 20, fieldSize: 64 * 1024 } });
    scope.post(
      '/api/common/upload/stream',
      hooks,
      handle(async (req) => {
        if (!req.isMultipart()) throw new Refused(422, 'validation_error', 'file: is required (send multipart/form-data with the image in the field "file")');
        const fields: Record<string, unknown> = {};
        const files: Array<{ field: string; bytes: Buffer }> = [];
        try {
          for await (const part of req.parts()) {
            if (part.type === 'file') files.push({ field: part.fieldname, bytes: await part.toBuffer() });
            else fields[part.fieldname] = part.value;
          }
        } catch (err) {
          throw multipartRefusal(err);
        }
        const file = files.find((f) => f.field === 'file');
        if (!file) {
          const others = files.map((f) => f.field).join(', ');
          throw new Refused(422, 'validation_error', `file: is required (multipart field "file")${others ? `; got file field(s) ${others}` : ''}`);
        }
        if (files.length > 1) throw invalid(`file: one image per request (got ${files.length} files)`);
        const path = first(fields, ['upload_path', 'uploadPath']);
        const name = first(fields, ['file_name', 'fileName']);
        return { bytes: file.bytes, field: 'file', uploadPath: path.value, uploadPathField: path.field, fileName: name.value, fileNameField: name.field };
      }),
    );
  });
}
