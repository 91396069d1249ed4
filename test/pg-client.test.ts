import { layerClient } from "@connector-store/sql-adapter"
import { SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { Duration, Effect, Exit, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPrefix, pgDatabaseForFile } from "./support/databases.js"
import { type RecordedSpan, recordingTracer } from "./support/secrecy.js"

/**
 * The store's Postgres client runs statements straight on a connection
 * (packages/sql-adapter/src/PgConnection.ts): these pin what that must not
 * change against `@effect/sql-pg`'s own statement path.
 */
describe("the store's Postgres client", () => {
  let runtime: ManagedRuntime.ManagedRuntime<SqlClient, unknown>
  const table = `${freshPrefix()}client`
  const run = <A, E>(effect: Effect.Effect<A, E, SqlClient>) => runtime.runPromise(effect)
  const runExit = <A, E>(effect: Effect.Effect<A, E, SqlClient>) => runtime.runPromiseExit(effect)
  const withSql = <A, E>(f: (sql: SqlClient) => Effect.Effect<A, E, SqlClient>) => Effect.flatMap(SqlClient, f)

  beforeAll(async () => {
    runtime = ManagedRuntime.make(layerClient({ url: await pgDatabaseForFile(), maxConnections: 4 }))
    await run(withSql((sql) => sql.unsafe(`CREATE TABLE ${table} (v TEXT NOT NULL)`)))
  })
  afterAll(async () => {
    await runtime?.dispose()
  })

  const values = () =>
    run(withSql((sql) => sql.unsafe<{ v: string }>(`SELECT v FROM ${table} ORDER BY v`))).then((rows) => rows.map((row) => row.v))

  it("runs a transaction's statements in that transaction: one backend transaction, and a failure rolls them all back", async () => {
    const ids = await run(withSql((sql) =>
      sql.withTransaction(Effect.all([
        sql<{ id: string }>`SELECT txid_current()::text AS id`,
        sql.unsafe(`INSERT INTO ${table} (v) VALUES ('kept')`).raw,
        sql<{ id: string }>`SELECT txid_current()::text AS id`
      ]))
    ))
    expect(ids[0][0]!.id).toBe(ids[2][0]!.id)
    const failed = await runExit(withSql((sql) =>
      sql.withTransaction(Effect.zipRight(
        sql.unsafe(`INSERT INTO ${table} (v) VALUES ('rolled back')`).raw,
        Effect.fail("abort" as const)
      ))
    ))
    expect(Exit.isFailure(failed)).toBe(true)
    expect(await values()).toEqual(["kept"])
    // Outside a transaction every statement is a transaction of its own.
    const [first, second] = await run(withSql((sql) =>
      Effect.all([sql<{ id: string }>`SELECT txid_current()::text AS id`, sql<{ id: string }>`SELECT txid_current()::text AS id`])
    ))
    expect(first[0]!.id).not.toBe(second[0]!.id)
  })

  it("leaves the transaction behind when it ends: the fiber's next statements run outside it, after a commit and after a rollback", async () => {
    const txid = (sql: SqlClient) => Effect.map(sql<{ id: string }>`SELECT txid_current()::text AS id`, (rows) => rows[0]!.id)
    const after = await run(withSql((sql) =>
      Effect.gen(function*() {
        const inside = yield* sql.withTransaction(txid(sql))
        const afterCommit = yield* Effect.serviceOption(TransactionConnection)
        const committed = [yield* txid(sql), yield* txid(sql)]
        yield* Effect.exit(sql.withTransaction(Effect.zipRight(txid(sql), Effect.fail("abort"))))
        const afterRollback = yield* Effect.serviceOption(TransactionConnection)
        const rolledBack = [yield* txid(sql), yield* txid(sql)]
        return { ids: [inside, ...committed, ...rolledBack], left: [afterCommit._tag, afterRollback._tag] }
      })
    ))
    expect(after.left).toEqual(["None", "None"])
    expect(new Set(after.ids).size).toBe(after.ids.length)
  })

  it("fails a transaction whose COMMIT fails with the driver's SqlError as a defect, keeps nothing of it, and discards its backend", async () => {
    const deferred = `${table}_deferred`
    await run(withSql((sql) => sql.unsafe(`CREATE TABLE ${deferred} (v TEXT UNIQUE DEFERRABLE INITIALLY DEFERRED)`)))
    let backend: number | undefined
    // The duplicate is only found at COMMIT: every statement before it succeeds.
    const exit = await runExit(withSql((sql) =>
      sql.withTransaction(Effect.zipRight(
        Effect.tap(sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`, (rows) => {
          backend = rows[0]!.pid
        }),
        sql.unsafe(`INSERT INTO ${deferred} (v) VALUES ('twice'), ('twice')`).raw
      ))
    ))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Die" && exit.cause.defect instanceof SqlError).toBe(true)
    expect(await run(withSql((sql) => sql.unsafe<{ v: string }>(`SELECT v FROM ${deferred}`)))).toEqual([])
    // A client whose commit failed never goes back to the pool: its backend ends.
    const alive = () =>
      run(withSql((sql) => sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE pid = ${backend!}`)).then((rows) => rows.length)
    let left = await alive()
    for (let tries = 0; left !== 0 && tries < 50; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      left = await alive()
    }
    expect(backend).toBeTypeOf("number")
    expect(left).toBe(0)
    // And the client goes on: a transaction commits.
    await run(withSql((sql) => sql.withTransaction(sql.unsafe(`INSERT INTO ${deferred} (v) VALUES ('once')`).raw)))
    expect(await run(withSql((sql) => sql.unsafe<{ v: string }>(`SELECT v FROM ${deferred}`)))).toEqual([{ v: "once" }])
  })

  it("fails a transaction that caught a failed statement: the server rolled it back at COMMIT, and the call must not say it committed", async () => {
    const caught = `${table}_caught`
    await run(withSql((sql) => sql.unsafe(`CREATE TABLE ${caught} (v TEXT NOT NULL)`)))
    const exit = await runExit(withSql((sql) =>
      sql.withTransaction(Effect.all([
        sql.unsafe(`INSERT INTO ${caught} (v) VALUES ('written before the failure')`).raw,
        // A failed statement aborts a Postgres transaction; catching the error does not undo that.
        Effect.ignore(sql.unsafe(`INSERT INTO ${caught} (v) VALUES (NULL)`).raw)
      ]))
    ))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Die" && exit.cause.defect instanceof SqlError).toBe(true)
    expect(await run(withSql((sql) => sql.unsafe(`SELECT v FROM ${caught}`)))).toEqual([])
    // The client is fine afterwards.
    await run(withSql((sql) => sql.withTransaction(sql.unsafe(`INSERT INTO ${caught} (v) VALUES ('kept')`).raw)))
    expect(await run(withSql((sql) => sql.unsafe(`SELECT v FROM ${caught}`)))).toEqual([{ v: "kept" }])
  })

  it("commits a transaction that succeeds with a statement of a forked fiber still running: only a failed one cancels it", async () => {
    const forked = `${table}_forked`
    await run(withSql((sql) => sql.unsafe(`CREATE TABLE ${forked} (v TEXT NOT NULL)`)))
    await run(withSql((sql) =>
      sql.withTransaction(Effect.zipRight(
        sql.unsafe(`INSERT INTO ${forked} (v) VALUES ('kept')`).raw,
        // The forked statement is under way when the transaction ends.
        Effect.zipRight(Effect.fork(sql`SELECT pg_sleep(0.3)`), Effect.sleep(Duration.millis(100)))
      ))
    ))
    expect(await run(withSql((sql) => sql.unsafe(`SELECT v FROM ${forked}`)))).toEqual([{ v: "kept" }])
  })

  it("runs a nested transaction inside the outer one: a savepoint it rolls back to, and nothing kept when the outer fails", async () => {
    const nested = `${table}_nested`
    await run(withSql((sql) => sql.unsafe(`CREATE TABLE ${nested} (v TEXT NOT NULL)`)))
    const count = (sql: SqlClient) => Effect.map(sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${nested}`), (rows) => rows[0]!.n)
    const seen = await run(withSql((sql) =>
      sql.withTransaction(Effect.all([
        sql.unsafe(`INSERT INTO ${nested} (v) VALUES ('outer')`).raw,
        // The inner transaction sees the outer one's uncommitted row: it is the same transaction.
        sql.withTransaction(count(sql)),
        Effect.exit(sql.withTransaction(Effect.zipRight(sql.unsafe(`INSERT INTO ${nested} (v) VALUES ('inner')`).raw, Effect.fail("inner failed")))),
        sql.unsafe(`INSERT INTO ${nested} (v) VALUES ('after')`).raw
      ]))
    ))
    expect(seen[1]).toBe(1)
    const rows = await run(withSql((sql) => sql.unsafe<{ v: string }>(`SELECT v FROM ${nested} ORDER BY v`)))
    expect(rows.map((row) => row.v)).toEqual(["after", "outer"])
    const failed = await runExit(withSql((sql) =>
      sql.withTransaction(Effect.zipRight(
        sql.withTransaction(sql.unsafe(`INSERT INTO ${nested} (v) VALUES ('inner, outer failed')`).raw),
        Effect.fail("outer failed")
      ))
    ))
    expect(Exit.isFailure(failed)).toBe(true)
    expect(await run(withSql(count))).toBe(2)
  })

  it("rolls an interrupted transaction back and hands its client back clean: no backend is left in a transaction", async () => {
    const exit = await runExit(withSql((sql) =>
      Effect.timeout(
        sql.withTransaction(Effect.zipRight(sql.unsafe(`INSERT INTO ${table} (v) VALUES ('interrupted')`).raw, Effect.never)),
        Duration.millis(200)
      )
    ))
    expect(Exit.isFailure(exit)).toBe(true)
    expect(await values()).toEqual(["kept"])
    const open = await run(withSql((sql) =>
      sql<{ open: number }>`SELECT count(*)::int AS open FROM pg_stat_activity
        WHERE datname = current_database() AND state LIKE 'idle in transaction%'`
    ))
    expect(open[0]!.open).toBe(0)
    // Every pooled client begins a fresh transaction: none is still inside the interrupted one (begun 200 ms before).
    const fresh = await run(withSql((sql) =>
      Effect.forEach([0, 1, 2, 3], () =>
        sql.withTransaction(sql<{ fresh: boolean }>`SELECT statement_timestamp() - now() < interval '100 milliseconds' AS fresh, pg_sleep(0.05)`), { concurrency: 4 })
    ))
    expect(fresh.map((rows) => rows[0]!.fresh)).toEqual([true, true, true, true])
  })

  it("runs statements outside a transaction on pooled clients of their own: concurrent ones on different backends", async () => {
    const pids = await run(withSql((sql) =>
      Effect.all(
        Array.from({ length: 3 }, () => sql<{ pid: number }>`SELECT pg_backend_pid() AS pid, pg_sleep(0.3)`),
        { concurrency: "unbounded" }
      )
    ))
    expect(new Set(pids.map((rows) => rows[0]!.pid)).size).toBe(3)
  })

  it("answers a write's raw result (the row count) inside and outside a transaction", async () => {
    const outside = await run(withSql((sql) => sql.unsafe(`UPDATE ${table} SET v = v WHERE v = 'kept'`).raw))
    const inside = await run(withSql((sql) => sql.withTransaction(sql.unsafe(`UPDATE ${table} SET v = v WHERE v = 'none'`).raw)))
    expect((outside as { rowCount: number }).rowCount).toBe(1)
    expect((inside as { rowCount: number }).rowCount).toBe(0)
  })

  it("fails a bad statement with the driver's SqlError, inside and outside a transaction, and stays usable", async () => {
    for (const wrap of [(e: Effect.Effect<unknown, SqlError, SqlClient>) => e, (e: Effect.Effect<unknown, SqlError, SqlClient>) => withSql((sql) => sql.withTransaction(e))]) {
      const exit = await runExit(wrap(withSql((sql) => sql.unsafe(`INSERT INTO ${table} (v) VALUES (NULL)`))))
      expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error instanceof SqlError).toBe(true)
    }
    expect(await values()).toEqual(["kept"])
  })

  it("cancels an interrupted statement on the server, inside and outside a transaction", async () => {
    for (const inTransaction of [false, true]) {
      const started = performance.now()
      const exit = await runExit(withSql((sql) => {
        const sleep = sql`SELECT pg_sleep(30)`
        return Effect.timeout(inTransaction ? sql.withTransaction(sleep) : sleep, Duration.millis(200))
      }))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(performance.now() - started).toBeLessThan(10_000)
    }
    // The server ends a cancelled statement at once; give it a moment to say so.
    const running = () =>
      run(withSql((sql) =>
        sql<{ running: number }>`SELECT count(*)::int AS running FROM pg_stat_activity
          WHERE query LIKE 'SELECT pg_sleep(30)%' AND state = 'active'`
      )).then((rows) => rows[0]?.running)
    let left = await running()
    for (let tries = 0; left !== 0 && tries < 50; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      left = await running()
    }
    expect(left).toBe(0)
  })

  it("gives every statement its sql.execute span when a tracer is installed, none otherwise", async () => {
    const spans: Array<RecordedSpan> = []
    const work = withSql((sql) =>
      Effect.zipRight(sql`SELECT 1 AS one`, sql.withTransaction(sql.unsafe(`UPDATE ${table} SET v = v WHERE v = 'kept'`).raw))
    )
    await run(work)
    expect(spans).toEqual([])
    await run(Effect.withTracer(work, recordingTracer(spans)))
    expect(spans.map((span) => span.name)).toEqual(["sql.execute", "sql.transaction", "sql.execute"])
    expect(spans[2]?.attributes.get("db.query.text")).toBe(`UPDATE ${table} SET v = v WHERE v = 'kept'`)
  })

  it("shows every statement to a Statement transformer, inside and outside a transaction", async () => {
    const seen: Array<string> = []
    const capture: Statement.Statement.Transformer = (self) =>
      Effect.sync(() => {
        seen.push(self.compile()[0])
        return self
      })
    await run(withSql((sql) =>
      Statement.withTransformer(
        Effect.zipRight(sql`SELECT 1 AS one`, sql.withTransaction(sql.unsafe(`UPDATE ${table} SET v = v WHERE v = 'kept'`).raw)),
        capture
      )
    ))
    expect(seen).toEqual(["SELECT 1 AS one", `UPDATE ${table} SET v = v WHERE v = 'kept'`])
  })
})
