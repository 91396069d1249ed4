import {
  ConnectorStore,
  type ProjectionWatch,
  type RelistReceiptInput,
  type RelistScope,
  type SweepCandidate,
  WatchRepository
} from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, TestClock } from "effect"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, seedWatches, succeedsChangingNothing } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/** The documented number of failed applies that gives a candidate up, stated on its own (not read from the code). */
const SWEEP_APPLY_ATTEMPTS = 5

const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
const otherScope: RelistScope = { ...scope, accountKey: "acct-2" }

/** A watch of `scope` on its own document, last written before any run starts, verified at `verified`. */
const tracked = (sourceID: string, verified: string | null, patch: Partial<ProjectionWatch> = {}): ProjectionWatch =>
  watchRow({
    ...scope,
    sourceID,
    documentID: `doc-${sourceID}`,
    verifiedStateDigest: verified,
    verificationStatus: "verified",
    nextAttemptAt: null,
    updatedAt: NOW - 1_000,
    ...patch
  })

const seen = (sourceID: string, digest: string | null): RelistReceiptInput => ({ sourceID, digest })
const later = (ms = 1) => TestClock.adjust(Duration.millis(ms))
const sources = (rows: ReadonlyArray<{ readonly sourceID: string }>) => rows.map((row) => row.sourceID)

/**
 * Every actionable candidate of a run, page by page; `maxDeletionFraction`
 * replaces the default deletion limit (tests of the limit itself are in
 * `guards.relist-limit.test.ts`).
 */
const allCandidates = (runID: string, pageSize = 2, maxDeletionFraction?: number) =>
  Effect.gen(function*() {
    const store = yield* ConnectorStore
    const out: Array<SweepCandidate> = []
    let after: string | undefined
    for (;;) {
      const page = yield* store.listSweepCandidates(runID, { limit: pageSize, after, maxDeletionFraction })
      out.push(...page)
      if (page.length < pageSize) return out
      after = page[page.length - 1]!.sourceID
    }
  })

/** A complete run over `receipts` in one page. */
const completeRun = (receipts: ReadonlyArray<RelistReceiptInput>) =>
  Effect.gen(function*() {
    const store = yield* ConnectorStore
    const run = yield* store.startRelistRun(scope)
    yield* later()
    expect(yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts, complete: true }))
      .toBe("completed")
    return run.runID
  })

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, {}, Effect.zipRight(at(NOW), body))

  describe(`relist runs on ${adapter.name}`, () => {
    it.effect("a started run is the scope's checkpoint; a second start supersedes it", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        expect(Option.isNone(yield* store.getSweepCheckpoint(scope))).toBe(true)
        const first = yield* store.startRelistRun(scope)
        expect(first).toMatchObject({ ...scope, state: "started", cursor: null, pagesCommitted: 0, startedAt: NOW })
        expect(Option.getOrThrow(yield* store.getSweepCheckpoint(scope))).toEqual(first)
        yield* later(5)
        const second = yield* store.startRelistRun(scope)
        expect(second.runID).not.toBe(first.runID)
        expect(Option.getOrThrow(yield* store.getSweepCheckpoint(scope)).runID).toBe(second.runID)
        expect(Option.getOrThrow(yield* store.getRelistRun(first.runID)))
          .toMatchObject({ state: "superseded", endedAt: NOW + 5, version: first.version + 1 })
        expect(Option.isNone(yield* store.getSweepCheckpoint(otherScope))).toBe(true)
      })))

    it.effect("pages commit in order with their cursor and receipts; a crashed runner resumes from the checkpoint", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const run = yield* store.startRelistRun(scope)
        expect(yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c1", receipts: [seen("b", "1"), seen("a", "1")] }))
          .toBe("committed")
        expect(yield* store.commitSweepCheckpoint(run.runID, { page: 2, cursor: "c2", receipts: [seen("d", null), seen("c", "2")] }))
          .toBe("committed")
        // The runner crashes here; whoever resumes reads where to go on from.
        const checkpoint = Option.getOrThrow(yield* store.getSweepCheckpoint(scope))
        expect(checkpoint).toMatchObject({ runID: run.runID, state: "listing", cursor: "c2", pagesCommitted: 2 })
        const receipts = yield* store.listSweepReceipts(run.runID, { limit: 10 })
        expect(receipts.map((r) => [r.sourceID, r.digest])).toEqual([["a", "1"], ["b", "1"], ["c", "2"], ["d", null]])
        expect(sources(yield* store.listSweepReceipts(run.runID, { limit: 2, after: "b" }))).toEqual(["c", "d"])
        expect(yield* store.commitSweepCheckpoint(run.runID, { page: 3, cursor: null, receipts: [], complete: true }))
          .toBe("completed")
        expect(Option.getOrThrow(yield* store.getSweepCheckpoint(scope)))
          .toMatchObject({ state: "complete", cursor: null, pagesCommitted: 3, receiptCount: 4, completedAt: NOW })
      })))

    it.effect("a runner that lost the race for a page, or skips one, stores nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const run = yield* store.startRelistRun(scope)
        expect(yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c1", receipts: [seen("a", "1")] }))
          .toBe("committed")
        const replay = yield* succeedsChangingNothing(
          store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "other", receipts: [seen("z", "9")] })
        )
        expect(replay).toBe("stale-page")
        const skip = yield* succeedsChangingNothing(
          store.commitSweepCheckpoint(run.runID, { page: 3, cursor: "c3", receipts: [seen("y", "9")], complete: true })
        )
        expect(skip).toBe("stale-page")
        expect(Option.getOrThrow(yield* store.getSweepCheckpoint(scope))).toMatchObject({ cursor: "c1", pagesCommitted: 1 })
      })))

    it.effect("a runner of a superseded, abandoned or complete run stores nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const old = yield* store.startRelistRun(scope)
        yield* store.commitSweepCheckpoint(old.runID, { page: 1, cursor: "c1", receipts: [seen("a", "1")] })
        const current = yield* store.startRelistRun(scope)
        for (const call of [
          store.commitSweepCheckpoint(old.runID, { page: 2, cursor: "c2", receipts: [seen("b", "1")] }),
          store.commitSweepCheckpoint(old.runID, { page: 2, cursor: null, receipts: [], complete: true }),
          store.recordRelistReceipt(old.runID, [seen("b", "1")])
        ] as ReadonlyArray<Effect.Effect<string, unknown>>) {
          expect(yield* succeedsChangingNothing(call)).toBe("stale-run")
        }
        expect(yield* store.abandonRelistRun(current.runID)).toBe("abandoned")
        expect(yield* succeedsChangingNothing(store.recordRelistReceipt(current.runID, [seen("c", "1")]))).toBe("stale-run")
        expect(yield* store.abandonRelistRun(current.runID)).toBe("already-ended")
        expect(Option.isNone(yield* store.getSweepCheckpoint(scope))).toBe(true)

        const done = yield* completeRun([])
        expect(yield* succeedsChangingNothing(store.commitSweepCheckpoint(done, { page: 2, cursor: null, receipts: [] })))
          .toBe("stale-run")
      })))

    it.effect("receipting an entity twice is harmless: one receipt, the last digest", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const run = yield* store.startRelistRun(scope)
        expect(yield* store.recordRelistReceipt(run.runID, [seen("a", "1"), seen("a", "2"), seen("b", "1")])).toBe("recorded")
        yield* later()
        expect(yield* store.recordRelistReceipt(run.runID, [seen("b", "1")])).toBe("recorded")
        yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c", receipts: [seen("a", "3"), seen("a", "3")] })
        const receipts = yield* store.listSweepReceipts(run.runID, { limit: 10 })
        expect(receipts).toEqual([
          { runID: run.runID, sourceID: "a", digest: "3", seenAt: NOW + 1 },
          { runID: run.runID, sourceID: "b", digest: "1", seenAt: NOW + 1 }
        ])
        // Receipts alone do not move the page sequence.
        expect(Option.getOrThrow(yield* store.getSweepCheckpoint(scope)).pagesCommitted).toBe(1)
      })))

    it.effect("an unknown run is a typed error", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        for (const call of [
          store.commitSweepCheckpoint("nope", { page: 1, cursor: null, receipts: [] }),
          store.recordRelistReceipt("nope", []),
          store.abandonRelistRun("nope"),
          store.listSweepReceipts("nope", { limit: 1 }),
          store.listSweepCandidates("nope", { limit: 1 }),
          store.markSweepCandidateApplied({ runID: "nope", sourceID: "a" })
        ] as ReadonlyArray<Effect.Effect<unknown, unknown>>) {
          expect(yield* failsChangingNothing(call)).toMatchObject({ _tag: "RelistRunNotFound", runID: "nope" })
        }
      })))
  })

  describe(`relist candidates on ${adapter.name}`, () => {
    it.effect("a complete run yields tracked documents it did not see, and seen ones whose digest moved", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(
          tracked("same", "d1"),
          tracked("moved", "d1"),
          tracked("gone", "d1"),
          tracked("gone-unverified", null),
          tracked("moved-unverified", null),
          tracked("no-provider-digest", "d1"),
          watchRow({ ...otherScope, sourceID: "elsewhere", documentID: "doc-elsewhere", updatedAt: NOW - 1_000 })
        )
        const runID = yield* completeRun([
          seen("same", "d1"),
          seen("moved", "d2"),
          seen("moved-unverified", "d2"),
          seen("no-provider-digest", null),
          seen("untracked", "d1")
        ])
        const found = yield* allCandidates(runID)
        expect(found.map((c) => [c.sourceID, c.kind, c.documentID, c.providerDigest, c.localDigest])).toEqual([
          ["gone", "deleted", "doc-gone", null, "d1"],
          ["gone-unverified", "deleted", "doc-gone-unverified", null, null],
          ["moved", "diverged", "doc-moved", "d2", "d1"]
        ])
        expect(found.every((c) => c.status === "open" && c.applyAttempts === 0 && c.runID === runID)).toBe(true)
        expect(Option.getOrThrow(yield* store.getRelistRun(runID)))
          .toMatchObject({ receiptCount: 5, trackedCount: 6, deletionCount: 2, divergenceCount: 1 })
        expect(sources(yield* store.listSweepCandidates(runID, { limit: 10, kind: "diverged" }))).toEqual(["moved"])
        expect(sources(yield* store.listSweepCandidates(runID, { limit: 10, kind: "deleted", after: "gone" })))
          .toEqual(["gone-unverified"])
      })))

    it.effect("a watch written after the run started is never judged by it", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("old-gone", "d1"))
        const run = yield* store.startRelistRun(scope)
        yield* later()
        // Created, and changed, while the listing ran: the listing may have passed them.
        yield* seedWatches(tracked("new", "d1", { createdAt: NOW + 1, updatedAt: NOW + 1 }))
        yield* seedWatches(tracked("touched", "d1", { updatedAt: NOW }))
        yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [seen("touched", "d9")], complete: true })
        expect(sources(yield* allCandidates(run.runID))).toEqual(["old-gone"])
      })))

    it.effect("no run short of complete and current yields candidates: a typed error, never an empty list", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("a", "d1"))
        const started = yield* store.startRelistRun(scope)
        const refused = (runID: string, state: string) =>
          Effect.gen(function*() {
            const error = yield* failsChangingNothing(store.listSweepCandidates(runID, { limit: 10 }))
            expect(error).toMatchObject({ _tag: "RelistRunNotComplete", runID, state })
          })
        yield* refused(started.runID, "started")
        yield* store.commitSweepCheckpoint(started.runID, { page: 1, cursor: "c", receipts: [] })
        yield* refused(started.runID, "listing")
        yield* store.abandonRelistRun(started.runID)
        yield* refused(started.runID, "abandoned")
        const complete = yield* completeRun([])
        expect(sources(yield* allCandidates(complete))).toEqual(["a"])
        yield* store.startRelistRun(scope)
        yield* refused(complete, "superseded")
      })))

    it.effect("the deletion safety limit refuses a run that would delete too much, unless the caller accepts it", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("a", "d1"), tracked("b", "d1"), tracked("c", "d1"), tracked("d", "d1"))
        const runID = yield* completeRun([seen("a", "d2")])
        const error = yield* failsChangingNothing(store.listSweepCandidates(runID, { limit: 10, maxDeletionFraction: 0.5 }))
        expect(error).toMatchObject({ _tag: "DeletionLimitExceeded", runID, deletions: 3, tracked: 4, maxDeletionFraction: 0.5 })
        expect(sources(yield* store.listSweepCandidates(runID, { limit: 10, maxDeletionFraction: 0.75 })))
          .toEqual(["a", "b", "c", "d"])
        expect(sources(yield* store.listSweepCandidates(runID, { limit: 10, maxDeletionFraction: 0.5, kind: "diverged" })))
          .toEqual(["a"])
        expect(sources(yield* store.listSweepCandidates(runID, {
          limit: 10,
          maxDeletionFraction: 0,
          acceptDeletionsBeyondLimit: true
        }))).toEqual(["a", "b", "c", "d"])
      })))

    it.effect("outcomes: delete or re-ingest is decided then applied, keep settles at once; settled ones leave the list", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("gone", "d1"), tracked("moved", "d1"), tracked("kept", "d1"))
        const runID = yield* completeRun([seen("moved", "d2")])
        const ref = (sourceID: string) => ({ runID, sourceID })
        const notAllowed = yield* failsChangingNothing(store.recordSweepOutcome(ref("moved"), "delete_local"))
        expect(notAllowed).toMatchObject({ _tag: "SweepOutcomeNotAllowed", kind: "diverged", outcome: "delete_local" })
        expect(yield* succeedsChangingNothing(store.markSweepCandidateApplied(ref("gone")))).toBe("undecided")
        expect(yield* store.recordSweepOutcome(ref("gone"), "delete_local")).toBe("recorded")
        expect(yield* store.recordSweepOutcome(ref("moved"), "reingest")).toBe("recorded")
        expect(yield* store.recordSweepOutcome(ref("kept"), "keep")).toBe("recorded")
        // Two deletions of three tracked: over the default limit, so this test lifts it.
        expect((yield* allCandidates(runID, 2, 1)).map((c) => [c.sourceID, c.status, c.outcome]))
          .toEqual([["gone", "decided", "delete_local"], ["moved", "decided", "reingest"]])
        expect(yield* store.markSweepCandidateApplied(ref("gone"))).toBe("applied")
        expect(yield* succeedsChangingNothing(store.markSweepCandidateApplied(ref("gone")))).toBe("applied")
        expect(yield* succeedsChangingNothing(store.recordSweepOutcome(ref("gone"), "keep"))).toBe("settled")
        expect(yield* succeedsChangingNothing(store.markSweepCandidateApplied(ref("kept")))).toBe("kept")
        expect(sources(yield* allCandidates(runID, 2, 1))).toEqual(["moved"])
        const missing = yield* failsChangingNothing(store.recordSweepOutcome(ref("never-tracked"), "keep"))
        expect(missing).toMatchObject({ _tag: "SweepCandidateNotFound", runID, sourceID: "never-tracked" })
      })))

    it.effect(`the ${SWEEP_APPLY_ATTEMPTS}th failed apply gives a candidate up: never applied, listed or retried until re-armed`, () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("gone", "d1"))
        const runID = yield* completeRun([])
        const ref = { runID, sourceID: "gone" }
        const identity = { ...scope, sourceID: "gone" }
        yield* store.recordSweepOutcome(ref, "delete_local")
        for (let attempt = 1; attempt < SWEEP_APPLY_ATTEMPTS; attempt++) {
          expect(yield* store.recordSweepApplyFailure(ref, { kind: "network", message: `timeout ${attempt}` })).toBe("retry")
          expect(Option.getOrThrow(yield* store.getSweepCandidate(identity)))
            .toMatchObject({ status: "decided", applyAttempts: attempt, lastErrorKind: "network", lastErrorMessage: `timeout ${attempt}` })
        }
        expect(yield* store.recordSweepApplyFailure(ref, { kind: "permission", message: "403" })).toBe("given-up")
        expect(Option.getOrThrow(yield* store.getSweepCandidate(identity))).toMatchObject({
          status: "given_up",
          applyAttempts: SWEEP_APPLY_ATTEMPTS,
          lastErrorKind: "permission",
          lastErrorMessage: "403"
        })
        expect(yield* succeedsChangingNothing(store.markSweepCandidateApplied(ref))).toBe("given-up")
        expect(yield* succeedsChangingNothing(store.recordSweepApplyFailure(ref, { kind: "x", message: "y" }))).toBe("given-up")
        expect(yield* succeedsChangingNothing(store.recordSweepOutcome(ref, "keep"))).toBe("given-up")
        expect(yield* allCandidates(runID)).toEqual([])
        expect(sources(yield* store.listGivenUpSweepCandidates(scope, { limit: 10 }))).toEqual(["gone"])
        expect(yield* store.listGivenUpSweepCandidates(otherScope, { limit: 10 })).toEqual([])

        expect(yield* store.rearmSweepCandidate(identity)).toBe("rearmed")
        expect(yield* store.rearmSweepCandidate(identity)).toBe("not-given-up")
        expect((yield* allCandidates(runID)).map((c) => [c.sourceID, c.status, c.outcome, c.applyAttempts]))
          .toEqual([["gone", "open", null, 0]])
        expect(yield* store.listGivenUpSweepCandidates(scope, { limit: 10 })).toEqual([])
        const unknown = yield* failsChangingNothing(store.rearmSweepCandidate({ ...identity, sourceID: "nope" }))
        expect(unknown).toMatchObject({ _tag: "SweepCandidateNotFound", sourceID: "nope" })
      })))

    it.effect("a given-up case stays given up when a newer run derives it again; other cases start afresh", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("stuck", "d1"), tracked("applied", "d1"), tracked("healed", "d1"))
        const first = yield* completeRun([seen("healed", "d2")])
        yield* store.recordSweepOutcome({ runID: first, sourceID: "stuck" }, "delete_local")
        for (let i = 0; i < SWEEP_APPLY_ATTEMPTS; i++) {
          yield* store.recordSweepApplyFailure({ runID: first, sourceID: "stuck" }, { kind: "network", message: "down" })
        }
        yield* store.recordSweepOutcome({ runID: first, sourceID: "applied" }, "delete_local")
        yield* store.markSweepCandidateApplied({ runID: first, sourceID: "applied" })
        yield* later(10)
        // "healed" now matches; "applied" is still not listed by the provider.
        const second = yield* completeRun([seen("healed", "d1")])
        expect(Option.getOrThrow(yield* store.getSweepCandidate({ ...scope, sourceID: "stuck" })))
          .toMatchObject({ runID: second, status: "given_up", applyAttempts: SWEEP_APPLY_ATTEMPTS })
        expect((yield* allCandidates(second, 2, 1)).map((c) => [c.sourceID, c.status, c.applyAttempts]))
          .toEqual([["applied", "open", 0]])
        expect(Option.isNone(yield* store.getSweepCandidate({ ...scope, sourceID: "healed" }))).toBe(true)
        expect(Option.getOrThrow(yield* store.getRelistRun(second))).toMatchObject({ deletionCount: 2, divergenceCount: 0 })
      })))

    it.effect("decisions about a run that is no longer current are stale", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("gone", "d1"))
        const runID = yield* completeRun([])
        const ref = { runID, sourceID: "gone" }
        yield* store.recordSweepOutcome(ref, "delete_local")
        yield* store.startRelistRun(scope)
        expect(yield* succeedsChangingNothing(store.recordSweepOutcome(ref, "keep"))).toBe("stale-run")
        expect(yield* succeedsChangingNothing(store.markSweepCandidateApplied(ref))).toBe("stale-run")
        expect(yield* succeedsChangingNothing(store.recordSweepApplyFailure(ref, { kind: "k", message: "m" })))
          .toBe("stale-run")
      })))
  })

  describe(`relist retention on ${adapter.name}`, () => {
    it.effect("collects ended runs older than the cutoff, oldest first, keeping current runs and given-up cases", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(tracked("stuck", "d1"), tracked("open", "d1"))
        const oldest = yield* completeRun([])
        for (let i = 0; i < SWEEP_APPLY_ATTEMPTS; i++) {
          if (i === 0) yield* store.recordSweepOutcome({ runID: oldest, sourceID: "stuck" }, "delete_local")
          yield* store.recordSweepApplyFailure({ runID: oldest, sourceID: "stuck" }, { kind: "k", message: "m" })
        }
        yield* later(10)
        const middle = yield* store.startRelistRun(scope) // supersedes `oldest` at NOW + 10
        yield* store.recordRelistReceipt(middle.runID, [seen("open", "d1")])
        yield* later(10)
        const current = yield* store.startRelistRun(scope) // supersedes `middle` at NOW + 20
        yield* store.recordRelistReceipt(current.runID, [seen("open", "d1")])
        yield* later(10)

        expect(yield* succeedsChangingNothing(store.collectRelistRuns({ before: NOW + 10, limit: 10 }))).toBe(0)
        expect(yield* store.collectRelistRuns({ before: NOW + 100, limit: 1 })).toBe(1)
        expect(Option.isNone(yield* store.getRelistRun(oldest))).toBe(true)
        expect(Option.getOrThrow(yield* store.getSweepCandidate({ ...scope, sourceID: "stuck" })))
          .toMatchObject({ status: "given_up", runID: oldest })
        expect(Option.isNone(yield* store.getSweepCandidate({ ...scope, sourceID: "open" }))).toBe(true)
        expect(Option.isSome(yield* store.getRelistRun(middle.runID))).toBe(true)
        expect(yield* store.collectRelistRuns({ before: NOW + 100, limit: 10 })).toBe(1)
        expect(Option.isNone(yield* store.getRelistRun(middle.runID))).toBe(true)
        const gone = yield* failsChangingNothing(store.listSweepReceipts(middle.runID, { limit: 10 }))
        expect(gone).toMatchObject({ _tag: "RelistRunNotFound" })
        expect(sources(yield* store.listSweepReceipts(current.runID, { limit: 10 }))).toEqual(["open"])
        expect(yield* store.collectRelistRuns({ before: NOW + 1_000_000, limit: 10 })).toBe(0)
        expect(Option.isSome(yield* store.getSweepCheckpoint(scope))).toBe(true)
      })))

    it.effect("tracked documents of the scope stay untouched by the whole sweep", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const rows = [tracked("a", "d1"), tracked("b", "d1")]
        yield* seedWatches(...rows)
        const runID = yield* completeRun([seen("a", "d2")])
        yield* store.recordSweepOutcome({ runID, sourceID: "b" }, "delete_local")
        yield* store.markSweepCandidateApplied({ runID, sourceID: "b" })
        const watches = yield* WatchRepository
        for (const row of rows) expect(Option.getOrThrow(yield* watches.get(row))).toEqual(row)
      })))
  })
}
