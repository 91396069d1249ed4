import { keysetPage } from "../operation/due.js"
import { compareCodePoints } from "../operation/retention.js"
import { type SyncLeaseState, syncLeaseStateOf } from "../syncstate/release.js"
import { type SyncStateEntry, type SyncStateKey, type SyncStateRow, toSyncStateEntry } from "../syncstate/SyncState.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** An operator's filter over every sync state. Each field present narrows. */
export interface OperatorSyncStateFields {
  /** Only sync states of this connector. */
  readonly connectorName?: string | undefined
  /** Only sync states of this owner (DID). */
  readonly ownerDID?: string | undefined
  /** Only rows whose lease is in this state at the time of the read (see `SyncLeaseState`). */
  readonly lease?: SyncLeaseState | undefined
}

/** An operator's page request over every sync state (cursor decoded) read at `at`, by (connectorName, ownerDID) in byte order. */
export interface OperatorSyncStateQuery extends OperatorSyncStateFields {
  /** The moment (ms since the epoch) at which lease states are judged. */
  readonly at: Millis
  /** The page size: at most this many rows. */
  readonly limit: number
  /** Only rows strictly after this key. */
  readonly after?: SyncStateKey | undefined
}

/** A sync state as an operator sees it: the public entry (no lease token) and where its lease stands. */
export interface OperatorSyncState extends SyncStateEntry {
  /** Where its lease stands at the time of the read: `none`, `held` or `stale`. */
  readonly lease: SyncLeaseState
}

/** The order of sync-state keys: connector, then owner, in byte order. */
export const compareSyncStateKeys = (a: SyncStateKey, b: SyncStateKey): number =>
  compareCodePoints(a.connectorName, b.connectorName) || compareCodePoints(a.ownerDID, b.ownerDID)

/** True when `row` passes every filter of `query` (not the position or limit). */
export const matchesOperatorSyncState = (row: SyncStateRow, query: OperatorSyncStateQuery): boolean =>
  (query.connectorName === undefined || row.connectorName === query.connectorName) &&
  (query.ownerDID === undefined || row.ownerDID === query.ownerDID) &&
  (query.lease === undefined || syncLeaseStateOf(row, query.at) === query.lease)

/** The reference answer to an `OperatorSyncStateQuery` over every row. */
export const operatorSyncStatePage = (rows: ReadonlyArray<SyncStateRow>, query: OperatorSyncStateQuery): ReadonlyArray<SyncStateRow> =>
  keysetPage(rows, (row) => matchesOperatorSyncState(row, query), compareSyncStateKeys, query.after, query.limit)

/** The operator's view of `row` at `now`. */
export const toOperatorSyncState = (row: SyncStateRow, now: Millis): OperatorSyncState => ({
  ...toSyncStateEntry(row),
  lease: syncLeaseStateOf(row, now)
})

/** Sync-state counts for the store's status: rows, leases live now, and stale leases. */
export interface SyncStateCounts {
  /** How many sync-state rows there are. */
  readonly total: number
  /** Rows whose lease is live now (expires after now). */
  readonly leasesHeld: number
  /** Rows whose lease expired and was never released. */
  readonly staleLeases: number
}

/** Pending-authorization counts for the store's status, by expiry alone: still usable, and expired. */
export interface PendingAuthCounts {
  /** Pending authorizations that may still be completed (expiry now or later). */
  readonly live: number
  /** Pending authorizations whose expiry has passed, waiting for `deleteExpiredPendingAuth`. */
  readonly expired: number
}

/** The reference sync-state counts of `rows` at `now`. */
export const syncStateCountsOf = (rows: ReadonlyArray<SyncStateRow>, now: Millis): SyncStateCounts => {
  const states = rows.map((row) => syncLeaseStateOf(row, now))
  return {
    total: rows.length,
    leasesHeld: states.filter((state) => state === "held").length,
    staleLeases: states.filter((state) => state === "stale").length
  }
}

/** The reference pending-authorization counts at `now`: a record expires once `expiresAt < now`, as `take` sees it. */
export const pendingAuthCountsOf = (expiries: ReadonlyArray<Millis>, now: Millis): PendingAuthCounts => ({
  live: expiries.filter((expiresAt) => expiresAt >= now).length,
  expired: expiries.filter((expiresAt) => expiresAt < now).length
})
