import { performance } from "node:perf_hooks"
import type { DueClaim, OperationKey, ProjectionWatch } from "@connector-store/promise"
import { HandlerFault } from "./handler.js"
import type { VerificationEnd, WorkerEvents, WorkerOptions, WorkerStats, WorkerStore, WriteBackOutcome } from "./options.js"
import { verifyWatch } from "./verification.js"
import { driveWriteBack } from "./writeBack.js"

/** A running worker. */
export interface Worker {
  /**
   * Stops claiming, lets what is in flight finish within `graceMs` (the option's by default), then aborts it and waits at most
   * `abortGraceMs` more; resolves once the worker is stopped. A drive cut short leaves only its lease, which lapses: another
   * worker takes the operation over by the store's in-doubt rules. Calling it again answers the same promise.
   */
  stop(options?: { readonly graceMs?: number | undefined }): Promise<void>
  /** The counts so far. */
  stats(): WorkerStats
  /** Calls `listener` on each `event`; answers a function that removes it. A listener that throws is ignored. */
  on<E extends keyof WorkerEvents>(event: E, listener: (payload: WorkerEvents[E]) => void): () => void
  /** Resolves when the worker has stopped (by `stop()`, a signal, or its store closing). */
  readonly done: Promise<void>
}

const WRITE_BACK_OUTCOMES: ReadonlyArray<WriteBackOutcome> = [
  "committed", "already-committed", "retrying", "deferred", "dead", "reconcile_only", "lease-lost", "exhausted", "abandoned"
]
const VERIFICATION_ENDS: ReadonlyArray<VerificationEnd> = ["verified", "pending", "repair_failed", "stale-generation", "stale-claim", "deferred"]

const countsOf = <K extends string>(keys: ReadonlyArray<K>): Record<K, number> =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>

/** A positive whole number option, or its default; anything else is refused before the worker starts. */
const positive = (name: string, value: number | undefined, fallback: number): number => {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value <= 0) throw new TypeError(`startWorker: options.${name} must be a positive whole number, got ${String(value)}`)
  return value
}

const isStoreClosed = (error: unknown) => (error as { readonly _tag?: unknown } | null)?._tag === "StoreClosed"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Starts a worker on `store`: it finds due write-backs by wake-ups (`awaitWork`) with the due sweep as the safety net, leases
 * disjoint batches fair between owners (`claimDueOperations`), marks each before its `send`, keeps its lease while the send
 * runs (a lost lease aborts the send's signal, and the drive never finalizes on it), re-sends only as the claim's `reissue`
 * allows, looks the entity up (`lookup`) on a 412 or 409 of a conditional re-send and on an answer left in doubt, finalizes
 * and arms the watch (a delete as the store's delete rules say), and records every failure with the kind `classify` gives
 * it. With `verify`, it claims due watches too and records what the provider holds, deferring when it gets no answer and
 * handing a mismatch to `repair`.
 */
export const startWorker = (store: WorkerStore, options: WorkerOptions): Worker => {
  const connectors = options.connectors
  if (typeof connectors !== "object" || connectors === null) throw new TypeError("startWorker: options.connectors must be an object of connectors by name")
  for (const [name, connector] of Object.entries(connectors)) {
    if (typeof connector?.send !== "function") throw new TypeError(`startWorker: options.connectors.${name}.send must be a function`)
  }
  const concurrency = positive("concurrency", options.concurrency, 1)
  const leaseMs = options.leaseMs === undefined ? undefined : positive("leaseMs", options.leaseMs, 30_000)
  const sendTimeoutMs = positive("sendTimeoutMs", options.sendTimeoutMs, 120_000)
  const handlerTimeoutMs = positive("handlerTimeoutMs", options.handlerTimeoutMs, 30_000)
  const abortGraceMs = positive("abortGraceMs", options.abortGraceMs, 1_000)
  const pollMs = positive("pollMs", options.pollMs, 1_000)
  const verifyAfterMs = positive("verifyAfterMs", options.verifyAfterMs, 30_000)
  const verifyRetryMs = positive("verifyRetryMs", options.verifyRetryMs, 30_000)
  const verifyMaxAttempts = positive("verifyMaxAttempts", options.verifyMaxAttempts, 5)
  const graceMs = positive("graceMs", options.graceMs, 10_000)
  const batchSize = Math.min(1_000, positive("batchSize", options.batchSize, Math.max(20, 2 * concurrency)))
  const verifying = options.verification !== false && Object.values(connectors).some((c) => c.verify !== undefined)

  const listeners = new Map<keyof WorkerEvents, Set<(payload: never) => void>>()
  const emit = <E extends keyof WorkerEvents>(event: E, payload: WorkerEvents[E]) => {
    for (const listener of listeners.get(event) ?? []) {
      try {
        ;(listener as (p: WorkerEvents[E]) => void)(payload)
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  const started = Date.now()
  const counts = {
    claimed: 0, sent: 0, finished: 0, lookups: 0, lookupsSettled: 0, handlerFaults: 0, storeErrors: 0,
    writeBacks: countsOf(WRITE_BACK_OUTCOMES), verifications: countsOf(VERIFICATION_ENDS)
  }
  const fault = (f: HandlerFault) => {
    counts.handlerFaults++
    emit("handler-fault", f)
  }
  const storeError = (method: string, error: unknown) => {
    counts.storeErrors++
    emit("store-error", { method, error })
  }

  let stopping = false
  const aborting = new AbortController()
  let stopWaiters: Array<() => void> = []
  const whenStopping = new Promise<void>((resolve) => stopWaiters.push(resolve))
  const inFlight = new Set<Promise<void>>()
  let slotFreed: (() => void) | undefined

  const track = (work: Promise<void>) => {
    const running = work.finally(() => {
      inFlight.delete(running)
      slotFreed?.()
    })
    inFlight.add(running)
  }

  const driveContext = (connectorName: string) => ({
    store, connectorName, connector: connectors[connectorName]!, leaseMs: 0, sendTimeoutMs, handlerTimeoutMs, abortGraceMs,
    verifyAfterMs, stopSignal: aborting.signal, fault, storeError,
    sentOne: () => void counts.sent++,
    lookedUp: (settled: boolean) => {
      counts.lookups++
      if (settled) counts.lookupsSettled++
    }
  })

  const keyOf = (claim: DueClaim): OperationKey => ({ callerDID: claim.operation.callerDID, operationID: claim.operation.operationID })

  /** Each batched claim's lease length, as granted. */
  const leaseLengths = new WeakMap<DueClaim, number>()

  const drive = async (leased: DueClaim): Promise<void> => {
    let claim = leased
    const name = claim.operation.connectorName
    if (!Object.hasOwn(connectors, name)) {
      fault(new HandlerFault("no-connector", "send", name, `${claim.operation.callerDID}/${claim.operation.operationID}`,
        `this worker has no connector named ${JSON.stringify(name)}: deferred without a request`))
      try {
        const deferred = await store.recordAttemptFailure(keyOf(claim), { leaseToken: claim.lease.token, kind: "offline", retryAt: store.now() + 60_000 })
        counts.writeBacks[deferred.outcome === "lease-lost" ? "lease-lost" : "deferred"]++
      } catch (error) {
        storeError("recordAttemptFailure", error)
      }
      return
    }
    const claimedLeaseMs = leaseLengths.get(claim) ?? Math.max(1, claim.lease.expiresAt - store.now())
    leaseLengths.delete(claim)
    try {
      // A claim that waited in the batch for a slot has its lease renewed first when half of it is gone.
      if (claim.lease.expiresAt - store.now() < claimedLeaseMs / 2) {
        const renewed = await store.renewOperationLease(keyOf(claim), { leaseToken: claim.lease.token, leaseMs: leaseMs ?? claimedLeaseMs })
        if (renewed.outcome !== "renewed") {
          counts.writeBacks["lease-lost"]++
          emit("write-back", { outcome: "lease-lost", operation: claim.operation, sent: false, lookedUp: false })
          return
        }
        claim = { ...claim, lease: renewed.lease, operation: renewed.operation }
      }
      const ended = await driveWriteBack({ ...driveContext(name), leaseMs: leaseMs ?? claimedLeaseMs }, claim)
      counts.writeBacks[ended.outcome]++
      emit("write-back", ended)
    } catch (error) {
      storeError("write-back", error)
      counts.writeBacks.abandoned++
      emit("write-back", { outcome: "abandoned", operation: claim.operation, sent: false, lookedUp: false })
    }
  }

  const verify = async (watch: ProjectionWatch, claimedUntil: number): Promise<void> => {
    try {
      const ended = await verifyWatch({
        store, connector: Object.hasOwn(connectors, watch.connectorName) ? connectors[watch.connectorName] : undefined,
        claimedUntil, handlerTimeoutMs, abortGraceMs, verifyRetryMs, verifyMaxAttempts, stopSignal: aborting.signal, fault
      }, watch)
      counts.verifications[ended.outcome]++
      emit("verification", ended)
    } catch (error) {
      storeError("verification", error)
    }
  }

  /** Claims leased to this worker that wait for a slot, in the batch's order. */
  const batched: Array<DueClaim> = []

  const loop = async (): Promise<void> => {
    let mark = 0
    let notifiedBefore = false
    let yielded = performance.now()
    while (!stopping) {
      // A store that answers from memory resolves in microtasks: let timers (lease renewals, timeouts) run between sweeps.
      if (performance.now() - yielded >= 5) {
        await new Promise<void>((resolve) => setImmediate(resolve))
        yielded = performance.now()
      }
      while (batched.length > 0 && inFlight.size < concurrency && !stopping) track(drive(batched.shift()!))
      if (inFlight.size >= concurrency || batched.length > 0) {
        await Promise.race([new Promise<void>((resolve) => { slotFreed = resolve }), whenStopping])
        slotFreed = undefined
        continue
      }
      let found = 0
      try {
        const now = store.now()
        const batch = await store.claimDueOperations(leaseMs === undefined ? { limit: batchSize } : { limit: batchSize, leaseMs })
        for (const operation of batch.finished) {
          counts.finished++
          emit("finished", { operation })
        }
        counts.claimed += batch.claimed.length
        found += batch.claimed.length
        for (const claim of batch.claimed) {
          leaseLengths.set(claim, Math.max(1, claim.lease.expiresAt - now))
          batched.push(claim)
        }
        while (batched.length > 0 && inFlight.size < concurrency) track(drive(batched.shift()!))
        const left = concurrency - inFlight.size
        if (verifying && left > 0 && !stopping) {
          const at = store.now()
          const until = at + 2 * (handlerTimeoutMs + abortGraceMs) + 5_000
          const watches = await store.claimDueWatches({ now: at, until, limit: left })
          found += watches.claimed.length
          for (const watch of watches.claimed) track(verify(watch, until))
        }
      } catch (error) {
        if (isStoreClosed(error)) break
        storeError("claimDueOperations", error)
        await Promise.race([sleep(Math.min(pollMs, 1_000)), whenStopping])
        continue
      }
      if (found > 0 || stopping) continue
      // Nothing due: sleep until a commit may have made work due, or the sweep's period. A wake-up that found nothing may
      // have been this worker's own claim (SQLite hears every commit): wait from the mark after it, the sweep as the net.
      const since = notifiedBefore ? await store.awaitWork({ since: 0, timeoutMs: 1 }).then((wake) => wake.mark, () => mark) : mark
      const waiting = store.awaitWork({ since, timeoutMs: pollMs })
      waiting.catch(() => {})
      const woken = await Promise.race([waiting.then((wake) => wake, (error: unknown) => error), whenStopping.then(() => undefined)])
      if (woken === undefined) break
      notifiedBefore = false
      if (typeof woken === "object" && woken !== null && "mark" in woken) {
        mark = (woken as { readonly mark: number }).mark
        notifiedBefore = (woken as unknown as { readonly woken: string }).woken === "notified"
      } else if (isStoreClosed(woken)) break
      else {
        storeError("awaitWork", woken)
        await Promise.race([sleep(Math.min(pollMs, 1_000)), whenStopping])
      }
    }
    // Claims never started go back at once: due again in a millisecond, not in doubt (never marked).
    for (const claim of batched.splice(0)) {
      await store.renewOperationLease(keyOf(claim), { leaseToken: claim.lease.token, leaseMs: 1 }).catch(() => undefined)
    }
  }

  const signals = options.stopOnSignals ?? []
  const onSignal = () => void worker.stop()
  for (const signal of signals) process.once(signal, onSignal)

  const running = loop()
  let stopped: Promise<void> | undefined
  let resolveDone: () => void = () => {}
  const done = new Promise<void>((resolve) => { resolveDone = resolve })

  const beginStop = () => {
    stopping = true
    const waiters = stopWaiters
    stopWaiters = []
    for (const wake of waiters) wake()
  }

  const worker: Worker = {
    stop: (stopOptions) => {
      if (stopped !== undefined) return stopped
      beginStop()
      const grace = stopOptions?.graceMs ?? graceMs
      stopped = (async () => {
        await running.catch(() => {})
        const settled = Promise.all(inFlight).then(() => true)
        let aborted = 0
        if (!(await Promise.race([settled, sleep(grace).then(() => false)]))) {
          aborted = inFlight.size
          aborting.abort(new Error("the worker stopped"))
          await Promise.race([settled, sleep(abortGraceMs + 100)])
        }
        for (const signal of signals) process.removeListener(signal, onSignal)
        emit("stopped", { aborted })
        resolveDone()
      })()
      return stopped
    },
    stats: () => {
      const uptimeMs = Date.now() - started
      return {
        uptimeMs,
        claimed: counts.claimed,
        sent: counts.sent,
        writeBacks: { ...counts.writeBacks },
        finished: counts.finished,
        lookups: counts.lookups,
        lookupsSettled: counts.lookupsSettled,
        verifications: { ...counts.verifications },
        handlerFaults: counts.handlerFaults,
        storeErrors: counts.storeErrors,
        inFlight: inFlight.size,
        committedPerSecond: uptimeMs > 0 ? counts.writeBacks.committed / (uptimeMs / 1_000) : 0,
        stopping
      }
    },
    on: (event, listener) => {
      const set = listeners.get(event) ?? new Set()
      listeners.set(event, set)
      set.add(listener as (payload: never) => void)
      return () => void set.delete(listener as (payload: never) => void)
    },
    done
  }
  // The store closing ends the loop: the worker then stops as stop() does.
  void running.then(() => {
    if (!stopping) void worker.stop()
  })
  return worker
}
