import {
  type SyncStateKey,
  type SyncStateStamp,
  SyncStateRepository,
  type SyncStateRow,
  type SyncStatus
} from "@connector-store/core"
import { decodeJsonColumn, encodeJsonColumn } from "@connector-store/core/adapter"
import type { SqlClient } from "@effect/sql/SqlClient"
import { epoch, epochOrNull, type RawRow, text, textOrNull } from "./internal/columns.js"
import { columnsOf, rowSchema } from "./internal/rows.js"
import { forUpdate } from "./SqlTransactor.js"
import { byteOrdered } from "./internal/collation.js"
import { returnedAny, rowReaders } from "./internal/queries.js"
import type { TableNames } from "./Tables.js"

const syncStateColumn = columnsOf<SyncStateRow>()

/** A JSON column as the seed's store wrote it (text, or null). */
const jsonColumn = (value: unknown) => decodeJsonColumn(textOrNull(value))

/** The sync-state table's row (the seed's rows too: no incarnation, no lease token). */
export const SYNC_STATE_SCHEMA = rowSchema<SyncStateRow>([
  syncStateColumn("connector_name", "connectorName", text, "text"),
  syncStateColumn("owner_did", "ownerDID", text, "text"),
  syncStateColumn("checkpoint", "checkpoint", jsonColumn, "text", encodeJsonColumn),
  syncStateColumn("last_synced_at", "lastSyncedAt", text, "text"),
  syncStateColumn("entity_count", "entityCount", epoch, "integer"),
  syncStateColumn("status", "status", (value) => text(value) as SyncStatus, "text"),
  syncStateColumn("error", "error", textOrNull, "text"),
  syncStateColumn("lease_token", "leaseToken", textOrNull, "text"),
  syncStateColumn("lease_expires_at", "leaseExpiresAt", epochOrNull, "bigint"),
  syncStateColumn("recovery", "recovery", jsonColumn, "text", encodeJsonColumn),
  syncStateColumn("version", "version", epoch, "integer"),
  syncStateColumn("incarnation", "incarnation", textOrNull, "text")
], ["connector_name", "owner_did"])

/** A sync-state row as read from the sync-state table. */
export const decodeSyncState = SYNC_STATE_SCHEMA.decode

/** `decodeSyncState` for the rows of `table`: a row that does not decode throws `CorruptRow` keyed `connectorName/ownerDID`. */
export const syncStateDecoder = SYNC_STATE_SCHEMA.decoder

/**
 * The sync-state table on a SQL client. Every write is one statement whose
 * guard is in its WHERE clause; `IS NOT DISTINCT FROM` matches the null
 * incarnation and lease columns of rows the seed's store wrote.
 */
export const makeSqlSyncStateRepository = (sql: SqlClient, tables: TableNames): SyncStateRepository["Type"] => {
  const table = sql(tables.syncState)
  const columns = sql.literal(SYNC_STATE_SCHEMA.list)
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
    lockRead: (key) => one("syncState.lockRead", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byKey(key)} ${forUpdate(sql)}`),
    get: (key) => one("syncState.get", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byKey(key)}`),
    insert: (row) =>
      changed(
        "syncState.insert",
        sql<RawRow>`INSERT INTO ${table} ${sql.insert(SYNC_STATE_SCHEMA.record(row, SYNC_STATE_SCHEMA.columns.map((column) => column.name)))}
          ON CONFLICT DO NOTHING RETURNING version`
      ),
    // RETURNING the row: the answer is the row as this statement left it, columns
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
        RETURNING ${columns}`
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
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE connector_name = ${connectorName} ORDER BY ${byteOrdered(sql, "owner_did")}`
      )
  }
}
