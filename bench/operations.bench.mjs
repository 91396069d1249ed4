// Issue 10's speed aims: the operation lifecycle (claim a new key → mark its
// request sent → finalize it and arm its watch) through the project, against
// the same lifecycle hand-written on the raw driver, on SQLite (temp files;
// the winner read synchronously, or asynchronously inside the transaction on
// both sides) and Postgres (a scratch database, 1 and 8 concurrent runners).
// Each side gets its own tables, created by the project's migrations. After
// the cases, the Postgres scaling aim (8 runners ≥ 3× one runner, through the
// project) is measured on its own, in alternating rounds.
import { performance } from "node:perf_hooks"
import { layer, layerClient, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { removeScratchDatabases, scratchDatabases } from "./support/databases.mjs"
import { measurementSettings } from "./support/measure.mjs"
import { effectSqlLifecycle } from "./support/operation-effect-sql-steps.mjs"
import { effectLifecycleOver, lifecycleOver, lifecyclePlan, winnerOf } from "./support/operation-lifecycle.mjs"
import { rawPgLifecycle, rawSqliteLifecycle } from "./support/operation-raw-steps.mjs"
import { stockClientLabel, stockClientRuntime } from "./support/stock-client.mjs"
import { portsOnlyRuntime, WITHOUT_DIRECT, WITHOUT_LANE, withoutLane } from "./support/runners.mjs"

const PG_POOL = 10
/** The Postgres Promise cases' side with its statements sent unnamed, to weigh named prepared statements in the same run. */
const UNPREPARED = "the Promise API with prepareStatements: false"
let opened = 0

/** Creates a side's tables through the project's own migrations. */
const migrated = async (connection) => (await openConnectorStore({ ...connection, readWinner: winnerOf })).close()

/** Where each side's tables live: SQLite, a file each; Postgres, a table prefix each in the run's scratch database. */
const connectionsFor = (database, id, context) =>
  Object.fromEntries(["project", "raw", "effectSql", "stock", "runner", "unprepared"].map((side) => [
    side,
    database === "sqlite"
      ? { url: context.sqlite.path(`${id}-${side}.sqlite`) }
      : { url: context.postgres.url, tablePrefix: `${id}_${side.toLowerCase()}_`, maxConnections: PG_POOL }
  ]))

/** The winner reader of a case: synchronous (a value), or asynchronous (a Promise; on the Effect API, an async Effect). */
const readersOf = (reader) =>
  reader === "async"
    ? { raw: async (documentID) => winnerOf(documentID), promise: async (documentID) => winnerOf(documentID), effect: (documentID) => Effect.promise(async () => winnerOf(documentID)) }
    : { raw: winnerOf, promise: winnerOf, effect: (documentID) => Effect.succeed(winnerOf(documentID)) }

/** The project's side: the Promise API or the Effect API on `connection`. */
const openProject = async (api, connection, reader = "sync") => {
  const readers = readersOf(reader)
  if (api === "promise") {
    const store = await openConnectorStore({ ...connection, readWinner: readers.promise })
    return { cycle: lifecycleOver(store, lifecyclePlan()), close: () => store.close() }
  }
  const runtime = ManagedRuntime.make(layer(connection, { readWinner: readers.effect }))
  await runtime.runtime()
  return { cycle: effectLifecycleOver(runtime, lifecyclePlan()), close: () => runtime.dispose() }
}

/** The project's Effect API over the stock client (see support/stock-client.mjs). */
const openStockClient = async (database, connection, reader) => {
  const runtime = stockClientRuntime(database, connection, readersOf(reader).effect)
  await runtime.runtime()
  return { cycle: effectLifecycleOver(runtime, lifecyclePlan()), close: () => runtime.dispose() }
}

/** The operation and watch tables of a side. */
const tablesOf = (connection) => {
  const names = tableNames(connection.tablePrefix)
  return { operation: names.operation, watch: names.projectionWatch }
}

/** The diagnostic baseline (support/operation-effect-sql-steps.mjs) on its own tables. */
const openEffectSql = async (connection) => {
  await migrated(connection)
  const runtime = ManagedRuntime.make(layerClient(connection))
  const steps = await effectSqlLifecycle(runtime, tablesOf(connection), winnerOf)
  return { cycle: lifecycleOver(steps, lifecyclePlan()), close: () => runtime.dispose() }
}

/** The raw driver's side on `connection`'s tables. */
const openRaw = async (database, connection, reader = "sync") => {
  await migrated(connection)
  const tables = tablesOf(connection)
  const steps = database === "sqlite"
    ? rawSqliteLifecycle(connection.url, tables, readersOf(reader).raw)
    : rawPgLifecycle(connection.url, tables, winnerOf, PG_POOL)
  return { cycle: lifecycleOver(steps, lifecyclePlan()), close: () => steps.close() }
}

/**
 * The project without the runner its API keeps for speed (see
 * support/runners.mjs), on its own tables: the Promise API without its
 * lane, the Effect API without the direct runner (SQLite only: on Postgres
 * the Effect API has none).
 */
const openWithoutRunner = async (database, api, connection, reader) => {
  const readers = readersOf(reader)
  if (api === "promise") {
    const store = await openConnectorStore({ ...connection, readWinner: readers.promise })
    return { label: WITHOUT_LANE, cycle: lifecycleOver(withoutLane(store), lifecyclePlan()), close: () => store.close() }
  }
  if (database !== "sqlite") return undefined
  await migrated(connection)
  const runtime = portsOnlyRuntime(connection, readers.effect)
  await runtime.runtime()
  return { label: WITHOUT_DIRECT, cycle: effectLifecycleOver(runtime, lifecyclePlan()), close: () => runtime.dispose() }
}

const openCase = async ({ database, api, reader = "sync", baseline = false, runner = false }, context) => {
  if (database === "postgres" && context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const connections = connectionsFor(database, `ops${++opened}`, context)
  const closers = []
  try {
    const raw = await openRaw(database, connections.raw, reader)
    closers.push(raw.close)
    const project = await openProject(api, connections.project, reader)
    closers.push(project.close)
    const baselines = {}
    if (baseline) {
      const effectSql = await openEffectSql(connections.effectSql)
      closers.push(effectSql.close)
      baselines["@effect/sql alone on the project's client"] = effectSql.cycle
      const stock = await openStockClient(database, connections.stock, reader)
      closers.push(stock.close)
      baselines[stockClientLabel(database)] = stock.cycle
    }
    if (database === "postgres" && api === "promise") {
      const unprepared = await openProject(api, { ...connections.unprepared, prepareStatements: false }, reader)
      closers.push(unprepared.close)
      baselines[UNPREPARED] = unprepared.cycle
    }
    if (runner) {
      const without = await openWithoutRunner(database, api, connections.runner, reader)
      if (without !== undefined) {
        closers.push(without.close)
        baselines[without.label] = without.cycle
      }
    }
    return {
      project: project.cycle,
      raw: raw.cycle,
      baselines,
      close: async () => {
        for (const close of closers.reverse()) await close()
      }
    }
  } catch (error) {
    for (const close of closers.reverse()) await close()
    throw error
  }
}

/**
 * The issue's aims, project / raw: SQLite ≥0.75× with a synchronous winner
 * reader, ≥0.60× with an asynchronous one; Postgres ≥0.85× at 1 runner,
 * ≥0.80× at 8 (and the scaling line below).
 */
const aimOf = ({ database, workers, reader = "sync" }) =>
  database === "sqlite" ? (reader === "sync" ? 0.75 : 0.6) : workers === 1 ? 0.85 : 0.8

const lifecycleCase = (setup) => ({
  name: `${setup.database} · ${setup.api === "promise" ? "Promise" : "Effect"} API · ${setup.database === "sqlite" ? `${setup.reader ?? "sync"} reader · ` : ""}${setup.workers} runner${setup.workers === 1 ? "" : "s"}`,
  aim: aimOf(setup),
  cpu: setup.database === "postgres",
  workers: setup.workers,
  open: (context) => {
    if (setup.database === "postgres") context.postgresRan = true
    return openCase(setup, context)
  }
})

/** `workers` concurrent lifecycle loops for `ms`; returns lifecycles per second. */
const rateOf = async (cycle, workers, ms) => {
  let cycles = 0
  const start = performance.now()
  await Promise.all(Array.from({ length: workers }, async (_, worker) => {
    while (performance.now() - start < ms) {
      await cycle(worker)
      cycles++
    }
  }))
  return cycles / ((performance.now() - start) / 1000)
}

/**
 * The Postgres scaling aim: one project store, lifecycles from 1 runner and
 * from 8 concurrent runners in alternating rounds, as many machines' runners
 * would share one database; the raw driver's own 8-vs-1 on its own tables
 * in the same rounds, printed beside it, is what this machine's cores and
 * database allow any client (the project's aim is to scale as raw does).
 */
const measureScaling = async (context) => {
  const { rounds, roundMs, warmupMs } = measurementSettings(process.env)
  const connection = (side) => ({ url: context.postgres.url, tablePrefix: `ops${++opened}_scaling_${side}_`, maxConnections: PG_POOL })
  const project = await openProject("promise", connection("project"))
  let raw
  try {
    raw = await openRaw("postgres", connection("raw"))
    const sides = { project: { cycle: project.cycle, one: [], eight: [] }, raw: { cycle: raw.cycle, one: [], eight: [] } }
    for (const side of Object.values(sides)) await rateOf(side.cycle, 8, warmupMs)
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? [sides.project, sides.raw] : [sides.raw, sides.project]
      for (const side of order) {
        if (round % 2 === 0) side.one.push(await rateOf(side.cycle, 1, roundMs))
        side.eight.push(await rateOf(side.cycle, 8, roundMs))
        if (round % 2 === 1) side.one.push(await rateOf(side.cycle, 1, roundMs))
      }
    }
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
    const scaling = (side) => mean(side.eight) / mean(side.one)
    const ratio = scaling(sides.project)
    const perRound = sides.project.eight.map((e, i) => e / sides.project.one[i])
    console.log(
      `  ${"postgres · Promise API · 8 runners vs 1".padEnd(46)} ${Math.round(mean(sides.project.eight)).toLocaleString("en-US").padStart(9)} ` +
        `${Math.round(mean(sides.project.one)).toLocaleString("en-US").padStart(9)}  ${ratio.toFixed(2)}×  ` +
        `(${Math.min(...perRound).toFixed(2)}×–${Math.max(...perRound).toFixed(2)}×)`.padEnd(15) +
        ` ≥3.00× ${ratio >= 3 ? "met" : "MISSED"}   (columns: 8 runners/s, 1 runner/s)`
    )
    console.log(
      `    ↳ raw pg, same rounds: ${Math.round(mean(sides.raw.eight)).toLocaleString("en-US")}/s against ` +
        `${Math.round(mean(sides.raw.one)).toLocaleString("en-US")}/s, ${scaling(sides.raw).toFixed(2)}× ` +
        `(the project scales ${(ratio / scaling(sides.raw)).toFixed(2)}× as well as raw)`
    )
  } finally {
    await project.close()
    await raw?.close()
  }
}

/** The operation-lifecycle bench (see bench/README.md for the shape). */
export default {
  title: "operation lifecycle: claimOperation → markOperationSent → finalizeOperationAndArmWatch, lifecycles/s",
  before: async () => ({ ...(await scratchDatabases()), postgresRan: false }),
  after: async (context) => {
    try {
      if (context.postgresRan && context.postgres.skip === undefined) await measureScaling(context)
    } finally {
      await removeScratchDatabases(context)
    }
  },
  cases: [
    lifecycleCase({ database: "sqlite", api: "promise", reader: "sync", workers: 1, runner: true }),
    lifecycleCase({ database: "sqlite", api: "promise", reader: "async", workers: 1 }),
    lifecycleCase({ database: "sqlite", api: "effect", reader: "sync", workers: 1, baseline: true, runner: true }),
    lifecycleCase({ database: "sqlite", api: "effect", reader: "async", workers: 1 }),
    lifecycleCase({ database: "postgres", api: "promise", workers: 1, baseline: true, runner: true }),
    lifecycleCase({ database: "postgres", api: "promise", workers: 8, runner: true })
  ]
}
