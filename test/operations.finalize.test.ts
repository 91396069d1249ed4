import { ConnectorStore, type FinalizeOperationInput, type ProjectionWatch } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  attemptedRow,
  claimed,
  claimedAndSent,
  claimInput,
  KEY,
  NOW,
  onOperationStore,
  POLICY
} from "./operations.fixtures.js"
import { identityOf, watchRow } from "./support/contract/fixtures.js"
import {
  at,
  failsChangingNothing,
  seedOperations,
  seedWatches,
  storedOperation,
  storedWatch,
  succeedsChangingNothing
} from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

const WATCH_DUE = NOW + 60_000
const id = identityOf()

const finalizeInput = (leaseToken: string, overrides: Partial<FinalizeOperationInput> = {}): FinalizeOperationInput => ({
  leaseToken,
  sourceID: "src-1",
  documentID: "doc-1",
  providerEtag: "etag-1",
  resultEntity: { id: "src-1", title: "Lunch" },
  watchDueAt: WATCH_DUE,
  ...overrides
})

for (const adapter of adapters) {
  const onStore = <A, E>(winners: Winners, body: Effect.Effect<A, E, StoreServices>) =>
    onOperationStore(adapter, winners.single(), body)

  describe(`finalizeOperationAndArmWatch on ${adapter.name}`, () => {
    it.effect("commits the operation and creates its watch, pending, due at the given time, observed := current winner", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        yield* at(NOW + 2_000)
        const store = yield* ConnectorStore
        const result = yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token))
        const watch: ProjectionWatch = {
          ...id,
          documentID: "doc-1",
          verifiedStateDigest: null,
          observedWinnerDigest: "w-1",
          verificationStatus: "pending_verification",
          verificationAttempts: 0,
          repairGeneration: 0,
          nextAttemptAt: WATCH_DUE,
          claimedUntil: null,
          deferReason: null,
          version: 0,
          createdAt: NOW + 2_000,
          updatedAt: NOW + 2_000
        }
        expect(result).toEqual({ outcome: "committed", operation: yield* storedOperation(KEY), watch, superseded: [] })
        expect(yield* storedOperation(KEY)).toMatchObject({
          state: "committed",
          sourceID: "src-1",
          documentID: "doc-1",
          providerEtag: "etag-1",
          resultEntity: { id: "src-1", title: "Lunch" },
          attempts: 1,
          sendMarker: token,
          leaseToken: null,
          leaseExpiresAt: null,
          nextAttemptAt: null,
          version: 2,
          updatedAt: NOW + 2_000
        })
        expect(yield* storedWatch(id)).toEqual(watch)
        expect(winners.singleReads).toEqual(["doc-1"])
      }))
    })

    it.effect("a create learns its source on commit: the watch is under the provider's new id", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const input = claimInput({ op: "create", sourceID: null, reissueIntent: { kind: "deterministic-create", providerID: "evt-7" } })
        const token = yield* claimedAndSent(input)
        const store = yield* ConnectorStore
        yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token, { sourceID: "evt-7" }))
        expect((yield* storedOperation(KEY))?.sourceID).toBe("evt-7")
        expect((yield* storedWatch(identityOf({ sourceID: "evt-7" }))).observedWinnerDigest).toBe("w-1")
      }))
    })

    it.effect("an existing watch of the identity is opened for a new generation", () => {
      const winners = new Winners({ "doc-1": "w-2" })
      return onStore(winners, Effect.gen(function*() {
        const existing = watchRow({ verificationStatus: "verified", repairGeneration: 4, verificationAttempts: 2, nextAttemptAt: null, claimedUntil: NOW + 5, deferReason: "auth" })
        yield* seedWatches(existing)
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const result = yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token))
        const opened: ProjectionWatch = {
          ...existing,
          repairGeneration: 5,
          verificationAttempts: 0,
          verificationStatus: "pending_verification",
          observedWinnerDigest: "w-2",
          nextAttemptAt: WATCH_DUE,
          claimedUntil: null,
          deferReason: null,
          version: existing.version + 1,
          updatedAt: NOW
        }
        expect(result).toMatchObject({ outcome: "committed", watch: opened, superseded: [] })
        expect(yield* storedWatch(id)).toEqual(opened)
      }))
    })

    it.effect("a watch of the same owner, model and document under another source is superseded", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const old = watchRow({ sourceID: "src-old", verificationStatus: "verified", nextAttemptAt: null })
        const otherOwner = watchRow({ ownerDID: "did:owner:2", sourceID: "src-x" })
        const otherDocument = watchRow({ sourceID: "src-y", documentID: "doc-2" })
        yield* seedWatches(old, otherOwner, otherDocument)
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const result = yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token))
        expect(result).toMatchObject({ outcome: "committed", superseded: [identityOf({ sourceID: "src-old" })] })
        expect(yield* store.getWatch(identityOf({ sourceID: "src-old" }))).toMatchObject({ _tag: "None" })
        expect(yield* storedWatch(id)).toMatchObject({ documentID: "doc-1", repairGeneration: 0 })
        expect(yield* storedWatch(identityOf({ ownerDID: "did:owner:2", sourceID: "src-x" }))).toEqual(otherOwner)
        expect(yield* storedWatch(identityOf({ sourceID: "src-y" }))).toEqual(otherDocument)
      }))
    })

    it.effect("a replay of the same finalize by the same run is already-committed and changes nothing", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token))
        yield* at(NOW + 1)
        const again = yield* succeedsChangingNothing(store.finalizeOperationAndArmWatch(KEY, finalizeInput(token)))
        expect(again).toEqual({ outcome: "already-committed", operation: yield* storedOperation(KEY) })
      }))
    })

    it.effect("a runner whose lease expired and was taken over changes nothing (lease-lost)", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const stale = yield* claimedAndSent()
        yield* at(NOW + POLICY.leaseMs)
        const current = yield* claimed()
        const store = yield* ConnectorStore
        const result = yield* succeedsChangingNothing(store.finalizeOperationAndArmWatch(KEY, finalizeInput(stale)))
        expect(result).toEqual({ outcome: "lease-lost", operation: current.operation })
        expect(winners.singleReads).toEqual([])
      }))
    })

    it.effect("a runner whose lease expired but was not taken over still commits (the token fences, not the clock)", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        yield* at(NOW + POLICY.leaseMs * 3)
        const store = yield* ConnectorStore
        expect(yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token))).toMatchObject({ outcome: "committed" })
      }))
    })

    it.effect("finalize racing a second finalize of the same run: one commits, the other is already-committed", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const results = yield* Effect.all(
          [store.finalizeOperationAndArmWatch(KEY, finalizeInput(token)), store.finalizeOperationAndArmWatch(KEY, finalizeInput(token))],
          { concurrency: 2 }
        )
        expect(results.map((r) => r.outcome).sort()).toEqual(["already-committed", "committed"])
        expect((yield* storedWatch(id)).version).toBe(0)
      }))
    })

    it.effect("finalize racing a stale runner's finalize: only the lease holder commits", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const stale = yield* claimedAndSent()
        yield* at(NOW + POLICY.leaseMs)
        const current = yield* claimed()
        const store = yield* ConnectorStore
        const [a, b] = yield* Effect.all(
          [
            store.finalizeOperationAndArmWatch(KEY, finalizeInput(stale, { sourceID: "src-stale" })),
            store.finalizeOperationAndArmWatch(KEY, finalizeInput(current.lease.token))
          ],
          { concurrency: 2 }
        )
        expect(a.outcome).toBe("lease-lost")
        expect(b.outcome).toBe("committed")
        expect((yield* storedOperation(KEY))?.sendMarker).toBe(current.lease.token)
        expect(yield* store.getWatch(identityOf({ sourceID: "src-stale" }))).toMatchObject({ _tag: "None" })
      }))
    })

    it.effect("a run whose request was in doubt (reconcile_only) commits once it learns the request landed; no other run may", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const input = claimInput({ reissueIntent: { kind: "reconcile" } })
        const doubtful = yield* claimedAndSent(input)
        yield* at(NOW + POLICY.leaseMs)
        const store = yield* ConnectorStore
        expect(yield* store.claimOperation(input)).toMatchObject({ outcome: "finished", operation: { state: "reconcile_only" } })
        expect(yield* succeedsChangingNothing(store.finalizeOperationAndArmWatch(KEY, finalizeInput("another-run"))))
          .toMatchObject({ outcome: "lease-lost" })
        expect(yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(doubtful)))
          .toMatchObject({ outcome: "committed", operation: { state: "committed", attempts: 1 } })
      }))
    })

    it.effect("a finalize without a send marker counts its attempt", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const claim = yield* claimed()
        const store = yield* ConnectorStore
        expect(yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(claim.lease.token)))
          .toMatchObject({ operation: { attempts: 1, sendMarker: claim.lease.token } })
      }))
    })

    it.effect("a winner read that fails applies nothing: the operation stays leased and the finalize can be retried", () => {
      const winners = new Winners({ "doc-1": "w-1" }).breakRead("doc-1")
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.finalizeOperationAndArmWatch(KEY, finalizeInput(token)))
        expect(error).toMatchObject({ _tag: "WinnerReadFailed", documentID: "doc-1" })
        expect(yield* storedOperation(KEY)).toMatchObject({ state: "attempted", leaseToken: token })
      }))
    })

    it.effect("a store without a winner reader refuses to finalize and changes nothing", () =>
      onOperationStore(adapter, {}, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.finalizeOperationAndArmWatch(KEY, finalizeInput(token)))
        expect(error).toMatchObject({ _tag: "WinnerReaderMissing", method: "finalizeOperationAndArmWatch" })
      })))

    it.effect("armWatch(…, 'finalize') stays refused", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        yield* seedWatches(watchRow())
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.armWatch(id, "finalize" as never /* outside the type: an untyped caller */, { dueAt: NOW }))
        expect(error).toMatchObject({ _tag: "ReservedArmReason" })
      }))
    })

    it.effect("the armed watch runs its verify cycle: claim the attempt, record a matching fetch → verified", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(token, { watchDueAt: NOW }))
        expect(yield* store.claimWatchAttempt(id, { generation: 0, until: NOW + 5_000, now: NOW })).toBe(true)
        expect(yield* store.recordVerification(id, { generation: 0, claimedUntil: NOW + 5_000, fetchedDigest: "w-1", maxAttempts: 3, dueAt: NOW + 1 }))
          .toBe("verified")
      }))
    })
  })

  describe(`the due sweep and retention over written operations on ${adapter.name}`, () => {
    it.effect("the sweep returns an operation a crashed runner left behind once its lease lapsed, never one under a live lease", () => {
      const winners = new Winners()
      return onStore(winners, Effect.gen(function*() {
        yield* claimedAndSent()
        const store = yield* ConnectorStore
        const live = yield* store.listDueOperations(NOW + POLICY.leaseMs - 1)
        expect(live.operations).toEqual([])
        const due = yield* store.listDueOperations(NOW + POLICY.leaseMs)
        expect(due.operations.map((row) => row.operationID)).toEqual([KEY.operationID])
      }))
    })

    it.effect("the sweep returns a retrying operation once its backoff passed, and never a finished one", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const retry = yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "retryable" })
        const next = retry.operation!.nextAttemptAt!
        expect((yield* store.listDueOperations(next - 1)).operations).toEqual([])
        expect((yield* store.listDueOperations(next)).operations).toHaveLength(1)
        yield* at(next)
        const again = yield* claimedAndSent()
        yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(again))
        expect((yield* store.listDueOperations(next + 10 * POLICY.leaseMs)).operations).toEqual([])
      }))
    })

    it.effect("retention collects a superseded committed operation written through the API and keeps the newest", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onStore(winners, Effect.gen(function*() {
        const store = yield* ConnectorStore
        const first = yield* claimedAndSent()
        yield* store.finalizeOperationAndArmWatch(KEY, finalizeInput(first))
        yield* at(NOW + 1_000)
        const secondKey = { ...KEY, operationID: "op-2" }
        const second = yield* claimedAndSent(claimInput({ operationID: "op-2", payloadHash: "hash-2" }))
        yield* store.finalizeOperationAndArmWatch(secondKey, finalizeInput(second))
        yield* at(NOW + 10_000)
        expect(yield* store.collectFinishedOperations({ before: NOW + 5_000, limit: 10 })).toBe(1)
        expect(yield* storedOperation(KEY)).toBeUndefined()
        expect(yield* storedOperation(secondKey)).toMatchObject({ state: "committed" })
        expect(yield* store.getDocumentWriteStates(["doc-1"])).toEqual(new Map([["doc-1", "committed"]]))
      }))
    })

    it.effect("retention never collects an attempted or reconcile_only operation", () => {
      const winners = new Winners()
      return onStore(winners, Effect.gen(function*() {
        yield* seedOperations(
          attemptedRow({ updatedAt: NOW - 99_000 }),
          attemptedRow({ operationID: "op-2", nodeKey: "n2", state: "reconcile_only", nextAttemptAt: null, documentID: null, updatedAt: NOW - 99_000 })
        )
        const store = yield* ConnectorStore
        expect(yield* store.collectFinishedOperations({ before: NOW, limit: 10 })).toBe(0)
      }))
    })
  })
}
