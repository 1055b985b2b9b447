/** A job as the store keeps it (`jobs.spec`): what was asked, with local references and their content hashes. */
export interface StoredSpec {
  model: string;
  input: Record<string, unknown>;
  callback_url?: string;
  /** Chat jobs: the wire protocol (as given, or the one the model's group picks). */
  protocol?: string;
  /**
   * Images to upload before the submit, and the input path each replaces:
   * a local file (`file`, its sha256 at validation; stream upload) or a Data URL
   * written in the input (`data: true`, sha256 of the text; base64 upload),
   * or with the job's `rehost: true` a remote http(s) URL written in the input
   * (`remote: true`, sha256 of the URL text; URL upload).
   */
  refs: Array<{ path: string; file: string; sha256: string; data?: true; remote?: true }>;
  /**
   * A for_each job (row kind `fanout`): the list it iterates (job and path), the
   * kind of the children it makes (submit or chat) and the price of one child.
   */
  forEach?: { expr: string; childKind: string; childCredits: number | null };
  /**
   * `run --redo rejected` of a model with a `seed` field whose manifest input gives none: the new seed, put
   * into the input sent (the manifest's input, and so the spec hash, stay as they are).
   */
  seed?: number;
}
