import { Effect, FiberRef, Option } from "effect"

type Table = Map<string, unknown>

interface Transaction {
  readonly drafts: Map<string, Table>
}

/**
 * A tiny transactional key-value database: named tables of rows by key.
 *
 * Transactions serialize on one lock. Inside one, the first write to a table
 * copies it into a draft, and reads see the drafts; commit swaps the drafts
 * in at once, and a failure or defect drops them, so a failed transaction
 * leaves nothing behind. Reads outside a transaction see only committed
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
            for (const [name, draft] of tx.drafts) this.committed.set(name, draft)
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
    return this.withTransaction(Effect.flatMap(FiberRef.get(this.current), (tx) =>
      Effect.sync(() => {
        const drafts = Option.getOrThrow(tx).drafts
        let draft = drafts.get(name)
        if (draft === undefined) {
          draft = new Map(this.committed.get(name) ?? [])
          drafts.set(name, draft)
        }
        return change(draft as Map<string, V>)
      })))
  }

  /** The names of the tables that hold any row. */
  tableNames(): ReadonlyArray<string> {
    return Array.from(this.committed.keys()).sort()
  }
}
