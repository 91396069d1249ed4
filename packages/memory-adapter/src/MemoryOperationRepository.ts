import {
  collectableOperations,
  type ConnectorOperation,
  operationKey,
  OperationRepository,
  resumeReaches,
  trackedPage
} from "@connector-store/core"
import { Effect, Option } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const TABLE = "operation"

/** The operation table in memory. */
export const makeMemoryOperationRepository = (db: MemoryDatabase): OperationRepository["Type"] => {
  const rows = Effect.map(db.read<ConnectorOperation>(TABLE), (table) => Array.from(table.values()))
  const find = (predicate: (row: ConnectorOperation) => boolean) => Effect.map(rows, (all) => all.filter(predicate))
  const byKey = (key: string) =>
    Effect.map(db.read<ConnectorOperation>(TABLE), (table) => Option.fromNullable(table.get(key)))

  return {
    lockRead: (key) => byKey(operationKey(key)),
    get: (key) => byKey(operationKey(key)),
    getByNodeKey: (nodeKey) => Effect.map(rows, (all) => Option.fromNullable(all.find((row) => row.nodeKey === nodeKey))),
    insert: (row) =>
      db.write<ConnectorOperation, boolean>(TABLE, (table) => {
        const key = operationKey(row)
        if (table.has(key) || Array.from(table.values()).some((other) => other.nodeKey === row.nodeKey)) return false
        table.set(key, row)
        return true
      }),
    update: (next, expectedVersion) =>
      db.write<ConnectorOperation, boolean>(TABLE, (table) => {
        const key = operationKey(next)
        if (table.get(key)?.version !== expectedVersion) return false
        table.set(key, next)
        return true
      }),
    listDue: (now) =>
      find((row) => row.state === "attempted" && (row.nextAttemptAt === null || row.nextAttemptAt <= now)),
    lockDeferred: (scope) => find((row) => row.state === "attempted" && resumeReaches(scope, row)),
    collectFinished: (params, now) =>
      db.write<ConnectorOperation, number>(TABLE, (table) => {
        const doomed = collectableOperations(Array.from(table.values()), params, now)
        for (const key of doomed) table.delete(operationKey(key))
        return doomed.length
      }),
    listTracked: (query) => Effect.map(rows, (all) => trackedPage(all, query)),
    listByDocuments: (documentIDs) => {
      const wanted = new Set(documentIDs)
      return find((row) => row.documentID !== null && wanted.has(row.documentID))
    }
  }
}
