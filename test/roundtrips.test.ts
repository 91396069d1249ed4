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
 * - A claim of a new key is its insert alone; a watch claim or deferral is
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
 */
const EXPECTED = {
  postgres: {
    "claimOperation (new key)": 1,
    "claimOperation (busy)": 2,
    "claimOperation (takeover)": 3,
    renewOperationLease: 2,
    markOperationSent: 1,
    recordAttemptFailure: 2,
    finalizeOperationAndArmWatch: 5,
    armWatch: 4,
    claimWatchAttempt: 1,
    deferWatch: 1,
    recordVerification: 4,
    getWatch: 1,
    listDueOperations: 3
  },
  sqlite: {
    "claimOperation (new key)": 1,
    "claimOperation (busy)": 2,
    "claimOperation (takeover)": 3,
    renewOperationLease: 2,
    markOperationSent: 1,
    recordAttemptFailure: 2,
    finalizeOperationAndArmWatch: 6,
    armWatch: 4,
    claimWatchAttempt: 1,
    deferWatch: 1,
    recordVerification: 4,
    getWatch: 1,
    listDueOperations: 3
  }
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
    const store = await openConnectorStore({ url: freshSqlitePath(), now: clock.now, readWinner: () => "winner" })
    try {
      expect(await measureRoundTrips(store, count, clock.advance, "sqlite")).toEqual(EXPECTED.sqlite)
    } finally {
      await store.close()
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
