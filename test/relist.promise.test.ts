import {
  type ConnectorStore,
  type PromiseConnectorStore,
  type RelistScope,
  WatchRepository
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"

/** The documented number of failed applies that gives a candidate up, stated on its own (not read from the code). */
const SWEEP_APPLY_ATTEMPTS = 5

const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }

for (const adapter of adapters) {
  const entryPoint = adapter.name === "memory" ? "openMemoryConnectorStore" : `openConnectorStore on ${adapter.name}`
  describe(`the relist sweep through the Promise API (${entryPoint})`, () => {
    let now = NOW
    let store: PromiseConnectorStore<unknown> | undefined
    const open = async () => {
      store = adapter.name === "memory"
        ? openMemoryConnectorStore({ now: () => now })
        : await openConnectorStore({ ...(await adapter.connection()), now: () => now })
      await store.runEffect(
        seedWatches(
          ...["kept", "gone", "moved"].map((sourceID) =>
            watchRow({ ...scope, sourceID, documentID: `doc-${sourceID}`, verifiedStateDigest: "d1", updatedAt: NOW - 1 })
          )
        ) as unknown as Effect.Effect<void, unknown, ConnectorStore>
      )
      return store
    }
    afterEach(async () => {
      await store?.close()
      now = NOW
    })

    it("a relist that crashes, resumes, completes and applies its candidates", async () => {
      const s = await open()
      const run = await s.startRelistRun(scope)
      expect(await s.commitSweepCheckpoint(run.runID, { page: 1, cursor: "p2", receipts: [{ sourceID: "kept", digest: "d1" }] }))
        .toBe("committed")
      expect(await s.listSweepCandidates(run.runID, { limit: 10 }).catch((e: unknown) => e))
        .toMatchObject({ _tag: "RelistRunNotComplete", state: "listing" })
      now += 1_000
      // A new process picks up where the crashed one stopped.
      const resume = await s.getSweepCheckpoint(scope)
      expect(resume).toMatchObject({ runID: run.runID, cursor: "p2", pagesCommitted: 1 })
      expect(await s.recordRelistReceipt(run.runID, [{ sourceID: "moved", digest: "d2" }])).toBe("recorded")
      expect(await s.commitSweepCheckpoint(run.runID, { page: resume!.pagesCommitted + 1, cursor: null, receipts: [], complete: true }))
        .toBe("completed")
      expect(await s.getRelistRun(run.runID)).toMatchObject({ state: "complete", completedAt: NOW + 1_000 })
      expect(await s.listSweepReceipts(run.runID, { limit: 10 })).toEqual([
        { runID: run.runID, sourceID: "kept", digest: "d1", seenAt: NOW },
        { runID: run.runID, sourceID: "moved", digest: "d2", seenAt: NOW + 1_000 }
      ])
      await expect(s.listSweepCandidates(run.runID, { limit: 10, maxDeletionFraction: 0.1 }))
        .rejects.toMatchObject({ _tag: "DeletionLimitExceeded", deletions: 1, tracked: 3 })
      const candidates = await s.listSweepCandidates(run.runID, { limit: 10, maxDeletionFraction: 0.5 })
      expect(candidates.map((c) => [c.sourceID, c.kind])).toEqual([["gone", "deleted"], ["moved", "diverged"]])

      const gone = { runID: run.runID, sourceID: "gone" }
      const moved = { runID: run.runID, sourceID: "moved" }
      await expect(s.recordSweepOutcome(moved, "delete_local")).rejects.toMatchObject({ _tag: "SweepOutcomeNotAllowed" })
      expect(await s.recordSweepOutcome(gone, "delete_local")).toBe("recorded")
      expect(await s.recordSweepOutcome(moved, "reingest")).toBe("recorded")
      expect(await s.markSweepCandidateApplied(moved)).toBe("applied")
      for (let i = 1; i <= SWEEP_APPLY_ATTEMPTS; i++) {
        expect(await s.recordSweepApplyFailure(gone, { kind: "permission", message: "403" }))
          .toBe(i < SWEEP_APPLY_ATTEMPTS ? "retry" : "given-up")
      }
      expect(await s.markSweepCandidateApplied(gone)).toBe("given-up")
      expect(await s.listSweepCandidates(run.runID, { limit: 10 })).toEqual([])
      const givenUp = await s.listGivenUpSweepCandidates(scope, { limit: 10 })
      expect(givenUp.map((c) => [c.sourceID, c.applyAttempts, c.lastErrorKind, c.lastErrorMessage]))
        .toEqual([["gone", SWEEP_APPLY_ATTEMPTS, "permission", "403"]])
      expect(await s.rearmSweepCandidate({ ...scope, sourceID: "gone" })).toBe("rearmed")
      expect(await s.getSweepCandidate({ ...scope, sourceID: "gone" })).toMatchObject({ status: "open", applyAttempts: 0 })
      expect(await s.getSweepCandidate({ ...scope, sourceID: "nope" })).toBeNull()
    })

    it("a superseded run's runner is told it is stale, and retention takes the old run", async () => {
      const s = await open()
      const old = await s.startRelistRun(scope)
      now += 10
      const current = await s.startRelistRun(scope)
      expect(await s.commitSweepCheckpoint(old.runID, { page: 1, cursor: null, receipts: [], complete: true })).toBe("stale-run")
      expect(await s.getSweepCheckpoint(scope)).toMatchObject({ runID: current.runID })
      expect(await s.abandonRelistRun(current.runID)).toBe("abandoned")
      expect(await s.getSweepCheckpoint(scope)).toBeNull()
      await expect(s.collectRelistRuns({ before: Number.NaN, limit: 1 })).rejects.toMatchObject({ _tag: "InvalidInput", field: "params.before" })
      expect(await s.collectRelistRuns({ before: NOW + 11, limit: 10 })).toBe(2)
      expect(await s.getRelistRun(old.runID)).toBeNull()
      await expect(s.listSweepReceipts(old.runID, { limit: 1 })).rejects.toMatchObject({ _tag: "RelistRunNotFound" })
      // The watches, the tracked set, are the sweep's input, never its output.
      const tracked = await s.runEffect(
        Effect.flatMap(WatchRepository, (w) => w.listByDocuments(["doc-gone"])) as unknown as Effect.Effect<
          ReadonlyArray<unknown>,
          unknown,
          ConnectorStore
        >
      )
      expect(tracked.length).toBe(1)
    })
  })
}
