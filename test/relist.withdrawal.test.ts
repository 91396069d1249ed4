import { ConnectorStore, type ProjectionWatch, type RelistReceiptInput, type RelistScope } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, seedWatches, storedWatch } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { claimedAndSent, claimInput, onOperationStore } from "./operations.fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }

/** A verified watch of `scope`, written well before any run starts. */
const tracked = (sourceID: string, documentID = `doc-${sourceID}`, verified = "v1"): ProjectionWatch =>
  watchRow({
    ...scope,
    sourceID,
    documentID,
    verifiedStateDigest: verified,
    observedWinnerDigest: verified,
    verificationStatus: "verified",
    nextAttemptAt: null,
    updatedAt: NOW - 1_000
  })

const seen = (sourceID: string, digest: string | null = "v1"): RelistReceiptInput => ({ sourceID, digest })
const all = { limit: 100, maxDeletionFraction: 1 } as const
let operations = 0

/**
 * A write-back through the public API: claimed, sent, committed at the
 * provider and finalized (which arms the watch), then verified against the
 * document's winner.
 */
const writeBack = (winners: Winners, sourceID: string, documentID: string) =>
  Effect.gen(function*() {
    const store = yield* ConnectorStore
    const operationID = `op-${++operations}`
    const input = claimInput({ operationID, sourceID, documentID, deterministicEventID: `event-${operationID}` })
    const token = yield* claimedAndSent(input)
    const now = (yield* Effect.clockWith((clock) => clock.currentTimeMillis))
    const finalized = yield* store.finalizeOperationAndArmWatch(
      { callerDID: input.callerDID, operationID },
      { leaseToken: token, sourceID, documentID, watchDueAt: now }
    )
    expect(finalized.outcome).toBe("committed")
    const identity = { ...scope, sourceID }
    const watch = yield* storedWatch(identity)
    expect(yield* store.claimWatchAttempt(identity, { until: now + 1_000, generation: watch.repairGeneration, now })).toBe(true)
    expect(yield* store.recordVerification(identity, {
      generation: watch.repairGeneration,
      claimedUntil: now + 1_000,
      fetchedDigest: winners.get(documentID),
      maxAttempts: 3,
      dueAt: now
    })).toBe("verified")
  })

/** Starts a run and commits `pages` of receipts, the last one completing it; returns the run id. */
const relist = (...pages: ReadonlyArray<ReadonlyArray<RelistReceiptInput>>) =>
  Effect.gen(function*() {
    const store = yield* ConnectorStore
    const run = yield* store.startRelistRun(scope)
    for (const [i, receipts] of pages.entries()) {
      const last = i === pages.length - 1
      expect(yield* store.commitSweepCheckpoint(run.runID, { page: i + 1, cursor: last ? null : `c${i + 1}`, receipts, complete: last }))
        .toBe(last ? "completed" : "committed")
    }
    return run.runID
  })

const listed = (runID: string) =>
  Effect.flatMap(ConnectorStore, (store) =>
    Effect.map(store.listSweepCandidates(runID, all), (rows) => rows.map((row) => [row.sourceID, row.kind, row.documentID])))

const refused = <A, E>(effect: Effect.Effect<A, E>) => Effect.flip(effect)

for (const adapter of adapters) {
  describe(`relist candidates are re-derived where they are acted on, on ${adapter.name}`, () => {
    it.effect("a write-back that lands while the clock stepped back is never a deletion of the run in flight", () => {
      const winners = new Winners({ "doc-s9": "w9" })
      return onOperationStore(adapter, winners.single(), Effect.gen(function*() {
        yield* seedWatches(tracked("s1"), tracked("s2"), tracked("s3"))
        const store = yield* ConnectorStore
        yield* at(NOW + 600_000)
        const run = yield* store.startRelistRun(scope)
        expect(yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c1", receipts: [seen("s1"), seen("s2")] }))
          .toBe("committed")
        // The clock steps back five minutes; a write-back for s9 commits and verifies.
        yield* at(NOW + 300_000)
        yield* writeBack(winners, "s9", "doc-s9")
        expect(yield* store.commitSweepCheckpoint(run.runID, { page: 2, cursor: null, receipts: [seen("s3")], complete: true }))
          .toBe("completed")
        expect(yield* listed(run.runID)).toEqual([])
        expect(yield* refused(store.recordSweepOutcome({ runID: run.runID, sourceID: "s9" }, "delete_local")))
          .toMatchObject({ _tag: "SweepCandidateNotFound", sourceID: "s9" })
        expect(yield* storedWatch({ ...scope, sourceID: "s9" })).toMatchObject({ documentID: "doc-s9", verificationStatus: "verified" })
      }))
    })

    it.effect("an update that commits and verifies after the run completed withdraws its deletion", () => {
      const winners = new Winners({ "doc-s1": "w1" })
      return onOperationStore(adapter, winners.single(), Effect.gen(function*() {
        yield* seedWatches(tracked("s1"), tracked("s2"))
        const store = yield* ConnectorStore
        yield* at(NOW + 10)
        const runID = yield* relist([seen("s2")])
        expect(yield* listed(runID)).toEqual([["s1", "deleted", "doc-s1"]])
        const ref = { runID, sourceID: "s1" }
        expect(yield* store.recordSweepOutcome(ref, "delete_local")).toBe("recorded")
        // The entity exists after all: an update to it commits at the provider and verifies.
        yield* writeBack(winners, "s1", "doc-s1")
        expect(yield* listed(runID)).toEqual([])
        const withdrawn = { _tag: "SweepCandidateWithdrawn", runID, sourceID: "s1", documentID: "doc-s1", kind: "deleted", reason: "watch-changed" }
        expect(yield* refused(store.markSweepCandidateApplied(ref))).toMatchObject({ ...withdrawn, method: "markSweepCandidateApplied" })
        expect(yield* refused(store.recordSweepOutcome(ref, "delete_local"))).toMatchObject({ ...withdrawn, method: "recordSweepOutcome" })
        expect(yield* store.getSweepCandidate({ ...scope, sourceID: "s1" })).toMatchObject({ _tag: "Some", value: { status: "decided" } })
      }))
    })

    it.effect("a new source that supersedes the candidate's watch on its document withdraws the deletion", () => {
      const winners = new Winners({ "doc-d1": "w1b" })
      return onOperationStore(adapter, winners.single(), Effect.gen(function*() {
        yield* seedWatches(tracked("s1", "doc-d1"), tracked("s2"))
        const store = yield* ConnectorStore
        yield* at(NOW + 10)
        const runID = yield* relist([seen("s2")])
        expect(yield* listed(runID)).toEqual([["s1", "deleted", "doc-d1"]])
        // s1b now holds the document; following "s1 deleted, doc-d1" would delete s1b's document.
        yield* writeBack(winners, "s1b", "doc-d1")
        expect(yield* listed(runID)).toEqual([])
        const ref = { runID, sourceID: "s1" }
        expect(yield* refused(store.recordSweepOutcome(ref, "delete_local")))
          .toMatchObject({ _tag: "SweepCandidateWithdrawn", sourceID: "s1", documentID: "doc-d1", reason: "watch-gone" })
        expect(yield* refused(store.markSweepCandidateApplied(ref)))
          .toMatchObject({ _tag: "SweepCandidateWithdrawn", sourceID: "s1", documentID: "doc-d1", reason: "watch-gone" })
      }))
    })

    it.effect("a write to the document still in flight holds the deletion back", () => {
      const winners = new Winners({ "doc-s1": "w1" })
      return onOperationStore(adapter, winners.single(), Effect.gen(function*() {
        yield* seedWatches(tracked("s1"), tracked("s2"))
        const store = yield* ConnectorStore
        yield* at(NOW + 10)
        const runID = yield* relist([seen("s2")])
        yield* claimedAndSent(claimInput({ operationID: "op-in-flight", sourceID: "s1", documentID: "doc-s1" }))
        expect(yield* listed(runID)).toEqual([])
        expect(yield* refused(store.recordSweepOutcome({ runID, sourceID: "s1" }, "delete_local")))
          .toMatchObject({ _tag: "SweepCandidateWithdrawn", sourceID: "s1", reason: "write-in-flight" })
      }))
    })

    it.effect("a divergence is withdrawn once the watch is written again (a re-arm opens a new verification)", () => {
      const winners = new Winners({ "doc-s2": "v2" })
      return onOperationStore(adapter, winners.single(), Effect.gen(function*() {
        yield* seedWatches(tracked("s1"), tracked("s2"))
        const store = yield* ConnectorStore
        yield* at(NOW + 10)
        const runID = yield* relist([seen("s1"), seen("s2", "v2")])
        expect(yield* listed(runID)).toEqual([["s2", "diverged", "doc-s2"]])
        expect(yield* store.armWatch({ ...scope, sourceID: "s2" }, "manual", { dueAt: NOW + 10 })).toBe("opened")
        expect(yield* listed(runID)).toEqual([])
        expect(yield* refused(store.recordSweepOutcome({ runID, sourceID: "s2" }, "reingest")))
          .toMatchObject({ _tag: "SweepCandidateWithdrawn", sourceID: "s2", kind: "diverged", reason: "watch-changed" })
      }))
    })

    it.effect("a candidate nothing touched still stands: listed, decided and applied", () =>
      onOperationStore(adapter, new Winners().single(), Effect.gen(function*() {
        yield* seedWatches(tracked("s1"), tracked("s2"))
        const store = yield* ConnectorStore
        yield* at(NOW + 10)
        const runID = yield* relist([seen("s2")])
        expect(yield* listed(runID)).toEqual([["s1", "deleted", "doc-s1"]])
        expect(yield* store.recordSweepOutcome({ runID, sourceID: "s1" }, "delete_local")).toBe("recorded")
        expect(yield* store.markSweepCandidateApplied({ runID, sourceID: "s1" })).toBe("applied")
      })))
  })
}
