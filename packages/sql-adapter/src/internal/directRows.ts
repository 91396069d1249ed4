import type { ConnectorOperation, PairedWrite, ProjectionWatch, WatchWrite } from "@connector-store/core"
import type { DirectRowsOf } from "@connector-store/core/adapter"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql/Statement"
import { operationDecoder, operationStatements } from "../SqlOperationRepository.js"
import type { TableNames } from "../Tables.js"
import { watchDecoder, watchStatements } from "../SqlWatchRepository.js"
import type { RawRow } from "./columns.js"
import { type Compiled, firstOf } from "./directStatements.js"
import { pairedWriteOf } from "./pairedWrite.js"

/** What a driver answers: at once (`better-sqlite3`) or later (`pg`). */
type Answer<A> = A | Promise<A>

/**
 * How one driver runs a repository statement (`name` names it in a
 * failure): its rows, or whether a write without RETURNING touched any row.
 */
export interface StatementDriver {
  readonly rows: (name: string, statement: Statement<unknown> | Compiled) => Answer<ReadonlyArray<RawRow>>
  readonly touchedAny: (name: string, statement: Statement<unknown> | Compiled) => Answer<boolean>
  /** `answer` turned by `then`: at once for a driver that answers at once, once it has come otherwise. */
  readonly map: <A, B>(answer: Answer<A>, then: (answered: A) => B) => Answer<B>
}

const anyRow = (found: ReadonlyArray<RawRow>): boolean => found.length > 0

/**
 * The direct rows of the hot methods over `driver`: the repositories' own
 * statements (`watchStatements`, `operationStatements`), named and decoded
 * as the repositories name and decode them (a row that does not decode
 * throws `CorruptRow`). One table of rows for every
 * driver; the caller types the answers as its driver gives them (at once,
 * or later).
 */
export const directRows = (sql: SqlClient, tables: TableNames, driver: StatementDriver): DirectRowsOf<boolean> => {
  const watch = watchStatements(sql, tables)
  const operation = operationStatements(sql, tables)
  const { rows, touchedAny, map } = driver
  // A row that does not decode throws `CorruptRow`, which the runners fail the call with.
  const decodeWatch = watchDecoder(tables.projectionWatch)
  const decodeOperation = operationDecoder(tables.operation)
  const firstWatch = (found: ReadonlyArray<RawRow>): ProjectionWatch | undefined => firstOf(decodeWatch, found)
  const firstOperation = (found: ReadonlyArray<RawRow>): ConnectorOperation | undefined => firstOf(decodeOperation, found)
  const everyWatch = (found: ReadonlyArray<RawRow>): ReadonlyArray<ProjectionWatch> => found.map(decodeWatch)
  const watchWrite = (write: WatchWrite): Answer<boolean> =>
    write.kind === "insert"
      ? map(rows("watch.insert", watch.insert(write.row)), anyRow)
      : write.kind === "update"
      ? touchedAny("watch.update", watch.update(write.previous, write.next))
      : map(rows("watch.delete", watch.delete(write.identity, write.version)), anyRow)
  return {
    watches: {
      lockRead: (identity) => map(rows("watch.lockRead", watch.lockRead(identity)), firstWatch),
      update: (previous, next) => touchedAny("watch.update", watch.update(previous, next)),
      insert: (row) => map(rows("watch.insert", watch.insert(row)), anyRow),
      delete: (identity, expectedVersion) => map(rows("watch.delete", watch.delete(identity, expectedVersion)), anyRow),
      claimAttempt: (identity, input, now, writtenAt) =>
        touchedAny("watch.claimAttempt", watch.claimAttempt(identity, input, now, writtenAt)),
      deferAttempt: (identity, input, now) => touchedAny("watch.deferAttempt", watch.deferAttempt(identity, input, now)),
      // The slot's lock is held already (`lockReadWithSlot`), as on the port (see makeSqlWatchRepository).
      lockArmTargets: (slot, identity) => map(rows("watch.lockArmTargets", watch.lockArmTargets(slot, identity)), everyWatch)
    },
    operations: {
      get: (key) => map(rows("operation.get", operation.get(key)), firstOperation),
      lockRead: (key) => map(rows("operation.lockRead", operation.lockRead(key)), firstOperation),
      lockReadWithSlot: (key, documentID) =>
        map(rows("operation.lockReadWithSlot", operation.lockReadWithSlot(key, documentID)), firstOperation),
      insert: (row) => map(rows("operation.insert", operation.insert(row)), anyRow),
      update: (previous, next) => touchedAny("operation.update", operation.update(previous, next)),
      updateWithWatch: (previous, next, write) => {
        const paired = operation.updateWithWatch
        if (paired !== undefined) return map(rows("operation.updateWithWatch", paired(previous, next, write)), pairedWriteOf)
        // Two statements (SQLite answers at once): the operation's write, then, when it landed, the watch's.
        return map(touchedAny("operation.update", operation.update(previous, next)), (won) =>
          won ? map(watchWrite(write), (written): PairedWrite => written ? "written" : "watch-lost") : "operation-lost") as Answer<
            PairedWrite
          >
      },
      markSent: (key, token, maxAttempts, now) =>
        map(rows("operation.markSent", operation.markSent(key, token, maxAttempts, now)), firstOperation)
    }
  }
}
