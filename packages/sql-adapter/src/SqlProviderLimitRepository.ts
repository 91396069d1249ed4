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
import { columnsOf, rowSchema } from "./internal/rows.js"
import type { TableNames } from "./Tables.js"

/** A limits row as stored: the scope as its two key columns (account key `''`: the whole connector). */
interface StoredProviderLimit extends Omit<ProviderLimit, "scope"> {
  readonly connectorName: string
  readonly accountKey: string
}

const limitColumn = columnsOf<StoredProviderLimit>()

/** The provider limits table's row. */
const PROVIDER_LIMIT_SCHEMA = rowSchema<StoredProviderLimit>([
  limitColumn("connector_name", "connectorName", text, "text"),
  limitColumn("account_key", "accountKey", text, "text"),
  limitColumn("max_in_flight", "maxInFlight", epochOrNull, "integer"),
  limitColumn("paused_until", "pausedUntil", epochOrNull, "bigint"),
  limitColumn("pause_status", "pauseStatus", epochOrNull, "integer"),
  limitColumn("version", "version", epoch, "integer"),
  limitColumn("updated_at", "updatedAt", epoch, "bigint")
], ["connector_name", "account_key"])

/** A limits row as read from the provider limits table. */
export const decodeProviderLimit = (row: RawRow): ProviderLimit => {
  const { accountKey, connectorName, ...limits } = PROVIDER_LIMIT_SCHEMA.decode(row)
  return { scope: scopeOfStored(connectorName, accountKey), ...limits }
}

/** The stored form of `limit`. */
const storedOf = ({ scope, ...limits }: ProviderLimit): StoredProviderLimit => ({
  connectorName: scope.connectorName,
  accountKey: storedAccountKey(scope),
  ...limits
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
  const { healthy, many, one } = rowReaders(rowDecoder(tables.providerLimits, PROVIDER_LIMIT_SCHEMA.key, decodeProviderLimit))
  const columns = sql.literal(PROVIDER_LIMIT_SCHEMA.list)
  const allColumns = PROVIDER_LIMIT_SCHEMA.columns.map((column) => column.name)
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
      many("providerLimits.forAccount", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${ofAccount(connectorName, accountKey)} ${keyOrder}`),
    lockForAccount: (connectorName, accountKey) =>
      many(
        "providerLimits.lockForAccount",
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${ofAccount(connectorName, accountKey)} ${keyOrder} ${forUpdate(sql)}`
      ),
    get: (scope) => one("providerLimits.get", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byScope(scope)}`),
    lockRead: (scope) => one("providerLimits.lockRead", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byScope(scope)} ${forUpdate(sql)}`),
    list: () => healthy("providerLimits.list", sql<RawRow>`SELECT ${columns} FROM ${table} ${keyOrder}`),
    insert: (row) =>
      returnedAny(
        "providerLimits.insert",
        sql<RawRow>`INSERT INTO ${table} ${sql.insert(PROVIDER_LIMIT_SCHEMA.record(storedOf(row), allColumns))}
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
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE paused_until > ${now} OR max_in_flight IS NOT NULL ${keyOrder}`
      ),
    lockScopes: (scopes) =>
      scopes.length === 0 ? Effect.succeed([]) : many(
        "providerLimits.lockScopes",
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE (connector_name, account_key) IN (${pairs(scopes.map((scope) => [scope.connectorName, storedAccountKey(scope)]))})
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
