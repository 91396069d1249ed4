import type { Millis } from "../watch/ProjectionWatch.js"
import type { JsonValue } from "./json.js"

/** Where a connector's sync for one owner stands, as its runner last reported it. */
export type SyncStatus = "idle" | "syncing" | "error"

/** The statuses `setSyncState` accepts. */
export const SYNC_STATUSES: ReadonlyArray<SyncStatus> = ["idle", "syncing", "error"]

/** The primary key of a sync state: one row per connector and owner. */
export interface SyncStateKey {
  /** The connector whose sync this is. */
  readonly connectorName: string
  /** The DID of the owner whose data the connector syncs. */
  readonly ownerDID: string
}

/** One connector's sync state for one owner, as callers see it; `incarnation` tells a row re-created after a delete from the old one. */
export interface SyncState {
  /** The runner's resume point, any JSON value; `null` until a progress or `setSyncState` write sets one. */
  readonly checkpoint: JsonValue
  /** Caller-defined text; `""` on a row no `setSyncState` has written yet. */
  readonly lastSyncedAt: string
  /** How many entities the runner last reported synced; 0 on a row nobody reported on yet. */
  readonly entityCount: number
  /** The status the runner last reported with `setSyncState`; `idle` on a new row. */
  readonly status: SyncStatus
  /** Until when a runner holds the sync lease; `null` when nobody does. */
  readonly leaseExpiresAt: Millis | null
  /** The runner's recovery data, any JSON value, kept beside the checkpoint; `null` until written. */
  readonly recovery: JsonValue
  /** How many progress writes this incarnation has taken (0 on a new row); a progress compare-and-set checks it. */
  readonly version: number
  /** The random id given when the row was created; absent on rows from older releases that had none. */
  readonly incarnation?: string
  /** The error text the runner last reported; absent when none (a later report without one clears it). */
  readonly error?: string
}

/** A sync state flat beside its key, as `listSyncStatesForConnector` lists it. */
export interface SyncStateEntry extends SyncStateKey, SyncState {}

/** A sync-state row as stored: the public state, its key, and the lease token only its holder is told. */
export interface SyncStateRow extends SyncStateKey, Omit<SyncState, "error" | "incarnation"> {
  /** The error text the runner last reported; `null` when none. */
  readonly error: string | null
  /** The secret token of the current sync lease, set by a claim; `null` when no lease was ever taken or it was released. */
  readonly leaseToken: string | null
  /** The random id given when the row was created; `null` on rows from older releases. */
  readonly incarnation: string | null
}

/** What a compare-and-set on a sync-state row checks: its incarnation and version, and its lease token when given. */
export interface SyncStateStamp {
  /** The version the row must still have. */
  readonly version: number
  /** The incarnation the row must still have (`null`: a row from an older release without one). */
  readonly incarnation: string | null
  /** When given, the lease token the row must still carry; omitted for writes not fenced by the lease. */
  readonly leaseToken?: string | undefined
}

/** The stamp of a row, for guarding a write against what was read (and, given `fence`, against a lost lease). */
export const stampOf = (row: SyncStateRow, fence?: string): SyncStateStamp =>
  fence === undefined
    ? { version: row.version, incarnation: row.incarnation }
    : { version: row.version, incarnation: row.incarnation, leaseToken: fence }

/** The report fields a progress result may carry, written only when it does. */
export type ReportedField = "lastSyncedAt" | "entityCount" | "error"

/** What a lease write checks: the row is still this incarnation with this lease on it. */
export interface SyncLeaseStamp {
  /** The incarnation the row must still have. */
  readonly incarnation: string | null
  /** The lease token the row must still carry (`null`: no lease). */
  readonly leaseToken: string | null
  /** The lease expiry the row must still carry (ms since the epoch; `null`: no lease). */
  readonly leaseExpiresAt: Millis | null
}

/** The lease stamp of a row. */
export const leaseStampOf = (row: SyncStateRow): SyncLeaseStamp => ({
  incarnation: row.incarnation,
  leaseToken: row.leaseToken,
  leaseExpiresAt: row.leaseExpiresAt
})

/**
 * A write a sync-state decision asks for; each kind writes only its own columns, guarded by its stamp: `insert` a new row,
 * `progress` (checkpoint, recovery, version and the `reported` fields), `status` (the report, checkpoint and recovery), `lease`
 * (token and expiry).
 */
export type SyncStateWrite =
  | { readonly kind: "insert"; readonly row: SyncStateRow }
  | {
    readonly kind: "progress"
    readonly row: SyncStateRow
    readonly expected: SyncStateStamp
    readonly reported: ReadonlyArray<ReportedField>
  }
  | { readonly kind: "status"; readonly row: SyncStateRow; readonly expected: SyncStateStamp }
  | { readonly kind: "lease"; readonly row: SyncStateRow; readonly expected: SyncLeaseStamp }

/** The public view of a row: the lease token stays inside the store. */
export const toSyncState = (row: SyncStateRow): SyncState => ({
  checkpoint: row.checkpoint,
  lastSyncedAt: row.lastSyncedAt,
  entityCount: row.entityCount,
  status: row.status,
  leaseExpiresAt: row.leaseExpiresAt,
  recovery: row.recovery,
  version: row.version,
  ...(row.incarnation === null ? {} : { incarnation: row.incarnation }),
  ...(row.error === null ? {} : { error: row.error })
})

/** The entry view of a row: the state's fields flat, beside its key. */
export const toSyncStateEntry = (row: SyncStateRow): SyncStateEntry => ({
  connectorName: row.connectorName,
  ownerDID: row.ownerDID,
  ...toSyncState(row)
})

/** The row a write creates when none exists: idle, nothing synced, no checkpoint or lease, version 0. */
export const blankSyncState = (key: SyncStateKey, incarnation: string): SyncStateRow => ({
  connectorName: key.connectorName,
  ownerDID: key.ownerDID,
  checkpoint: null,
  lastSyncedAt: "",
  entityCount: 0,
  status: "idle",
  error: null,
  leaseToken: null,
  leaseExpiresAt: null,
  recovery: null,
  version: 0,
  incarnation
})

/** A readable label of a sync-state key, for errors and logs. */
export const formatSyncStateKey = (key: SyncStateKey): string => `${key.connectorName}/${key.ownerDID}`

/** An unambiguous map key for a sync-state key. */
export const syncStateMapKey = (key: SyncStateKey): string => JSON.stringify([key.connectorName, key.ownerDID])
