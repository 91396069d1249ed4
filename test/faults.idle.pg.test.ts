import type { WatchIdentity } from "@connector-store/core"
import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { claimFor, expectTyped, rejectionOf, sleep, storedRows, withClient } from "./faults.support.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const key = { callerDID: "did:caller:faults", operationID: "idle" }
const identity: WatchIdentity = {
  ownerDID: "did:owner:faults",
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1",
  sourceID: "src-idle"
}

/**
 * The server ends a session that sits idle inside a transaction for longer
 * than `idle_in_transaction_session_timeout` (here 300 ms, set on this
 * file's database). A winner reader that stalls inside the store's
 * transaction makes that happen.
 */
describe.runIf(pgAvailable)("a winner reader stalling past idle_in_transaction_session_timeout, on Postgres", () => {
  let url: string
  let store: SqlConnectorStore
  let stallMs = 0
  const prefix = freshPrefix()

  beforeAll(async () => {
    url = await pgDatabaseForFile()
    const database = new URL(url).pathname.slice(1)
    await withClient(url, (admin) => admin.query(`ALTER DATABASE ${database} SET idle_in_transaction_session_timeout = '300ms'`))
    store = await openConnectorStore({
      url,
      tablePrefix: prefix,
      maxConnections: 2,
      readWinner: async () => {
        if (stallMs > 0) await sleep(stallMs)
        return "winner-1"
      }
    })
  })

  afterAll(async () => {
    await store?.close()
  })

  it("the database ends sessions idle in a transaction after 300 ms", async () => {
    const setting = await withClient(url, (admin) => admin.query<{ value: string }>("SELECT current_setting('idle_in_transaction_session_timeout') AS value"))
    expect(setting.rows[0]!.value).toBe("300ms")
  })

  it("a reader pausing below the timeout (100 ms) does not disturb a finalize", async () => {
    const control = { callerDID: "did:caller:faults", operationID: "control" }
    const claim = await store.claimOperation(claimFor("control"))
    if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
    stallMs = 100
    const finalized = await store.finalizeOperationAndArmWatch(control, {
      leaseToken: claim.lease.token,
      sourceID: "src-control",
      documentID: "doc-control",
      watchDueAt: store.now()
    })
    stallMs = 0
    expect(finalized.outcome).toBe("committed")
  })

  it("a finalize whose reader stalls fails typed, commits nothing, and the retry commits and arms once", async () => {
    const claim = await store.claimOperation(claimFor("idle"))
    if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
    const leaseToken = claim.lease.token
    expect((await store.markOperationSent(key, { leaseToken })).outcome).toBe("sent")
    const before = await storedRows(url, prefix)
    const finalize = { leaseToken, sourceID: "src-idle", documentID: "doc-idle", watchDueAt: store.now(), resultEntity: { ok: true } }

    stallMs = 1_000
    const failure = await rejectionOf(store.finalizeOperationAndArmWatch(key, finalize))
    stallMs = 0
    expectTyped(failure, "finalizeOperationAndArmWatch with a stalled reader")
    expect(await storedRows(url, prefix)).toEqual(before)

    const retried = await store.finalizeOperationAndArmWatch(key, finalize)
    expect(retried.outcome).toBe("committed")
    const after = await storedRows(url, prefix)
    expect(after.operations.find((row) => row.operation_id === "idle")).toMatchObject({ state: "committed", send_marker: leaseToken, attempts: 1 })
    expect(after.watches.filter((row) => row.source_id === "src-idle")).toEqual([
      { source_id: "src-idle", document_id: "doc-idle", repair_generation: 0, verification_status: "pending_verification", version: 0 }
    ])
  })

  it("a verification whose reader stalls fails typed, changes nothing, and the retry verifies", async () => {
    const now = store.now()
    const until = now + 10_000
    expect(await store.claimWatchAttempt(identity, { generation: 0, until, now })).toBe(true)
    const before = await storedRows(url, prefix)
    const verification = { generation: 0, claimedUntil: until, fetchedDigest: "winner-1", maxAttempts: 3, dueAt: now }

    stallMs = 1_000
    const failure = await rejectionOf(store.recordVerification(identity, verification))
    stallMs = 0
    expectTyped(failure, "recordVerification with a stalled reader")
    expect(await storedRows(url, prefix)).toEqual(before)

    expect(await store.recordVerification(identity, verification)).toBe("verified")
    expect((await storedRows(url, prefix)).watches.find((row) => row.source_id === "src-idle")).toMatchObject({ verification_status: "verified", repair_generation: 0 })
  })
})
