import { ConnectorStore, type ProjectionWatch, type RelistScope } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"

// The default deletion safety limit, stated here on its own: a listing with
// no limit of its caller's refuses when a complete run derived deletions of
// more than half (rounded down) of the documents it tracked, once it tracked
// two or more.

const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
const tracked = (sourceID: string): ProjectionWatch =>
  watchRow({
    ...scope,
    sourceID,
    documentID: `doc-${sourceID}`,
    verifiedStateDigest: "d",
    verificationStatus: "verified",
    nextAttemptAt: null,
    updatedAt: NOW - 1_000
  })

/** Seeds `trackedCount` watches, completes a run that saw the first `seenCount` of them, and returns its id. */
const runSeeing = (trackedCount: number, seenCount: number) =>
  Effect.gen(function*() {
    const sourceIDs = Array.from({ length: trackedCount }, (_, i) => `s${i}`)
    yield* at(NOW)
    yield* seedWatches(...sourceIDs.map(tracked))
    const store = yield* ConnectorStore
    const run = yield* store.startRelistRun(scope)
    yield* TestClock.adjust(Duration.millis(1))
    const receipts = sourceIDs.slice(0, seenCount).map((sourceID) => ({ sourceID, digest: "d" }))
    expect(yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts, complete: true })).toBe("completed")
    return run.runID
  })

const page = { limit: 100 }

for (const adapter of adapters) {
  describe(`the default deletion limit on ${adapter.name}`, () => {
    it.effect("an empty complete listing of five tracked documents is refused, naming the numbers, and lists nothing", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const runID = yield* runSeeing(5, 0)
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.listSweepCandidates(runID, page))
        expect(error).toMatchObject({ _tag: "DeletionLimitExceeded", runID, deletions: 5, tracked: 5, maxDeletionFraction: 0.5 })
        expect(String(error)).toContain("5 of 5")
        // Overridable per call: a caller that checked, or a limit of its own.
        expect((yield* store.listSweepCandidates(runID, { ...page, acceptDeletionsBeyondLimit: true })).length).toBe(5)
        expect((yield* store.listSweepCandidates(runID, { ...page, maxDeletionFraction: 1 })).length).toBe(5)
        yield* failsChangingNothing(store.listSweepCandidates(runID, { ...page, maxDeletionFraction: 0.8 }))
      })))

    it.effect("deletions of exactly half the tracked set are listed", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const runID = yield* runSeeing(4, 2)
        expect((yield* (yield* ConnectorStore).listSweepCandidates(runID, page)).map((c) => c.sourceID)).toEqual(["s2", "s3"])
      })))

    it.effect("three deletions of four tracked are refused", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const runID = yield* runSeeing(4, 1)
        const error = yield* failsChangingNothing((yield* ConnectorStore).listSweepCandidates(runID, page))
        expect(error).toMatchObject({ _tag: "DeletionLimitExceeded", deletions: 3, tracked: 4, maxDeletionFraction: 0.5 })
      })))

    it.effect("half of an odd tracked set rounds down: three of five are refused, two of five listed", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const refused = yield* runSeeing(5, 2)
        const store = yield* ConnectorStore
        expect(yield* failsChangingNothing(store.listSweepCandidates(refused, page)))
          .toMatchObject({ _tag: "DeletionLimitExceeded", deletions: 3, tracked: 5 })
        // A new run supersedes it and sees one more document.
        const run = yield* store.startRelistRun(scope)
        yield* TestClock.adjust(Duration.millis(1))
        const receipts = ["s0", "s1", "s2"].map((sourceID) => ({ sourceID, digest: "d" }))
        yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts, complete: true })
        expect((yield* store.listSweepCandidates(run.runID, page)).map((c) => c.sourceID)).toEqual(["s3", "s4"])
      })))

    it.effect("an empty listing of two tracked documents is refused", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const runID = yield* runSeeing(2, 0)
        expect(yield* failsChangingNothing((yield* ConnectorStore).listSweepCandidates(runID, page)))
          .toMatchObject({ _tag: "DeletionLimitExceeded", deletions: 2, tracked: 2 })
      })))

    it.effect("a scope tracking one document may lose it", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const runID = yield* runSeeing(1, 0)
        expect((yield* (yield* ConnectorStore).listSweepCandidates(runID, page)).map((c) => c.sourceID)).toEqual(["s0"])
      })))

    it.effect("divergences list without the check, even when the run's deletions are over the limit", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const runID = yield* runSeeing(4, 0)
        expect(yield* (yield* ConnectorStore).listSweepCandidates(runID, { ...page, kind: "diverged" })).toEqual([])
      })))
  })
}
