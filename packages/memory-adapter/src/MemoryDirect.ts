import {
  type ConnectorOperation,
  decideClaim,
  decideDefer,
  operationKey,
  type PairedWrite,
  type ProjectionWatch,
  watchKey
} from "@connector-store/core"
import { type DirectDatabaseApi } from "@connector-store/core/adapter"
import type { MemoryDatabase, Transaction } from "./MemoryDatabase.js"
import { operationChanges } from "./MemoryOperationRepository.js"
import { watchChanges } from "./MemoryWatchRepository.js"

type Index = Map<string, ReadonlyArray<string>>
type OperationRows = Map<string, ConnectorOperation>
type WatchRows = Map<string, ProjectionWatch>

/**
 * The memory database as a `DirectDatabase`: the repositories' own changes
 * (`watchChanges`, `operationChanges`) made synchronously. A transaction
 * begun here holds the database's lock as one begun in a fiber does; a row
 * call outside one is a transaction of its own, as on the ports.
 */
export const makeMemoryDirect = (db: MemoryDatabase, repositories: DirectDatabaseApi["repositories"]): DirectDatabaseApi => {
  /** The open direct transaction; the lock makes it the only one. */
  let open: Transaction | undefined

  /** `change` inside the open transaction, or in one of its own (the caller checked the lock is free). */
  const inTransaction = <A>(change: (tx: Transaction) => A): A => {
    if (open !== undefined) return change(open)
    const tx = db.beginNow()
    if (tx === undefined) throw new Error("a direct row call outside a transaction found the memory database locked")
    let done = false
    try {
      const result = change(tx)
      done = true
      return result
    } finally {
      db.endNow(tx, done)
    }
  }
  const watches = <A>(change: (table: Map<string, ProjectionWatch>, index: Index) => A): A =>
    inTransaction((tx) => db.writeNow(tx, watchChanges.table, watchChanges.index, change))
  const operations = <A>(change: (table: Map<string, ConnectorOperation>, index: Index) => A): A =>
    inTransaction((tx) => db.writeNow(tx, operationChanges.table, operationChanges.index, change))
  /**
   * One row's decision, read and written in one transaction; as on the
   * ports, nothing is written (not even an empty table) unless it changes the row.
   */
  const decided = <V>(table: string, key: string, decide: (row: V | undefined) => V | undefined): V | undefined =>
    inTransaction((tx) => {
      const next = decide(db.readNow<V>(tx, table).get(key))
      if (next !== undefined) db.writeNow<V, never, void>(tx, table, undefined, (rows) => void rows.set(key, next))
      return next
    })
  const watchRow = (key: string) => db.readNow<ProjectionWatch>(open, watchChanges.table).get(key)
  const operationRow = (key: string) => db.readNow<ConnectorOperation>(open, operationChanges.table).get(key)

  return {
    repositories,
    free: () => db.isFree(),
    begin: () => {
      const tx = db.beginNow()
      if (tx === undefined) return undefined
      open = tx
      const end = (commit: boolean) => {
        if (open === tx) open = undefined
        db.endNow(tx, commit)
      }
      return {
        commit: () => end(true),
        rollback: () => end(false),
        joined: (effect) => db.joined(tx, effect)
      }
    },
    watches: {
      lockRead: (identity) => watchRow(watchKey(identity)),
      update: (previous, next) => watches((table, index) => watchChanges.update(table, index, previous, next)),
      insert: (row) => watches((table, index) => watchChanges.insert(table, index, row)),
      delete: (identity, expectedVersion) => watches((table, index) => watchChanges.delete(table, index, identity, expectedVersion)),
      claimAttempt: (identity, input, now, writtenAt) =>
        decided(watchChanges.table, watchKey(identity), (row: ProjectionWatch | undefined) =>
          decideClaim(row, input, now, writtenAt).next) !== undefined,
      deferAttempt: (identity, input, now) =>
        decided(watchChanges.table, watchKey(identity), (row: ProjectionWatch | undefined) =>
          decideDefer(row, input, now).next) !== undefined,
      lockArmTargets: (slot, identity) =>
        watchChanges.armTargets(
          db.readNow<ProjectionWatch>(open, watchChanges.table),
          db.readNow<ReadonlyArray<string>>(open, watchChanges.index),
          slot,
          identity
        )
    },
    operations: {
      get: (key) => operationRow(operationKey(key)),
      lockRead: (key) => operationRow(operationKey(key)),
      // The direct transaction holds the database's one lock: the slot needs none of its own.
      lockReadWithSlot: (key) => operationRow(operationKey(key)),
      insert: (row) => operations((table, index) => operationChanges.insert(table, index, row)),
      update: (previous, next) => operations((table, index) => operationChanges.update(table, index, previous, next)),
      // The two writes in turn, in the open transaction (or one of their own).
      updateWithWatch: (previous, next, watch) =>
        inTransaction((tx): PairedWrite => {
          const operationWon = db.writeNow(tx, operationChanges.table, operationChanges.index, (table: OperationRows, index: Index) =>
            operationChanges.update(table, index, previous, next))
          if (!operationWon) return "operation-lost"
          const watchWon = db.writeNow(tx, watchChanges.table, watchChanges.index, (table: WatchRows, index: Index) =>
            watchChanges.write(table, index, watch))
          return watchWon ? "written" : "watch-lost"
        }),
      markSent: (key, token, maxAttempts, now) =>
        decided(operationChanges.table, operationKey(key), (row: ConnectorOperation | undefined) =>
          operationChanges.marked(row, token, maxAttempts, now))
    }
  }
}
