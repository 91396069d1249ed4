import type { PromiseConnectorStore } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput, KEY, NOW } from "./operations.fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()
const open: Array<PromiseConnectorStore<unknown>> = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()))
})

for (const adapter of adapters) {
  /** A Promise store of this adapter at `clock.now`, whose winner reader logs the handle it was given. */
  const openStore = async (clock: { now: number }, handles: Array<unknown>, policy?: { readonly maxAttempts: number }) => {
    const options = {
      now: () => clock.now,
      readWinner: async (documentID: string, tx: unknown) => {
        handles.push(tx)
        const query = (tx as { query?: (text: string) => Promise<unknown> }).query
        if (query !== undefined) await query("SELECT 1")
        return `winner-of-${documentID}`
      },
      ...(policy === undefined ? {} : { operationPolicy: policy })
    }
    const store = adapter.name === "memory"
      ? openMemoryConnectorStore(options)
      : await openConnectorStore({ ...(await adapter.connection()), ...options })
    open.push(store as PromiseConnectorStore<unknown>)
    return store
  }

  describe(`the operation methods of the Promise store on ${adapter.name}`, () => {
    it("drive a whole lifecycle and read it back, with rejections that are the tagged errors", async () => {
      const clock = { now: NOW }
      const handles: Array<unknown> = []
      const store = await openStore(clock, handles)
      const claim = await store.claimOperation(claimInput())
      if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
      expect(await store.claimOperation(claimInput())).toMatchObject({ outcome: "busy" })
      await expect(store.claimOperation(claimInput({ payloadHash: "other" })))
        .rejects.toMatchObject({ _tag: "IdempotencyConflict", callerDID: KEY.callerDID, operationID: KEY.operationID })
      expect(await store.renewOperationLease(KEY, { leaseToken: claim.lease.token })).toMatchObject({ outcome: "renewed" })
      expect(await store.markOperationSent(KEY, { leaseToken: claim.lease.token })).toMatchObject({ outcome: "sent" })
      clock.now = NOW + 1_000
      const finalized = await store.finalizeOperationAndArmWatch(KEY, {
        leaseToken: claim.lease.token,
        sourceID: "src-1",
        documentID: "doc-1",
        providerEtag: "etag-1",
        resultEntity: { id: "src-1" },
        watchDueAt: NOW + 5_000
      })
      expect(finalized).toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "winner-of-doc-1", nextAttemptAt: NOW + 5_000 } })
      expect(handles).toHaveLength(1)
      if (adapter.name !== "memory") expect(handles[0]).toMatchObject({ dialect: adapter.name === "postgres" ? "pg" : "sqlite" })

      const stored = await store.getOperation(KEY)
      expect(stored).toMatchObject({ state: "committed", resultEntity: { id: "src-1" }, updatedAt: NOW + 1_000 })
      expect(await store.getOperationByNodeKey(stored!.nodeKey, "did:owner:1")).toEqual(stored)
      expect(await store.getOperationByNodeKey(stored!.nodeKey, "did:someone-else")).toBeNull()
      expect(await store.getOperation({ ...KEY, operationID: "missing" })).toBeNull()
      expect(await store.listTrackedOperations({ visibleTo: "did:caller:1" })).toEqual({ operations: [stored], nextCursor: null, corrupt: [] })
      expect(await store.getDocumentWriteStates(["doc-1", "doc-2"])).toEqual(new Map([["doc-1", "committed"], ["doc-2", "none"]]))
      expect(await store.getWatchByDocument("doc-1")).toEqual(finalized.outcome === "committed" ? finalized.watch : null)
      await expect(store.markOperationSent(KEY, { leaseToken: "" })).rejects.toMatchObject({ _tag: "InvalidInput", field: "options.leaseToken" })
    })

    it("take the operation policy as an option, and refuse one they cannot keep", async () => {
      const clock = { now: NOW }
      const store = await openStore(clock, [], { maxAttempts: 1 })
      const claim = await store.claimOperation(claimInput())
      if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
      expect(await store.recordAttemptFailure(KEY, { leaseToken: claim.lease.token, kind: "retryable", httpStatus: 429 }))
        .toMatchObject({ outcome: "dead", operation: { attempts: 1 } })
      // Refused at open, before anything opens (the memory store's open is synchronous: it throws).
      const refused = adapter.name === "memory"
        ? (async () => openMemoryConnectorStore({ operationPolicy: { maxAttempts: 0 } }))()
        : openConnectorStore({ ...(await adapter.connection()), operationPolicy: { maxAttempts: 0 } })
      await expect(refused).rejects.toMatchObject({ _tag: "InvalidInput", field: "options.operationPolicy.maxAttempts" })
    })
  })
}
