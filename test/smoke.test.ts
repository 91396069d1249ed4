import { it, expect } from "vitest"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { WatchRepository, type ProjectionWatch } from "@connector-store/core"
import { Effect } from "effect"

const id = { ownerDID: "did:o", connectorName: "gcal", model: "Event", accountKey: "acc", sourceID: "s1" }
const row: ProjectionWatch = { ...id, documentID: "doc1", verifiedStateDigest: null, observedWinnerDigest: null, verificationStatus: "verified", verificationAttempts: 0, repairGeneration: 0, nextAttemptAt: null, claimedUntil: null, deferReason: null, version: 0, createdAt: 1, updatedAt: 1 }

for (const url of ["memory", "/tmp/smoke.sqlite", "postgres://postgres@127.0.0.1:5432/test"]) {
  it(url, async () => {
    let winner = "w1"
    const opts = { readWinner: async (_d: string, tx: any) => { if (tx?.query) await tx.query("SELECT 1"); return winner }, now: () => 1000 }
    const store = url === "memory" ? openMemoryConnectorStore(opts) : await openConnectorStore({ url, ...opts })
    await store.runEffect(Effect.flatMap(WatchRepository, (r) => Effect.flatMap(r.delete(id, 0), () => r.delete(id, 1)).pipe(Effect.zipRight(r.delete(id,2)), Effect.zipRight(r.delete(id,3)), Effect.zipRight(r.insert(row)))) as any)
    expect(await store.armWatch(id, "manual", { dueAt: 500 })).toBe("opened")
    expect(await store.claimWatchAttempt(id, { until: 2000, generation: 1, now: 1000 })).toBe(true)
    expect(await store.claimWatchAttempt(id, { until: 2000, generation: 1, now: 1000 })).toBe(false)
    expect(await store.recordVerification(id, { generation: 1, claimedUntil: 2000, fetchedDigest: "w1", maxAttempts: 3, dueAt: 3000 })).toBe("verified")
    winner = "w2"
    const due = await store.listDueOperations(1000, { readWinners: async (ids) => new Map(ids.map((i) => [i, "w2"])) })
    expect(due.watches.length).toBe(1)
    console.log(await store.getWatch(id))
    await expect(store.armWatch(id, "finalize" as any, { dueAt: 1 })).rejects.toMatchObject({ _tag: "ReservedArmReason" })
    await expect(store.armWatch({ ...id, ownerDID: "" }, "manual", { dueAt: 1 })).rejects.toMatchObject({ _tag: "InvalidInput", field: "identity.ownerDID" })
    expect(await store.collectFinishedOperations({ before: 5, limit: 10 })).toBe(0)
    await store.close()
  })
}
