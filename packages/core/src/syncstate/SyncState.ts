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

/**
 * One connector's sync state for one owner, as callers see it. `version`
 * counts the progress writes of this incarnation; `incarnation` is a random
 * id given when the row was created, so a row deleted and created again is
 * never mistaken for the old one. Rows written by older releases may have no
 * incarnation.
 */
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

/**
 * A sync state with the key it is stored under (`listSyncStatesForConnector`):
 * the state's fields flat, with `connectorName` and `ownerDID` beside them,
 * as the original store lists them.
 */
export interface SyncStateEntry extends SyncStateKey, SyncState {}

/**
 * A sync-state row as the repository stores it: the public state plus the
 * key and the current lease token, which only the lease holder is told.
 */
export interface SyncStateRow extends SyncStateKey, Omit<SyncState, "error" | "incarnation"> {
  /** The error text the runner last reported; `null` when none. */
  readonly error: string | null
  /** The secret token of the current sync lease, set by a claim; `null` when no lease was ever taken or it was released. */
  readonly leaseToken: string | null
  /** The random id given when the row was created; `null` on rows from older releases. */
  readonly incarnation: string | null
}

/**
 * What a compare-and-set on a sync-state row checks: the row is still this
 * incarnation at this version and, when `leaseToken` is given (a write
 * fenced by the sync lease), still carries that lease token.
 */
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
 * A write a sync-state decision asks for. Each kind touches only its own
 * columns, so writers of different kinds never undo each other:
 * - `insert`: a new row (refused when the key is taken);
 * - `progress`: checkpoint, recovery and version, and the `reported` fields
 *   the recompute returned, if the row still has the stamp;
 * - `status`: status, lastSyncedAt, entityCount, error, checkpoint and
 *   recovery, if the row still has the stamp (version unchanged);
 * - `lease`: lease token and expiry, if the row still has the lease stamp.
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

/**
 * The row a write creates when none exists yet and no `setSyncState` said
 * otherwise: idle, nothing synced, no checkpoint, no lease, version 0.
 */
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
