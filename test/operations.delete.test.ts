import { ConnectorStore, type FinalizeDeleteInput } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { Effect } from "effect"
import { attemptedRow, claimed, claimedAndSent, claimInput, KEY, NOW, onOperationStore } from "./operations.fixtures.js"
import { identityOf, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, seedOperations, seedWatches, storedOperation, succeedsChangingNothing } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/**
 * Delete write-backs: claimed, marked and failed as any write-back is;
 * finalized with `finalizeDeleteOperation`, which commits the delete and
 * retires the deleted entity's watch in one transaction. A delete re-sends
 * only under `idempotent-delete` (gone means applied) or goes
 * `reconcile_only`; finalizing it as a create or an update, or a create or
 * an update as a delete, is refused and changes nothing.
 */

const adapters = await adaptersUnderTest()
const id = identityOf()

const deleteClaim = (overrides: Parameters<typeof claimInput>[0] = {}) =>
  claimInput({ op: "delete", reissueIntent: { kind: "idempotent-delete" }, providerEtag: null, ...overrides })

const deleteInput = (leaseToken: string, overrides: Partial<FinalizeDeleteInput> = {}): FinalizeDeleteInput => ({
  leaseToken,
  sourceID: "src-1",
  documentID: "doc-1",
  ...overrides
})

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) =>
    onOperationStore(adapter, new Winners({ "doc-1": "w-1" }).single(), body)

  describe(`delete write-backs on ${adapter.name}`, () => {
    it.effect("commit, and retire the entity's watch; the document's write state is committed", () =>
      onStore(Effect.gen(function*() {
        const watch = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
        const other = watchRow({ sourceID: "src-2", documentID: "doc-2" })
        yield* seedWatches(watch, other)
        const token = yield* claimedAndSent(deleteClaim())
        yield* at(NOW + 1_000)
        const store = yield* ConnectorStore
        const result = yield* store.finalizeDeleteOperation(KEY, deleteInput(token))
        const stored = yield* storedOperation(KEY)
        expect(result).toEqual({ outcome: "committed", operation: stored, retired: [id] })
        expect(stored).toMatchObject({ op: "delete", state: "committed", sourceID: "src-1", leaseToken: null, sendMarker: token, attempts: 1 })
        expect(yield* store.getWatch(id)).toMatchObject({ _tag: "None" })
        expect(yield* store.getWatch(identityOf({ sourceID: "src-2" }))).toMatchObject({ _tag: "Some", value: other })
        expect((yield* store.getDocumentWriteStates(["doc-1"])).get("doc-1")).toBe("committed")
      })))

    it.effect("with no watch retire nothing; a replay is already-committed and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent(deleteClaim())
        const store = yield* ConnectorStore
        expect(yield* store.finalizeDeleteOperation(KEY, deleteInput(token))).toMatchObject({ outcome: "committed", retired: [] })
        const replay = yield* succeedsChangingNothing(store.finalizeDeleteOperation(KEY, deleteInput(token)))
        expect(replay).toMatchObject({ outcome: "already-committed" })
      })))

    it.effect("a stale lease holder changes nothing: lease-lost, the watch stays", () =>
      onStore(Effect.gen(function*() {
        yield* seedWatches(watchRow())
        yield* claimedAndSent(deleteClaim())
        const store = yield* ConnectorStore
        const result = yield* succeedsChangingNothing(store.finalizeDeleteOperation(KEY, deleteInput("not-the-lease")))
        expect(result).toMatchObject({ outcome: "lease-lost" })
      })))

    it.effect("a takeover after the request may have landed hands the idempotent-delete reissue; with reconcile, reconcile_only", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* claimedAndSent(deleteClaim())
        yield* at(NOW + 20_000)
        const takeover = yield* claimed(deleteClaim())
        expect(takeover.reissue).toEqual({ kind: "idempotent-delete" })
        const other = { callerDID: "did:caller:1", operationID: "op-2" }
        yield* claimedAndSent(deleteClaim({ ...other, reissueIntent: { kind: "reconcile" } }))
        yield* at(NOW + 40_000)
        expect(yield* store.claimOperation(deleteClaim({ ...other, reissueIntent: { kind: "reconcile" } }))).toMatchObject({
          outcome: "finished",
          operation: { state: "reconcile_only" }
        })
      })))

    it.effect("an operator settling a reconcile_only delete as committed retires the watch instead of arming one", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(watchRow())
        yield* seedOperations(attemptedRow({
          op: "delete",
          reissueIntent: { kind: "idempotent-delete" },
          state: "reconcile_only",
          sendMarker: "run-1",
          nextAttemptAt: null,
          lastKind: "unknown"
        }))
        const result = yield* store.settleOperation(KEY, {
          outcome: "committed",
          sourceID: "src-1",
          documentID: "doc-1",
          watchDueAt: NOW + 60_000
        })
        expect(result).toMatchObject({ operation: { state: "committed", op: "delete" }, watch: null, superseded: [id] })
        expect(yield* store.getWatch(id)).toMatchObject({ _tag: "None" })
      })))

    it.effect("a finalize of the wrong kind is refused with InvalidInput naming the key, and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* seedWatches(watchRow())
        const token = yield* claimedAndSent(deleteClaim())
        const asArm = yield* failsChangingNothing(store.finalizeOperationAndArmWatch(KEY, {
          ...deleteInput(token),
          watchDueAt: NOW + 30_000
        }))
        expect(asArm).toMatchObject({
          _tag: "InvalidInput",
          method: "finalizeOperationAndArmWatch",
          field: "key",
          reason: "names a delete write-back: finalize it with finalizeDeleteOperation"
        })
        const update = { callerDID: "did:caller:1", operationID: "op-upd" }
        const updateToken = yield* claimedAndSent(claimInput(update))
        const asDelete = yield* failsChangingNothing(store.finalizeDeleteOperation(update, deleteInput(updateToken)))
        expect(asDelete).toMatchObject({
          _tag: "InvalidInput",
          method: "finalizeDeleteOperation",
          field: "key",
          reason: "names a update write-back: finalize it with finalizeOperationAndArmWatch"
        })
      })))

    it.effect("a reissue intent that does not fit the kind is refused at the claim, before anything is written", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const deleteAsUpdate = yield* failsChangingNothing(store.claimOperation(deleteClaim({
          reissueIntent: { kind: "conditional-update", ifMatch: "e" }
        })))
        expect(deleteAsUpdate).toMatchObject({
          _tag: "InvalidInput",
          field: "input.reissueIntent",
          reason: "of kind conditional-update does not fit op delete (use idempotent-delete or reconcile)"
        })
        const updateAsDelete = yield* failsChangingNothing(store.claimOperation(claimInput({ reissueIntent: { kind: "idempotent-delete" } })))
        expect(updateAsDelete).toMatchObject({
          _tag: "InvalidInput",
          field: "input.reissueIntent",
          reason: "of kind idempotent-delete fits only op delete"
        })
        const missing = yield* failsChangingNothing(store.finalizeDeleteOperation(KEY, { leaseToken: "t", sourceID: "", documentID: "doc-1" }))
        expect(missing).toMatchObject({ _tag: "InvalidInput", method: "finalizeDeleteOperation", field: "options.sourceID" })
      })))
  })
}

describe("delete write-backs through the Promise API", () => {
  it("claim, mark sent, finalize: committed, the watch retired", async () => {
    const store = openMemoryConnectorStore({ readWinner: () => "w-1" })
    try {
      const watchClaim = { ...deleteClaim(), sourceID: "src-1" }
      await store.runEffect(seedWatches(watchRow()))
      const claim = await store.claimOperation(watchClaim)
      if (claim.outcome !== "claimed") throw new Error(`unexpected ${claim.outcome}`)
      expect((await store.markOperationSent(KEY, { leaseToken: claim.lease.token })).outcome).toBe("sent")
      expect(await store.finalizeDeleteOperation(KEY, deleteInput(claim.lease.token))).toMatchObject({ outcome: "committed", retired: [id] })
      expect(await store.getWatch(id)).toBeNull()
    } finally {
      await store.close()
    }
  })
})
