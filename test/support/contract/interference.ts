import {
  ConnectorStore,
  type PersistenceError,
  type ProjectionWatch,
  Transactor,
  type WatchIdentity,
  WatchRepository,
  WinnerReader,
  type WinnerReaders
} from "@connector-store/core"
import { MemoryDatabase, type MemoryPorts, portsOf } from "@connector-store/memory-adapter"
import { Context, Effect, Layer, Option } from "effect"

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

/** A memory store whose watch writes follow `plan`, and what happened to it. */
export interface InterferedStore {
  readonly layer: Layer.Layer<ConnectorStore | MemoryPorts | WinnerReader>
  /** How many times `update` was called. */
  readonly updates: () => number
  /** How many concurrent writes committed. */
  readonly concurrentWrites: () => number
}

/**
 * The memory adapter with its watch repository's `update` under `plan`, for
 * injecting lost races and failing writes into the service's CAS loop.
 */
export const interferedStore = (plan: UpdatePlan, readers: WinnerReaders): InterferedStore => {
  const ports = portsOf(new MemoryDatabase())
  const watches = Context.get(ports, WatchRepository)
  const transactor = Context.get(ports, Transactor)
  let updates = 0
  let committed = 0
  const pending: Array<Effect.Effect<void, PersistenceError>> = []

  const concurrently: UpdateTools["concurrently"] = (identity, change) => {
    pending.push(transactor.withTransaction(Effect.gen(function*() {
      const row = Option.getOrThrow(yield* watches.lockRead(identity))
      const written = yield* watches.update({ ...change(row), version: row.version + 1 }, row.version)
      if (!written) return yield* Effect.dieMessage("the concurrent writer itself lost a race")
      committed++
    })))
  }
  const runConcurrentWriters = Effect.suspend(() => Effect.all(pending.splice(0), { discard: true }))

  const interfered = ports.pipe(
    Context.add(WatchRepository, {
      ...watches,
      update: (next, expectedVersion) =>
        Effect.suspend(() => plan(++updates, next, expectedVersion, { write: watches.update, concurrently }))
    }),
    Context.add(Transactor, {
      withTransaction: (effect) => Effect.ensuring(transactor.withTransaction(effect), Effect.orDie(runConcurrentWriters))
    })
  )
  return {
    layer: ConnectorStore.layer.pipe(
      Layer.provideMerge(Layer.succeedContext(Context.add(interfered, WinnerReader, readers)))
    ),
    updates: () => updates,
    concurrentWrites: () => committed
  }
}
