import type { JsonValue } from "./json.js"
import { blankSyncState, stampOf, type SyncStateKey, type SyncStateRow, type SyncStateWrite, type SyncStatus } from "./SyncState.js"

/** What `setSyncState` writes; `error` omitted or null clears one, an omitted checkpoint or recovery keeps the stored one. */
export interface SyncStateInput {
  /** The status to report: `idle`, `syncing` or `error`. */
  readonly status: SyncStatus
  /** Caller-defined text (typically when the last sync finished), stored as given. */
  readonly lastSyncedAt: string
  /** How many entities the runner synced: an integer from 0 to 2^31 - 1. */
  readonly entityCount: number
  /** The error text to store; omitted or `null` clears a previous one. */
  readonly error?: string | null | undefined
  /** A JSON value (checked at the boundary). */
  readonly checkpoint?: unknown
  /** A JSON value (checked at the boundary). */
  readonly recovery?: unknown
}

const pick = (given: unknown, stored: JsonValue): JsonValue => given === undefined ? stored : given as JsonValue

/**
 * Decides a `setSyncState` (the input valid already): no row inserts one at version 0 under `incarnation`; a row gets the
 * status fields, version, incarnation and lease kept, guarded by the lease with `fence`.
 */
export const decideSetSyncState = (
  key: SyncStateKey,
  row: SyncStateRow | undefined,
  input: SyncStateInput,
  incarnation: string,
  fence?: string
): SyncStateWrite => {
  const base = row ?? blankSyncState(key, incarnation)
  const next: SyncStateRow = {
    ...base,
    status: input.status,
    lastSyncedAt: input.lastSyncedAt,
    entityCount: input.entityCount,
    error: input.error ?? null,
    checkpoint: pick(input.checkpoint, base.checkpoint),
    recovery: pick(input.recovery, base.recovery)
  }
  return row === undefined ? { kind: "insert", row: next } : { kind: "status", row: next, expected: stampOf(row, fence) }
}
