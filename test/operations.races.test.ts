import type { ClaimResult, PromiseConnectorStore } from "@connector-store/core"
import { openConnectorStore, type SqlTransaction } from "@connector-store/sql-adapter"
import pg from "pg"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput, KEY, NOW, POLICY } from "./operations.fixtures.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

type Store = PromiseConnectorStore<SqlTransaction>

/** The clock every store of a test reads: moved by the test, shared like a wall clock. */
const clock = { now: NOW }
const opened: Array<Store> = []

/**
 * `count` independent stores on one Postgres database and prefix, each with
 * its own connection pool: as many workers on many machines would be.
 */
const fleet = async (count: number, connectionsEach: number) => {
  const url = await pgDatabaseForFile()
  const tablePrefix = freshPrefix()
  const stores = await Promise.all(Array.from({ length: count }, () =>
    openConnectorStore({
      url,
      tablePrefix,
      maxConnections: connectionsEach,
      now: () => clock.now,
      operationPolicy: POLICY,
      readWinner: () => "w-1"
    })
  ))
  opened.push(...stores)
  const rows = async (table: string): Promise<ReadonlyArray<Record<string, unknown>>> => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return (await client.query(`SELECT * FROM ${tablePrefix}${table}`)).rows
    } finally {
      await client.end()
    }
  }
  return { stores, rows }
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()))
  clock.now = NOW
})

const finalizeOf = (leaseToken: string, sourceID = "src-1", documentID = "doc-1") => ({
  leaseToken,
  sourceID,
  documentID,
  providerEtag: "etag-1",
  resultEntity: { id: sourceID },
  watchDueAt: NOW + 60_000
})

describe.runIf(pgAvailable)("operation races on Postgres, real concurrent connections", () => {
  it("50 concurrent claims of one key: exactly one row and exactly one lease holder", async () => {
    const { stores, rows } = await fleet(5, 10)
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => stores[i % stores.length]!.claimOperation(claimInput())))
    const claims = results.filter((r): r is Extract<ClaimResult, { outcome: "claimed" }> => r.outcome === "claimed")
    expect(claims).toHaveLength(1)
    expect(results.filter((r) => r.outcome === "busy")).toHaveLength(49)
    const stored = await rows("operation")
    expect(stored).toHaveLength(1)
    expect(stored[0]).toMatchObject({ lease_token: claims[0]!.lease.token, version: 0 })
  })

  it("50 concurrent takeovers of a lapsed lease: exactly one new holder, and the old one is fenced out", async () => {
    const { stores, rows } = await fleet(5, 10)
    const first = await stores[0]!.claimOperation(claimInput())
    if (first.outcome !== "claimed") throw new Error("setup claim failed")
    clock.now = NOW + POLICY.leaseMs
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => stores[i % stores.length]!.claimOperation(claimInput())))
    const claims = results.filter((r) => r.outcome === "claimed")
    expect(claims).toHaveLength(1)
    expect(await stores[1]!.markOperationSent(KEY, { leaseToken: first.lease.token })).toMatchObject({ outcome: "lease-lost" })
    const stored = await rows("operation")
    expect(stored).toHaveLength(1)
    expect(stored[0]).toMatchObject({ lease_token: claims[0]!.outcome === "claimed" ? claims[0]!.lease.token : null, version: 1 })
  })

  it("a stale runner's send marker racing a takeover: either the takeover sees the marker, or the marker is refused", async () => {
    const { stores } = await fleet(2, 4)
    for (let round = 0; round < 20; round++) {
      clock.now = NOW
      const key = { ...KEY, operationID: `op-${round}` }
      const input = claimInput({ operationID: key.operationID })
      const first = await stores[0]!.claimOperation(input)
      if (first.outcome !== "claimed") throw new Error("setup claim failed")
      clock.now = NOW + POLICY.leaseMs
      const [sent, takeover] = await Promise.all([
        stores[0]!.markOperationSent(key, { leaseToken: first.lease.token }),
        stores[1]!.claimOperation(input)
      ])
      expect(takeover.outcome).toBe("claimed")
      if (takeover.outcome !== "claimed") continue
      if (sent.outcome === "sent") expect(takeover.reissue).toEqual(input.reissueIntent)
      else expect([sent.outcome, takeover.reissue]).toEqual(["lease-lost", null])
    }
  })

  it("concurrent finalizes: the holder's finalize sent twice from two machines commits once; a stale runner's never", async () => {
    const { stores, rows } = await fleet(3, 4)
    for (let round = 0; round < 10; round++) {
      clock.now = NOW
      const key = { ...KEY, operationID: `op-${round}` }
      const input = claimInput({ operationID: key.operationID, documentID: `doc-${round}` })
      const stale = await stores[0]!.claimOperation(input)
      if (stale.outcome !== "claimed") throw new Error("setup claim failed")
      await stores[0]!.markOperationSent(key, { leaseToken: stale.lease.token })
      clock.now = NOW + POLICY.leaseMs
      const holder = await stores[1]!.claimOperation(input)
      if (holder.outcome !== "claimed") throw new Error("takeover failed")
      const results = await Promise.all([
        stores[0]!.finalizeOperationAndArmWatch(key, finalizeOf(stale.lease.token, `src-stale-${round}`, `doc-${round}`)),
        stores[1]!.finalizeOperationAndArmWatch(key, finalizeOf(holder.lease.token, `src-${round}`, `doc-${round}`)),
        stores[2]!.finalizeOperationAndArmWatch(key, finalizeOf(holder.lease.token, `src-${round}`, `doc-${round}`))
      ])
      expect(results.map((r) => r.outcome).sort()).toEqual(["already-committed", "committed", "lease-lost"])
    }
    const watches = await rows("projection_watch")
    expect(watches.map((w) => w["source_id"]).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `src-${i}`).sort())
    expect((await rows("operation")).every((op) => op["state"] === "committed")).toBe(true)
  })

  /** Claims `count` operations of `doc-shared`, each under its own source, spread over the stores. */
  const claimsOnSharedDocument = async (stores: ReadonlyArray<Store>, count: number) =>
    Promise.all(Array.from({ length: count }, async (_, i) => {
      const key = { ...KEY, operationID: `op-${i}` }
      const store = stores[i % stores.length]!
      const claim = await store.claimOperation(claimInput({ operationID: key.operationID, sourceID: `src-${i}` }))
      if (claim.outcome !== "claimed") throw new Error("setup claim failed")
      return { key, store, finalize: () => store.finalizeOperationAndArmWatch(key, finalizeOf(claim.lease.token, `src-${i}`, "doc-shared")) }
    }))

  it("six concurrent finalizes of one document under different sources all commit and leave exactly one watch", async () => {
    // Each lost try of a finalize is some other finalize's commit, so up to
    // six contenders always fit in the six tries.
    const { stores, rows } = await fleet(3, 4)
    const runners = await claimsOnSharedDocument(stores, 6)
    const results = await Promise.all(runners.map((runner) => runner.finalize()))
    expect(results.map((r) => r.outcome)).toEqual(Array(6).fill("committed"))
    const watches = await rows("projection_watch")
    expect(watches).toHaveLength(1)
    expect(watches[0]).toMatchObject({ document_id: "doc-shared", verification_status: "pending_verification" })
    expect(results.flatMap((r) => r.outcome === "committed" ? r.superseded : [])).toHaveLength(5)
  })

  it("sixteen concurrent finalizes of one document take turns: every one commits on its first call", async () => {
    const { stores, rows } = await fleet(4, 4)
    const runners = await claimsOnSharedDocument(stores, 16)
    const results = await Promise.all(runners.map((runner) => runner.finalize()))
    expect(results.map((result) => result.outcome)).toEqual(runners.map(() => "committed"))
    expect(await rows("projection_watch")).toHaveLength(1)
    expect((await rows("operation")).filter((op) => op["state"] === "committed")).toHaveLength(16)
  })

  it("the due sweep during finalizes never fails and only ever reports attempted, due operations", async () => {
    const { stores, rows } = await fleet(3, 6)
    const count = 30
    const runners = []
    for (let i = 0; i < count; i++) {
      const key = { ...KEY, operationID: `op-${i}` }
      const claim = await stores[i % 3]!.claimOperation(claimInput({ operationID: key.operationID, documentID: `doc-${i}` }))
      if (claim.outcome !== "claimed") throw new Error("setup claim failed")
      runners.push({ key, token: claim.lease.token, i })
    }
    // Every lease has lapsed (a crash-looking fleet), yet each holder still finalizes.
    clock.now = NOW + POLICY.leaseMs
    let finalizing = true
    const sweeps: Array<number> = []
    const sweeper = (async () => {
      while (finalizing) {
        const due = await stores[2]!.listDueOperations(clock.now, { readWinner: () => "w-1" })
        for (const op of due.operations) {
          expect(op.state).toBe("attempted")
          expect(op.nextAttemptAt === null || op.nextAttemptAt <= clock.now).toBe(true)
        }
        sweeps.push(due.operations.length)
      }
    })()
    await Promise.all(runners.map(({ key, token, i }) =>
      stores[i % 2]!.finalizeOperationAndArmWatch(key, finalizeOf(token, `src-${i}`, `doc-${i}`))
    ))
    finalizing = false
    await sweeper
    expect(sweeps.length).toBeGreaterThan(0)
    const after = await stores[2]!.listDueOperations(clock.now, { readWinner: () => "w-1" })
    expect(after.operations).toEqual([])
    expect(await rows("projection_watch")).toHaveLength(count)
  })
})
