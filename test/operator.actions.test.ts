import { ConnectorStore, type ConnectorOperation, type ProjectionWatch } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { attemptedRow, claimInput, KEY, NOW, onOperationStore, POLICY } from "./operations.fixtures.js"
import { identityOf, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, seedOperations, seedWatches, storedOperation, storedWatch } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** A reconcile_only operation whose request (by run "run-1") is in doubt. */
const unconfirmed = (overrides: Partial<ConnectorOperation> = {}) =>
  attemptedRow({ state: "reconcile_only", sendMarker: "run-1", nextAttemptAt: null, lastKind: "unknown", ...overrides })

const settleCommitted = {
  outcome: "committed",
  sourceID: "src-9",
  documentID: "doc-1",
  providerEtag: "etag-9",
  resultEntity: { id: "src-9", title: "Lunch" },
  watchDueAt: NOW + 60_000
} as const

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>, winners: Winners = new Winners({ "doc-1": "w-now" })) =>
    onOperationStore(adapter, winners.single(), body)
  const onStoreWithoutReader = <A, E>(body: Effect.Effect<A, E, StoreServices>) => onOperationStore(adapter, {}, body)

  describe(`settleOperation on ${adapter.name}`, () => {
    it.effect("settles a reconcile_only operation as committed with the provider entity and arms its watch", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(unconfirmed())
        const store = yield* ConnectorStore
        const result = yield* store.settleOperation(KEY, settleCommitted)
        const stored = yield* storedOperation(KEY)
        expect(stored).toEqual({
          ...unconfirmed(),
          state: "committed",
          sourceID: "src-9",
          documentID: "doc-1",
          providerEtag: "etag-9",
          resultEntity: { id: "src-9", title: "Lunch" },
          sendMarker: null,
          nextAttemptAt: null,
          version: 5,
          updatedAt: NOW
        })
        expect(result.operation).toEqual(stored)
        const watch = yield* storedWatch(identityOf({ sourceID: "src-9" }))
        expect(watch).toEqual({
          ...identityOf({ sourceID: "src-9" }),
          documentID: "doc-1",
          verifiedStateDigest: null,
          observedWinnerDigest: "w-now",
          verificationStatus: "pending_verification",
          verificationAttempts: 0,
          repairGeneration: 0,
          nextAttemptAt: NOW + 60_000,
          claimedUntil: null,
          deferReason: null,
          version: 0,
          createdAt: NOW,
          updatedAt: NOW
        } satisfies ProjectionWatch)
        expect(result.watch).toEqual(watch)
        expect(result.superseded).toEqual([])
      })))

    it.effect("a committed settle supersedes the document's watch under another source and opens an existing one", () =>
      onStore(Effect.gen(function*() {
        const old = watchRow({ sourceID: "src-old", documentID: "doc-1" })
        const existing = watchRow({ sourceID: "src-9", documentID: "doc-other", verificationStatus: "repair_failed" })
        yield* seedOperations(unconfirmed())
        yield* seedWatches(old, existing)
        const store = yield* ConnectorStore
        const result = yield* store.settleOperation(KEY, settleCommitted)
        expect(result.superseded).toEqual([identityOf({ sourceID: "src-old" })])
        expect(result.watch).toEqual({
          ...existing,
          documentID: "doc-1",
          observedWinnerDigest: "w-now",
          verificationStatus: "pending_verification",
          verificationAttempts: 0,
          repairGeneration: existing.repairGeneration + 1,
          nextAttemptAt: NOW + 60_000,
          version: existing.version + 1,
          updatedAt: NOW
        })
        const repo = yield* Effect.flatMap(ConnectorStore, (s) => s.getWatch(identityOf({ sourceID: "src-old" })))
        expect(repo._tag).toBe("None")
      })))

    it.effect("without a winner reader a committed settle keeps the watch's observed winner (none for a new watch)", () =>
      onStoreWithoutReader(Effect.gen(function*() {
        yield* seedOperations(unconfirmed())
        const store = yield* ConnectorStore
        const result = yield* store.settleOperation(KEY, settleCommitted)
        expect(result.watch?.observedWinnerDigest).toBeNull()
        expect(result.operation.state).toBe("committed")
      })))

    it.effect("settles a reconcile_only operation as dead, clearing the in-doubt fact", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(unconfirmed())
        const store = yield* ConnectorStore
        const result = yield* store.settleOperation(KEY, { outcome: "dead" })
        expect(yield* storedOperation(KEY)).toEqual({
          ...unconfirmed(),
          state: "dead",
          sendMarker: null,
          version: 5,
          updatedAt: NOW
        })
        expect(result.watch).toBeNull()
        const status = yield* store.getStoreStatus()
        expect(status.inDoubt).toBe(0)
      })))

    it.effect("settles a dead operation that is still in doubt", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(unconfirmed({ state: "dead" }))
        const store = yield* ConnectorStore
        const result = yield* store.settleOperation(KEY, { outcome: "dead" })
        expect(result.operation.sendMarker).toBeNull()
      })))

    it.effect("a settle clears a durable doubt from an earlier run: the operation is no longer in doubt and retry is safe", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(unconfirmed({ sendMarker: null, inDoubtSince: NOW - 90_000, reissueIntent: { kind: "reconcile" } }))
        const store = yield* ConnectorStore
        const settled = yield* store.settleOperation(KEY, { outcome: "dead" })
        expect([settled.operation.state, settled.operation.inDoubtSince, settled.operation.sendMarker]).toEqual(["dead", null, null])
        expect((yield* store.getStoreStatus()).inDoubt).toBe(0)
        const retried = yield* store.retryOperation(KEY)
        expect([retried.state, retried.inDoubtSince]).toEqual(["attempted", null])
        const claim = yield* store.claimOperation(claimInput())
        expect(claim).toMatchObject({ outcome: "claimed", reissue: null })
      })))

    for (const state of ["attempted", "committed"] as const) {
      it.effect(`refuses a ${state} operation and changes nothing`, () =>
        onStore(Effect.gen(function*() {
          yield* seedOperations(attemptedRow({ state, sendMarker: state === "attempted" ? "run-1" : null }))
          const store = yield* ConnectorStore
          const error = yield* failsChangingNothing(store.settleOperation(KEY, settleCommitted))
          expect(error._tag).toBe("OperatorActionRefused")
          expect(error.message).toContain(`it is ${state === "attempted" ? "still attempted" : "committed"}`)
        })))
    }

    it.effect("refuses a dead operation whose outcome is known (not in doubt)", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ state: "dead", sendMarker: null }))
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.settleOperation(KEY, { outcome: "dead" }))
        expect(error._tag).toBe("OperatorActionRefused")
      })))

    it.effect("an unknown key is OperatorTargetNotFound; bad input is InvalidInput naming the field; nothing changes", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(unconfirmed())
        const store = yield* ConnectorStore
        const missing = yield* failsChangingNothing(store.settleOperation({ ...KEY, operationID: "nope" }, { outcome: "dead" }))
        expect(missing).toMatchObject({ _tag: "OperatorTargetNotFound", what: "operation" })
        const noSource = yield* failsChangingNothing(store.settleOperation(KEY, { ...settleCommitted, sourceID: "" }))
        expect(noSource).toMatchObject({ _tag: "InvalidInput", field: "input.sourceID" })
        const badOutcome = yield* failsChangingNothing(store.settleOperation(KEY, { outcome: "maybe" } as never))
        expect(badOutcome).toMatchObject({ _tag: "InvalidInput", field: "input.outcome" })
        const badDue = yield* failsChangingNothing(store.settleOperation(KEY, { ...settleCommitted, watchDueAt: 1.5 }))
        expect(badDue).toMatchObject({ _tag: "InvalidInput", field: "input.watchDueAt" })
      })))
  })

  describe(`retryOperation on ${adapter.name}`, () => {
    it.effect("a dead operation not in doubt becomes attempted, due now, with a fresh attempt budget", () =>
      onStore(Effect.gen(function*() {
        const dead = attemptedRow({ state: "dead", attempts: POLICY.maxAttempts, nextAttemptAt: null, lastKind: "permanent" })
        yield* seedOperations(dead)
        const store = yield* ConnectorStore
        const retried = yield* store.retryOperation(KEY)
        const expected = { ...dead, state: "attempted", attempts: 0, nextAttemptAt: NOW, version: 5, updatedAt: NOW }
        expect(retried).toEqual(expected)
        expect(yield* storedOperation(KEY)).toEqual(expected)
        yield* at(NOW + 1)
        const claim = yield* store.claimOperation(claimInput())
        expect(claim.outcome).toBe("claimed")
        if (claim.outcome === "claimed") expect(claim.reissue).toBeNull()
      })))

    it.effect("a dead operation in doubt with a safe intent is retried and stays in doubt: the next claim gets the reissue intent", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ state: "dead", sendMarker: "run-1", nextAttemptAt: null }))
        const store = yield* ConnectorStore
        const retried = yield* store.retryOperation(KEY)
        expect([retried.sendMarker, retried.inDoubtSince]).toEqual([null, NOW])
        expect((yield* store.getStoreStatus()).inDoubt).toBe(1)
        const claim = yield* store.claimOperation(claimInput())
        expect(claim).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update", ifMatch: "etag-0" } })
      })))

    it.effect("a dead operation in doubt from an earlier run (no marker of its own) keeps its doubt and its date when retried", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ state: "dead", inDoubtSince: NOW - 50_000, nextAttemptAt: null }))
        const store = yield* ConnectorStore
        const retried = yield* store.retryOperation(KEY)
        expect([retried.state, retried.inDoubtSince]).toEqual(["attempted", NOW - 50_000])
        const claim = yield* store.claimOperation(claimInput())
        expect(claim).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update", ifMatch: "etag-0" } })
      })))

    it.effect("refuses a dead operation in doubt from an earlier run whose intent allows no safe re-send", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ state: "dead", inDoubtSince: NOW - 50_000, reissueIntent: { kind: "reconcile" } }))
        const store = yield* ConnectorStore
        expect(yield* failsChangingNothing(store.retryOperation(KEY))).toMatchObject({ _tag: "OperatorActionRefused" })
      })))

    it.effect("refuses a dead operation in doubt whose intent allows no safe re-send, telling to settle it", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ state: "dead", sendMarker: "run-1", reissueIntent: { kind: "reconcile" } }))
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.retryOperation(KEY))
        expect(error._tag).toBe("OperatorActionRefused")
        expect(error.message).toMatch(/may have landed.*settle/)
      })))

    for (const state of ["attempted", "committed", "reconcile_only"] as const) {
      it.effect(`refuses a ${state} operation`, () =>
        onStore(Effect.gen(function*() {
          yield* seedOperations(attemptedRow({ state }))
          const store = yield* ConnectorStore
          const error = yield* failsChangingNothing(store.retryOperation(KEY))
          expect(error).toMatchObject({ _tag: "OperatorActionRefused" })
          expect(error.message).toContain(`it is ${state}`)
        })))
    }

    it.effect("an unknown key fails OperatorTargetNotFound; a malformed key InvalidInput", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        expect(yield* failsChangingNothing(store.retryOperation(KEY))).toMatchObject({ _tag: "OperatorTargetNotFound" })
        expect(yield* failsChangingNothing(store.retryOperation({ ...KEY, callerDID: "" })))
          .toMatchObject({ _tag: "InvalidInput", field: "key.callerDID" })
      })))
  })

  describe(`rearmWatch on ${adapter.name}`, () => {
    it.effect("opens a new generation of a repair_failed watch, due at the given time, observed := current winner", () =>
      onStore(Effect.gen(function*() {
        const failed = watchRow({ verificationStatus: "repair_failed", nextAttemptAt: null, verificationAttempts: 5 })
        yield* seedWatches(failed)
        const store = yield* ConnectorStore
        const armed = yield* store.rearmWatch(identityOf(), { dueAt: NOW + 5_000 })
        const expected: ProjectionWatch = {
          ...failed,
          verificationStatus: "pending_verification",
          verificationAttempts: 0,
          repairGeneration: failed.repairGeneration + 1,
          observedWinnerDigest: "w-now",
          nextAttemptAt: NOW + 5_000,
          version: failed.version + 1,
          updatedAt: NOW
        }
        expect(armed).toEqual(expected)
        expect(yield* storedWatch(identityOf())).toEqual(expected)
      })))

    it.effect("without a winner reader keeps the observed winner", () =>
      onStoreWithoutReader(Effect.gen(function*() {
        yield* seedWatches(watchRow({ verificationStatus: "repair_failed" }))
        const store = yield* ConnectorStore
        const armed = yield* store.rearmWatch(identityOf(), { dueAt: NOW })
        expect(armed.observedWinnerDigest).toBe("digest-observed")
        expect(armed.verificationStatus).toBe("pending_verification")
      })))

    it.effect("an unknown watch is OperatorTargetNotFound; a bad due time InvalidInput; nothing changes", () =>
      onStore(Effect.gen(function*() {
        yield* seedWatches(watchRow())
        const store = yield* ConnectorStore
        expect(yield* failsChangingNothing(store.rearmWatch(identityOf({ sourceID: "nope" }), { dueAt: NOW })))
          .toMatchObject({ _tag: "OperatorTargetNotFound", what: "watch" })
        expect(yield* failsChangingNothing(store.rearmWatch(identityOf(), { dueAt: -1 })))
          .toMatchObject({ _tag: "InvalidInput", field: "options.dueAt" })
      })))
  })
}
