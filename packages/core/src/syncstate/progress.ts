import type { JsonValue } from "./json.js"
import { blankSyncState, stampOf, type SyncStateKey, type SyncStateRow, type SyncStateWrite } from "./SyncState.js"

/** What a progress recompute is computed from: the stored checkpoint and recovery, and the stamp they carry. */
export interface SyncProgressCASCurrent {
  readonly checkpoint: JsonValue
  readonly recovery: JsonValue
  readonly version: number
  readonly incarnation: string | null
}

/** What a progress recompute returns: the new checkpoint and recovery, both JSON values (checked). */
export interface SyncProgressCASResult {
  readonly checkpoint: unknown
  readonly recovery: unknown
}

/**
 * Computes the new checkpoint and recovery from the current ones
 * (`undefined`: no sync state exists yet). It may be called more than once
 * per `updateSyncProgress`, once per attempt, each time with what is stored
 * then; only the result of the attempt that wins is written. It runs with no
 * lock held, and should be a quick, pure function of its argument.
 */
export type SyncProgressRecompute = (current: SyncProgressCASCurrent | undefined) => SyncProgressCASResult

/** A recompute result that passed its checks. */
export interface ValidProgress {
  readonly checkpoint: JsonValue
  readonly recovery: JsonValue
}

/** What a recompute is given for a row (or for no row). */
export const progressCurrent = (row: SyncStateRow | undefined): SyncProgressCASCurrent | undefined =>
  row === undefined
    ? undefined
    : { checkpoint: row.checkpoint, recovery: row.recovery, version: row.version, incarnation: row.incarnation }

/**
 * Decides a progress write from the row a recompute was computed from. No
 * row: insert a blank row carrying the progress at version 1 (version counts
 * the progress writes of an incarnation) under the new `incarnation`. A row:
 * bump its version and replace checkpoint and recovery, guarded by the
 * version AND incarnation that were read, so neither a concurrent progress
 * write nor a delete-and-recreate in between lets this result land. Status
 * fields and lease are never part of a progress write.
 */
export const decideSyncProgress = (
  key: SyncStateKey,
  row: SyncStateRow | undefined,
  progress: ValidProgress,
  incarnation: string
): SyncStateWrite =>
  row === undefined
    ? { kind: "insert", row: { ...blankSyncState(key, incarnation), ...progress, version: 1 } }
    : {
      kind: "progress",
      row: { ...row, checkpoint: progress.checkpoint, recovery: progress.recovery, version: row.version + 1 },
      expected: stampOf(row)
    }
