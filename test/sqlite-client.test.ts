import { ConnectorStore, type PersistenceError } from "@connector-store/core"
import {
  layer,
  makeSqlTransactor,
  openConnectorStore,
  type SqlConnectorStore,
  SqliteConnection
} from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Exit, Fiber, ManagedRuntime, Runtime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput, KEY, NOW } from "./operations.fixtures.js"
import { freshSqlitePath } from "./support/databases.js"
import { type RecordedSpan, recordingTracer } from "./support/secrecy.js"

const open: Array<SqlConnectorStore> = []
const runtimes: Array<ManagedRuntime.ManagedRuntime<SqlClient, unknown>> = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()))
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.dispose()))
})

/** A runtime holding the project's SQLite client on `filename`. */
const clientOn = (filename: string) => {
  const runtime = ManagedRuntime.make(SqliteConnection.layer({ filename, busyTimeoutMs: 100 }))
  runtimes.push(runtime)
  return runtime
}

/** A promise and its resolver (Node 20 has no Promise.withResolvers). */
const deferred = () => {
  let resolve!: () => void
  const promise = new Promise<void>((done) => {
    resolve = done
  })
  return { promise, resolve }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("the project's SQLite client", () => {
  it("runs a whole transaction of synchronous statements without an asynchronous step (runSync succeeds)", async () => {
    const runtime = clientOn(freshSqlitePath())
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`))
    const rows = runtime.runSync(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.zipRight(sql`INSERT INTO t (v) VALUES (${"a"})`, sql<{ v: string }>`SELECT v FROM t`))
    ))
    expect(rows).toEqual([{ v: "a" }])
  })

  it("never runs another fiber's statement inside an open transaction: it waits for the transaction to end", async () => {
    const runtime = clientOn(freshSqlitePath())
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`))
    const entered = deferred()
    const release = deferred()
    // A transaction that writes, suspends (as on an asynchronous winner read), then fails: it rolls back.
    const failing = runtime.runPromiseExit(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (v) VALUES (${"rolled back"})`
        entered.resolve()
        yield* Effect.promise(() => release.promise)
        return yield* Effect.fail("abort")
      }))
    ))
    await entered.promise
    // Another fiber's plain insert and another transaction, both while the first is open.
    const plain = runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql`INSERT INTO t (v) VALUES (${"plain"})`))
    const other = runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(sql`INSERT INTO t (v) VALUES (${"other transaction"})`)
    ))
    release.resolve()
    expect(Exit.isFailure(await failing)).toBe(true)
    await Promise.all([plain, other])
    const rows = await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql<{ v: string }>`SELECT v FROM t ORDER BY v`))
    expect(rows.map((row) => row.v)).toEqual(["other transaction", "plain"])
  })

  it("runs a statement of a transaction that has ended (a handle kept past it) outside any transaction, never inside another's", async () => {
    const runtime = clientOn(freshSqlitePath())
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql`CREATE TABLE t (v TEXT)`))
    // The first transaction's runtime, as a winner reader's handle captures it.
    const kept = await runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.zipLeft(Effect.runtime<SqlClient>(), sql`INSERT INTO t (v) VALUES ('first')`))
    ))
    const entered = deferred()
    const release = deferred()
    const failing = runtime.runPromiseExit(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (v) VALUES ('rolled back')`
        entered.resolve()
        yield* Effect.promise(() => release.promise)
        return yield* Effect.fail("abort")
      }))
    ))
    await entered.promise
    const late = Runtime.runPromise(kept)(Effect.flatMap(SqlClient, (sql) => sql`INSERT INTO t (v) VALUES ('late')`))
    release.resolve()
    expect(Exit.isFailure(await failing)).toBe(true)
    await late
    const rows = await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql<{ v: string }>`SELECT v FROM t ORDER BY v`))
    expect(rows.map((row) => row.v)).toEqual(["first", "late"])
  })

  it("opens the stock client's spans (sql.transaction, sql.execute) when a tracer is installed, none otherwise", async () => {
    const runtime = clientOn(freshSqlitePath())
    const spans: Array<RecordedSpan> = []
    const work = Effect.flatMap(SqlClient, (sql) =>
      Effect.zipRight(sql`CREATE TABLE IF NOT EXISTS t (v TEXT)`, sql.withTransaction(sql`INSERT INTO t (v) VALUES ('x')`))
    )
    await runtime.runPromise(work)
    expect(spans).toEqual([])
    await runtime.runPromise(Effect.withTracer(work, recordingTracer(spans)))
    expect(spans.map((span) => span.name)).toEqual(["sql.execute", "sql.transaction", "sql.execute"])
    expect(spans[2]?.attributes.get("db.query.text")).toBe("INSERT INTO t (v) VALUES ('x')")
  })

  it("joins an outer transaction: a failed nested one rolls back to its savepoint, the outer one commits", async () => {
    const runtime = clientOn(freshSqlitePath())
    const rows = await runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      Effect.gen(function*() {
        yield* sql`CREATE TABLE t (v TEXT)`
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO t (v) VALUES (${"outer"})`
          yield* Effect.exit(sql.withTransaction(Effect.zipRight(sql`INSERT INTO t (v) VALUES (${"inner, failed"})`, Effect.fail("no"))))
          yield* sql.withTransaction(sql`INSERT INTO t (v) VALUES (${"inner"})`)
        }))
        return yield* sql<{ v: string }>`SELECT v FROM t ORDER BY v`
      })
    ))
    expect(rows.map((row) => row.v)).toEqual(["inner", "outer"])
  })

  it("turns a failed COMMIT into a typed PersistenceError with the driver's error inside, and stays usable", async () => {
    const runtime = clientOn(freshSqlitePath())
    const exit = await runtime.runPromiseExit(Effect.flatMap(SqlClient, (sql) =>
      Effect.gen(function*() {
        yield* sql`PRAGMA foreign_keys = ON`
        yield* sql`CREATE TABLE parent (id INTEGER PRIMARY KEY)`
        yield* sql`CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`
        // The deferred foreign key is only checked at COMMIT, which fails.
        yield* makeSqlTransactor(sql).withTransaction(sql`INSERT INTO child (parent) VALUES (${42})`)
      })
    ))
    expect(exit).toMatchObject({ _tag: "Failure", cause: { _tag: "Fail", error: { _tag: "PersistenceError", operation: "transaction" } } })
    const error = Exit.isFailure(exit) ? (exit.cause as unknown as { error: PersistenceError }).error : undefined
    expect(String((error?.cause as { cause?: { code?: string } })?.cause?.code)).toMatch(/^SQLITE_CONSTRAINT/)
    const count = await runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      Effect.zipRight(sql`INSERT INTO parent (id) VALUES (1)`, sql<{ n: number }>`SELECT COUNT(*) AS n FROM child`)
    ))
    expect(count).toEqual([{ n: 0 }])
  })

  it("hands every fiber's transaction its turn when one waiting for the lock is interrupted", async () => {
    const runtime = clientOn(freshSqlitePath())
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql`CREATE TABLE t (v TEXT)`))
    const release = deferred()
    const holder = runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.zipRight(sql`INSERT INTO t (v) VALUES ('holder')`, Effect.promise(() => release.promise)))
    ))
    const waiting = runtime.runFork(Effect.flatMap(SqlClient, (sql) => sql.withTransaction(sql`INSERT INTO t (v) VALUES ('interrupted')`)))
    const after = runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql.withTransaction(sql`INSERT INTO t (v) VALUES ('after')`)))
    await sleep(10)
    await runtime.runPromise(Fiber.interrupt(waiting))
    release.resolve()
    await Promise.all([holder, after])
    const rows = await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql<{ v: string }>`SELECT v FROM t ORDER BY v`))
    expect(rows.map((row) => row.v)).toEqual(["after", "holder"])
  })
})

describe("stores on one SQLite file in one process", () => {
  /**
   * Store A finalizes with a winner reader that suspends (a timer longer
   * than the busy timeout) while it holds the write lock; store B claims
   * meanwhile. Busy-waiting inside the driver would block the event loop A
   * needs to commit, and B would fail with SQLITE_BUSY after the busy
   * timeout; sharing the connection, B waits for A's transaction instead.
   */
  const finalizeWhileAnotherClaims = async (a: SqlConnectorStore, b: SqlConnectorStore, reading: Promise<void>) => {
    const claim = await a.claimOperation(claimInput())
    if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
    await a.markOperationSent(KEY, { leaseToken: claim.lease.token })
    const finalized = a.finalizeOperationAndArmWatch(KEY, {
      leaseToken: claim.lease.token,
      sourceID: "src-1",
      documentID: "doc-1",
      providerEtag: "etag-1",
      resultEntity: { id: "src-1" },
      watchDueAt: NOW + 5_000
    })
    await reading
    const other = b.claimOperation(claimInput({ operationID: "op-2", sourceID: "src-2", deterministicEventID: "event-2" }))
    const [done, claimed] = await Promise.all([finalized, other])
    expect(done).toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "winner-of-doc-1" } })
    expect(claimed).toMatchObject({ outcome: "claimed" })
  }

  const openPair = async (prefixes: readonly [string | undefined, string | undefined]) => {
    const url = freshSqlitePath()
    const reading = deferred()
    const common = { url, now: () => NOW, busyTimeoutMs: 100 }
    const a = await openConnectorStore({
      ...common,
      tablePrefix: prefixes[0],
      readWinner: async (documentID: string) => {
        reading.resolve()
        await sleep(300)
        return `winner-of-${documentID}`
      }
    })
    open.push(a)
    const b = await openConnectorStore({ ...common, tablePrefix: prefixes[1], readWinner: async (id: string) => `winner-of-${id}` })
    open.push(b)
    return { url, a, b, reading: reading.promise }
  }

  it("share one connection: one store waits for the other's transaction, suspended on a winner read, instead of failing busy", async () => {
    const { a, b, reading, url } = await openPair([undefined, undefined])
    expect(SqliteConnection.sharedSqliteConnections(url)).toBe(2)
    await finalizeWhileAnotherClaims(a, b, reading)
    expect(await b.getOperation(KEY)).toMatchObject({ state: "committed" })
  })

  it("share it across table prefixes too", async () => {
    const { a, b, reading, url } = await openPair(["a_", "b_"])
    expect(SqliteConnection.sharedSqliteConnections(url)).toBe(2)
    await finalizeWhileAnotherClaims(a, b, reading)
    expect(await b.getOperation(KEY)).toBeNull()
  })

  it("keep the connection open while one store remains: closing one leaves the other working", async () => {
    const { a, b, url } = await openPair([undefined, undefined])
    await a.close()
    expect(SqliteConnection.sharedSqliteConnections(url)).toBe(1)
    expect(await b.claimOperation(claimInput())).toMatchObject({ outcome: "claimed" })
    await b.close()
    expect(SqliteConnection.sharedSqliteConnections(url)).toBe(0)
    // Reopened, the file has what B wrote.
    const c = await openConnectorStore({ url, now: () => NOW })
    open.push(c)
    expect(await c.getOperation(KEY)).toMatchObject({ state: "attempted" })
  })

  it("never share :memory: (each store its own database)", async () => {
    const a = await openConnectorStore({ url: ":memory:", now: () => NOW })
    open.push(a)
    const b = await openConnectorStore({ url: ":memory:", now: () => NOW })
    open.push(b)
    expect(await a.claimOperation(claimInput())).toMatchObject({ outcome: "claimed" })
    expect(await b.getOperation(KEY)).toBeNull()
    expect(SqliteConnection.sharedSqliteConnections(":memory:")).toBe(0)
  })
})

describe("a store on the project's SQLite client", () => {
  it("runs a whole transition with a synchronous winner reader in one synchronous step (runSync succeeds)", async () => {
    const runtime = ManagedRuntime.make(
      layer({ url: freshSqlitePath() }, { readWinner: (documentID) => Effect.succeed(`winner-of-${documentID}`) })
    )
    try {
      const claim = await runtime.runPromise(Effect.flatMap(ConnectorStore, (store) => store.claimOperation(claimInput())))
      if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
      const finalized = runtime.runSync(Effect.flatMap(ConnectorStore, (store) =>
        Effect.zipRight(
          store.markOperationSent(KEY, { leaseToken: claim.lease.token }),
          store.finalizeOperationAndArmWatch(KEY, {
            leaseToken: claim.lease.token,
            sourceID: "src-1",
            documentID: "doc-1",
            providerEtag: "etag-1",
            resultEntity: { id: "src-1" },
            watchDueAt: NOW + 5_000
          })
        )))
      expect(finalized).toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "winner-of-doc-1" } })
    } finally {
      await runtime.dispose()
    }
  })
})
