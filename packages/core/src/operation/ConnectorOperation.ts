import type { DeferReason, Millis } from "../watch/ProjectionWatch.js"

/**
 * Where a write-back operation stands. `attempted` is the only state a
 * runner drives; the others are final: `committed` (the provider applied
 * it), `dead` (it failed for good) and `reconcile_only` (the outcome is
 * unknown; it needs a lookup or a person, never a blind re-send).
 */
export type OperationState = "attempted" | "committed" | "dead" | "reconcile_only"

/** The provider call an operation makes. */
export type OperationOp = "create" | "update"

/** The caller's idempotency key of an operation: its primary key. */
export interface OperationKey {
  readonly callerDID: string
  readonly operationID: string
}

/**
 * One row of the operation table: the durable envelope of one provider
 * create or update, keyed by the caller's idempotency key.
 */
export interface ConnectorOperation extends OperationKey {
  /** An opaque random public id, given when the key is first claimed. */
  readonly nodeKey: string
  readonly ownerDID: string
  readonly connectorName: string
  readonly model: string
  readonly op: OperationOp
  readonly accountKey: string
  readonly target: string
  readonly sourceID: string | null
  readonly deterministicEventID: string
  readonly payloadHash: string
  /** A JSON value: how a re-drive may re-send after a request may have landed. */
  readonly reissueIntent: unknown
  readonly providerEtag: string | null
  readonly documentID: string | null
  /** A JSON value: the provider entity the committed write produced. */
  readonly resultEntity: unknown
  readonly state: OperationState
  readonly attempts: number
  readonly nextAttemptAt: Millis | null
  readonly lastKind: string | null
  readonly lastHTTPStatus: number | null
  readonly deferReason: DeferReason | null
  /**
   * The current run's marker: the lease token of the run whose counted
   * request may be in flight (set by `markOperationSent`). Once committed,
   * the run that committed; once `reconcile_only`, the run that may settle it.
   */
  readonly sendMarker: string | null
  /**
   * When an earlier request was first recorded as possibly landed (a run's
   * marker folded in at a takeover, or a failure without proof that the
   * request did not apply); null when no earlier request is in doubt.
   * Cleared only by a commit or a settle. See `isInDoubt`.
   */
  readonly inDoubtSince: Millis | null
  readonly version: number
  readonly incarnation: string | null
  readonly leaseToken: string | null
  readonly leaseExpiresAt: Millis | null
  readonly createdAt: Millis
  readonly updatedAt: Millis
}

/** A readable label of an operation key, for errors and logs. */
export const formatOperationKey = (key: OperationKey): string => `${key.callerDID}/${key.operationID}`

/** An unambiguous map key for an operation key. */
export const operationKey = (key: OperationKey): string => JSON.stringify([key.callerDID, key.operationID])
