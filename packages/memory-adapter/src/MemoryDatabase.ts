import { Effect, FiberRef, Option } from "effect"
import { DraftTable } from "./DraftTable.js"

type Table = Map<string, unknown>

/** The name of a secondary index table: never a store table, never in a snapshot. */
export const indexTable = (name: string) => `index:${name}`
const isIndexTable = (name: string) => name.startsWith("index:")

/** The keys `index` files under `value`. */
export const indexed = (index: ReadonlyMap<string, ReadonlyArray<string>>, value: string): ReadonlyArray<string> =>
  index.get(value) ?? []

/** Files `key` under `after` instead of `before` (either absent); the lists are replaced, never changed in place. */
export const reindex = (
  index: Map<string, ReadonlyArray<string>>,
  key: string,
  before: string | undefined,
  after: string | undefined
): void => {
  if (before === after) return
  if (before !== undefined) {
    const rest = indexed(index, before).filter((k) => k !== key)
    if (rest.length === 0) index.delete(before)
    else index.set(before, rest)
  }
  if (after !== undefined) index.set(after, [...indexed(index, after), key])
}

interface Transaction {
  readonly drafts: Map<string, DraftTable<unknown>>
}

/**
 * A tiny transactional key-value database: named tables of rows by key.
 *
 * Transactions serialize on one lock. Inside one, the first write to a table
 * opens a draft over it (its changes only, never a copy of the table), and
 * reads see the drafts; commit applies every draft's changes in one
 * synchronous step, and a failure or defect drops them, so a failed
 * transaction leaves nothing behind. Reads outside a transaction see only committed
 * state; a write outside one runs in a transaction of its own.
 */
export class MemoryDatabase {
  private readonly committed = new Map<string, Table>()
  private readonly lock = Effect.unsafeMakeSemaphore(1)
  private readonly current = FiberRef.unsafeMake<Option.Option<Transaction>>(Option.none())

  /** Runs `effect` in a transaction, joining the caller's when there is one. */
  withTransaction<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.flatMap(FiberRef.get(this.current), (outer) => {
      if (Option.isSome(outer)) return effect
      const tx: Transaction = { drafts: new Map() }
      return this.lock.withPermits(1)(
        Effect.tap(Effect.locally(effect, this.current, Option.some(tx)), () =>
          Effect.sync(() => {
            for (const [name, draft] of tx.drafts) draft.commitInto(this.tableOf(name))
          }))
      )
    })
  }

  /** The rows of `name` as the current transaction (or committed state) sees them. */
  read<V>(name: string): Effect.Effect<ReadonlyMap<string, V>> {
    return Effect.map(FiberRef.get(this.current), (tx) => {
      const draft = Option.isSome(tx) ? tx.value.drafts.get(name) : undefined
      return (draft ?? this.committed.get(name) ?? new Map()) as ReadonlyMap<string, V>
    })
  }

  /** Changes the rows of `name` inside a transaction and returns what `change` returns. */
  write<V, A>(name: string, change: (rows: Map<string, V>) => A): Effect.Effect<A> {
    return this.writeWithIndex<V, never, A>(name, undefined, (rows) => change(rows))
  }

  /**
   * Changes the rows of `name` and of its secondary index `index` (a table
   * of the store's own, see `isIndexTable`) in one transaction, so the index
   * commits or rolls back with the rows it points at.
   */
  writeWithIndex<V, I, A>(
    name: string,
    index: string | undefined,
    change: (rows: Map<string, V>, index: Map<string, I>) => A
  ): Effect.Effect<A> {
    return this.withTransaction(Effect.flatMap(FiberRef.get(this.current), (tx) =>
      Effect.sync(() => {
        const drafts = Option.getOrThrow(tx).drafts
        const draftOf = (table: string) => {
          let draft = drafts.get(table)
          if (draft === undefined) {
            draft = new DraftTable(this.committed.get(table) ?? new Map())
            drafts.set(table, draft)
          }
          return draft
        }
        return change(
          draftOf(name) as Map<string, V>,
          (index === undefined ? new Map() : draftOf(index)) as Map<string, I>
        )
      })))
  }

  /** The names of the tables any transaction has written. */
  tableNames(): ReadonlyArray<string> {
    return Array.from(this.committed.keys()).filter((name) => !isIndexTable(name)).sort()
  }

  private tableOf(name: string): Table {
    let table = this.committed.get(name)
    if (table === undefined) {
      table = new Map()
      this.committed.set(name, table)
    }
    return table
  }
}
