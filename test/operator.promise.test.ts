import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { describe, expect, it } from "vitest"

const NOW = 1_700_000_000_000
const key = { callerDID: "did:caller:1", operationID: "op-1" }
const claim = {
  ...key,
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  op: "create" as const,
  accountKey: "acct-1",
  target: "calendar/primary",
  deterministicEventID: "event-1",
  payloadHash: "hash-1",
  reissueIntent: { kind: "reconcile" } as const
}

describe("operator calls on the Promise facade", () => {
  it("list, settle, retry and status resolve with the Effect API's answers; refusals reject with the tagged error", async () => {
    const store = openMemoryConnectorStore({ now: () => NOW, readWinner: async () => "w-1" })
    try {
      const claimed = await store.claimOperation(claim)
      if (claimed.outcome !== "claimed") throw new Error(claimed.outcome)
      await store.markOperationSent(key, { leaseToken: claimed.lease.token })
      await store.recordAttemptFailure(key, { leaseToken: claimed.lease.token, kind: "unknown" })

      const page = await store.listOperations({ states: ["reconcile_only"], inDoubt: true })
      expect([page.items.map((row) => row.operationID), page.nextCursor]).toEqual([["op-1"], null])
      expect((await store.getStoreStatus()).inDoubt).toBe(1)
      expect(await store.findOperationByNodeKey(claimed.operation.nodeKey)).toMatchObject(key)
      expect(await store.findOperationByNodeKey("no-such-node")).toBeNull()

      await expect(store.retryOperation(key)).rejects.toMatchObject({ _tag: "OperatorActionRefused" })
      const settled = await store.settleOperation(key, { outcome: "dead" })
      expect([settled.operation.state, settled.watch]).toEqual(["dead", null])
      const retried = await store.retryOperation(key)
      expect([retried.state, retried.attempts, retried.nextAttemptAt]).toEqual(["attempted", 0, NOW])
      await expect(store.rearmWatch({ ...key, ownerDID: "o", connectorName: "c", model: "m", accountKey: "a", sourceID: "s" }, { dueAt: NOW }))
        .rejects.toMatchObject({ _tag: "OperatorTargetNotFound" })
      await expect(store.listWatches({ limit: 0 })).rejects.toMatchObject({ _tag: "InvalidInput", field: "filter.limit" })
    } finally {
      await store.close()
    }
  })
})
