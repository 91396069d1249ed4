import type { Millis } from "../watch/ProjectionWatch.js"
import { leaseStampOf, type SyncStateRow, type SyncStateWrite } from "./SyncState.js"

/** Where a sync state's lease stands: `none`, `held` (live) or `stale` (expired, never released: anyone may take it over). */
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
 * Decides an operator's release of the lease on `row`: a stale one is cleared, a live one only with `force`, none is
 * `not-held`; the write is guarded by the lease read.
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
