import {
  ConnectorStore,
  type JsonValue,
  type PersistenceError,
  type SyncProgressCASCurrent,
  type SyncProgressRecompute,
  SyncStateRepository
} from "@connector-store/core"
import { Context, Effect, Layer } from "effect"
import type { AdapterUnderTest, StoreServices } from "./stores.js"

/** Another writer's calls, made on the same database through an undecorated store. */
export type OtherWriter = (other: ConnectorStore["Type"]) => Effect.Effect<unknown, unknown>

/** A store whose sync-state reads can be followed by another writer's calls. */
export interface InterferingStore {
  /** The store under test (its ports, the snapshot, and `ConnectorStore`). */
  readonly layer: Layer.Layer<StoreServices, PersistenceError>
  /**
   * Queues `writers`: the next sync-state `get` returns what it read and
   * then, before its caller goes on, the first queued writer runs to the
   * end; the following `get` runs the next one, and so on. As if each had
   * landed between a progress attempt's read and its write.
   */
  readonly interfere: (...writers: ReadonlyArray<OtherWriter>) => void
  /** How many queued writers have not run yet. */
  readonly pending: () => number
  /** Drops the queued writers that have not run; returns how many there were. */
  readonly discard: () => number
}

/** `adapter`'s store with an `InterferingStore` hook on `SyncStateRepository.get`. */
export const interferingStore = (adapter: AdapterUnderTest): InterferingStore => {
  const queue: Array<OtherWriter> = []
  const decorated = Layer.effectContext(Effect.gen(function*() {
    const context = yield* Effect.context<StoreServices>()
    const repo = Context.get(context, SyncStateRepository)
    const other = Context.get(context, ConnectorStore)
    const get: SyncStateRepository["Type"]["get"] = (key) =>
      Effect.tap(repo.get(key), () => {
        const writer = queue.shift()
        return writer === undefined ? Effect.void : Effect.orDie(writer(other))
      })
    return Context.add(Context.omit(ConnectorStore)(context), SyncStateRepository, { ...repo, get })
  })).pipe(Layer.provide(adapter.layer({})))
  return {
    // Fresh: the adapter's layer already built `ConnectorStore.layer` once, over the undecorated port.
    layer: Layer.fresh(ConnectorStore.layer).pipe(Layer.provideMerge(decorated)),
    interfere: (...writers) => void queue.push(...writers),
    pending: () => queue.length,
    discard: () => queue.splice(0).length
  }
}

/** A checkpoint that logs which recomputes built it, in order. */
export interface LoggedCheckpoint {
  readonly log: ReadonlyArray<string>
}

/** The log of a checkpoint written by `appending` (empty for none). */
export const logOf = (checkpoint: JsonValue | undefined): ReadonlyArray<string> =>
  typeof checkpoint === "object" && checkpoint !== null && !Array.isArray(checkpoint)
    ? (checkpoint as unknown as LoggedCheckpoint).log ?? []
    : []

/**
 * A recompute that appends `tag` to the checkpoint's log and counts its
 * entries in the recovery; every `current` it is called with is pushed to `seen`.
 */
export const appending = (tag: string, seen: Array<SyncProgressCASCurrent | null> = []): SyncProgressRecompute =>
(current) => {
  seen.push(current)
  const log = [...logOf(current?.checkpoint), tag]
  return { checkpoint: { log }, recovery: { entries: log.length } }
}

/** A valid RFC 7636 code verifier, distinct per `seed`. */
export const verifierFor = (seed: string): string => `${seed}-`.padEnd(43, "v").replace(/[^A-Za-z0-9\-._~]/g, "_")
