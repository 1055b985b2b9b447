/** A job as the store keeps it (`jobs.spec`): what was asked, with local references and their content hashes. */
export interface StoredSpec {
  model: string;
  input: Record<string, unknown>;
  callback_url?: string;
  /** Local image files to upload, the input path each replaces, and the file's sha256 at validation. */
  refs: Array<{ path: string; file: string; sha256: string }>;
}
