import {
  ConnectorStore,
  type PersistenceError,
  type ProjectionWatch,
  Transactor,
  type WatchIdentity,
  WatchRepository,
  type WinnerReaders
} from "@connector-store/core"
import type { DirectDatabaseApi } from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import { Cause, Context, Effect, Exit, FiberRef, Layer, Option } from "effect"
import { withWatchPort } from "../direct.js"
import type { StoreServices } from "../stores.js"

/** What an interfering `update` can do besides answering. */
export interface UpdateTools {
  /** The real versioned write (inside the current transaction). */
  readonly write: (next: ProjectionWatch, expectedVersion: number) => Effect.Effect<boolean, PersistenceError>
  /**
   * Another writer's change to a row, committed in its own transaction right
   * after the current one ends: as if it had landed between this try's
   * lock-read and its write.
   */
  readonly concurrently: (identity: WatchIdentity, change: (row: ProjectionWatch) => ProjectionWatch) => void
}

/** Decides what the `call`-th (1-based) `WatchRepository.update` does. */
export type UpdatePlan = (
  call: number,
  next: ProjectionWatch,
  expectedVersion: number,
  tools: UpdateTools
) => Effect.Effect<boolean, PersistenceError>

/** A store whose watch writes follow `plan`, and what happened to it. */
export interface InterferedStore {
  readonly layer: Layer.Layer<StoreServices, PersistenceError>
  /** How many times `update` was called. */
  readonly updates: () => number
  /** How many concurrent writes committed. */
  readonly concurrentWrites: () => number
}

/** Whether the current fiber runs inside the decorated store's transaction. */
const inTransaction = FiberRef.unsafeMake(false)

const memoryStore = (readers: WinnerReaders): Layer.Layer<StoreServices, PersistenceError> => Memory.layer(readers)

/**
 * `base`'s store (memory by default; any adapter's `layer`) with its watch
 * repository's `update` under `plan`, for injecting lost races and failing
 * writes into the service's CAS loop.
 */
export const interferedStore = (
  plan: UpdatePlan,
  readers: WinnerReaders,
  base: (readers: WinnerReaders) => Layer.Layer<StoreServices, PersistenceError> = memoryStore
): InterferedStore => {
  let updates = 0
  let committed = 0
  const pending: Array<Effect.Effect<void, PersistenceError>> = []

  const decorated = Layer.effectContext(Effect.gen(function*() {
    const context = yield* Effect.context<StoreServices>()
    const watches = Context.get(context, WatchRepository)
    const transactor = Context.get(context, Transactor)
    const concurrently: UpdateTools["concurrently"] = (identity, change) => {
      pending.push(transactor.withTransaction(Effect.gen(function*() {
        const row = Option.getOrThrow(yield* watches.lockRead(identity))
        const written = yield* watches.update(row, { ...change(row), version: row.version + 1 })
        if (!written) return yield* Effect.dieMessage("the concurrent writer itself lost a race")
        committed++
      })))
    }
    const runConcurrentWriters = Effect.suspend(() => Effect.all(pending.splice(0), { discard: true }))
    // The direct rows (SQLite, memory), where hot transitions run: their watch
    // writes follow the same plan, and the other writers commit right after
    // the direct transaction ends, on the direct rows too.
    const directPending: Array<() => void> = []
    const decoratedDirect = (db: DirectDatabaseApi): DirectDatabaseApi => {
      const runDirectWriters = () => {
        for (const writer of directPending.splice(0)) writer()
      }
      const directConcurrently: UpdateTools["concurrently"] = (identity, change) => {
        directPending.push(() => {
          const transaction = db.begin()
          if (transaction === undefined) throw new Error("the concurrent writer found the database busy")
          const row = db.watches.lockRead(identity)
          if (row === undefined || !db.watches.update(row, { ...change(row), version: row.version + 1 })) {
            transaction.rollback()
            throw new Error("the concurrent writer itself lost a race")
          }
          transaction.commit()
          committed++
        })
      }
      return {
        ...db,
        begin: () => {
          const transaction = db.begin()
          if (transaction === undefined) return undefined
          const ended = (end: () => void) => () => {
            try {
              end()
            } finally {
              runDirectWriters()
            }
          }
          return { ...transaction, commit: ended(transaction.commit), rollback: ended(transaction.rollback) }
        },
        watches: {
          ...db.watches,
          update: (previous, next) => {
            const write = (written: ProjectionWatch, expectedVersion: number) =>
              Effect.sync(() => db.watches.update({ ...previous, version: expectedVersion }, written))
            // Run now; a planned failure is thrown as the error itself, as the direct rows throw theirs.
            const exit = Effect.runSyncExit(plan(++updates, next, previous.version, { write, concurrently: directConcurrently }))
            if (Exit.isSuccess(exit)) return exit.value
            throw Cause.squash(exit.cause)
          }
        }
      }
    }
    const decoratedWatches: WatchRepository["Type"] = {
      ...watches,
      update: (previous, next) => {
        const write = (written: ProjectionWatch, expectedVersion: number) =>
          watches.update({ ...previous, version: expectedVersion }, written)
        const planned = Effect.suspend(() => plan(++updates, next, previous.version, { write, concurrently }))
        // A write outside a transaction (a compare-and-set of its own): the
        // other writers commit right after it, as after a transaction.
        return Effect.flatMap(FiberRef.get(inTransaction), (inside) =>
          inside ? planned : Effect.ensuring(planned, Effect.orDie(runConcurrentWriters)))
      }
    }
    // The decorated direct rows speak for the decorated watch port, so the store keeps taking them.
    return withWatchPort(Context.omit(ConnectorStore)(context), decoratedWatches, decoratedDirect).pipe(
      Context.add(Transactor, {
        withTransaction: (effect) =>
          Effect.ensuring(
            transactor.withTransaction(Effect.locally(effect, inTransaction, true)),
            Effect.orDie(runConcurrentWriters)
          )
      })
    )
  })).pipe(Layer.provide(base(readers)))
  return {
    // Fresh: the base layer already built `ConnectorStore.layer` once, over the undecorated ports.
    layer: Layer.fresh(ConnectorStore.layer).pipe(Layer.provideMerge(decorated)),
    updates: () => updates,
    concurrentWrites: () => committed
  }
}
