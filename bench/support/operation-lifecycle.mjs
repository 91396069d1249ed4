// The operation lifecycle a bench cycle runs, written once over "steps" (the
// store's Promise methods, or the raw driver's hand-written equivalents), so
// both sides run the very same script: claim a new key → mark its request
// sent → finalize it and arm its watch. Every cycle writes a new operation
// and a new watch, as a sync engine writing back a stream of edits does.
import { ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"

/** Every document's winner (finalize reads it as the watch's observed digest). */
export const WINNER = "winner-digest"
const LEASE_MS = 30_000
const WATCH_DUE_MS = 60_000

/** The winners map both sides read: every document the lifecycle touches has `WINNER`. */
export const winnerOf = () => WINNER

/**
 * Numbers each worker's operations, so a side's workers never share a key:
 * `next(worker)` is the worker's next operation's idempotency key and ids.
 */
export const lifecyclePlan = () => {
  let serial = 0
  return {
    next: (worker) => {
      const n = ++serial
      return {
        key: { callerDID: `did:bench:runner-${worker}`, operationID: `op-${n}` },
        sourceID: `source-${worker}-${n}`,
        documentID: `document-${worker}-${n}`
      }
    }
  }
}

/**
 * The claim of one planned operation: an update from a local document,
 * re-sendable as a conditional update; `markSent` marks its request sent in
 * the claim's own write.
 */
export const claimInputOf = (planned, markSent = false) => ({
  // The key's fields one by one, not `...planned.key`: on Node 20 a spread followed by new fields costs
  // ~1.5 µs per field, which would put ~20 µs of the bench's own work into every lifecycle.
  callerDID: planned.key.callerDID,
  operationID: planned.key.operationID,
  ownerDID: "did:bench:owner",
  connectorName: "bench-connector",
  model: "Event",
  op: "update",
  accountKey: "bench@example.com",
  target: "calendars/primary",
  sourceID: planned.sourceID,
  deterministicEventID: `event-${planned.key.operationID}`,
  payloadHash: `hash-${planned.key.operationID}`,
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: planned.documentID,
  leaseMs: LEASE_MS,
  ...(markSent ? { markSent } : {})
})

/** What the runner reports once the provider applied the write. */
export const finalizeInputOf = (planned, leaseToken, now) => ({
  leaseToken,
  sourceID: planned.sourceID,
  documentID: planned.documentID,
  providerEtag: "etag-1",
  resultEntity: { id: planned.sourceID, summary: "Lunch" },
  watchDueAt: now + WATCH_DUE_MS
})

const unexpected = (step, got, planned) =>
  new Error(`${step} of ${planned.key.operationID} returned ${JSON.stringify(got?.outcome ?? got)}`)

/**
 * One lifecycle per call, on the worker's next key. Any outcome but
 * claimed → sent → committed throws: a bench must not count no-ops.
 * `steps` has the Promise API's shape. With `markSent`, the claim marks the
 * request sent itself (`claimOperation({ markSent: true })`) and there is
 * no `markOperationSent` call.
 */
export const lifecycleOver = (steps, plan, { markSent = false } = {}) => async (worker) => {
  const planned = plan.next(worker)
  const claim = await steps.claimOperation(claimInputOf(planned, markSent))
  if (claim.outcome !== "claimed") throw unexpected("claimOperation", claim, planned)
  if (markSent) {
    if (claim.operation.sendMarker !== claim.lease.token) throw unexpected("claimOperation (markSent)", claim, planned)
  } else {
    const sent = await steps.markOperationSent(planned.key, { leaseToken: claim.lease.token })
    if (sent.outcome !== "sent") throw unexpected("markOperationSent", sent, planned)
  }
  const finalized = await steps.finalizeOperationAndArmWatch(planned.key, finalizeInputOf(planned, claim.lease.token, Date.now()))
  if (finalized.outcome !== "committed") throw unexpected("finalizeOperationAndArmWatch", finalized, planned)
}

/** The same lifecycle as one Effect on the `ConnectorStore` service: one `runPromise` per lifecycle. */
export const effectLifecycleOver = (runtime, plan) => {
  const lifecycle = (planned) =>
    Effect.gen(function*() {
      const store = yield* ConnectorStore
      const claim = yield* store.claimOperation(claimInputOf(planned))
      if (claim.outcome !== "claimed") return yield* Effect.die(unexpected("claimOperation", claim, planned))
      const sent = yield* store.markOperationSent(planned.key, { leaseToken: claim.lease.token })
      if (sent.outcome !== "sent") return yield* Effect.die(unexpected("markOperationSent", sent, planned))
      const finalized = yield* store.finalizeOperationAndArmWatch(planned.key, finalizeInputOf(planned, claim.lease.token, Date.now()))
      if (finalized.outcome !== "committed") return yield* Effect.die(unexpected("finalizeOperationAndArmWatch", finalized, planned))
    })
  return (worker) => runtime.runPromise(lifecycle(plan.next(worker)))
}
