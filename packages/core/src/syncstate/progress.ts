import type { JsonValue } from "./json.js"
import {
  blankSyncState,
  type ReportedField,
  stampOf,
  type SyncStateKey,
  type SyncStateRow,
  type SyncStateWrite
} from "./SyncState.js"

/** What a progress recompute is computed from: the stored checkpoint and recovery, and the stamp they carry. */
export interface SyncProgressCASCurrent {
  /** The stored checkpoint, a JSON value (`null` when none). */
  readonly checkpoint: JsonValue
  /** The stored recovery data, a JSON value (`null` when none). */
  readonly recovery: JsonValue
  /** The row's version when read; the write succeeds only if it is unchanged. */
  readonly version: number
  /** The row's incarnation when read (`null` on a row from an older release). */
  readonly incarnation: string | null
}

/**
 * What a recompute returns: the new checkpoint and recovery, and report fields to write (one left out keeps what is stored);
 * copies of the key, `version` and `incarnation` may ride along, anything else of them is refused.
 */
export interface SyncProgressCASResult {
  /** The new checkpoint; must be a JSON value. */
  readonly checkpoint: unknown
  /** The new recovery data; must be a JSON value. */
  readonly recovery: unknown
  /** When given, the caller-defined text to store as `lastSyncedAt`. */
  readonly lastSyncedAt?: string | undefined
  /** When given, the entity count to store: an integer from 0 to 2^31 - 1. */
  readonly entityCount?: number | undefined
  /** `null` clears a stored error. */
  readonly error?: string | null | undefined
}

/**
 * Computes the new checkpoint and recovery from the current ones (`null`: no row yet); called once per attempt with no lock
 * held, so keep it quick and pure.
 */
export type SyncProgressRecompute = (current: SyncProgressCASCurrent | null) => SyncProgressCASResult

/** A recompute result that passed its checks: only the fields a progress write takes. */
export interface ValidProgress extends Omit<SyncProgressCASResult, "checkpoint" | "recovery"> {
  /** The new checkpoint, checked to be JSON. */
  readonly checkpoint: JsonValue
  /** The new recovery data, checked to be JSON. */
  readonly recovery: JsonValue
}

/** What a recompute is given for a row (or for no row). */
export const progressCurrent = (row: SyncStateRow | undefined): SyncProgressCASCurrent | null =>
  row === undefined
    ? null
    : { checkpoint: row.checkpoint, recovery: row.recovery, version: row.version, incarnation: row.incarnation }

/** The progress fields of a checked result, and nothing else of it. */
export const validProgress = (result: SyncProgressCASResult): ValidProgress => {
  const progress: { -readonly [K in keyof ValidProgress]: ValidProgress[K] } = {
    checkpoint: result.checkpoint as JsonValue,
    recovery: result.recovery as JsonValue
  }
  if (result.lastSyncedAt !== undefined) progress.lastSyncedAt = result.lastSyncedAt
  if (result.entityCount !== undefined) progress.entityCount = result.entityCount
  if (result.error !== undefined) progress.error = result.error
  return progress
}

const reportedOf = (progress: ValidProgress): ReadonlyArray<ReportedField> =>
  (["lastSyncedAt", "entityCount", "error"] as const).filter((field) => progress[field] !== undefined)

/**
 * Decides a progress write from the row the recompute saw: no row inserts a blank one at version 1 under `incarnation`; a row
 * gets the progress and the next version, guarded by the version and incarnation read (and the lease, with `fence`).
 */
export const decideSyncProgress = (
  key: SyncStateKey,
  row: SyncStateRow | undefined,
  progress: ValidProgress,
  incarnation: string,
  fence?: string
): SyncStateWrite => {
  const base = row ?? blankSyncState(key, incarnation)
  const next: SyncStateRow = {
    ...base,
    checkpoint: progress.checkpoint,
    recovery: progress.recovery,
    lastSyncedAt: progress.lastSyncedAt ?? base.lastSyncedAt,
    entityCount: progress.entityCount ?? base.entityCount,
    error: progress.error === undefined ? base.error : progress.error,
    version: base.version + 1
  }
  return row === undefined
    ? { kind: "insert", row: next }
    : { kind: "progress", row: next, expected: stampOf(row, fence), reported: reportedOf(progress) }
}
