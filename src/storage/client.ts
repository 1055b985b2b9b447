/**
 * The S3 client, from the standard AWS environment and config files: credentials (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE and the shared files, SSO, ...), region
 * (AWS_REGION, the profile's region) and endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 * endpoint_url), all resolved by the SDK itself. The SDK is loaded on first use only (a run to a disk
 * never loads it).
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';

/** The SDK's own switch for its notice that later releases need Node 22 (printed once per process on Node 20). */
const NODE_WARNING_SWITCH = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/** Region used with a custom endpoint when none is configured (MinIO, s3rver and most S3-compatible services accept it). */
const FALLBACK_REGION = 'us-east-1';

/**
 * Builds the client. With a custom endpoint (from the environment or a profile), addressing is path-style
 * (`http://host/bucket/key`: what MinIO, Ceph and local servers expect) unless GENBATCH_S3_VIRTUAL_HOSTS=1.
 * Checksums are computed and validated only when an operation requires them (`WHEN_REQUIRED`): the SDK's
 * default since early 2025 sends CRC32 trailers that many S3-compatible services refuse (aws-sdk-js-v3 #6810).
 */
export async function s3ClientFromEnv(): Promise<S3Client> {
  const env = process.env;
  const { S3Client } = await import('@aws-sdk/client-s3');
  const base: S3ClientConfig = {
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // One retry layer: a failed request is retried by genbatch's (src/client/retry.ts), around the whole file.
    maxAttempts: 1,
    // A bucket that does not answer is not waited for without end: connect within 10 s, no 2 min of silence.
    requestHandler: { connectionTimeout: 10_000, requestTimeout: 120_000 },
  };
  // The SDK's NodeVersionSupportWarning (a process warning on Node < 22) is about the SDK's future
  // releases, not about anything the user can act on in genbatch: turned off with the SDK's own
  // switch while the client is made (the warning is decided there, once), unless the user set it.
  const own = env[NODE_WARNING_SWITCH] === undefined;
  if (own) process.env[NODE_WARNING_SWITCH] = 'true';
  try {
    const probe = new S3Client(base);
    const config = probe.config as unknown as { serviceConfiguredEndpoint?: () => Promise<string | undefined>; region: () => Promise<string> };
    const endpoint = await config.serviceConfiguredEndpoint?.();
    let region: string | null = null;
    try {
      region = await config.region();
    } catch {
      region = null; // none configured: the SDK says so on the first request, unless an endpoint is given
    }
    probe.destroy();
    const custom = endpoint !== undefined && endpoint !== '';
    const virtualHosts = env.GENBATCH_S3_VIRTUAL_HOSTS === '1';
    return new S3Client({
      ...base,
      ...(custom && !virtualHosts ? { forcePathStyle: true } : {}),
      ...(custom && region === null ? { region: FALLBACK_REGION } : {}),
    });
  } finally {
    if (own) delete process.env[NODE_WARNING_SWITCH];
  }
}
