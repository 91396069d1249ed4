import type { Millis } from "../watch/ProjectionWatch.js"
import { leaseStampOf, type SyncStateRow, type SyncStateWrite } from "./SyncState.js"

/**
 * Where a sync state's lease stands at a moment: `none` (nobody holds it),
 * `held` (live: it expires after now), or `stale` (it expired and was never
 * released: its runner is gone or late, and any runner may take it over).
 */
export type SyncLeaseState = "none" | "held" | "stale"

/** The lease state of `row` at `now` (see `SyncLeaseState`). */
export const syncLeaseStateOf = (row: Pick<SyncStateRow, "leaseToken" | "leaseExpiresAt">, now: Millis): SyncLeaseState =>
  row.leaseToken === null && row.leaseExpiresAt === null
    ? "none"
    : row.leaseExpiresAt !== null && row.leaseExpiresAt > now
    ? "held"
    : "stale"

/** What an operator's release of a sync lease decided. */
export type OperatorSyncLeaseRelease =
  | { readonly outcome: "released"; readonly was: "held" | "stale"; readonly write: Extract<SyncStateWrite, { readonly kind: "lease" }> }
  | { readonly outcome: "not-held"; readonly write: undefined }
  | { readonly outcome: "refused"; readonly reason: string; readonly write: undefined }

/**
 * Decides an operator's release of the lease on `row`, whoever holds it: a
 * stale lease is cleared; a live one only with `force` (the operator knows
 * its runner is gone), since another runner could otherwise sync alongside
 * one still running; no lease is `not-held`, and nothing changes. The write
 * clears token and expiry, guarded by the lease stamp read, so a lease
 * renewed or taken over meanwhile is never cleared; status, checkpoint and
 * progress are left as they are.
 */
export const decideOperatorReleaseSyncLease = (
  row: SyncStateRow,
  now: Millis,
  options: { readonly force: boolean }
): OperatorSyncLeaseRelease => {
  const state = syncLeaseStateOf(row, now)
  if (state === "none") return { outcome: "not-held", write: undefined }
  if (state === "held" && !options.force) {
    return {
      outcome: "refused",
      reason: `its lease is live until ${new Date(row.leaseExpiresAt!).toISOString()}; ` +
        "release it only when its runner is gone (force), or let it lapse",
      write: undefined
    }
  }
  return {
    outcome: "released",
    was: state,
    write: { kind: "lease", row: { ...row, leaseToken: null, leaseExpiresAt: null }, expected: leaseStampOf(row) }
  }
}
