import {
  type ProviderLimit,
  ProviderLimitRepository,
  type ProviderScope,
  type ScopeLoad,
  scopeKey,
  scopeOfStored,
  storedAccountKey
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { epoch, epochOrNull, type RawRow, rowDecoder, text } from "./internal/columns.js"
import { byteOrdered } from "./internal/collation.js"
import { rawThen, returnedAny, rowReaders, statementThen } from "./internal/queries.js"
import { affectedRows } from "./internal/versionedUpdate.js"
import { forUpdate } from "./SqlTransactor.js"
import type { TableNames } from "./Tables.js"

/** A limits row as read from the provider limits table (account key `''`: the whole connector). */
export const decodeProviderLimit = (row: RawRow): ProviderLimit => ({
  scope: scopeOfStored(text(row["connector_name"]), text(row["account_key"])),
  maxInFlight: epochOrNull(row["max_in_flight"]),
  pausedUntil: epochOrNull(row["paused_until"]),
  pauseStatus: epochOrNull(row["pause_status"]),
  version: epoch(row["version"]),
  updatedAt: epoch(row["updated_at"])
})

/**
 * The provider limits table on a SQL client, and the live-lease counts of
 * the operation table, read on its index of attempted, leased rows by
 * (connector_name, account_key, lease_expires_at): an account's count is
 * one index range of its live leases; a connector's reads the connector's
 * leased rows (live, or lapsed and not yet taken over), never the unleased
 * backlog.
 */
export const makeSqlProviderLimitRepository = (sql: SqlClient, tables: TableNames): ProviderLimitRepository["Type"] => {
  const table = sql(tables.providerLimits)
  const operations = sql(tables.operation)
  const { healthy, many, one } = rowReaders(rowDecoder(tables.providerLimits, ["connector_name", "account_key"], decodeProviderLimit))
  const byScope = (scope: ProviderScope) => sql`connector_name = ${scope.connectorName} AND account_key = ${storedAccountKey(scope)}`
  const keyOrder = sql`ORDER BY ${byteOrdered(sql, "connector_name")}, ${byteOrdered(sql, "account_key")}`
  // Any number of (connector, account key) pairs in one parameter.
  const pairs = (list: ReadonlyArray<readonly [string, string]>) =>
    sql.onDialectOrElse({
      pg: () => sql`SELECT e->>0, e->>1 FROM jsonb_array_elements(${JSON.stringify(list)}::jsonb) AS e`,
      orElse: () => sql`SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(${JSON.stringify(list)})`
    })
  const ofAccount = (connectorName: string, accountKey: string) =>
    sql`connector_name = ${connectorName} AND account_key IN (${accountKey}, '')`

  return {
    forAccount: (connectorName, accountKey) =>
      many("providerLimits.forAccount", sql<RawRow>`SELECT * FROM ${table} WHERE ${ofAccount(connectorName, accountKey)} ${keyOrder}`),
    lockForAccount: (connectorName, accountKey) =>
      many(
        "providerLimits.lockForAccount",
        sql<RawRow>`SELECT * FROM ${table} WHERE ${ofAccount(connectorName, accountKey)} ${keyOrder} ${forUpdate(sql)}`
      ),
    get: (scope) => one("providerLimits.get", sql<RawRow>`SELECT * FROM ${table} WHERE ${byScope(scope)}`),
    lockRead: (scope) => one("providerLimits.lockRead", sql<RawRow>`SELECT * FROM ${table} WHERE ${byScope(scope)} ${forUpdate(sql)}`),
    list: () => healthy("providerLimits.list", sql<RawRow>`SELECT * FROM ${table} ${keyOrder}`),
    insert: (row) =>
      returnedAny(
        "providerLimits.insert",
        sql<RawRow>`INSERT INTO ${table} (connector_name, account_key, max_in_flight, paused_until, pause_status, version, updated_at)
          VALUES (${row.scope.connectorName}, ${storedAccountKey(row.scope)}, ${row.maxInFlight}, ${row.pausedUntil}, ${row.pauseStatus},
            ${row.version}, ${row.updatedAt})
          ON CONFLICT DO NOTHING RETURNING version`
      ),
    update: (previous, next) =>
      rawThen(
        "providerLimits.update",
        sql`UPDATE ${table} SET max_in_flight = ${next.maxInFlight}, paused_until = ${next.pausedUntil},
            pause_status = ${next.pauseStatus}, version = ${next.version}, updated_at = ${next.updatedAt}
          WHERE ${byScope(previous.scope)} AND version = ${previous.version}`,
        (raw) => affectedRows(raw) > 0
      ),
    listActive: (now) =>
      many(
        "providerLimits.listActive",
        sql<RawRow>`SELECT * FROM ${table} WHERE paused_until > ${now} OR max_in_flight IS NOT NULL ${keyOrder}`
      ),
    lockScopes: (scopes) =>
      scopes.length === 0 ? Effect.succeed([]) : many(
        "providerLimits.lockScopes",
        sql<RawRow>`SELECT * FROM ${table} WHERE (connector_name, account_key) IN (${pairs(scopes.map((scope) => [scope.connectorName, storedAccountKey(scope)]))})
          ${keyOrder} ${forUpdate(sql)}`
      ),
    liveLeases: (scopes, now) => {
      const accounts = scopes.flatMap((scope) => scope.accountKey === undefined ? [] : [[scope.connectorName, scope.accountKey] as const])
      const connectors = scopes.flatMap((scope) => scope.accountKey === undefined ? [scope.connectorName] : [])
      const live = sql`state = 'attempted' AND lease_expires_at > ${now}`
      const loads = (rows: ReadonlyArray<RawRow>, key: (row: RawRow) => string) =>
        new Map(rows.map((row) => [key(row), { live: epoch(row["live"]), earliestExpiry: epochOrNull(row["earliest"]) }]))
      const byAccount = accounts.length === 0 ? Effect.succeed(new Map<string, ScopeLoad>()) : statementThen(
        "providerLimits.liveLeases",
        sql<RawRow>`SELECT connector_name, account_key, count(*) AS live, min(lease_expires_at) AS earliest FROM ${operations}
          WHERE ${live} AND (connector_name, account_key) IN (${pairs(accounts)}) GROUP BY connector_name, account_key`,
        (rows) => loads(rows, (row) => JSON.stringify([row["connector_name"], row["account_key"]]))
      )
      const byConnector = connectors.length === 0 ? Effect.succeed(new Map<string, ScopeLoad>()) : statementThen(
        "providerLimits.liveLeases",
        sql<RawRow>`SELECT connector_name, count(*) AS live, min(lease_expires_at) AS earliest FROM ${operations}
          WHERE ${live} AND connector_name IN ${sql.in(connectors)} GROUP BY connector_name`,
        (rows) => loads(rows, (row) => JSON.stringify([row["connector_name"], ""]))
      )
      return Effect.zipWith(byAccount, byConnector, (ofAccounts, ofConnectors) =>
        scopes.map((scope) =>
          (scope.accountKey === undefined ? ofConnectors : ofAccounts).get(scopeKey(scope)) ?? { live: 0, earliestExpiry: null }))
    }
  }
}
