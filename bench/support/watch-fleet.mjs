// The watch rows a watch-cycle case works on, and the cycle itself written
// once over "steps" (the store's Promise methods, or the raw driver's
// hand-written equivalents), so both sides run the very same script.
import { WatchRepository } from "@connector-store/core"
import { Effect } from "effect"

/** Every watch's document has this winner. */
export const WINNER = "winner-digest"
/** What the verifier "fetched": never the winner, so each verification stays pending. */
export const FETCHED = "fetched-digest"
/** High enough that no generation is ever given up during a run. */
export const MAX_ATTEMPTS = 1_000_000_000
const CLAIM_MS = 30_000
const RETRY_MS = 60_000

/**
 * `workers` × `rowsPerWorker` watches, pending at generation 1 and due; each
 * worker cycles round-robin over its own rows, so workers never contend.
 * `generation` is tracked here: every cycle opens the next one.
 */
export const watchFleet = ({ workers, rowsPerWorker }) => {
  const byWorker = Array.from({ length: workers }, (_, worker) =>
    Array.from({ length: rowsPerWorker }, (_, index) => ({
      identity: {
        ownerDID: "did:bench:owner",
        connectorName: "bench-connector",
        model: "Event",
        accountKey: "bench@example.com",
        sourceID: `source-${worker}-${index}`
      },
      documentID: `document-${worker}-${index}`,
      generation: 1
    })))
  const turns = new Array(workers).fill(0)
  return {
    slots: byWorker.flat(),
    winners: new Map(byWorker.flat().map((slot) => [slot.documentID, WINNER])),
    next: (worker) => byWorker[worker][turns[worker]++ % rowsPerWorker]
  }
}

/** The fleet's rows as first written: pending, generation 1, due since the epoch, unclaimed. */
export const seedRows = (fleet, now = Date.now()) =>
  fleet.slots.map((slot) => ({
    ...slot.identity,
    documentID: slot.documentID,
    verifiedStateDigest: null,
    observedWinnerDigest: WINNER,
    verificationStatus: "pending_verification",
    verificationAttempts: 0,
    repairGeneration: slot.generation,
    nextAttemptAt: 0,
    claimedUntil: null,
    deferReason: null,
    version: 0,
    createdAt: now,
    updatedAt: now
  }))

/** Inserts the fleet's rows through the store's own repository port (an Effect needing `WatchRepository`). */
export const insertFleet = (fleet) =>
  Effect.flatMap(WatchRepository, (watches) =>
    Effect.forEach(seedRows(fleet), (row) =>
      Effect.flatMap(watches.insert(row), (inserted) =>
        inserted ? Effect.void : Effect.dieMessage(`watch ${row.sourceID} already exists`))))

const unexpected = (step, got, slot) =>
  new Error(`${step} on ${slot.identity.sourceID} (generation ${slot.generation}) returned ${JSON.stringify(got)}`)

/**
 * One watch cycle per call, on the worker's next row: claim → record a
 * mismatching verification (pending) → arm manual (opens the next
 * generation). Any other outcome throws: a bench must not count no-ops.
 * `steps` has the Promise API's shape: `claimWatchAttempt`,
 * `recordVerification`, `armWatch`.
 */
export const cycleOver = (steps, fleet) => async (worker) => {
  const slot = fleet.next(worker)
  const now = Date.now()
  const until = now + CLAIM_MS
  const claimed = await steps.claimWatchAttempt(slot.identity, { until, generation: slot.generation, now })
  if (claimed !== true) throw unexpected("claimWatchAttempt", claimed, slot)
  const verified = await steps.recordVerification(slot.identity, {
    generation: slot.generation,
    claimedUntil: until,
    fetchedDigest: FETCHED,
    maxAttempts: MAX_ATTEMPTS,
    dueAt: now + RETRY_MS
  })
  if (verified !== "pending") throw unexpected("recordVerification", verified, slot)
  const armed = await steps.armWatch(slot.identity, "manual", { dueAt: now })
  if (armed !== "opened") throw unexpected("armWatch", armed, slot)
  slot.generation++
}

/**
 * The same cycle as one Effect on the `ConnectorStore` service (the Effect
 * API): one `runPromise` per cycle instead of one per step.
 */
export const effectCycleOver = (runtime, ConnectorStore, fleet) => {
  const cycle = (slot, now) =>
    Effect.gen(function*() {
      const store = yield* ConnectorStore
      const until = now + CLAIM_MS
      const claimed = yield* store.claimWatchAttempt(slot.identity, { until, generation: slot.generation, now })
      if (claimed !== true) return yield* Effect.die(unexpected("claimWatchAttempt", claimed, slot))
      const verified = yield* store.recordVerification(slot.identity, {
        generation: slot.generation,
        claimedUntil: until,
        fetchedDigest: FETCHED,
        maxAttempts: MAX_ATTEMPTS,
        dueAt: now + RETRY_MS
      })
      if (verified !== "pending") return yield* Effect.die(unexpected("recordVerification", verified, slot))
      const armed = yield* store.armWatch(slot.identity, "manual", { dueAt: now })
      if (armed !== "opened") return yield* Effect.die(unexpected("armWatch", armed, slot))
    })
  return async (worker) => {
    const slot = fleet.next(worker)
    await runtime.runPromise(cycle(slot, Date.now()))
    slot.generation++
  }
}
