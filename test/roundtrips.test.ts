import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, describe, expect, it } from "vitest"
import {
  countSqliteStatements,
  measureRoundTrips,
  type RoundTripProxy,
  startRoundTripProxy,
  throughProxy
} from "../bench/support/round-trips.mjs"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

/**
 * The statements each public method sends, pinned, so a regression (a lock
 * or a transaction where none is needed, a read that could ride along)
 * fails here. Postgres is counted at the wire (the server's ReadyForQuery
 * messages through a proxy: one per round trip); SQLite at the engine
 * (every statement better-sqlite3 runs, BEGIN and COMMIT included).
 *
 * Why each count is the minimum the method's guarantees need here:
 * - A claim of a new key is its insert alone (marked sent in it when asked:
 *   `markSent`); a watch claim or deferral is
 *   one guarded UPDATE (the pure decision's preconditions as its WHERE,
 *   test/guarded-writes.property.test.ts).
 * - The other transitions that read nothing but their own row (an existing
 *   key's claim, renew, mark sent, attempt failure) are an unlocked read and
 *   one versioned write (a compare-and-set statement); a claim of an
 *   existing key first tries its insert.
 * - armWatch and recordVerification read the winner under the row's lock:
 *   BEGIN, locked read, write, COMMIT (on SQLite the project's client begins
 *   IMMEDIATE, so the write lock needs no statement of its own).
 * - finalize: BEGIN, the operation locked, the arm targets locked in one
 *   statement, the writes, COMMIT. On Postgres the operation's lock
 *   statement also takes the document slot's advisory lock (its arguments
 *   are the locked row's columns, so the row is locked first), the targets
 *   come in a statement of their own (its snapshot is taken once the slot is
 *   held, so it sees the previous holder's watch), and the operation's and
 *   the watch's versioned writes are one statement of two data-modifying
 *   CTEs: 5. On SQLite the write lock already serializes and a statement
 *   writes one table: the two writes are two statements, 6.
 * - listDueOperations: the due operations, the due watches, one audit page.
 * - A batch claim (claimDueOperations, claimDueWatches): BEGIN, one locked
 *   page, the writes, COMMIT, whatever the batch's size on Postgres (every
 *   row's versioned write in one statement); SQLite writes each row with a
 *   statement of its own, in-process.
 */
const EXPECTED = {
  postgres: {
    "claimOperation (new key)": 1,
    "claimOperation (busy)": 2,
    "claimOperation (takeover)": 3,
    "claimOperation (new key, markSent)": 1,
    "claimOperation (takeover, markSent)": 3,
    renewOperationLease: 2,
    markOperationSent: 1,
    recordAttemptFailure: 2,
    finalizeOperationAndArmWatch: 5,
    armWatch: 4,
    claimWatchAttempt: 1,
    deferWatch: 1,
    recordVerification: 4,
    getWatch: 1,
    listDueOperations: 3,
    "claimDueOperations (3 due)": 4,
    "claimDueWatches (2 due)": 4
  },
  sqlite: {
    "claimOperation (new key)": 1,
    "claimOperation (busy)": 2,
    "claimOperation (takeover)": 3,
    "claimOperation (new key, markSent)": 1,
    "claimOperation (takeover, markSent)": 3,
    renewOperationLease: 2,
    markOperationSent: 1,
    recordAttemptFailure: 2,
    finalizeOperationAndArmWatch: 6,
    armWatch: 4,
    claimWatchAttempt: 1,
    deferWatch: 1,
    recordVerification: 4,
    getWatch: 1,
    listDueOperations: 3,
    "claimDueOperations (3 due)": 6,
    "claimDueWatches (2 due)": 5
  }
}

/**
 * The calls provider limits touch, on a store opened with
 * `providerLimits: true` (the default store's counts above do not change):
 * - a claim first reads the limits of its account and connector (one
 *   statement); with none that can limit it, it is the default claim (a new
 *   key: its insert);
 * - with a pause in force or a cap, the claim is one transaction: BEGIN, the
 *   operation locked, the limits locked, the capped scopes' live leases
 *   counted under that lock (none when paused), the write, COMMIT;
 * - a retryable 429 is BEGIN, the operation locked, its write, the account's
 *   limits locked, the pause written, COMMIT; any other failure is as on the
 *   default store;
 * - a batch claim (of two rows here; SQLite writes each row with a statement
 *   of its own, Postgres all in one) adds the limits in force to its
 *   transaction (one statement) and, with a cap in force, the count of the
 *   capped scopes (to leave the full ones out of its read), and the lock and
 *   the count again of the capped scopes its page reaches.
 */
const LIMITED_CLAIMS = {
  "claimOperation (new key, no limit)": 2,
  "claimOperation (busy, no limit)": 3,
  "claimOperation (new key, account paused)": 6,
  "claimOperation (new key, account capped)": 7,
  "recordAttemptFailure (429)": 6,
  "recordAttemptFailure (503)": 2
}
const EXPECTED_LIMITED = {
  postgres: { ...LIMITED_CLAIMS, "claimDueOperations (no limit)": 5, "claimDueOperations (connector capped)": 8 },
  sqlite: { ...LIMITED_CLAIMS, "claimDueOperations (no limit)": 6, "claimDueOperations (connector capped)": 9 }
}

/** Runs each call of `EXPECTED_LIMITED` once on a store that enforces limits; the statements `count()` grew by, by call. */
const measureLimited = async (store: Awaited<ReturnType<typeof openConnectorStore>>, count: () => number, advance: (ms: number) => void) => {
  const counts: Record<string, number> = {}
  const measure = async <A>(name: string, call: () => Promise<A>, outcome: string): Promise<A> => {
    const before = count()
    const result = await call()
    counts[name] = count() - before
    const seen = (result as { readonly outcome?: string }).outcome
    if (seen !== outcome) throw new Error(`${name} answered ${String(seen)}, expected ${outcome}`)
    return result
  }
  const input = (operationID: string, accountKey = "rt@example.com") => ({
    callerDID: "did:rt:limits",
    operationID,
    ownerDID: "did:rt:owner",
    connectorName: "rt-connector",
    model: "Event",
    op: "update" as const,
    accountKey,
    target: "calendars/primary",
    sourceID: `source-${operationID}`,
    deterministicEventID: `event-${operationID}`,
    payloadHash: `hash-${operationID}`,
    reissueIntent: { kind: "conditional-update" as const, ifMatch: "etag-0" },
    leaseMs: 30_000
  })
  // Warm the pool and the statement caches.
  await store.claimOperation(input("warm"))
  await store.setProviderLimit({ connectorName: "rt-connector", accountKey: "capped@example.com", maxInFlight: 5 })
  await store.claimOperation(input("warm-capped", "capped@example.com"))
  await store.pauseProvider({ connectorName: "rt-connector", accountKey: "paused@example.com", until: store.now() + 1_000 })
  await store.claimOperation(input("warm-paused", "paused@example.com"))

  const first = await measure("claimOperation (new key, no limit)", () => store.claimOperation(input("op-1")), "claimed")
  await measure("claimOperation (busy, no limit)", () => store.claimOperation(input("op-1")), "busy")
  await measure("claimOperation (new key, account paused)", () => store.claimOperation(input("op-2", "paused@example.com")), "scheduled")
  await measure("claimOperation (new key, account capped)", () => store.claimOperation(input("op-3", "capped@example.com")), "claimed")
  if (first.outcome !== "claimed") throw new Error("expected a claim")
  await measure("recordAttemptFailure (429)", () =>
    store.recordAttemptFailure(first.operation, { leaseToken: first.lease.token, kind: "retryable", httpStatus: 429, retryAt: store.now() + 500 }), "retrying")
  const second = await store.claimOperation(input("op-4", "other@example.com"))
  if (second.outcome !== "claimed") throw new Error("expected a claim")
  await measure("recordAttemptFailure (503)", () =>
    store.recordAttemptFailure(second.operation, { leaseToken: second.lease.token, kind: "retryable", httpStatus: 503 }), "retrying")
  await store.resumeProvider({ connectorName: "rt-connector", accountKey: "rt@example.com" })
  advance(60_000)
  const claimDue = async (name: string) => {
    const before = count()
    const batch = await store.claimDueOperations({ limit: 2 })
    counts[name] = count() - before
    if (batch.claimed.length === 0) throw new Error(`${name} claimed nothing`)
  }
  await store.setProviderLimit({ connectorName: "rt-connector", accountKey: "capped@example.com", maxInFlight: null })
  await claimDue("claimDueOperations (no limit)")
  await store.setProviderLimit({ connectorName: "rt-connector", maxInFlight: 100 })
  advance(60_000)
  await claimDue("claimDueOperations (connector capped)")
  return counts
}

/** A store clock the script moves on (a lease expiring), so no count depends on the wall clock. */
const testClock = () => {
  let now = 1_700_000_000_000
  return { now: () => now, advance: (ms: number) => void (now += ms) }
}

describe("round trips per public method on SQLite", () => {
  it("each method runs the pinned number of statements", async () => {
    const count = countSqliteStatements()
    const clock = testClock()
    const store = await openConnectorStore({ url: freshSqlitePath(), serverCheckMs: 0, now: clock.now, readWinner: () => "winner" })
    try {
      expect(await measureRoundTrips(store, count, clock.advance, "sqlite")).toEqual(EXPECTED.sqlite)
    } finally {
      await store.close()
    }
  })
})

describe("round trips of the calls provider limits touch, on a store that enforces them", () => {
  it("on SQLite", async () => {
    const count = countSqliteStatements()
    const clock = testClock()
    const store = await openConnectorStore({ url: freshSqlitePath(), serverCheckMs: 0, now: clock.now, readWinner: () => "winner", providerLimits: true })
    try {
      expect(await measureLimited(store, count, clock.advance)).toEqual(EXPECTED_LIMITED.sqlite)
    } finally {
      await store.close()
    }
  })

  it.runIf(pgAvailable)("on Postgres", async () => {
    const via = throughProxy(await pgDatabaseForFile())
    const limitedProxy = await startRoundTripProxy(via.target)
    const clock = testClock()
    const store = await openConnectorStore({
      serverCheckMs: 0,
      url: via.at(limitedProxy.port),
      tablePrefix: freshPrefix(),
      maxConnections: 1,
      clock: "local",
      now: clock.now,
      readWinner: () => "winner",
      providerLimits: true
    })
    try {
      expect(await measureLimited(store, limitedProxy.roundTrips, clock.advance)).toEqual(EXPECTED_LIMITED.postgres)
    } finally {
      await store.close()
      await limitedProxy.close()
    }
  })
})

describe.runIf(pgAvailable)("round trips per public method on Postgres", () => {
  let proxy: RoundTripProxy | undefined
  afterAll(() => proxy?.close())

  it("each method takes the pinned number of round trips", async () => {
    const via = throughProxy(await pgDatabaseForFile())
    proxy = await startRoundTripProxy(via.target)
    const clock = testClock()
    // One connection and the local clock: nothing else (a second
    // connection's startup, a clock measurement) is counted in between.
    const store = await openConnectorStore({
      serverCheckMs: 0,
      url: via.at(proxy.port),
      tablePrefix: freshPrefix(),
      maxConnections: 1,
      clock: "local",
      now: clock.now,
      readWinner: () => "winner"
    })
    try {
      expect(await measureRoundTrips(store, proxy.roundTrips, clock.advance, "postgres")).toEqual(EXPECTED.postgres)
    } finally {
      await store.close()
    }
  })
})
