import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startCommitDropProxy, type CommitDropProxy } from "./faults.proxy.js"
import { claimFor, expectTyped, rejectionOf, storedRows } from "./faults.support.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const key = (id: string) => ({ callerDID: "did:caller:faults", operationID: id })

/**
 * A COMMIT whose acknowledgement is lost: the server committed, the store
 * only saw its connection die. The same lease holder retrying the same call
 * must get the committed result back, never an error or a second effect.
 */
describe.runIf(pgAvailable)("a lost COMMIT acknowledgement, on Postgres through a proxy that drops it", () => {
  let direct: string
  let proxy: CommitDropProxy
  let store: SqlConnectorStore
  const prefix = freshPrefix()

  beforeAll(async () => {
    direct = await pgDatabaseForFile()
    const target = new URL(direct)
    proxy = await startCommitDropProxy({ host: target.hostname, port: Number(target.port || 5432) })
    const viaProxy = new URL(direct)
    viaProxy.port = String(proxy.port)
    store = await openConnectorStore({
      url: viaProxy.toString(),
      tablePrefix: prefix,
      maxConnections: 2,
      readWinner: () => "winner-1"
    })
  })

  afterAll(async () => {
    await store?.close()
    await proxy?.close()
  })

  it("a retried markOperationSent answers already-sent and counts the attempt once (its UPDATE's acknowledgement lost)", async () => {
    const claim = await store.claimOperation(claimFor("mark"))
    if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
    const before = (await storedRows(direct, prefix)).operations.find((row) => row.operation_id === "mark")!

    // The mark is one autocommit UPDATE (no BEGIN/COMMIT): its acknowledgement is the UPDATE's.
    proxy.armCommitDrop("UPDATE")
    const lost = await rejectionOf(store.markOperationSent(key("mark"), { leaseToken: claim.lease.token }))
    expectTyped(lost, "markOperationSent after a lost COMMIT acknowledgement")
    expect(proxy.dropped()).toBe(1)
    // The server did commit: the marker is there although the caller saw a failure.
    const committed = (await storedRows(direct, prefix)).operations.find((row) => row.operation_id === "mark")!
    expect(committed).toMatchObject({ send_marker: claim.lease.token, attempts: 1, version: before.version + 1 })

    const retried = await store.markOperationSent(key("mark"), { leaseToken: claim.lease.token })
    expect(retried.outcome).toBe("already-sent")
    const after = (await storedRows(direct, prefix)).operations.find((row) => row.operation_id === "mark")!
    expect(after).toEqual(committed)
  })

  it("a retried finalizeOperationAndArmWatch answers already-committed with the stored result, the watch armed once", async () => {
    const claim = await store.claimOperation(claimFor("fin"))
    if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
    const token = claim.lease.token
    expect((await store.markOperationSent(key("fin"), { leaseToken: token })).outcome).toBe("sent")
    const finalize = {
      leaseToken: token,
      sourceID: "src-fin",
      documentID: "doc-fin",
      providerEtag: "etag-1",
      resultEntity: { id: "src-fin", title: "landed" },
      watchDueAt: store.now() + 60_000
    }

    proxy.armCommitDrop()
    const lost = await rejectionOf(store.finalizeOperationAndArmWatch(key("fin"), finalize))
    expectTyped(lost, "finalizeOperationAndArmWatch after a lost COMMIT acknowledgement")
    expect(proxy.dropped()).toBe(2)
    const committed = await storedRows(direct, prefix)
    const operation = committed.operations.find((row) => row.operation_id === "fin")!
    expect(operation).toMatchObject({ state: "committed", send_marker: token, attempts: 1, source_id: "src-fin" })
    expect(committed.watches.filter((row) => row.source_id === "src-fin")).toEqual([
      { source_id: "src-fin", document_id: "doc-fin", repair_generation: 0, verification_status: "pending_verification", version: 0 }
    ])

    const retried = await store.finalizeOperationAndArmWatch(key("fin"), finalize)
    expect(retried.outcome).toBe("already-committed")
    if (retried.outcome !== "already-committed") return
    expect(retried.operation.resultEntity).toEqual({ id: "src-fin", title: "landed" })
    expect(retried.operation.providerEtag).toBe("etag-1")
    expect(await storedRows(direct, prefix)).toEqual(committed)
  })

  it("a claim whose insert was acknowledged to nobody is busy until its lease lapses, then claimable with no reissue", async () => {
    proxy.armCommitDrop("INSERT")
    const lost = await rejectionOf(store.claimOperation(claimFor("claim", { leaseMs: 1_500 })))
    expectTyped(lost, "claimOperation after a lost INSERT acknowledgement")
    expect(proxy.dropped()).toBe(3)
    const orphan = (await storedRows(direct, prefix)).operations.find((row) => row.operation_id === "claim")!
    expect(orphan).toMatchObject({ state: "attempted", attempts: 0, send_marker: null })

    // The lost lease's token never reached anyone, so nobody may drive the operation until it lapses.
    const retried = await store.claimOperation(claimFor("claim", { leaseMs: 1_500 }))
    expect(retried.outcome).toBe("busy")
    await new Promise((resolve) => setTimeout(resolve, 1_600))
    const taken = await store.claimOperation(claimFor("claim", { leaseMs: 1_500 }))
    expect(taken).toMatchObject({ outcome: "claimed", created: false, reissue: null })
    if (taken.outcome === "claimed") expect(taken.lease.token).not.toBe(orphan.lease_token)
  })

  it("the call after a lost acknowledgement, on a new connection, succeeds", async () => {
    const claim = await store.claimOperation(claimFor("next"))
    expect(claim.outcome).toBe("claimed")
    expect(await store.getOperation(key("fin"))).toMatchObject({ state: "committed" })
  })
})
