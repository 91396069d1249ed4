import {
  compareCodePoints,
  type SyncLeaseStamp,
  type SyncStateRow,
  type SyncStateStamp,
  SyncStateRepository,
  syncStateMapKey
} from "@connector-store/core"
import { decodeJsonColumn, encodeJsonColumn } from "@connector-store/core/adapter"
import { Effect, Option } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const TABLE = "sync_state"

/**
 * A row as kept in memory: the JSON columns as their stored text, as in SQL,
 * so nothing a caller still holds aliases stored state and the exact
 * encoding is the same on every adapter.
 */
interface StoredSyncState extends Omit<SyncStateRow, "checkpoint" | "recovery"> {
  readonly checkpoint: string | null
  readonly recovery: string | null
}

const store = (row: SyncStateRow): StoredSyncState => ({
  ...row,
  checkpoint: encodeJsonColumn(row.checkpoint),
  recovery: encodeJsonColumn(row.recovery)
})

const load = (stored: StoredSyncState): SyncStateRow => ({
  ...stored,
  checkpoint: decodeJsonColumn(stored.checkpoint),
  recovery: decodeJsonColumn(stored.recovery)
})

const hasStamp = (stored: StoredSyncState | undefined, expected: SyncStateStamp): stored is StoredSyncState =>
  stored !== undefined && stored.version === expected.version && stored.incarnation === expected.incarnation &&
  (expected.leaseToken === undefined || stored.leaseToken === expected.leaseToken)

const hasLeaseStamp = (stored: StoredSyncState | undefined, expected: SyncLeaseStamp): stored is StoredSyncState =>
  stored !== undefined && stored.incarnation === expected.incarnation && stored.leaseToken === expected.leaseToken &&
  stored.leaseExpiresAt === expected.leaseExpiresAt

/** The sync-state table in memory. */
export const makeMemorySyncStateRepository = (db: MemoryDatabase): SyncStateRepository["Type"] => {
  const byKey = (key: string) =>
    Effect.map(db.read<StoredSyncState>(TABLE), (table) => Option.map(Option.fromNullable(table.get(key)), load))
  const patched = (next: SyncStateRow, holds: (stored: StoredSyncState | undefined) => stored is StoredSyncState, patch: (stored: StoredSyncState) => StoredSyncState) =>
    db.write<StoredSyncState, Option.Option<SyncStateRow>>(TABLE, (table) => {
      const key = syncStateMapKey(next)
      const stored = table.get(key)
      if (!holds(stored)) return Option.none()
      const written = patch(stored)
      table.set(key, written)
      return Option.some(load(written))
    })
  const guarded = (...args: Parameters<typeof patched>) => Effect.map(patched(...args), Option.isSome)

  return {
    lockRead: (key) => byKey(syncStateMapKey(key)),
    get: (key) => byKey(syncStateMapKey(key)),
    insert: (row) =>
      db.write<StoredSyncState, boolean>(TABLE, (table) => {
        const key = syncStateMapKey(row)
        if (table.has(key)) return false
        table.set(key, store(row))
        return true
      }),
    updateProgress: (next, expected, reported) => {
      const { checkpoint, recovery, version } = store(next)
      const report = Object.fromEntries(reported.map((field) => [field, next[field]]))
      return patched(next, (s): s is StoredSyncState => hasStamp(s, expected), (s) => ({ ...s, ...report, checkpoint, recovery, version }))
    },
    updateStatus: (next, expected) => {
      const { status, lastSyncedAt, entityCount, error, checkpoint, recovery } = store(next)
      return guarded(
        next,
        (s): s is StoredSyncState => hasStamp(s, expected),
        (s) => ({ ...s, status, lastSyncedAt, entityCount, error, checkpoint, recovery })
      )
    },
    updateLease: (next, expected) =>
      guarded(
        next,
        (s): s is StoredSyncState => hasLeaseStamp(s, expected),
        (s) => ({ ...s, leaseToken: next.leaseToken, leaseExpiresAt: next.leaseExpiresAt })
      ),
    delete: (key) => db.write<StoredSyncState, boolean>(TABLE, (table) => table.delete(syncStateMapKey(key))),
    listByConnector: (connectorName) =>
      Effect.map(db.read<StoredSyncState>(TABLE), (table) =>
        Array.from(table.values())
          .filter((row) => row.connectorName === connectorName)
          .sort((a, b) => compareCodePoints(a.ownerDID, b.ownerDID))
          .map(load))
  }
}
