import type { ConnectorOperation, FailureKind, ProjectionWatch, SafeReissue } from "@connector-store/promise"

/** What a `send` (or a `lookup`) answers for a create or an update: the provider entity that now carries the write. */
export interface SentEntity {
  /** The provider's id of the entity: the operation commits with it as its `sourceID`. */
  readonly id: string
  /** The entity's etag after the write, if the provider gives one. */
  readonly etag?: string | null | undefined
  /**
   * What the entity holds, hashed as the operation's `payloadHash` is: a `lookup` answer whose digest differs does not carry
   * this write. Optional: without it, a lookup's answer is taken as carrying the write.
   */
  readonly digest?: string | null | undefined
  /** A JSON value stored as the operation's `resultEntity`. */
  readonly entity?: unknown
}

/** What `classify` makes of a failed `send`: the store's `FailureKind` and the answer's facts. */
export interface ClassifiedFailure {
  readonly kind: FailureKind
  /** The provider's HTTP status, if it answered. */
  readonly httpStatus?: number | null | undefined
  /** A Retry-After, in ms from now. */
  readonly retryAfterMs?: number | undefined
  /** True when the answer proves the request was not applied (a 4xx proves it without this). */
  readonly notApplied?: boolean | undefined
}

/** What a `send` is given besides the operation. */
export interface SendContext {
  /**
   * Non-null whenever an earlier request of this operation may have landed: re-send only as it says (conditional on
   * `ifMatch`, under the deterministic provider id, or the delete again), never the plain write.
   */
  readonly reissue: SafeReissue | null
  /** Aborted when the worker may no longer drive the operation (its lease was lost, the send took too long, the worker stops). */
  readonly signal: AbortSignal
  /** This attempt's number, from 1 (the store counted it before the send). */
  readonly attempt: number
}

/** What a `lookup`, `verify` or `repair` is given. */
export interface HandlerContext {
  /** Aborted when the worker gives the call up. */
  readonly signal: AbortSignal
}

/**
 * One connector's provider calls: all a worker needs to drive its write-backs and verify their projections. Only `send` is
 * required.
 */
export interface Connector {
  /**
   * Makes the operation's write at the provider: a create or an update resolves with the entity (`SentEntity`), a delete with
   * anything; a failure throws (the error goes to `classify`). Only the provider call belongs here.
   */
  readonly send: (operation: ConnectorOperation, context: SendContext) => Promise<unknown>
  /** What a thrown error means; `classifyFailure` (an HTTP status and a Retry-After read off the error) when absent. */
  readonly classify?: ((error: unknown) => ClassifiedFailure) | undefined
  /**
   * "Did our earlier request land?": the entity carrying this operation's write, or null when the provider holds no sign of
   * it. Asked on a 412 or 409 of a conditional re-send and on an answer that left the outcome in doubt.
   */
  readonly lookup?: ((operation: ConnectorOperation, context: HandlerContext) => Promise<SentEntity | null>) | undefined
  /**
   * The provider's current state of a watched entity, as a digest hashed the way the document's winner is, or null when the
   * entity is gone; throws when the provider cannot be asked (the watch is deferred without spending an attempt).
   */
  readonly verify?: ((watch: ProjectionWatch, context: HandlerContext) => Promise<string | null>) | undefined
  /** The local document takes the provider's state `digest` (null: gone) after a mismatch; the next pass verifies it. */
  readonly repair?: ((watch: ProjectionWatch, digest: string | null, context: HandlerContext) => Promise<void>) | undefined
}
