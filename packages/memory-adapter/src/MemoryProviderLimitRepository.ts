import {
  compareCodePoints,
  type ConnectorOperation,
  holdsLiveLease,
  limitsClaims,
  type ProviderLimit,
  ProviderLimitRepository,
  type ProviderScope,
  scopeKey,
  scopesOfAccount,
  storedAccountKey
} from "@connector-store/core"
import { Effect, Option } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const TABLE = "provider_limits"
const OPERATIONS = "operation"

/** Key order of the SQL table: connector, then account key (`''` for the connector's own row), in byte order. */
const byScope = (a: ProviderLimit, b: ProviderLimit): number =>
  compareCodePoints(a.scope.connectorName, b.scope.connectorName) ||
  compareCodePoints(storedAccountKey(a.scope), storedAccountKey(b.scope))

/** True when `row` falls under `scope`. */
const inScope = (row: ConnectorOperation, scope: ProviderScope): boolean =>
  row.connectorName === scope.connectorName && (scope.accountKey === undefined || row.accountKey === scope.accountKey)

/** The provider limits table in memory; live leases are counted over the operation table. */
export const makeMemoryProviderLimitRepository = (db: MemoryDatabase): ProviderLimitRepository["Type"] => {
  const byKey = (scope: ProviderScope) =>
    Effect.map(db.read<ProviderLimit>(TABLE), (table) => Option.fromNullable(table.get(scopeKey(scope))))
  const forAccount = (connectorName: string, accountKey: string) =>
    Effect.map(db.read<ProviderLimit>(TABLE), (table) =>
      scopesOfAccount(connectorName, accountKey).flatMap((scope) => {
        const row = table.get(scopeKey(scope))
        return row === undefined ? [] : [row]
      }).sort(byScope))

  return {
    forAccount,
    lockForAccount: forAccount,
    get: byKey,
    lockRead: byKey,
    list: () => Effect.map(db.read<ProviderLimit>(TABLE), (table) => Array.from(table.values()).sort(byScope)),
    insert: (row) =>
      db.write<ProviderLimit, boolean>(TABLE, (table) => {
        const key = scopeKey(row.scope)
        if (table.has(key)) return false
        table.set(key, row)
        return true
      }),
    update: (previous, next) =>
      db.write<ProviderLimit, boolean>(TABLE, (table) => {
        const key = scopeKey(next.scope)
        if (table.get(key)?.version !== previous.version) return false
        table.set(key, next)
        return true
      }),
    listActive: (now) =>
      Effect.map(db.read<ProviderLimit>(TABLE), (table) => Array.from(table.values()).filter((row) => limitsClaims(row, now)).sort(byScope)),
    lockScopes: (scopes) =>
      Effect.map(db.read<ProviderLimit>(TABLE), (table) =>
        scopes.flatMap((scope) => {
          const row = table.get(scopeKey(scope))
          return row === undefined ? [] : [row]
        }).sort(byScope)),
    liveLeases: (scopes, now) =>
      Effect.map(db.read<ConnectorOperation>(OPERATIONS), (table) =>
        scopes.map((scope) => {
          let live = 0
          let earliestExpiry: number | null = null
          for (const row of table.values()) {
            if (!inScope(row, scope) || !holdsLiveLease(row, now)) continue
            live++
            if (earliestExpiry === null || row.leaseExpiresAt! < earliestExpiry) earliestExpiry = row.leaseExpiresAt
          }
          return { live, earliestExpiry }
        }))
  }
}
