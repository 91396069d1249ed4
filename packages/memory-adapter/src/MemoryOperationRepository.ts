import {
  advanceFairPosition,
  collectableOperations,
  type ConnectorOperation,
  decideMarkSent,
  DEFAULT_OPERATION_POLICY,
  type DueOperationPosition,
  dueOperationPositionOf,
  dueOperationsPage,
  fairOperationTable,
  fairPage,
  type FairPosition,
  operationKey,
  OperationRepository,
  type PairedWrite,
  type ProjectionWatch,
  type ProviderScope,
  scopeKey,
  scopesOfAccount,
  resumeReaches,
  trackedPage
} from "@connector-store/core"
import { Effect, Option } from "effect"
import { indexed, indexTable, type MemoryDatabase, reindex } from "./MemoryDatabase.js"
import { watchChanges } from "./MemoryWatchRepository.js"

const TABLE = "operation"
const BY_NODE_KEY = indexTable("operation.node_key")

type Rows = Map<string, ConnectorOperation>
type ByNodeKey = Map<string, ReadonlyArray<string>>

/**
 * The operation table's changes over its rows and node-key index, shared by
 * the repository and `MemoryDirect`. Each answers what the port method of
 * the same name answers.
 */
export const operationChanges = {
  table: TABLE,
  index: BY_NODE_KEY,
  insert: (table: Rows, index: ByNodeKey, row: ConnectorOperation): boolean => {
    const key = operationKey(row)
    if (table.has(key) || indexed(index, row.nodeKey).length > 0) return false
    table.set(key, row)
    reindex(index, key, undefined, row.nodeKey)
    return true
  },
  update: (table: Rows, index: ByNodeKey, previous: ConnectorOperation, next: ConnectorOperation): boolean => {
    const key = operationKey(next)
    const stored = table.get(key)
    if (stored?.version !== previous.version) return false
    table.set(key, next)
    reindex(index, key, stored.nodeKey, next.nodeKey)
    return true
  },
  /** The row `markSent` writes: the pure decision's when it is the common "sent", else undefined (nothing written). */
  marked: (row: ConnectorOperation | undefined, token: string, maxAttempts: number, now: number): ConnectorOperation | undefined => {
    const decision = decideMarkSent(row, token, { ...DEFAULT_OPERATION_POLICY, maxAttempts }, now)
    return decision.result.outcome === "sent" ? decision.next : undefined
  }
}

/** The operation table in memory. */
export const makeMemoryOperationRepository = (db: MemoryDatabase): OperationRepository["Type"] => {
  const rows = Effect.map(db.read<ConnectorOperation>(TABLE), (table) => Array.from(table.values()))
  const find = (predicate: (row: ConnectorOperation) => boolean) => Effect.map(rows, (all) => all.filter(predicate))
  const byKey = (key: string) =>
    Effect.map(db.read<ConnectorOperation>(TABLE), (table) => Option.fromNullable(table.get(key)))

  const update = (previous: ConnectorOperation, next: ConnectorOperation) =>
    db.writeWithIndex<ConnectorOperation, ReadonlyArray<string>, boolean>(TABLE, BY_NODE_KEY, (table, index) =>
      operationChanges.update(table, index, previous, next))
  const duePage = (now: number, after: DueOperationPosition | undefined, limit: number) =>
    Effect.map(db.read<ConnectorOperation>(TABLE), (table) => {
      const rows = dueOperationsPage(table.values(), now, after, limit)
      const last = rows.at(-1)
      return { rows, read: rows.length, last: last === undefined ? undefined : dueOperationPositionOf(last) }
    })
  // The batch's owner-fair page, as the reference reads it.
  const fairDuePage = (now: number, at: FairPosition<DueOperationPosition>, limit: number, excluding?: ReadonlyArray<ProviderScope>) =>
    Effect.map(db.read<ConnectorOperation>(TABLE), (table) => {
      const passed = new Set((excluding ?? []).map(scopeKey))
      const page = fairPage(fairOperationTable(table.values(), now, (row) =>
        !scopesOfAccount(row.connectorName, row.accountKey).some((scope) => passed.has(scopeKey(scope)))), at, limit)
      return {
        rows: page.rows,
        read: page.rows.length,
        last: advanceFairPosition(at, page.rows.map((row) => [row.ownerDID, dueOperationPositionOf(row)] as const), page.done),
        scanned: page.scanned,
        more: page.more
      }
    })

  return {
    lockRead: (key) => byKey(operationKey(key)),
    // Memory transactions run one at a time: the slot needs no lock of its own.
    lockReadWithSlot: (key) => byKey(operationKey(key)),
    get: (key) => byKey(operationKey(key)),
    // By node key through an index, so the uniqueness check costs one lookup, not the table.
    getByNodeKey: (nodeKey) =>
      Effect.zipWith(db.read<ConnectorOperation>(TABLE), db.read<ReadonlyArray<string>>(BY_NODE_KEY), (table, index) =>
        Option.fromNullable(indexed(index, nodeKey).map((key) => table.get(key)).find((row) => row !== undefined))),
    insert: (row) =>
      db.writeWithIndex<ConnectorOperation, ReadonlyArray<string>, boolean>(TABLE, BY_NODE_KEY, (table, index) =>
        operationChanges.insert(table, index, row)),
    update,
    // The two writes in turn, in the caller's transaction (or one of their own).
    updateWithWatch: (previous, next, watch) =>
      db.withTransaction(Effect.flatMap(
        update(previous, next),
        (won): Effect.Effect<PairedWrite> =>
          won
            ? db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, PairedWrite>(
              watchChanges.table,
              watchChanges.index,
              (table, index) => watchChanges.write(table, index, watch) ? "written" : "watch-lost"
            )
            : Effect.succeed("operation-lost")
      )),
    // The pure decision itself, read and written in one memory transaction.
    markSent: (key, token, maxAttempts, now) =>
      db.withTransaction(Effect.flatMap(byKey(operationKey(key)), (row) => {
        const next = operationChanges.marked(Option.getOrUndefined(row), token, maxAttempts, now)
        // Nothing is written (not even an empty table) unless the decision writes.
        return next === undefined ? Effect.succeed(Option.none()) : db.write<ConnectorOperation, Option.Option<ConnectorOperation>>(TABLE, (table) => {
          table.set(operationKey(key), next)
          return Option.some(next)
        })
      })),
    listDue: (now) =>
      find((row) => row.state === "attempted" && (row.nextAttemptAt === null || row.nextAttemptAt <= now)),
    listDuePage: (now, after, limit) => duePage(now, after, limit),
    // One transaction at a time holds the database: the page is already the caller's alone.
    lockDuePage: fairDuePage,
    updateAll: (changes) => Effect.forEach(changes, ([previous, next]) => update(previous, next)),
    lockDeferred: (scope) => find((row) => row.state === "attempted" && resumeReaches(scope, row)),
    collectFinished: (params, now) =>
      db.writeWithIndex<ConnectorOperation, ReadonlyArray<string>, number>(TABLE, BY_NODE_KEY, (table, index) => {
        const doomed = collectableOperations(Array.from(table.values()), params, now)
        for (const key of doomed) {
          reindex(index, operationKey(key), table.get(operationKey(key))?.nodeKey, undefined)
          table.delete(operationKey(key))
        }
        return doomed.length
      }),
    listTracked: (query) => Effect.map(rows, (all) => trackedPage(all, query)),
    listByDocuments: (documentIDs) => {
      const wanted = new Set(documentIDs)
      return find((row) => row.documentID !== null && wanted.has(row.documentID))
    }
  }
}
