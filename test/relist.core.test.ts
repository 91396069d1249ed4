import {
  collectableRelistRuns,
  decideRelistAbandon,
  decideRelistReceipts,
  decideRelistStart,
  decideSweepApplied,
  decideSweepApplyFailure,
  decideSweepCheckpoint,
  decideSweepOutcome,
  decideSweepRearm,
  deletionAllowance,
  deriveCandidate,
  deriveSweepCandidates,
  distinctReceipts,
  type RelistRun,
  type RelistRunState,
  type RelistScope,
  type SweepCandidate,
  type RelistBaselineEntry,
  type SweepCandidateBasis,
  type TrackedDocument,
  withdrawalOf
} from "@connector-store/core"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { propertyRuns } from "./support/runs.js"

/** The documented number of failed applies that gives a candidate up, stated on its own (not read from the code). */
const SWEEP_APPLY_ATTEMPTS = 5

const scope: RelistScope = { ownerDID: "did:o", connectorName: "gcal", model: "Event", accountKey: "acct" }
const T = 1_000_000

const runIn = (state: RelistRunState, patch: Partial<RelistRun> = {}): RelistRun => ({
  ...decideRelistStart(undefined, scope, "run-1", T).run,
  state,
  ...patch
})

const watch = (sourceID: string, verified: string | null, version = 2): TrackedDocument => ({
  ...scope,
  sourceID,
  documentID: `doc-${sourceID}`,
  verifiedStateDigest: verified,
  version,
  createdAt: T - 10
})

/** The baseline entry of `watch(sourceID, …, version)` as a run starting then records it, written out. */
const entry = (sourceID: string, watchVersion = 2, watchCreatedAt = T - 10): RelistBaselineEntry => ({
  sourceID,
  documentID: `doc-${sourceID}`,
  watchVersion,
  watchCreatedAt
})

/** The baseline of every given source at version 2. */
const baselineOf = (sources: ReadonlyArray<string>) => new Map(sources.map((s) => [s, entry(s)]))

const candidate = (patch: Partial<SweepCandidate> = {}): SweepCandidate => ({
  ...scope,
  sourceID: "s",
  runID: "run-1",
  documentID: "doc-s",
  kind: "deleted",
  providerDigest: null,
  localDigest: "d1",
  status: "open",
  outcome: null,
  applyAttempts: 0,
  lastErrorKind: null,
  lastErrorMessage: null,
  version: 0,
  createdAt: T,
  updatedAt: T,
  ...patch
})

describe("relist run lifecycle", () => {
  it("a start supersedes whatever run is current, and leaves an ended one alone", () => {
    for (const state of ["started", "listing", "complete"] as const) {
      const { run, superseded } = decideRelistStart(runIn(state, { version: 4 }), scope, "run-2", T + 5)
      expect(run).toMatchObject({ runID: "run-2", state: "started", pagesCommitted: 0, version: 0, startedAt: T + 5 })
      expect(superseded).toMatchObject({ runID: "run-1", state: "superseded", endedAt: T + 5, version: 5, updatedAt: T + 5 })
    }
    for (const state of ["abandoned", "superseded"] as const) {
      expect(decideRelistStart(runIn(state), scope, "run-2", T).superseded).toBeUndefined()
    }
  })

  it("only a listing run takes pages, and only its next one; the last page completes it", () => {
    const listing = runIn("listing", { pagesCommitted: 2, cursor: "c2" })
    expect(decideSweepCheckpoint(listing, { page: 3, cursor: "c3" }, T + 1).next)
      .toMatchObject({ state: "listing", cursor: "c3", pagesCommitted: 3, version: 1, updatedAt: T + 1 })
    expect(decideSweepCheckpoint(listing, { page: 3, cursor: "c3", complete: true }, T + 1))
      .toMatchObject({ outcome: "completed", next: { state: "complete", cursor: null, pagesCommitted: 3, completedAt: T + 1 } })
    for (const page of [1, 2, 4]) expect(decideSweepCheckpoint(listing, { page, cursor: "x" }, T)).toEqual({ outcome: "stale-page", next: undefined })
    expect(decideSweepCheckpoint(runIn("started"), { page: 1, cursor: "c1" }, T).outcome).toBe("committed")
    for (const state of ["complete", "abandoned", "superseded"] as const) {
      expect(decideSweepCheckpoint(runIn(state), { page: 1, cursor: null, complete: true }, T))
        .toEqual({ outcome: "stale-run", next: undefined })
      expect(decideRelistReceipts(runIn(state))).toBe("stale-run")
    }
    expect(decideRelistReceipts(listing)).toBe("recorded")
  })

  it("abandoning ends a current run once", () => {
    expect(decideRelistAbandon(runIn("complete"), T + 2).next).toMatchObject({ state: "abandoned", endedAt: T + 2 })
    expect(decideRelistAbandon(runIn("superseded"), T + 2)).toEqual({ outcome: "already-ended", next: undefined })
  })

  it("a page's receipts keep one per source id, the last listed winning", () => {
    expect(distinctReceipts([
      { sourceID: "a", digest: "1" },
      { sourceID: "b", digest: null },
      { sourceID: "a", digest: "2" }
    ])).toEqual([{ sourceID: "b", digest: null }, { sourceID: "a", digest: "2" }])
  })
})

describe("relist candidate rules", () => {
  const run = runIn("complete")

  it("judges only the run's scope and watches unchanged, row for row, since its baseline", () => {
    expect(deriveCandidate(run, watch("a", "d1"), entry("a"), undefined)?.kind).toBe("deleted")
    // Written since the run started: a higher version.
    expect(deriveCandidate(run, watch("a", "d1", 3), entry("a"), undefined)).toBeUndefined()
    // Created since the run started: no entry at all.
    expect(deriveCandidate(run, watch("a", "d1"), undefined, undefined)).toBeUndefined()
    // Deleted and created again at the same version: another creation.
    expect(deriveCandidate(run, watch("a", "d1"), entry("a", 2, T - 11), undefined)).toBeUndefined()
    // Moved to another document.
    expect(deriveCandidate(run, { ...watch("a", "d1"), documentID: "doc-b" }, entry("a"), undefined)).toBeUndefined()
    expect(deriveCandidate(run, { ...watch("a", "d1"), accountKey: "other" }, entry("a"), undefined)).toBeUndefined()
  })

  it("no clock decides: a watch's times before or after the run's start change nothing", () => {
    fc.assert(fc.property(fc.integer(), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 5 }), (createdAt, now, then) => {
      const row = { ...watch("a", "d1", now), createdAt }
      const judged = deriveCandidate(run, row, entry("a", then, createdAt), undefined) !== undefined
      expect(judged).toBe(now === then)
    }), { numRuns: propertyRuns(100) })
  })

  it("a receipt with another digest than the verified one is a divergence; an unknown digest is none", () => {
    expect(deriveCandidate(run, watch("a", "d1"), entry("a"), { digest: "d2" }))
      .toEqual({ kind: "diverged", providerDigest: "d2", localDigest: "d1" })
    expect(deriveCandidate(run, watch("a", "d1"), entry("a"), { digest: "d1" })).toBeUndefined()
    expect(deriveCandidate(run, watch("a", "d1"), entry("a"), { digest: null })).toBeUndefined()
    expect(deriveCandidate(run, watch("a", null), entry("a"), { digest: "d2" })).toBeUndefined()
  })

  it("a receipted entity is never a deletion candidate", () => {
    fc.assert(fc.property(
      fc.uniqueArray(fc.string({ minLength: 1, maxLength: 3 }), { maxLength: 12 }),
      fc.func(fc.boolean()),
      fc.func(fc.option(fc.constantFrom("d1", "d2"), { nil: null })),
      (sources, seen, digestOf) => {
        const receipts = new Map(sources.filter((s) => seen(s)).map((s) => [s, { digest: digestOf(s) }]))
        const { candidates, counts } = deriveSweepCandidates(run, sources.map((s) => watch(s, "d1")), baselineOf(sources), receipts, [], T)
        for (const c of candidates) expect(c.kind === "deleted").toBe(!receipts.has(c.sourceID))
        expect(counts.deletions).toBe(sources.filter((s) => !receipts.has(s)).length)
        expect(counts.tracked).toBe(sources.length)
      }
    ), { numRuns: propertyRuns(100) })
  })

  it("a given-up case keeps its give-up across runs; every other case starts afresh", () => {
    const previous = [
      candidate({ sourceID: "stuck", runID: "run-0", status: "given_up", applyAttempts: 5, lastErrorKind: "k", version: 7 }),
      candidate({ sourceID: "stale-given-up", runID: "run-0", status: "given_up", applyAttempts: 5 }),
      candidate({ sourceID: "decided", runID: "run-0", status: "decided", outcome: "delete_local", applyAttempts: 2 }),
      candidate({ sourceID: "elsewhere", accountKey: "other", runID: "run-x" })
    ]
    const { candidates } = deriveSweepCandidates(
      run,
      [watch("stuck", "d1"), watch("stale-given-up", "d1"), watch("decided", "d1")],
      baselineOf(["stuck", "stale-given-up", "decided"]),
      new Map([["stale-given-up", { digest: "d1" }]]),
      previous,
      T + 9
    )
    const bySource = new Map(candidates.map((c) => [c.sourceID, c]))
    expect([...bySource.keys()].sort()).toEqual(["decided", "stale-given-up", "stuck"])
    expect(bySource.get("stuck")).toMatchObject({ runID: "run-1", status: "given_up", applyAttempts: 5, lastErrorKind: "k", version: 8 })
    expect(bySource.get("stale-given-up")).toEqual(previous[1])
    expect(bySource.get("decided")).toMatchObject({ runID: "run-1", status: "open", outcome: null, applyAttempts: 0, version: 0 })
  })

  describe("withdrawal: a candidate re-derived against the current watch and operations", () => {
    const own = { ...scope, sourceID: "s" }
    const standing: SweepCandidateBasis = {
      watch: { ...own, documentID: "doc-s", verifiedStateDigest: "d1", version: 2, createdAt: T - 10 },
      baseline: { sourceID: "s", documentID: "doc-s", watchVersion: 2, watchCreatedAt: T - 10 },
      documentWatches: [own],
      documentOperations: ["committed", "dead"]
    }
    const cases: ReadonlyArray<readonly [string, Partial<SweepCandidateBasis>, string | undefined]> = [
      ["nothing changed", {}, undefined],
      ["the watch is gone (superseded by another source)", { watch: undefined, documentWatches: [] }, "watch-gone"],
      ["a later write armed the watch", { watch: { ...standing.watch!, version: 3 } }, "watch-changed"],
      ["the watch moved to another document", { watch: { ...standing.watch!, documentID: "doc-t" } }, "watch-changed"],
      ["the run has no baseline for it", { baseline: undefined }, "watch-changed"],
      ["the watch was created again", { watch: { ...standing.watch!, createdAt: T } }, "watch-changed"],
      ["a new source tracks the document", { documentWatches: [own, { ...own, sourceID: "s1b" }] }, "document-reused"],
      ["another owner tracks the document", { documentWatches: [own, { ...own, ownerDID: "did:p" }] }, "document-reused"],
      ["a write to the document is attempted", { documentOperations: ["dead", "attempted"] }, "write-in-flight"],
      ["a write to the document is in doubt", { documentOperations: ["reconcile_only"] }, "write-in-flight"]
    ]
    for (const [label, patch, reason] of cases) {
      it(`${label}: ${reason ?? "stands"}`, () => {
        for (const kind of ["deleted", "diverged"] as const) {
          expect(withdrawalOf(candidate({ kind }), { ...standing, ...patch })).toBe(reason)
        }
      })
    }
  })

  it("the deletion allowance is the fraction of the tracked set, rounded down", () => {
    expect(deletionAllowance(100, 0.29)).toBe(29)
    expect(deletionAllowance(3, 0.5)).toBe(1)
    expect(deletionAllowance(0, 1)).toBe(0)
    expect(deletionAllowance(7, 1)).toBe(7)
  })
})

describe("relist candidate transitions", () => {
  it("delete_local is only for deletion candidates; keep settles at once", () => {
    expect(decideSweepOutcome(candidate({ kind: "diverged" }), "delete_local", T).outcome).toBe("not-allowed")
    expect(decideSweepOutcome(candidate(), "keep", T).next).toMatchObject({ status: "kept", outcome: "keep", version: 1 })
    expect(decideSweepOutcome(candidate({ kind: "diverged" }), "reingest", T).next).toMatchObject({ status: "decided" })
  })

  it("the fifth failed apply of a decided candidate gives it up; the four before it retry", () => {
    let row = decideSweepOutcome(candidate(), "delete_local", T).next!
    for (let failure = 1; failure <= 4; failure++) {
      const decision = decideSweepApplyFailure(row, { kind: "k", message: `m${failure}` }, T)
      expect(decision.outcome).toBe("retry")
      row = decision.next!
      expect(row).toMatchObject({ status: "decided", applyAttempts: failure })
    }
    const fifth = decideSweepApplyFailure(row, { kind: "k", message: "m5" }, T)
    expect(fifth.outcome).toBe("given-up")
    expect(fifth.next).toMatchObject({ status: "given_up", applyAttempts: 5 })
  })

  it("applies, failures and re-arms never push attempts past the cap nor apply a given-up candidate", () => {
    type Step = "delete" | "keep" | "apply" | "fail" | "rearm"
    fc.assert(fc.property(fc.array(fc.oneof({ arbitrary: fc.constantFrom<Step>("delete", "keep", "apply", "rearm"), weight: 1 }, { arbitrary: fc.constant<Step>("fail"), weight: 3 }), { maxLength: 40 }), (steps) => {
      let row = candidate()
      let failuresSinceArm = 0
      for (const step of steps) {
        const before = row
        const decision = step === "delete"
          ? decideSweepOutcome(row, "delete_local", T)
          : step === "keep"
          ? decideSweepOutcome(row, "keep", T)
          : step === "apply"
          ? decideSweepApplied(row, T)
          : step === "fail"
          ? decideSweepApplyFailure(row, { kind: "k", message: "m" }, T)
          : decideSweepRearm(row, T)
        row = decision.next ?? row
        if (step === "fail" && before.status === "decided") failuresSinceArm++
        if (step === "rearm" && before.status === "given_up") failuresSinceArm = 0
        expect(row.applyAttempts).toBeLessThanOrEqual(SWEEP_APPLY_ATTEMPTS)
        expect(row.applyAttempts).toBe(Math.min(failuresSinceArm, SWEEP_APPLY_ATTEMPTS))
        if (before.status === "given_up" && step !== "rearm") expect(decision.next).toBeUndefined()
        if (row.status === "applied") expect(before.status === "decided" || before.status === "applied").toBe(true)
        expect(row.status === "given_up").toBe(failuresSinceArm >= SWEEP_APPLY_ATTEMPTS)
      }
    }), { numRuns: propertyRuns(100) })
  })
})

describe("relist retention rule", () => {
  it("takes ended runs last written before the cutoff, oldest first, never a current one", () => {
    const runs = [
      runIn("superseded", { runID: "b", updatedAt: 5 }),
      runIn("abandoned", { runID: "a", updatedAt: 5 }),
      runIn("superseded", { runID: "c", updatedAt: 3 }),
      runIn("superseded", { runID: "late", updatedAt: 10 }),
      runIn("complete", { runID: "current", updatedAt: 1 }),
      runIn("listing", { runID: "listing", updatedAt: 1 })
    ]
    expect(collectableRelistRuns(runs, { before: 10, limit: 10 })).toEqual(["c", "a", "b"])
    expect(collectableRelistRuns(runs, { before: 10, limit: 2 })).toEqual(["c", "a"])
    expect(collectableRelistRuns(runs, { before: 3, limit: 10 })).toEqual([])
  })
})
