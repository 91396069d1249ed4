// Round trips, not speed: how many statements each public method sends to
// the database (Postgres, counted at the wire through a proxy; SQLite,
// counted at the engine), and how a hot row behaves: 8 runners on ONE key
// on Postgres, the retries each commit cost and how many calls ran out of
// their retry budget (must be none). The counts are pinned by
// test/roundtrips.test.ts; this prints them as a table.
import { performance } from "node:perf_hooks"
import { StoreMetrics, watchIdentityOf } from "@connector-store/core"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, Metric } from "effect"
import { removeScratchDatabases, scratchDatabases } from "./support/databases.mjs"
import { measurementSettings } from "./support/measure.mjs"
import {
  countSqliteStatements,
  measureRoundTrips,
  ROUND_TRIP_METHODS,
  startRoundTripProxy,
  throughProxy
} from "./support/round-trips.mjs"

const RUNNERS = 8
let opened = 0

/** A store clock the round-trip script moves on (a lease expiring). */
const testClock = () => {
  let now = Date.now()
  return { now: () => now, advance: (ms) => void (now += ms) }
}

const roundTripTable = async (context) => {
  const clock = testClock()
  const count = countSqliteStatements()
  const sqliteStore = await openConnectorStore({ url: context.sqlite.path("roundtrips.sqlite"), serverCheckMs: 0, now: clock.now, readWinner: () => "winner" })
  let sqlite
  try {
    sqlite = await measureRoundTrips(sqliteStore, count, clock.advance, "sqlite")
  } finally {
    await sqliteStore.close()
  }
  let postgres
  if (context.postgres.skip === undefined) {
    const via = throughProxy(context.postgres.url)
    const proxy = await startRoundTripProxy(via.target)
    const store = await openConnectorStore({
      serverCheckMs: 0,
      url: via.at(proxy.port),
      tablePrefix: `rt${++opened}_`,
      maxConnections: 1,
      clock: "local",
      now: clock.now,
      readWinner: () => "winner"
    })
    try {
      postgres = await measureRoundTrips(store, proxy.roundTrips, clock.advance, "postgres")
    } finally {
      await store.close()
      await proxy.close()
    }
  }
  return [
    `  ${"method".padEnd(32)} ${"postgres".padStart(9)} ${"sqlite".padStart(7)}   (round trips; sqlite: statements run)`,
    ...ROUND_TRIP_METHODS.map((method) =>
      `  ${method.padEnd(32)} ${String(postgres?.[method] ?? "–").padStart(9)} ${String(sqlite[method]).padStart(7)}`
    )
  ]
}

/** The lost tries counted so far for `method` (StoreMetrics.lostRaceRetries). */
const lostTries = (method) =>
  Effect.runSync(Metric.value(Metric.tagged(StoreMetrics.lostRaceRetries, "method", method))).count

/**
 * `RUNNERS` loops of `step` for `ms` on one store; `step` returns how many
 * writes it committed. Counts calls that failed ConcurrentUpdateExhausted.
 */
const hotLoop = async (step, methods, ms) => {
  const lostBefore = methods.map(lostTries)
  let commits = 0
  let calls = 0
  let exhausted = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: RUNNERS }, async (_, runner) => {
    while (performance.now() - started < ms) {
      try {
        const result = await step(runner)
        commits += result.commits
        calls += result.calls
      } catch (error) {
        if (error?._tag !== "ConcurrentUpdateExhausted") throw error
        exhausted++
        calls++
      }
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const lost = methods.reduce((sum, method, i) => sum + lostTries(method) - lostBefore[i], 0)
  return { commits, calls, lost, exhausted, seconds }
}

const hotLine = (name, { commits, calls, lost, exhausted, seconds }) =>
  `  ${name.padEnd(58)} ${String(commits).padStart(6)} commits ${String(calls).padStart(6)} calls  ` +
  `${(lost / Math.max(commits, 1)).toFixed(2)} retries/commit  ${exhausted} exhausted` +
  `${exhausted === 0 ? "" : " ← MISSED (must be 0)"}  (${Math.round(commits / seconds)} commits/s)`

const hotRow = async (context) => {
  if (context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const { roundMs } = measurementSettings(process.env)
  const ms = Math.max(roundMs * 2, 1_500)
  const store = await openConnectorStore({
    serverCheckMs: 0,
    url: context.postgres.url,
    tablePrefix: `hot${++opened}_`,
    maxConnections: 10,
    readWinner: () => "winner"
  })
  try {
    // One operation, committed once, gives the one watch every runner fights over.
    const key = { callerDID: "did:hot:caller", operationID: "hot-op" }
    const claimInput = {
      ...key,
      ownerDID: "did:hot:owner",
      connectorName: "hot-connector",
      model: "Event",
      op: "update",
      accountKey: "hot@example.com",
      target: "calendars/primary",
      sourceID: "hot-source",
      deterministicEventID: "hot-event",
      payloadHash: "hot-hash",
      reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
      providerEtag: "etag-0",
      documentID: "hot-doc",
      leaseMs: 30_000
    }
    const first = await store.claimOperation(claimInput)
    const finalized = await store.finalizeOperationAndArmWatch(key, {
      leaseToken: first.lease.token, sourceID: "hot-source", documentID: "hot-doc", watchDueAt: store.now() - 1
    })
    const identity = watchIdentityOf(finalized.watch)
    const generation = finalized.watch.repairGeneration

    // Watch: every runner claims the one watch's attempt; the winner defers it
    // (due at once again), so the next round is open to all.
    const watchCycle = await hotLoop(async () => {
      const until = store.now() + 60_000
      if (!(await store.claimWatchAttempt(identity, { generation, until, now: store.now() }))) return { commits: 0, calls: 1 }
      if (!(await store.deferWatch(identity, { generation, claimedUntil: until, nextAttemptAt: store.now() - 1 }))) {
        throw new Error("the claim's holder could not defer it")
      }
      return { commits: 2, calls: 2 }
    }, ["claimWatchAttempt", "deferWatch"], ms)

    // Operation: a second key; every runner claims it, the holder reports the
    // device offline with the retry due at once, which releases the lease.
    const opKey = { callerDID: "did:hot:caller", operationID: "hot-op-2" }
    const opInput = { ...claimInput, ...opKey, sourceID: "hot-source-2", documentID: "hot-doc-2" }
    const operationCycle = await hotLoop(async () => {
      const claim = await store.claimOperation(opInput)
      if (claim.outcome !== "claimed") return { commits: 0, calls: 1 }
      const failed = await store.recordAttemptFailure(opKey, { leaseToken: claim.lease.token, kind: "offline", retryAt: store.now() - 1 })
      if (failed.outcome !== "deferred") throw new Error(`recordAttemptFailure answered ${failed.outcome}`)
      return { commits: 2, calls: 2 }
    }, ["claimOperation", "recordAttemptFailure"], ms)

    // Locked: every runner manually re-arms the same watch (it reads the
    // winner, so it runs under the row's lock and waits its turn).
    const armCycle = await hotLoop(async () => {
      const outcome = await store.armWatch(identity, "manual", { dueAt: store.now() })
      if (outcome !== "opened") throw new Error(`armWatch answered ${outcome}`)
      return { commits: 1, calls: 1 }
    }, ["armWatch"], ms)

    return [
      hotLine(`watch: claimWatchAttempt → deferWatch, ${RUNNERS} runners, 1 watch`, watchCycle),
      hotLine(`operation: claimOperation → recordAttemptFailure, ${RUNNERS} runners, 1 key`, operationCycle),
      hotLine(`armWatch (manual, locked), ${RUNNERS} runners, 1 watch`, armCycle)
    ]
  } finally {
    await store.close()
  }
}

/** The round-trip bench (see bench/README.md for the shape). */
export default {
  title: "round trips per public method, and a hot row (8 runners on one key)",
  before: scratchDatabases,
  after: removeScratchDatabases,
  cases: [
    { name: "round trips per public method (postgres, sqlite)", run: roundTripTable },
    { name: `postgres · hot row · ${RUNNERS} runners on one key`, run: hotRow }
  ]
}
