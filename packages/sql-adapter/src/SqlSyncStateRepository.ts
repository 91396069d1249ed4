import {
  type SyncStateKey,
  type SyncStateStamp,
  SyncStateRepository,
  type SyncStateRow,
  type SyncStatus
} from "@connector-store/core"
import { decodeJsonColumn, encodeJsonColumn } from "@connector-store/core/adapter"
import type { SqlClient } from "@effect/sql/SqlClient"
import { epoch, epochOrNull, type RawRow, rowDecoder, text, textOrNull } from "./internal/columns.js"
import { forUpdate } from "./SqlTransactor.js"
import { byteOrdered } from "./internal/collation.js"
import { returnedAny, rowReaders } from "./internal/queries.js"
import type { TableNames } from "./Tables.js"

/** A sync-state row as read from the sync-state table (the seed's rows too: no incarnation, no lease token). */
export const decodeSyncState = (row: RawRow): SyncStateRow => ({
  connectorName: text(row["connector_name"]),
  ownerDID: text(row["owner_did"]),
  checkpoint: decodeJsonColumn(textOrNull(row["checkpoint"])),
  lastSyncedAt: text(row["last_synced_at"]),
  entityCount: epoch(row["entity_count"]),
  status: text(row["status"]) as SyncStatus,
  error: textOrNull(row["error"]),
  leaseToken: textOrNull(row["lease_token"]),
  leaseExpiresAt: epochOrNull(row["lease_expires_at"]),
  recovery: decodeJsonColumn(textOrNull(row["recovery"])),
  version: epoch(row["version"]),
  incarnation: textOrNull(row["incarnation"])
})

/** `decodeSyncState` for the rows of `table`: a row that does not decode throws `CorruptRow` keyed `connectorName/ownerDID`. */
export const syncStateDecoder = (table: string) => rowDecoder(table, ["connector_name", "owner_did"], decodeSyncState)

/**
 * The sync-state table on a SQL client. Every write is one statement whose
 * guard is in its WHERE clause; `IS NOT DISTINCT FROM` matches the null
 * incarnation and lease columns of rows the seed's store wrote.
 */
export const makeSqlSyncStateRepository = (sql: SqlClient, tables: TableNames): SyncStateRepository["Type"] => {
  const table = sql(tables.syncState)
  const byKey = (key: SyncStateKey) => sql`connector_name = ${key.connectorName} AND owner_did = ${key.ownerDID}`
  const { healthy, one } = rowReaders(syncStateDecoder(tables.syncState))
  const changed = returnedAny
  const empty = sql.literal("")
  /** The guard of a versioned write: key, version, incarnation and, for a fenced write, the lease token. */
  const stamped = (next: SyncStateKey, expected: SyncStateStamp) =>
    sql`${byKey(next)} AND version = ${expected.version}
      AND incarnation IS NOT DISTINCT FROM ${expected.incarnation}
      ${expected.leaseToken === undefined ? empty : sql`AND lease_token = ${expected.leaseToken}`}`

  return {
    // On SQLite the store's transactions take the write lock first (see makeSqlTransactor).
    lockRead: (key) => one("syncState.lockRead", sql<RawRow>`SELECT * FROM ${table} WHERE ${byKey(key)} ${forUpdate(sql)}`),
    get: (key) => one("syncState.get", sql<RawRow>`SELECT * FROM ${table} WHERE ${byKey(key)}`),
    insert: (row) =>
      changed(
        "syncState.insert",
        sql<RawRow>`INSERT INTO ${table} (
          connector_name, owner_did, checkpoint, last_synced_at, entity_count, status, error,
          lease_token, lease_expires_at, recovery, version, incarnation
        ) VALUES (
          ${row.connectorName}, ${row.ownerDID}, ${encodeJsonColumn(row.checkpoint)}, ${row.lastSyncedAt},
          ${row.entityCount}, ${row.status}, ${row.error}, ${row.leaseToken}, ${row.leaseExpiresAt},
          ${encodeJsonColumn(row.recovery)}, ${row.version}, ${row.incarnation}
        ) ON CONFLICT DO NOTHING RETURNING version`
      ),
    // RETURNING *: the answer is the row as this statement left it, columns
    // another writer changed since the read included.
    updateProgress: (next, expected, reported) =>
      one(
        "syncState.updateProgress",
        sql<RawRow>`UPDATE ${table} SET
          checkpoint = ${encodeJsonColumn(next.checkpoint)},
          recovery = ${encodeJsonColumn(next.recovery)},
          version = ${next.version}
          ${reported.includes("lastSyncedAt") ? sql`, last_synced_at = ${next.lastSyncedAt}` : empty}
          ${reported.includes("entityCount") ? sql`, entity_count = ${next.entityCount}` : empty}
          ${reported.includes("error") ? sql`, error = ${next.error}` : empty}
        WHERE ${stamped(next, expected)}
        RETURNING *`
      ),
    updateStatus: (next, expected) =>
      changed(
        "syncState.updateStatus",
        sql<RawRow>`UPDATE ${table} SET
          status = ${next.status},
          last_synced_at = ${next.lastSyncedAt},
          entity_count = ${next.entityCount},
          error = ${next.error},
          checkpoint = ${encodeJsonColumn(next.checkpoint)},
          recovery = ${encodeJsonColumn(next.recovery)}
        WHERE ${stamped(next, expected)}
        RETURNING version`
      ),
    updateLease: (next, expected) =>
      changed(
        "syncState.updateLease",
        sql<RawRow>`UPDATE ${table} SET
          lease_token = ${next.leaseToken},
          lease_expires_at = ${next.leaseExpiresAt}
        WHERE ${byKey(next)}
          AND incarnation IS NOT DISTINCT FROM ${expected.incarnation}
          AND lease_token IS NOT DISTINCT FROM ${expected.leaseToken}
          AND lease_expires_at IS NOT DISTINCT FROM ${expected.leaseExpiresAt}
        RETURNING version`
      ),
    delete: (key) => changed("syncState.delete", sql<RawRow>`DELETE FROM ${table} WHERE ${byKey(key)} RETURNING version`),
    listByConnector: (connectorName) =>
      healthy(
        "syncState.listByConnector",
        sql<RawRow>`SELECT * FROM ${table} WHERE connector_name = ${connectorName} ORDER BY ${byteOrdered(sql, "owner_did")}`
      )
  }
}
