import { TurnQueue, WorkNotices } from "@connector-store/core/adapter"
import { Effect, type Fiber, FiberRef } from "effect"
import { DraftTable } from "./DraftTable.js"

type Table = Map<string, unknown>

const EMPTY: ReadonlyMap<string, unknown> = new Map()

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

/** One transaction's drafts; `open` until it commits or rolls back. */
export interface Transaction {
  readonly drafts: Map<string, DraftTable<unknown>>
  /** False once committed or rolled back: a fiber still holding it is outside any transaction. */
  open: boolean
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
 *
 * The lock is the database's own rather than Effect's semaphore, which
 * always resumes its taker through an asynchronous callback and so sends
 * every transaction through the scheduler: taking a free lock here is one
 * synchronous step, so a transaction whose every step is synchronous runs
 * start to finish on the caller's stack. A transaction that finds the lock
 * held waits, interruptibly, for a release and then tries again; the lock
 * itself is only taken uninterruptibly, together with the release's
 * installation, so an interruption never leaves it held. A release wakes
 * every waiter, so a waiter interrupted after its wake-up strands no one.
 */
export class MemoryDatabase {
  /** Notices of commits that wrote anything, for the waits of every store on this database (see `WorkSignal`). */
  readonly notices = new WorkNotices()
  private readonly committed = new Map<string, Table>()
  private readonly current = FiberRef.unsafeMake<Transaction | undefined>(undefined)
  /** One transaction at a time. */
  private readonly turns = new TurnQueue()

  private transactionOf(fiber: Fiber.RuntimeFiber<unknown, unknown>): Transaction | undefined {
    const tx = fiber.getFiberRef(this.current)
    return tx !== undefined && tx.open ? tx : undefined
  }

  /**
   * Runs `effect` in a transaction, joining the caller's when there is one.
   * The fiber's reference to the transaction is set once and left behind
   * when it ends (closed, so it counts as none): one fiber-ref write per
   * transaction instead of a set and a restore.
   */
  withTransaction<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.withFiberRuntime((fiber) => {
      if (this.transactionOf(fiber) !== undefined) return effect
      return Effect.uninterruptibleMask((restore) => {
        const tx: Transaction = { drafts: new Map(), open: true }
        const begin: Effect.Effect<void> = Effect.suspend(() => {
          if (this.turns.held) return Effect.zipRight(restore(this.turns.released), begin)
          this.turns.held = true
          return FiberRef.set(this.current, tx)
        })
        const end = (commit: boolean): void => {
          tx.open = false
          try {
            if (commit) this.commitDrafts(tx)
          } finally {
            this.turns.release()
          }
        }
        return Effect.zipRight(
          begin,
          Effect.matchCauseEffect(restore(effect), {
            onFailure: (cause) => {
              end(false)
              return Effect.failCause(cause)
            },
            onSuccess: (value) => {
              end(true)
              return Effect.succeed(value)
            }
          })
        )
      })
    })
  }

  /** The rows of `name` as the current transaction (or committed state) sees them. */
  read<V>(name: string): Effect.Effect<ReadonlyMap<string, V>> {
    return Effect.withFiberRuntime((fiber) => Effect.succeed(this.readNow<V>(this.transactionOf(fiber), name)))
  }

  /** The rows of `name` as `tx` sees them (its drafts over the committed rows), or as committed when `tx` is undefined. */
  readNow<V>(tx: Transaction | undefined, name: string): ReadonlyMap<string, V> {
    const draft = tx?.drafts.get(name)
    return (draft ?? this.committed.get(name) ?? EMPTY) as ReadonlyMap<string, V>
  }

  /** `writeWithIndex`'s change, made now in `tx`. */
  writeNow<V, I, A>(
    tx: Transaction,
    name: string,
    index: string | undefined,
    change: (rows: Map<string, V>, index: Map<string, I>) => A
  ): A {
    return change(
      this.draftOf(tx, name) as Map<string, V>,
      (index === undefined ? new Map() : this.draftOf(tx, index)) as Map<string, I>
    )
  }

  /**
   * True when no transaction holds the lock and no fiber waits for it (woken
   * or not): a caller that does not queue (the direct path) never takes the
   * lock ahead of fibers already waiting.
   */
  isFree(): boolean {
    return !this.turns.busy
  }

  /**
   * Takes the lock now, outside any fiber (see `MemoryDirect`), and opens a
   * transaction; undefined, changing nothing, when the lock is held.
   */
  beginNow(): Transaction | undefined {
    if (!this.isFree()) return undefined
    this.turns.held = true
    return { drafts: new Map(), open: true }
  }

  /** Ends a transaction `beginNow` opened: its drafts committed (`commit`) or dropped, the lock handed on. Once only. */
  endNow(tx: Transaction, commit: boolean): void {
    if (!tx.open) return
    tx.open = false
    try {
      if (commit) this.commitDrafts(tx)
    } finally {
      this.turns.release()
    }
  }

  /** `tx`'s drafts made the committed rows; a transaction that wrote anything is a notice of work. */
  private commitDrafts(tx: Transaction): void {
    for (const [name, draft] of tx.drafts) draft.commitInto(this.tableOf(name))
    if (tx.drafts.size > 0) this.notices.notify()
  }

  /** `effect` run as part of `tx`: its reads and writes go to `tx`'s drafts. */
  joined<A, E, R>(tx: Transaction, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.locally(effect, this.current, tx)
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
    const step: Effect.Effect<A> = Effect.withFiberRuntime((fiber) => {
      const tx = this.transactionOf(fiber)
      // Outside a transaction, the write is a transaction of its own.
      if (tx === undefined) return this.withTransaction(step)
      try {
        return Effect.succeed(this.writeNow(tx, name, index, change))
      } catch (defect) {
        return Effect.die(defect)
      }
    })
    return step
  }

  private draftOf(tx: Transaction, table: string): DraftTable<unknown> {
    let draft = tx.drafts.get(table)
    if (draft === undefined) {
      draft = new DraftTable(this.committed.get(table) ?? new Map())
      tx.drafts.set(table, draft)
    }
    return draft
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
