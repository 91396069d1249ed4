import { ConnectorStore, type WinnerReaders } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import Sqlite from "better-sqlite3"
import * as Statement from "@effect/sql/Statement"
import { Effect, Layer, TestContext } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { claimInput, KEY } from "./operations.fixtures.js"
import { identityOf, NOW } from "./support/contract/fixtures.js"
import { at, seedWatches } from "./support/contract/store.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"
import { clock, normalized, script as promiseScript, seeded } from "./support/laneScript.js"
import { type RecordedSpan, recordingTracer } from "./support/secrecy.js"

// Whether a tracer is installed must never change which code runs: the
// same script through the Effect API (and the hot calls through the Promise
// API) makes the same statements, in the same order, on the driver, with a
// tracer and without one; the tracer only adds spans around them.

const id = identityOf()
const readers: WinnerReaders = { readWinner: (documentID) => Effect.succeed(`w-${documentID}`) }

/** The hot transitions, the reads around them, a sync-state write cycle and a relist step, each answer kept. */
const script = Effect.gen(function*() {
  const store = yield* ConnectorStore
  const answers: Array<unknown> = []
  const step = <A, E>(call: Effect.Effect<A, E>) => Effect.map(Effect.either(call), (answer) => void answers.push(answer))
  yield* seedWatches(seeded)
  yield* step(store.getWatch(id))
  yield* step(store.listWatchesByDocuments(["doc-1", "doc-2"]))
  yield* step(store.claimWatchAttempt(id, { until: NOW + 30_000, generation: seeded.repairGeneration, now: NOW }))
  yield* step(store.claimWatchAttempt(id, { until: NOW + 30_000, generation: seeded.repairGeneration, now: NOW }))
  yield* step(store.recordVerification(id, {
    generation: seeded.repairGeneration,
    claimedUntil: NOW + 30_000,
    fetchedDigest: "stale",
    maxAttempts: 5,
    dueAt: NOW
  }))
  yield* step(store.deferWatch(id, { nextAttemptAt: NOW + 5, generation: seeded.repairGeneration, claimedUntil: NOW + 30_000 }))
  yield* step(store.armWatch(id, "manual", { dueAt: NOW + 10 }))
  yield* step(store.armWatch(id, "ingress", { dueAt: NOW + 10, triggeringWinner: "w-doc-1" }))
  const claimed = yield* store.claimOperation(claimInput())
  answers.push(claimed)
  yield* step(store.claimOperation(claimInput()))
  const leaseToken = claimed.outcome === "claimed" ? claimed.lease.token : "no-lease"
  yield* step(store.markOperationSent(KEY, { leaseToken: "not-the-holder" }))
  yield* step(store.markOperationSent(KEY, { leaseToken }))
  yield* step(store.finalizeOperationAndArmWatch(KEY, {
    leaseToken,
    sourceID: "src-1",
    documentID: "doc-1",
    providerEtag: "e-1",
    resultEntity: { id: 1 },
    watchDueAt: NOW + 5
  }))
  yield* step(store.getOperation(KEY))
  yield* step(store.listTrackedOperations({ visibleTo: KEY.callerDID }))
  yield* step(store.listOperations({ limit: 10 }))
  yield* step(store.listWatches({ limit: 10 }))
  yield* step(store.listDueOperations(NOW + 60_000))
  yield* step(store.setSyncState("gcal", "did:owner:1", { status: "syncing", lastSyncedAt: "t", entityCount: 1, checkpoint: { page: 1 } }))
  yield* step(store.claimSyncLease("gcal", "did:owner:1", { now: NOW, leaseMs: 60_000 }))
  yield* step(store.updateSyncProgress("gcal", "did:owner:1", () => ({ checkpoint: { page: 2 }, recovery: null })))
  yield* step(store.getSyncState("gcal", "did:owner:1"))
  const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
  const run = yield* store.startRelistRun(scope)
  answers.push(run)
  yield* step(store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c", receipts: [{ sourceID: "src-1", digest: "d" }] }))
  yield* step(store.commitSweepCheckpoint(run.runID, { page: 2, cursor: null, receipts: [], complete: true }))
  yield* step(store.listSweepCandidates(run.runID, { limit: 100 }))
  yield* step(store.getSweepCheckpoint(scope))
  return answers
})

/** What one run of the script showed: the statements the driver ran (their text, in order), the answers, the spans. */
interface Observed {
  readonly statements: ReadonlyArray<string>
  readonly answers: unknown
  readonly spans: ReadonlyArray<RecordedSpan>
}

/**
 * Replaces `owner[name]` with `patched` (given the original) until the
 * returned function is called.
 */
const patch = <O extends object>(owner: O, name: keyof O & string, patched: (original: Function) => Function) => {
  const original = owner[name] as unknown as Function
  ;(owner as Record<string, unknown>)[name] = patched(original)
  return () => void ((owner as Record<string, unknown>)[name] = original)
}

/** Records the text of every statement better-sqlite3 runs, until the returned function is called. */
const recordSqlite = (statements: Array<string>): () => void => {
  const probe = new Sqlite(":memory:")
  const statementPrototype = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, unknown>
  probe.close()
  const restores = (["run", "get", "all", "iterate"] as const).map((method) =>
    patch(statementPrototype, method, (original) =>
      function(this: { readonly source: string }, ...args: Array<unknown>) {
        statements.push(this.source)
        return original.apply(this, args)
      })
  )
  restores.push(patch(Sqlite.prototype as unknown as Record<string, unknown>, "exec", (original) =>
    function(this: unknown, text: string) {
      statements.push(text)
      return original.call(this, text)
    }))
  return () => restores.forEach((restore) => restore())
}

/**
 * Records every query a `pg` client sends, until the returned function is
 * called: its text, and how many values were bound (not what they were), when
 * any were passed.
 */
const recordPg = (statements: Array<string>): () => void =>
  patch(pg.Client.prototype as unknown as Record<string, unknown>, "query", (original) =>
    function(this: unknown, config: unknown, ...rest: Array<unknown>) {
      const text = typeof config === "string" ? config : String((config as { readonly text?: unknown }).text)
      const values = Array.isArray(rest[0]) ? rest[0] : (config as { readonly values?: unknown }).values
      statements.push(Array.isArray(values) ? `${text} -- ${values.length} values` : text)
      return original.call(this, config, ...rest)
    })

/**
 * Records, until the returned function is called, each statement that takes
 * `@effect/sql`'s own statement path (`withConnection`, behind every stock
 * way of running one) instead of the client's routes: the driver sees the
 * same calls either way, so this is where taking it shows.
 */
const recordStockPath = (statements: Array<string>): () => void => {
  const probe = Statement.make(Effect.never, Statement.makeCompilerSqlite(), [], undefined).unsafe("SELECT 1")
  return patch(Object.getPrototypeOf(probe) as Record<string, unknown>, "withConnection", (original) =>
    function(this: Statement.Statement<unknown>, ...args: Array<unknown>) {
      statements.push(`@effect/sql ${String(args[0])}: ${this.compile()[0]}`)
      return original.apply(this, args)
    })
}

/**
 * The statements of the store's calls: without the server history's checks (which server answers, the generation kept
 * beside a SQLite file), which run on every new connection and on a schedule of their own, so interleave by timing.
 */
const ofCalls = (statements: ReadonlyArray<string>): ReadonlyArray<string> =>
  statements.filter((text) => !/pg_control_system\(\)|server_history|total_changes\(\)/.test(text))

/** Every recorder in `recorders`, as one. */
const recordingAll = (...recorders: ReadonlyArray<(statements: Array<string>) => () => void>) => (statements: Array<string>) => {
  const stops = recorders.map((record) => record(statements))
  return () => stops.forEach((stop) => stop())
}

/**
 * Runs the script on a store built by `layer` (the layer's build, its
 * migrations, included), statements recorded by `record`; with a tracer
 * installed when `traced`.
 */
const observe = async (
  layer: Layer.Layer<ConnectorStore | Sql.SqlPorts, unknown>,
  record: (statements: Array<string>) => () => void,
  traced: boolean
): Promise<Observed> => {
  const statements: Array<string> = []
  const spans: Array<RecordedSpan> = []
  const program = Effect.provide(Effect.zipRight(at(NOW), script), layer)
  const stop = record(statements)
  try {
    const answers = await Effect.runPromise(
      (traced ? Effect.withTracer(program, recordingTracer(spans)) : program).pipe(Effect.provide(TestContext.TestContext))
    )
    return { statements, answers: normalized(answers), spans }
  } finally {
    stop()
  }
}

/**
 * Runs the Promise API's script of hot calls (`support/laneScript.ts`) on a
 * store `openConnectorStore` opens on `connection` (its migrations
 * included), statements recorded by `record`; with a tracer installed (the
 * `observability` option) when `traced`.
 */
const observePromise = async (
  connection: { readonly url: string; readonly tablePrefix?: string },
  record: (statements: Array<string>) => () => void,
  traced: boolean
): Promise<Observed> => {
  const statements: Array<string> = []
  const spans: Array<RecordedSpan> = []
  clock.now = NOW
  const stop = record(statements)
  try {
    const store = await Sql.openConnectorStore({
      ...connection,
      readWinner: (documentID) => `w-${documentID}`,
      now: () => clock.now,
      ...(traced ? { observability: Layer.setTracer(recordingTracer(spans)) } : {})
    })
    try {
      return { statements, answers: normalized(await promiseScript(store)), spans }
    } finally {
      await store.close()
    }
  } finally {
    stop()
    clock.now = NOW
  }
}

/** The hot methods, whose spans every traced run of either script must have. */
const HOT_METHODS = [
  "armWatch",
  "claimWatchAttempt",
  "deferWatch",
  "recordVerification",
  "claimOperation",
  "markOperationSent",
  "finalizeOperationAndArmWatch"
]

/**
 * The spans a traced run must have opened: one per method of `methods`, named
 * `connector-store.<method>`; a `sql.transaction` span; and `sql.execute`
 * spans shaped as `@effect/sql` opens them, each around a statement the
 * driver ran.
 */
const expectSpans = ({ spans, statements }: Observed, methods: ReadonlyArray<string>) => {
  const names = new Set(spans.map((span) => span.name))
  for (const method of methods) expect(names, method).toContain(`connector-store.${method}`)
  expect(names).toContain("sql.transaction")
  const statementSpans = spans.filter((span) => span.name === "sql.execute")
  expect(statementSpans.length).toBeGreaterThan(10)
  for (const span of statementSpans) {
    const text = span.attributes.get("db.query.text")
    expect(typeof text).toBe("string")
    expect(statements.some((ran) => ran === text || ran.startsWith(`${String(text)} -- `)), String(text)).toBe(true)
    expect(span.attributes.get("db.operation.name")).toMatch(/^execute(Raw)?$/)
    expect(span.attributes.get("db.system.name")).toEqual(expect.any(String))
  }
}

/** The methods of the Effect API's script, whose spans its traced run must have. */
const EFFECT_METHODS = [
  ...HOT_METHODS,
  "getWatch",
  "listWatchesByDocuments",
  "listTrackedOperations",
  "listOperations",
  "setSyncState",
  "claimSyncLease",
  "updateSyncProgress",
  "startRelistRun",
  "commitSweepCheckpoint",
  "listSweepCandidates"
]

describe("the same code runs with a tracer and without one", () => {
  it("on SQLite: the same statements in the same order, and the tracer sees the method and statement spans", async () => {
    const on = () => Sql.layer({ url: freshSqlitePath() }, readers)
    const record = recordingAll(recordSqlite, recordStockPath)
    const untraced = await observe(on(), record, false)
    const traced = await observe(on(), record, true)
    expect(untraced.statements.length).toBeGreaterThan(50)
    expect(ofCalls(traced.statements)).toEqual(ofCalls(untraced.statements))
    expect(traced.answers).toEqual(untraced.answers)
    expectSpans(traced, EFFECT_METHODS)
  })

  it("on SQLite through the Promise API: the same statements in the same order, and the tracer sees the method and statement spans", async () => {
    const record = recordingAll(recordSqlite, recordStockPath)
    const untraced = await observePromise({ url: freshSqlitePath() }, record, false)
    const traced = await observePromise({ url: freshSqlitePath() }, record, true)
    expect(untraced.statements.length).toBeGreaterThan(50)
    expect(ofCalls(traced.statements)).toEqual(ofCalls(untraced.statements))
    expect(traced.answers).toEqual(untraced.answers)
    expectSpans(traced, HOT_METHODS)
  })

  describe.runIf(pgAvailable)("on Postgres", () => {
    it("the same statements in the same order, and the tracer sees the method and statement spans", async () => {
      const url = await pgDatabaseForFile()
      // One prefix for both runs (it is in every statement's text): the first run's tables are dropped before the second.
      const tablePrefix = freshPrefix()
      const on = () => Sql.layer({ url, tablePrefix, maxConnections: 4 }, readers)
      const record = recordingAll(recordPg, recordStockPath)
      const untraced = await observe(on(), record, false)
      await dropTables(url, tablePrefix)
      const traced = await observe(on(), record, true)
      expect(untraced.statements.length).toBeGreaterThan(50)
      expect(ofCalls(traced.statements)).toEqual(ofCalls(untraced.statements))
      expect(traced.answers).toEqual(untraced.answers)
      expectSpans(traced, EFFECT_METHODS)
    })

    it("through the Promise API: the same statements in the same order, and the tracer sees the method and statement spans", async () => {
      const url = await pgDatabaseForFile()
      const tablePrefix = freshPrefix()
      const record = recordingAll(recordPg, recordStockPath)
      const untraced = await observePromise({ url, tablePrefix }, record, false)
      await dropTables(url, tablePrefix)
      const traced = await observePromise({ url, tablePrefix }, record, true)
      expect(untraced.statements.length).toBeGreaterThan(50)
      expect(ofCalls(traced.statements)).toEqual(ofCalls(untraced.statements))
      expect(traced.answers).toEqual(untraced.answers)
      expectSpans(traced, HOT_METHODS)
    })
  })
})

/** Drops every table whose name starts with `prefix`. */
const dropTables = async (url: string, prefix: string): Promise<void> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ tablename: string }>(
      "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND starts_with(tablename, $1)",
      [prefix]
    )
    if (rows.length > 0) await client.query(`DROP TABLE ${rows.map((row) => `"${row.tablename}"`).join(", ")} CASCADE`)
  } finally {
    await client.end()
  }
}
