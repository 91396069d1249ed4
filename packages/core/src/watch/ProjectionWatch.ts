/** Milliseconds since the Unix epoch, a finite integer. */
export type Millis = number

/** An opaque digest of a document's converged state. */
export type Digest = string

/** Where a watch stands in its verify/repair loop. */
export type VerificationStatus = "pending_verification" | "verified" | "repair_failed"

/** Why an attempt was pushed out without spending it: a reason that lapses on its own. */
export type DeferReason = "offline" | "auth"

/** The primary key of a projection watch. */
export interface WatchIdentity {
  readonly ownerDID: string
  readonly connectorName: string
  readonly model: string
  readonly accountKey: string
  readonly sourceID: string
}

/**
 * One row of the projection-watch table: after a write-back committed, the
 * store verifies that the local converged state of `documentID` matches the
 * provider, and repairs it if not. Every write bumps `version`.
 */
export interface ProjectionWatch extends WatchIdentity {
  readonly documentID: string
  /** The winner digest last proved equal to the provider's state. */
  readonly verifiedStateDigest: Digest | null
  /** The winner digest the current generation was opened against (a give-up leaves it as it was). */
  readonly observedWinnerDigest: Digest | null
  readonly verificationStatus: VerificationStatus
  readonly verificationAttempts: number
  readonly repairGeneration: number
  readonly nextAttemptAt: Millis | null
  /** Until when a verifier holds the current attempt. */
  readonly claimedUntil: Millis | null
  readonly deferReason: DeferReason | null
  readonly version: number
  readonly createdAt: Millis
  readonly updatedAt: Millis
}

/** The identity part of a watch row. */
export const watchIdentityOf = (row: WatchIdentity): WatchIdentity => ({
  ownerDID: row.ownerDID,
  connectorName: row.connectorName,
  model: row.model,
  accountKey: row.accountKey,
  sourceID: row.sourceID
})

/** A readable, unambiguous label of a watch identity, for errors and logs. */
export const formatWatchIdentity = (id: WatchIdentity): string =>
  [id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID].join("/")

/** An unambiguous map key for a watch identity. */
export const watchKey = (id: WatchIdentity): string =>
  JSON.stringify([id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID])
