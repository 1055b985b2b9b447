import type * as z from 'zod';

/** What a model produces. */
export type ModelKind = 'image' | 'video' | 'music' | 'audio' | 'lyrics' | 'chat';

/** Where a task's results are read: the generic status endpoint or the music detail endpoint. */
export type ResultEndpoint = 'status' | 'music';

export interface PriceQuote {
  /** Credits this input costs, or null when the service gives no price (never 0, never a guess). */
  credits: number | null;
  /** How the number was reached, e.g. "high quality, 2K: 24 credits"; for null, why it is unknown. */
  basis: string;
}

/**
 * A model (or music workflow) id accepted by POST /api/generate/submit.
 * One family module defines one or more specs; src/models/index.ts lists them all.
 * The runner, the estimator and the sandbox all use the same spec.
 */
export interface ModelSpec {
  /** Exact value of `model` in the submit body. */
  id: string;
  /** Family module name, e.g. "alpha-image-2". */
  family: string;
  kind: ModelKind;
  /** One line for `genbatch models`. */
  summary: string;
  /**
   * zod schema of `input`. Strict (unknown keys rejected) where the service
   * documents the fields; an open object where it says "not shown".
   * Cross-field rules live in superRefine with plain-words messages.
   */
  input: z.ZodType<Record<string, unknown>>;
  /** Reject unknown fields at the body root too (the service says so for the flash model). */
  strictRoot?: boolean;
  /** Every value workflow() can return, in the order `genbatch models` lists them. */
  workflows: readonly string[];
  /** Workflow inferred from the fields present in a valid input, e.g. "image-to-video". */
  workflow(input: Record<string, unknown>): string;
  /**
   * How this model is priced, in one line for `genbatch models`, ending with its source:
   * "(service price)" for a price the service gives, or starting "unknown:" when it gives none.
   */
  priceBasis: string;
  /** Price of one submission of a valid input, per the service's tables. */
  price(input: Record<string, unknown>): PriceQuote;
  /**
   * Input paths that take an image: an http(s) URL, or in a manifest a local
   * JPEG/PNG/GIF/WebP path that the runner uploads. `[]` marks an array.
   * e.g. ["image_urls[]", "start_image_url"].
   */
  imageFields: string[];
  /** Input paths that take only a remote URL (audio or video); a local path is an error. */
  urlOnlyFields: string[];
  /** Formats a local image in imageFields may have (jpeg, png, gif, webp, read from its bytes), when the service narrows them. */
  imageFormats?: readonly string[];
  /** Largest local image in imageFields, in bytes, when the service gives a limit. */
  imageMaxBytes?: number;
  /** Typical generation time in seconds [min, max]: first poll not before min; sandbox draws in range. */
  typicalSeconds: [number, number];
  resultEndpoint: ResultEndpoint;
  /** Number of result items the service documents per task (n images, music variations), when known. */
  outputCount?(input: Record<string, unknown>): number | null;
  /**
   * Sandbox only: the length in seconds of a video result when it is not simply input.duration
   * (undefined: the sandbox's default length). For a model whose service ignores duration in some workflow,
   * or gives an omitted duration its own default (video 1.5: 6 s, 8 s in reference mode).
   */
  videoSeconds?(input: Record<string, unknown>): number | undefined;
  /**
   * Sandbox only: the resolution (`1K`, `2K`, `4K`) an image result is made at when it is not simply
   * input.resolution (alpha-image-2's rule 1: size omitted or auto is processed as 1K whatever resolution says).
   */
  imageResolution?(input: Record<string, unknown>): string | undefined;
  /** Sandbox only: the resolution (`720p`, `1080P`) a video result is made at when input.resolution does not say (clip-02-pro: 1080P only). */
  videoResolution?(input: Record<string, unknown>): string | undefined;
  /** Sandbox-only price when the service gives none. Never used by the runner's estimate. */
  sandboxCredits?: number;
  /** One-line notes on choices made where the service says "not shown". */
  choices?: string[];
}

/** One field-level problem with a submit body. */
export interface FieldIssue {
  /** Path from the body root, e.g. "input.size", "input.image_urls[2]", "model". */
  path: string;
  message: string;
  /** The service error type this maps to. */
  type: 'validation_error' | 'content_too_long_error';
}
