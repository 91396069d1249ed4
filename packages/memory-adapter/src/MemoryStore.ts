import {
  ConnectorStore,
  type StoreObservability,
  OperationPolicy,
  type OperationPolicyOverrides,
  OperationRepository,
  OperatorRepository,
  PendingAuthRepository,
  ProviderLimitEnforcement,
  ProviderLimitRepository,
  RelistRepository,
  type PromiseConnectorStore,
  type PromiseWinnerReaders,
  ServerHistory,
  StoreSnapshot,
  SyncStateRepository,
  Transactor,
  WatchRepository,
  unknownDurability,
  WinnerReader,
  type WinnerReaders
} from "@connector-store/core"
import {
  DirectDatabase,
  WorkSignal,
  fromPromiseReaders,
  makePromiseStore,
  allOptionNames,
  fieldOf,
  openOptionsProblem,
  optional,
  Rules,
  CallBounds,
  type CallBoundOptions
} from "@connector-store/core/adapter"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { MemoryDatabase } from "./MemoryDatabase.js"
import { makeMemoryDirect } from "./MemoryDirect.js"
import { makeMemoryOperationRepository } from "./MemoryOperationRepository.js"
import { makeMemoryOperatorRepository } from "./MemoryOperatorRepository.js"
import { makeMemoryRelistRepository } from "./MemoryRelistRepository.js"
import { makeMemoryWatchRepository } from "./MemoryWatchRepository.js"
import { makeMemorySyncStateRepository } from "./MemorySyncStateRepository.js"
import { makeMemoryPendingAuthRepository } from "./MemoryPendingAuthRepository.js"
import { makeMemoryProviderLimitRepository } from "./MemoryProviderLimitRepository.js"

/** What a memory store hands winner readers as their transaction handle. */
export interface MemoryTransaction {
  readonly adapter: "memory"
}

/** Every port a memory store provides, except the winner reader. */
export type MemoryPorts = Transactor | WatchRepository | OperationRepository | StoreSnapshot | SyncStateRepository | PendingAuthRepository
  | RelistRepository | OperatorRepository | ProviderLimitRepository

/** A memory store's server history: nothing survives a restart to be forgotten by a failover, so no claim is put in doubt. */
const MEMORY_HISTORY: ServerHistory["Type"] = {
  doubtAt: () => undefined,
  countDoubtful: () => undefined,
  report: Effect.succeed(unknownDurability("memory")),
  endDoubt: () => Effect.succeed({ outcome: "none" })
}

/** The ports over an existing in-memory database. */
export const portsOf = (db: MemoryDatabase): Context.Context<MemoryPorts> => {
  const watches = makeMemoryWatchRepository(db)
  const operations = makeMemoryOperationRepository(db)
  // Hot transitions also run synchronously on the database (see MemoryDirect), and its
  // commits are notices of work (see WorkSignal). Both services are optional, read by the
  // store with serviceOption, so they are not in the type.
  return Context.make(DirectDatabase, makeMemoryDirect(db, { watches, operations })).pipe(
    Context.add(WorkSignal, db.notices),
    Context.add(ServerHistory, MEMORY_HISTORY),
    Context.add(Transactor, { withTransaction: (effect) => db.withTransaction(effect) }),
    Context.add(WatchRepository, watches),
    Context.add(OperationRepository, operations),
    Context.add(SyncStateRepository, makeMemorySyncStateRepository(db)),
    Context.add(PendingAuthRepository, makeMemoryPendingAuthRepository(db)),
    Context.add(RelistRepository, makeMemoryRelistRepository(db)),
    Context.add(OperatorRepository, makeMemoryOperatorRepository(db)),
    Context.add(ProviderLimitRepository, makeMemoryProviderLimitRepository(db)),
    Context.add(StoreSnapshot, {
      snapshot: Effect.gen(function*() {
        const tables: Record<string, ReadonlyArray<unknown>> = {}
        for (const name of db.tableNames()) {
          const rows = yield* db.read<unknown>(name)
          tables[name] = Array.from(rows.entries()).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([, row]) => row)
        }
        return tables
      })
    })
  ) as Context.Context<MemoryPorts>
}

/** The repository ports over a fresh, empty in-memory database (one per build). */
export const layerPorts: Layer.Layer<MemoryPorts> = Layer.effectContext(Effect.sync(() => portsOf(new MemoryDatabase())))

/**
 * The whole store in memory, for unit tests: `ConnectorStore` plus its ports,
 * with winners read by `readers`, each call bounded by `bounds` (see
 * `MemoryStoreOptions.callTimeoutMs`).
 */
export const layer = (readers: WinnerReaders = {}, bounds: CallBoundOptions = {}): Layer.Layer<ConnectorStore | MemoryPorts | WinnerReader> =>
  ConnectorStore.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(layerPorts, Layer.succeed(WinnerReader, readers), CallBounds.layer(bounds)))
  )

const OPTIONS = allOptionNames<MemoryStoreOptions>()([
  "now",
  "readWinner",
  "readWinners",
  "operationPolicy",
  "observability",
  "callTimeoutMs",
  "closeTimeoutMs",
  "providerLimits"
])

/** The checks of the memory store's own options (the shared ones are in `openOptionsProblem`). */
const memoryChecks = (options: unknown) => [
  ["options.callTimeoutMs", fieldOf(options, "callTimeoutMs"), optional(Rules.positiveInt)] as const,
  ["options.closeTimeoutMs", fieldOf(options, "closeTimeoutMs"), optional(Rules.nonNegativeInt)] as const
]

/** The options of `openMemoryConnectorStore`. */
export interface MemoryStoreOptions extends PromiseWinnerReaders<MemoryTransaction>, StoreObservability {
  /** The store's clock; the system clock when absent. */
  readonly now?: () => number
  /** Lease, attempt and backoff settings of write-back operations, over the defaults. */
  readonly operationPolicy?: OperationPolicyOverrides | undefined
  /**
   * The longest one call may take (default 30 s): a call still waiting then
   * (on a winner reader that never answers, say) rejects with a
   * `PersistenceError` of reason `timeout` and nothing of it is applied.
   */
  readonly callTimeoutMs?: number | undefined
  /** The longest `close()` waits for calls in flight before it ends them (default 5 s). */
  readonly closeTimeoutMs?: number | undefined
  /**
   * Whether claims honour provider limits (pauses and caps, see
   * `setProviderLimit` and `pauseProvider`) and a retryable 429 pauses its
   * account. Off by default (see `ProviderLimitEnforcement`).
   */
  readonly providerLimits?: boolean | undefined
}

const handle = Effect.succeed<MemoryTransaction>({ adapter: "memory" })

/** A memory store with the Promise API. */
export interface MemoryConnectorStore extends PromiseConnectorStore<MemoryTransaction> {
  /** The store's clock (`options.now`, else the system clock): the time its decisions are made at. */
  now(): number
}

/**
 * Opens an empty in-memory store with the Promise API. Throws `InvalidInput`
 * naming the option (method `openMemoryConnectorStore`) when an option is
 * unacceptable or unknown (naming the nearest known one), before anything
 * opens.
 */
export const openMemoryConnectorStore = (options: MemoryStoreOptions = {}): MemoryConnectorStore => {
  const problem = openOptionsProblem("openMemoryConnectorStore", options, memoryChecks(options), OPTIONS)
  if (problem !== undefined) throw problem
  // The policy stays in the runtime's context, where a direct lane would find it.
  const bounds = { callTimeoutMs: options.callTimeoutMs, closeTimeoutMs: options.closeTimeoutMs }
  const layered = layer(fromPromiseReaders(options, handle), bounds).pipe(
    Layer.provideMerge(OperationPolicy.layer(options.operationPolicy)),
    Layer.provideMerge(ProviderLimitEnforcement.layer(options.providerLimits === true))
  )
  const store = makePromiseStore({
    runtime: ManagedRuntime.make(options.observability === undefined ? layered : Layer.provideMerge(layered, options.observability)),
    handle,
    now: options.now,
    readers: { readWinner: options.readWinner, readWinners: options.readWinners }
  })
  const local = options.now ?? Date.now
  return { ...store, now: () => local() }
}
