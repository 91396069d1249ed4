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
  /** The DID of the user whose data this is. */
  readonly ownerDID: string
  /** The connector (provider integration), e.g. `gcal`. */
  readonly connectorName: string
  /** The kind of entity at the provider, e.g. `Event`. */
  readonly model: string
  /** The provider account (the user's login there, e.g. an email address). */
  readonly accountKey: string
  /** The provider entity's id. */
  readonly sourceID: string
}

/** One projection watch: after a write-back commits, the store verifies `documentID` against the provider and repairs it. */
export interface ProjectionWatch extends WatchIdentity {
  /** The local document the provider entity projects into. */
  readonly documentID: string
  /** The winner digest last proved equal to the provider's state. */
  readonly verifiedStateDigest: Digest | null
  /** The winner digest the current generation was opened against (a give-up leaves it as it was). */
  readonly observedWinnerDigest: Digest | null
  /** `pending_verification` (a verifier has work), `verified` or `repair_failed` (given up; an operator's look). */
  readonly verificationStatus: VerificationStatus
  /** Verification attempts spent on the current generation. */
  readonly verificationAttempts: number
  /** Bumped when the watch is (re)opened against a new winner: a result for an older generation changes nothing. */
  readonly repairGeneration: number
  /** When the next verification is due; null when none is (verified, given up). */
  readonly nextAttemptAt: Millis | null
  /** Until when a verifier holds the current attempt. */
  readonly claimedUntil: Millis | null
  /** Why the next attempt was pushed out (`offline`, `auth`), if it was. */
  readonly deferReason: DeferReason | null
  /** The row's optimistic-concurrency version, bumped by every write. */
  readonly version: number
  /** When the row was created, on the store's clock. */
  readonly createdAt: Millis
  /** When the row was last written, on the store's clock. */
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
