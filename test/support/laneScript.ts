// The script of hot calls the direct-lane tests run through a store with
// the lane and one without, to compare their answers and rows.
import {
  ConnectorStore,
  OperationPolicy,
  type PromiseConnectorStore,
  type PromiseWinnerReaders,
  StoreMetrics,
  type StorePorts,
  StoreSnapshot,
  WinnerReader
} from "@connector-store/core"
import { fromPromiseReaders, makePromiseStore } from "@connector-store/core/adapter"
import type { SqlTransaction } from "@connector-store/sql-adapter"
import { Effect, Layer, ManagedRuntime, Metric, type MetricState } from "effect"
import { expect } from "vitest"
import { claimInput, KEY } from "../operations.fixtures.js"
import { identityOf, NOW, watchRow } from "./contract/fixtures.js"
import { seedWatches } from "./contract/store.js"

/** The clock the scripted stores read (`now: () => clock.now`); set it back to NOW between runs. */
export const clock = { now: NOW }

/** The watch the script works on, and its row as seeded. */
export const id = identityOf()
export const seeded = watchRow({ verificationStatus: "pending_verification", nextAttemptAt: NOW - 1, claimedUntil: null })

/** A script of hot calls (and their unhappy cases), its answers in order. */
export const script = async (store: PromiseConnectorStore<SqlTransaction>): Promise<ReadonlyArray<unknown>> => {
  const answers: Array<unknown> = []
  const record = async (call: () => Promise<unknown>) => {
    try {
      answers.push(await call())
    } catch (error) {
      answers.push({ rejected: error })
    }
  }
  await store.runEffect(seedWatches(seeded))
  // Before the row is due by the caller's `now` (the store's clock says it is due): not claimable.
  await record(() => store.claimWatchAttempt(id, { until: NOW + 30_000, generation: seeded.repairGeneration, now: NOW - 5 }))
  await record(() => store.claimWatchAttempt(id, { until: NOW + 30_000, generation: seeded.repairGeneration, now: NOW }))
  await record(() => store.claimWatchAttempt(id, { until: NOW + 30_000, generation: seeded.repairGeneration, now: NOW }))
  await record(() =>
    store.recordVerification(id, { generation: seeded.repairGeneration, claimedUntil: NOW + 30_000, fetchedDigest: "stale", maxAttempts: 5, dueAt: NOW })
  )
  await record(() =>
    store.recordVerification(id, { generation: 99, claimedUntil: null, fetchedDigest: "stale", maxAttempts: 5, dueAt: NOW })
  )
  await record(() => store.deferWatch(id, { nextAttemptAt: NOW + 5, generation: seeded.repairGeneration, claimedUntil: NOW + 30_000 }))
  await record(() => store.armWatch(id, "manual", { dueAt: NOW + 10 }))
  await record(() => store.armWatch(id, "ingress", { dueAt: NOW + 10, triggeringWinner: "w-doc-1" }))
  await record(() => store.armWatch(identityOf({ sourceID: "nobody" }), "manual", { dueAt: NOW }))
  await record(() => store.armWatch(id, "finalize" as never, { dueAt: NOW }))
  await record(() => store.claimWatchAttempt({ ...id, ownerDID: "" }, { until: NOW, generation: 0, now: NOW }))
  const claimed = await store.claimOperation(claimInput())
  answers.push(claimed)
  await record(() => store.claimOperation(claimInput()))
  await record(() => store.claimOperation(claimInput({ payloadHash: "other" })))
  if (claimed.outcome !== "claimed") throw new Error(`claim: ${claimed.outcome}`)
  const token = claimed.lease.token
  await record(() => store.markOperationSent(KEY, { leaseToken: "not-the-holder" }))
  await record(() => store.markOperationSent(KEY, { leaseToken: token }))
  await record(() => store.markOperationSent(KEY, { leaseToken: token }))
  const finalize = { leaseToken: token, sourceID: "src-1", documentID: "doc-1", providerEtag: "e-1", resultEntity: { id: 1 }, watchDueAt: NOW + 5 }
  await record(() => store.finalizeOperationAndArmWatch(KEY, { ...finalize, leaseToken: "stale" }))
  await record(() => store.finalizeOperationAndArmWatch(KEY, finalize))
  await record(() => store.finalizeOperationAndArmWatch(KEY, finalize))
  // A lapsed lease taken over.
  const other = claimInput({ operationID: "op-2", sourceID: "src-2", deterministicEventID: "event-2" })
  await record(() => store.claimOperation(other))
  clock.now = NOW + 10 * 60_000
  await record(() => store.claimOperation(other))
  // A claim that marks its request sent, new and taken over, and one whose mark is refused.
  const sending = claimInput({ operationID: "op-3", sourceID: "src-3", deterministicEventID: "event-3", markSent: true })
  await record(() => store.claimOperation(sending))
  await record(() => store.claimOperation({ ...sending, operationID: "op-4", markSent: 1 as never }))
  clock.now = NOW + 20 * 60_000
  await record(() => store.claimOperation(sending))
  answers.push(await store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot)))
  return answers
}

/** `value` with every random token replaced by its first appearance's number, so two runs compare. */
export const normalized = (value: unknown): unknown => {
  const seen = new Map<string, string>()
  return JSON.parse(JSON.stringify(value, (_, v) => v instanceof Error ? { ...v, _tag: (v as { _tag?: string })._tag, message: v.message } : v), (_, v) => {
    if (typeof v === "string" && /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(v)) {
      if (!seen.has(v)) seen.set(v, `token-${seen.size}`)
      return seen.get(v)
    }
    return v
  })
}

/** Every document's winner is `w-` and its id. */
export const readers = { readWinner: (documentID: string) => `w-${documentID}` }

/**
 * A Promise store over `ports`, built as `openConnectorStore` builds one,
 * deciding with `clock`; its readers get `dialect`'s stub handle (the
 * memory adapter's, for "memory"). `lane:
 * false` gives the store no readers for the lane, so every call takes the
 * Effect path. `close` is handed to `closing`.
 */
export const promiseStoreOver = <P>(
  ports: Layer.Layer<P, unknown>,
  readers: PromiseWinnerReaders<SqlTransaction>,
  options: { readonly lane: boolean; readonly dialect: SqlTransaction["dialect"] | "memory" },
  closing: Array<() => Promise<void>>
) => {
  // The memory adapter's handle; readers given to these stores never look at it.
  const handle = Effect.succeed<SqlTransaction>(
    options.dialect === "memory"
      ? { adapter: "memory" } as unknown as SqlTransaction
      : { dialect: options.dialect, query: () => Promise.resolve([]) }
  )
  const runtime = ManagedRuntime.make(
    ConnectorStore.layer.pipe(
      Layer.provideMerge(Layer.succeed(WinnerReader, fromPromiseReaders(readers, handle))),
      Layer.provideMerge(ports as unknown as Layer.Layer<StorePorts>),
      Layer.provideMerge(OperationPolicy.layer(undefined))
    )
  )
  const store = makePromiseStore<SqlTransaction>({
    runtime: runtime as never,
    handle,
    now: () => clock.now,
    readers: options.lane ? readers : undefined
  })
  closing.push(() => store.close())
  return { store, runtime: runtime as unknown as ManagedRuntime.ManagedRuntime<P, unknown> }
}

/**
 * The lost-race budget through `store`'s lane, whose versioned watch writes
 * lose as `lose` says and whose transactions `seen` counts: five lost
 * writes and the sixth try lands; six lost and the call gives up with
 * `ConcurrentUpdateExhausted`; every lost try and the failed call counted
 * in the store's metrics.
 */
export const expectLostRaceBudget = async (
  store: PromiseConnectorStore<SqlTransaction>,
  seen: { readonly begun: number },
  lose: { watchUpdates: number }
): Promise<void> => {
  await store.runEffect(seedWatches(seeded))
  const lost = Metric.tagged(StoreMetrics.lostRaceRetries, "method", "armWatch")
  const calls = Metric.tagged(Metric.tagged(StoreMetrics.calls, "method", "armWatch"), "outcome", "ConcurrentUpdateExhausted")
  const count = (metric: Metric.Metric.Counter<number>) =>
    Effect.runPromise(Effect.map(Metric.value(metric), (state: MetricState.MetricState.Counter<number>) => state.count))
  const [lostBefore, callsBefore] = [await count(lost), await count(calls)]
  lose.watchUpdates = 5
  expect(await store.armWatch(id, "manual", { dueAt: NOW })).toBe("opened")
  expect(seen.begun).toBe(6)
  lose.watchUpdates = 6
  await expect(store.armWatch(id, "manual", { dueAt: NOW })).rejects.toMatchObject({
    _tag: "ConcurrentUpdateExhausted",
    method: "armWatch",
    attempts: 6
  })
  expect(seen.begun).toBe(12)
  expect(await count(lost)).toBe(lostBefore + 5 + 6)
  expect(await count(calls)).toBe(callsBefore + 1)
  expect(await store.getWatch(id)).toMatchObject({ repairGeneration: seeded.repairGeneration + 1 })
}

/** A winner reader (`w-` and the document's id) that answers only once `release` is called. */
export const gatedReader = () => {
  let release!: () => void
  const gate = new Promise<void>((resolve) => release = resolve)
  return { release, readers: { readWinner: async (documentID: string) => (await gate, `w-${documentID}`) } }
}
