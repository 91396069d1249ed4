import type { Millis } from "../watch/ProjectionWatch.js"
import { blankSyncState, leaseStampOf, type SyncStateKey, type SyncStateRow, type SyncStateWrite } from "./SyncState.js"

/** The sync lease a runner holds on one connector and owner; `token` fences renewals and releases: keep it private. */
export interface SyncLease extends SyncStateKey {
  /** The lease's secret token, drawn by the store at the claim; renewals and releases must present it. */
  readonly token: string
  /** When the lease lapses unless renewed (ms since the epoch): the claim's or renewal's `now + leaseMs`. */
  readonly expiresAt: Millis
}

/** What a holder hands back to renew or release its lease (a whole `SyncLease` will do). */
export type SyncLeaseHolder = Pick<SyncLease, "connectorName" | "ownerDID" | "token">

/** When a claim or renewal happens and how long the lease lasts from then. */
export interface SyncLeaseTerms {
  /** The instant of the claim or renewal (ms since the epoch), from the store's clock. */
  readonly now: Millis
  /** How long the lease lasts from `now`, in milliseconds. */
  readonly leaseMs: number
}

/** What `claimSyncLease` did. `busy`: another runner's lease is live until `leaseExpiresAt`. */
export type SyncLeaseClaim =
  | { readonly outcome: "claimed"; readonly lease: SyncLease }
  | { readonly outcome: "busy"; readonly leaseExpiresAt: Millis }

/** What `renewSyncLease` did. `lost`: the lease was released, taken over, or its row deleted. */
export type SyncLeaseRenewal =
  | { readonly outcome: "renewed"; readonly lease: SyncLease }
  | { readonly outcome: "lost" }

/** A lease decision: the outcome, and the write that makes it so (none when nothing changes). */
export interface SyncLeaseDecision<O> {
  /** What the caller is told happened. */
  readonly outcome: O
  /** The row write that makes the outcome true; `undefined` when nothing is written. */
  readonly write: SyncStateWrite | undefined
}

/** True while the row's lease expires strictly after `now` (one expiring at `now` may be taken over). */
export const isSyncLeaseLive = (row: SyncStateRow, now: Millis): boolean =>
  row.leaseExpiresAt !== null && row.leaseExpiresAt > now

const holds = (row: SyncStateRow | undefined, lease: Pick<SyncLease, "token">): row is SyncStateRow =>
  row !== undefined && row.leaseToken === lease.token

const withLease = (row: SyncStateRow, token: string | null, expiresAt: Millis | null): SyncStateRow => ({
  ...row,
  leaseToken: token,
  leaseExpiresAt: expiresAt
})

/** Decides a claim under the fresh `token`: no row creates a blank one holding it, a live lease is `busy`, anything else is taken over. */
export const decideClaimSyncLease = (
  key: SyncStateKey,
  row: SyncStateRow | undefined,
  terms: SyncLeaseTerms,
  token: string,
  incarnation: string
): SyncLeaseDecision<SyncLeaseClaim> => {
  const expiresAt = terms.now + terms.leaseMs
  const lease: SyncLease = { connectorName: key.connectorName, ownerDID: key.ownerDID, token, expiresAt }
  if (row === undefined) {
    return { outcome: { outcome: "claimed", lease }, write: { kind: "insert", row: withLease(blankSyncState(key, incarnation), token, expiresAt) } }
  }
  if (isSyncLeaseLive(row, terms.now)) return { outcome: { outcome: "busy", leaseExpiresAt: row.leaseExpiresAt! }, write: undefined }
  return {
    outcome: { outcome: "claimed", lease },
    write: { kind: "lease", row: withLease(row, token, expiresAt), expected: leaseStampOf(row) }
  }
}

/** Decides a renewal: only the holder of the current lease (lapsed but not taken over included) extends it to `now + leaseMs`. */
export const decideRenewSyncLease = (
  row: SyncStateRow | undefined,
  lease: Pick<SyncLease, "token">,
  terms: SyncLeaseTerms
): SyncLeaseDecision<SyncLeaseRenewal> => {
  if (!holds(row, lease)) return { outcome: { outcome: "lost" }, write: undefined }
  const expiresAt = terms.now + terms.leaseMs
  return {
    outcome: { outcome: "renewed", lease: { connectorName: row.connectorName, ownerDID: row.ownerDID, token: lease.token, expiresAt } },
    write: { kind: "lease", row: withLease(row, lease.token, expiresAt), expected: leaseStampOf(row) }
  }
}

/** Decides a release: only the holder's lease is cleared; `true` when it was. */
export const decideReleaseSyncLease = (
  row: SyncStateRow | undefined,
  lease: Pick<SyncLease, "token">
): SyncLeaseDecision<boolean> =>
  holds(row, lease)
    ? { outcome: true, write: { kind: "lease", row: withLease(row, null, null), expected: leaseStampOf(row) } }
    : { outcome: false, write: undefined }
