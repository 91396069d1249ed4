import { ConnectorStore, type WatchIdentity } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { type ClockSource, openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import { claimFor, sleep, withClient } from "./faults.support.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

/** How far each runner's machine clock is off the database server's, in opposite directions. */
const SKEW_MS = 30_000
const LEASE_MS = 10_000
const OWNER = "did:owner:clock"

const key = (id: string) => ({ callerDID: "did:caller:faults", operationID: id })
const identityOf = (id: string): WatchIdentity => ({
  ownerDID: "did:owner:faults",
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1",
  sourceID: `src-${id}`
})

/** The database server's time now, read directly (not through a store). */
const serverNow = (url: string) =>
  withClient(url, async (admin) =>
    Math.round((await admin.query<{ now: number }>("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now")).rows[0]!.now))

/** Two runners on one database, one machine clock 30 s fast and one 30 s slow, deciding with `clock`. */
const openRunners = async (url: string, clock: ClockSource) => {
  const prefix = freshPrefix()
  const open = (offset: number) =>
    openConnectorStore({
      url,
      tablePrefix: prefix,
      maxConnections: 2,
      now: () => Date.now() + offset,
      clock,
      readWinner: () => "winner-1"
    })
  return { fast: await open(SKEW_MS), slow: await open(-SKEW_MS) }
}

/** Commits operation `id` on `store` and arms its watch, due at `watchDueAt`. */
const committedWithWatch = async (store: SqlConnectorStore, id: string, watchDueAt: number) => {
  const claim = await store.claimOperation(claimFor(id))
  if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
  const finalized = await store.finalizeOperationAndArmWatch(key(id), {
    leaseToken: claim.lease.token,
    sourceID: `src-${id}`,
    documentID: `doc-${id}`,
    watchDueAt
  })
  expect(finalized.outcome).toBe("committed")
}

/**
 * What two skewed runners observe in each situation where a clock decides:
 * the fast one's claims while the slow one's lease is live, and the slow
 * one's view of work that is due by the database's clock.
 */
const observe = async (url: string, clock: ClockSource) => {
  const { fast, slow } = await openRunners(url, clock)
  try {
    // The operation drive lease: the slow runner holds it, the fast one tries to take it.
    expect((await slow.claimOperation(claimFor("held", { leaseMs: LEASE_MS }))).outcome).toBe("claimed")
    const operationTakeover = (await fast.claimOperation(claimFor("held", { leaseMs: LEASE_MS }))).outcome

    // The sync lease, with the store's time as the terms' `now`.
    expect((await slow.claimSyncLease("gcal", OWNER, { now: slow.now(), leaseMs: LEASE_MS })).outcome).toBe("claimed")
    const syncTakeover = (await fast.claimSyncLease("gcal", OWNER, { now: fast.now(), leaseMs: LEASE_MS })).outcome

    // A watch claim, with the store's time as `now` and the base of `until`.
    await committedWithWatch(slow, "watched", (await serverNow(url)) - 2 * SKEW_MS)
    const slowNow = slow.now()
    expect(await slow.claimWatchAttempt(identityOf("watched"), { generation: 0, now: slowNow, until: slowNow + LEASE_MS })).toBe(true)
    const fastNow = fast.now()
    const watchTakeover = await fast.claimWatchAttempt(identityOf("watched"), { generation: 0, now: fastNow, until: fastNow + LEASE_MS })

    // Work due by the database clock: a watch due now, and an operation whose short lease just lapsed.
    await committedWithWatch(fast, "due", await serverNow(url))
    expect((await fast.claimOperation(claimFor("lapsed", { leaseMs: 300 }))).outcome).toBe("claimed")
    await sleep(400)
    const slowSweep = await slow.listDueOperations(slow.now(), {})
    const fastSweep = await fast.listDueOperations(fast.now(), {})
    const dueWatchListedBy = {
      slow: slowSweep.watches.some((row) => row.sourceID === "src-due"),
      fast: fastSweep.watches.some((row) => row.sourceID === "src-due")
    }
    const lapsedListedBySlow = slowSweep.operations.some((row) => row.operationID === "lapsed")
    const lapsedClaimBySlow = (await slow.claimOperation(claimFor("lapsed", { leaseMs: LEASE_MS }))).outcome
    return { operationTakeover, syncTakeover, watchTakeover, dueWatchListedBy, lapsedListedBySlow, lapsedClaimBySlow }
  } finally {
    await fast.close()
    await slow.close()
  }
}

describe.runIf(pgAvailable)("runners whose machine clocks differ by ±30 s, on one Postgres database", () => {
  let url: string

  beforeAll(async () => {
    url = await pgDatabaseForFile()
  })

  it("each store's clock follows the server's, whatever its machine clock says", async () => {
    const { fast, slow } = await openRunners(url, "database")
    try {
      const server = await serverNow(url)
      expect(Math.abs(fast.now() - server)).toBeLessThan(1_000)
      expect(Math.abs(slow.now() - server)).toBeLessThan(1_000)
    } finally {
      await fast.close()
      await slow.close()
    }
  })

  it("on the database clock (the Postgres default), never hold one lease at once and never miss due work", async () => {
    expect(await observe(url, "database")).toEqual({
      operationTakeover: "busy",
      syncTakeover: "busy",
      watchTakeover: false,
      dueWatchListedBy: { slow: true, fast: true },
      lapsedListedBySlow: true,
      lapsedClaimBySlow: "claimed"
    })
  })

  it("control: on the machines' own clocks, the fast runner takes live leases and the slow one misses due work", async () => {
    expect(await observe(url, "local")).toEqual({
      operationTakeover: "claimed",
      syncTakeover: "claimed",
      watchTakeover: true,
      dueWatchListedBy: { slow: false, fast: true },
      lapsedListedBySlow: false,
      lapsedClaimBySlow: "busy"
    })
  })

  it("a machine clock that jumps after open is caught up with at the next refresh", async () => {
    let jump = 0
    const local = () => Date.now() + jump
    const readings = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const sql = yield* Layer.build(Sql.layerClient({ url, maxConnections: 1 })).pipe(Effect.map((context) => Context.get(context, SqlClient)))
      const clock = yield* Sql.makeDatabaseClock(sql, local, 200)
      const server = () => Effect.promise(() => serverNow(url))
      const atOpen = clock.now() - (yield* server())
      jump = SKEW_MS
      const justAfterJump = clock.now() - (yield* server())
      yield* Effect.promise(() => sleep(600))
      const afterRefresh = clock.now() - (yield* server())
      return { atOpen, justAfterJump, afterRefresh }
    })))
    expect(Math.abs(readings.atOpen)).toBeLessThan(1_000)
    // Between refreshes the store's clock moves with the machine's (no round trip per reading)...
    expect(Math.abs(readings.justAfterJump - SKEW_MS)).toBeLessThan(1_000)
    // ...and the next measurement brings it back to the server's.
    expect(Math.abs(readings.afterRefresh)).toBeLessThan(1_000)
  })

  it("the Effect API decides on the server's clock with layerDatabaseClock", async () => {
    const layer = Sql.layerDatabaseClock(() => Date.now() - SKEW_MS).pipe(
      Layer.provideMerge(Sql.layer({ url, tablePrefix: freshPrefix(), maxConnections: 2 }))
    )
    const claim = await Effect.runPromise(
      Effect.provide(Effect.flatMap(ConnectorStore, (store) => store.claimOperation(claimFor("effect", { leaseMs: LEASE_MS }))), layer)
    )
    if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
    expect(Math.abs(claim.lease.expiresAt - LEASE_MS - (await serverNow(url)))).toBeLessThan(1_000)
  })
})
