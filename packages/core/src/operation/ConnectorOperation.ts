import type { DeferReason, Millis } from "../watch/ProjectionWatch.js"

/**
 * Where a write-back operation stands: `attempted` (a runner drives it), or final: `committed`, `dead` or
 * `reconcile_only` (outcome unknown: a lookup or a person, never a blind re-send).
 */
export type OperationState = "attempted" | "committed" | "dead" | "reconcile_only"

/** The provider call an operation makes: `create` (its id learnt at commit), `update` or `delete` (of the entity named by `sourceID`). */
export type OperationOp = "create" | "update" | "delete"

/** The caller's idempotency key of an operation: its primary key. */
export interface OperationKey {
  /** The DID of the device or process that made the edit: the namespace of its operation ids. */
  readonly callerDID: string
  /** The caller's idempotency key for this one write; claiming it again is a replay, never a second write. */
  readonly operationID: string
}

/** One operation row: the durable envelope of one provider create, update or delete, keyed by the caller's idempotency key. */
export interface ConnectorOperation extends OperationKey {
  /** An opaque random public id, given when the key is first claimed. */
  readonly nodeKey: string
  /** The DID of the user whose data this is. */
  readonly ownerDID: string
  /** The connector (provider integration) that makes the write, e.g. `gcal`. */
  readonly connectorName: string
  /** The kind of entity at the provider, e.g. `Event`. */
  readonly model: string
  /** `create`, `update` or `delete`: the provider call this operation makes (a delete is finalized with `finalizeDeleteOperation`). */
  readonly op: OperationOp
  /** The provider account the write goes through (the user's login there, e.g. an email address). */
  readonly accountKey: string
  /** Where at the provider the write goes: the container of the entity (a calendar, a project, a list, …). */
  readonly target: string
  /** The provider entity's id: the one an update targets, or the one a create made (null until it commits). */
  readonly sourceID: string | null
  /** The local id of this entity, stable across retries, so a re-sent create cannot make a second entity. */
  readonly deterministicEventID: string
  /** A digest of everything the write sends; a replay of the key must bring the same one (`IdempotencyConflict` otherwise). */
  readonly payloadHash: string
  /** A JSON value: how a re-drive may re-send after a request may have landed. */
  readonly reissueIntent: unknown
  /** The provider etag the edit was based on, and after commit the etag the write returned. */
  readonly providerEtag: string | null
  /** The local document the write comes from (the watch's document once committed). */
  readonly documentID: string | null
  /** A JSON value: the provider entity the committed write produced. */
  readonly resultEntity: unknown
  /** Where the operation stands: `attempted` (a runner drives it) or one of the final states. */
  readonly state: OperationState
  /** Provider requests counted so far; never above the policy's `maxAttempts`. */
  readonly attempts: number
  /** When the next attempt is due (backoff or a deferral); null when it is due now or the operation is final. */
  readonly nextAttemptAt: Millis | null
  /** The `FailureKind` of the last failed attempt, if any. */
  readonly lastKind: string | null
  /** The HTTP status of the last failed attempt, if it had one. */
  readonly lastHTTPStatus: number | null
  /** Why the next attempt was pushed out without spending one (`offline`, `auth`), if it was. */
  readonly deferReason: DeferReason | null
  /** The lease token of the run whose counted request may be in flight (`markOperationSent`); once committed, the run that committed. */
  readonly sendMarker: string | null
  /** When an earlier request was first recorded as possibly landed; cleared only by a commit or a settle (see `isInDoubt`). */
  readonly inDoubtSince: Millis | null
  /** The row's optimistic-concurrency version, bumped by every write. */
  readonly version: number
  /** A random id of the current run (one claim and what follows it), new at each takeover. */
  readonly incarnation: string | null
  /** The token of the lease a runner holds (`claim.lease.token`), null when none does. */
  readonly leaseToken: string | null
  /** When that lease ends, on the store's clock. */
  readonly leaseExpiresAt: Millis | null
  /** When the key was first claimed, on the store's clock. */
  readonly createdAt: Millis
  /** When the row was last written, on the store's clock. */
  readonly updatedAt: Millis
}

/** A readable label of an operation key, for errors and logs. */
export const formatOperationKey = (key: OperationKey): string => `${key.callerDID}/${key.operationID}`

/** An unambiguous map key for an operation key. */
export const operationKey = (key: OperationKey): string => JSON.stringify([key.callerDID, key.operationID])
