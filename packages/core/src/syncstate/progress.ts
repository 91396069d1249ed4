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
 * What a progress recompute returns: the new checkpoint and recovery (JSON
 * values), and optionally the report fields the original store also takes
 * from it. A field given is written; one left out keeps what is stored.
 * Copies of what the recompute was given (`version`, `incarnation`) and of
 * the key may ride along; any other value for them, or a `status` or lease
 * field, is refused (a progress write never changes them).
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
 * Computes the new checkpoint and recovery from the current ones (`null`:
 * no sync state exists yet, as the original store passes). It may be called
 * more than once per `updateSyncProgress`, once per attempt, each time with
 * what is stored then; only the result of the attempt that wins is written.
 * It runs with no lock held, and should be a quick, pure function of its argument.
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

/**
 * The progress fields of a result that passed `progressResultChecks`, and
 * nothing else of it: whatever else the caller's object holds is never
 * spread into a row.
 */
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
 * Decides a progress write from the row a recompute was computed from. No
 * row: insert a blank row carrying the progress at version 1 (version counts
 * the progress writes of an incarnation) under the new `incarnation`. A row:
 * bump its version and replace checkpoint and recovery (and the report
 * fields the result gave), guarded by the version AND incarnation that were
 * read, so neither a concurrent progress write nor a delete-and-recreate in
 * between lets this result land; with `fence`, also by the lease token.
 * Keys, incarnation, status and lease come from the row or the blank, never
 * from the result.
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
