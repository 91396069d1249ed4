import {
  ConnectorStore,
  type EnqueueOperationInput,
  IdempotencyConflict,
  type PromiseConnectorStore
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { attemptedRow, claimed, claimInput, KEY, NOW, onOperationStore, POLICY } from "./operations.fixtures.js"
import { at, failsChangingNothing, seedOperations, storedOperation, succeedsChangingNothing } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

// enqueueOperation on every adapter: an app hands an edit over without a
// lease; a worker's due claim takes it from there.

const adapters = await adaptersUnderTest()

/** The edit of `KEY` as an app hands it over (a claim's input has no lease fields here). */
const edit = (overrides: Partial<EnqueueOperationInput> = {}): EnqueueOperationInput => {
  const { leaseMs: _leaseMs, markSent: _markSent, ...input } = claimInput()
  return { ...input, ...overrides }
}

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) => onOperationStore(adapter, {}, body)

  describe(`enqueueOperation on ${adapter.name}`, () => {
    it.effect("a new key is stored attempted and due now, with no lease, no run and no attempt spent", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const result = yield* store.enqueueOperation(edit())
        expect(result.outcome).toBe("enqueued")
        const row = yield* storedOperation(KEY)
        expect(row).toEqual(result.operation)
        expect(row).toMatchObject({
          state: "attempted",
          attempts: 0,
          sendMarker: null,
          inDoubtSince: null,
          leaseToken: null,
          leaseExpiresAt: null,
          nextAttemptAt: NOW,
          version: 0,
          createdAt: NOW,
          payloadHash: "hash-1",
          reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
          documentID: "doc-1"
        })
        expect(row?.nodeKey).toMatch(/.{16,}/)
        expect(row?.incarnation).toMatch(/.{16,}/)
        expect(row?.incarnation).not.toBe(row?.nodeKey)
      })))

    it.effect("a due claim leases the enqueued operation as a first run: no reissue, nothing in doubt", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* store.enqueueOperation(edit())
        const batch = yield* store.claimDueOperations({ limit: 10 })
        expect(batch.claimed).toHaveLength(1)
        expect(batch.claimed[0]).toMatchObject({ outcome: "claimed", created: false, reissue: null })
        expect(batch.claimed[0]!.lease.expiresAt).toBe(NOW + POLICY.leaseMs)
        expect(batch.claimed[0]!.operation.incarnation).toMatch(/.{16,}/)
        expect((yield* store.claimDueOperations({ limit: 10 })).claimed).toHaveLength(0)
      })))

    it.effect("a claim of the enqueued key by its own edit takes it, as a replay would", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* store.enqueueOperation(edit())
        const claim = yield* claimed()
        expect(claim.created).toBe(false)
        expect(claim.reissue).toBeNull()
      })))

    it.effect("a replay of a known key changes nothing and answers known with the stored row, whatever its state", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const first = yield* store.enqueueOperation(edit())
        expect(yield* succeedsChangingNothing(store.enqueueOperation(edit()))).toEqual({ outcome: "known", operation: first.operation })
        // Leased by a worker since: still nothing changes, the lease stays.
        const claim = yield* claimed()
        yield* at(NOW + 1)
        expect(yield* succeedsChangingNothing(store.enqueueOperation(edit()))).toEqual({ outcome: "known", operation: claim.operation })
      })))

    for (const state of ["committed", "dead", "reconcile_only"] as const) {
      it.effect(`a replay of a ${state} key changes nothing`, () =>
        onStore(Effect.gen(function*() {
          const row = attemptedRow({ state, nextAttemptAt: null })
          yield* seedOperations(row)
          const store = yield* ConnectorStore
          expect(yield* succeedsChangingNothing(store.enqueueOperation(edit()))).toEqual({ outcome: "known", operation: row })
        })))
    }

    it.effect("a known key with another payload is an IdempotencyConflict naming the key, and nothing is written", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* store.enqueueOperation(edit())
        const error = yield* failsChangingNothing(store.enqueueOperation(edit({ payloadHash: "hash-2" })))
        expect(error).toBeInstanceOf(IdempotencyConflict)
        expect(error).toMatchObject({ _tag: "IdempotencyConflict", callerDID: KEY.callerDID, operationID: KEY.operationID })
        // The same rule holds against a key a claim recorded.
        const claimedKey = claimInput({ operationID: "op-claimed" })
        yield* claimed(claimedKey)
        const other = yield* failsChangingNothing(store.enqueueOperation(edit({ operationID: "op-claimed", payloadHash: "hash-9" })))
        expect(other).toMatchObject({ _tag: "IdempotencyConflict", operationID: "op-claimed" })
      })))

    const badInputs: ReadonlyArray<readonly [string, string, unknown]> = [
      ["a missing payload hash", "input.payloadHash", edit({ payloadHash: undefined as never })],
      ["an operation kind that is none", "input.op", edit({ op: "upsert" as never })],
      ["an empty caller DID", "input.callerDID", edit({ callerDID: "" })],
      ["a delete with a conditional-update intent", "input.reissueIntent", edit({ op: "delete" })],
      ["a lease length (an enqueue takes no lease)", "input.leaseMs", { ...edit(), leaseMs: 1_000 }],
      ["a number for the document id", "input.documentID", edit({ documentID: 7 as never })]
    ]
    for (const [what, field, input] of badInputs) {
      it.effect(`refuses ${what} with InvalidInput naming ${field}, writing nothing`, () =>
        onStore(Effect.gen(function*() {
          const store = yield* ConnectorStore
          const error = yield* failsChangingNothing(store.enqueueOperation(input as EnqueueOperationInput))
          expect(error).toMatchObject({ _tag: "InvalidInput", method: "enqueueOperation", field })
        })))
    }
  })

  describe(`enqueueOperation wake-ups on ${adapter.name}`, () => {
    it("wakes another store's pending awaitWork: the fleet hears of the new work", async () => {
      type Store = PromiseConnectorStore<unknown>
      const connection = await adapter.connection() // one database for both stores
      const open = async (): Promise<Store> =>
        adapter.name === "memory"
          ? openMemoryConnectorStore() as unknown as Store
          : await openConnectorStore({ ...connection, readWinner: () => null }) as unknown as Store
      const waiter = await open()
      const writer = adapter.name === "memory" ? waiter : await open()
      try {
        const { mark } = await waiter.awaitWork({ since: 0, timeoutMs: 5_000 })
        const waiting = waiter.awaitWork({ since: mark, timeoutMs: 30_000 })
        await new Promise((resolve) => setTimeout(resolve, 50))
        expect((await writer.enqueueOperation(edit())).outcome).toBe("enqueued")
        const wake = await waiting
        expect(wake.woken).toBe("notified")
        expect((await waiter.claimDueOperations({ limit: 5 })).claimed.map((c) => c.operation.operationID)).toEqual([KEY.operationID])
      } finally {
        await waiter.close()
        if (writer !== waiter) await writer.close()
      }
    })
  })
}
