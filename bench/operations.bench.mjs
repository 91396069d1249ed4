// Issue 3's speed aims: the operation lifecycle (claim a new key → mark its
// request sent → finalize it and arm its watch) through the project, against
// the same lifecycle hand-written on the raw driver, on SQLite (temp files)
// and Postgres (a scratch database, 1 and 8 concurrent runners). Each side
// gets its own tables, created by the project's migrations. After the cases,
// the Postgres scaling aim (8 runners ≥ 3× one runner, through the project)
// is measured on its own, in alternating rounds.
import { performance } from "node:perf_hooks"
import { layer, layerClient, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { scratchPostgres, scratchSqliteFolder } from "./support/databases.mjs"
import { measurementSettings } from "./support/measure.mjs"
import { effectSqlLifecycle } from "./support/operation-effect-sql-steps.mjs"
import { effectLifecycleOver, lifecycleOver, lifecyclePlan, winnerOf } from "./support/operation-lifecycle.mjs"
import { rawPgLifecycle, rawSqliteLifecycle } from "./support/operation-raw-steps.mjs"

const PG_POOL = 10
let opened = 0

/** Creates a side's tables through the project's own migrations. */
const migrated = async (connection) => (await openConnectorStore({ ...connection, readWinner: winnerOf })).close()

/** Where each side's tables live: SQLite, a file each; Postgres, a table prefix each in the run's scratch database. */
const connectionsFor = (database, id, context) =>
  Object.fromEntries(["project", "raw", "effectSql"].map((side) => [
    side,
    database === "sqlite"
      ? { url: context.sqlite.path(`${id}-${side}.sqlite`) }
      : { url: context.postgres.url, tablePrefix: `${id}_${side.toLowerCase()}_`, maxConnections: PG_POOL }
  ]))

/** The project's side: the Promise API or the Effect API on `connection`. */
const openProject = async (api, connection) => {
  if (api === "promise") {
    const store = await openConnectorStore({ ...connection, readWinner: winnerOf })
    return { cycle: lifecycleOver(store, lifecyclePlan()), close: () => store.close() }
  }
  const runtime = ManagedRuntime.make(layer(connection, { readWinner: (documentID) => Effect.succeed(winnerOf(documentID)) }))
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
const openRaw = async (database, connection) => {
  await migrated(connection)
  const tables = tablesOf(connection)
  const steps = database === "sqlite"
    ? rawSqliteLifecycle(connection.url, tables, winnerOf)
    : rawPgLifecycle(connection.url, tables, winnerOf, PG_POOL)
  return { cycle: lifecycleOver(steps, lifecyclePlan()), close: () => steps.close() }
}

const openCase = async ({ database, api, baseline = false }, context) => {
  if (database === "postgres" && context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const connections = connectionsFor(database, `ops${++opened}`, context)
  const closers = []
  try {
    const raw = await openRaw(database, connections.raw)
    closers.push(raw.close)
    const project = await openProject(api, connections.project)
    closers.push(project.close)
    const effectSql = baseline ? await openEffectSql(connections.effectSql) : undefined
    if (effectSql !== undefined) closers.push(effectSql.close)
    return {
      project: project.cycle,
      raw: raw.cycle,
      baselines: effectSql === undefined ? {} : { "@effect/sql alone, same statements": effectSql.cycle },
      close: async () => {
        for (const close of closers.reverse()) await close()
      }
    }
  } catch (error) {
    for (const close of closers.reverse()) await close()
    throw error
  }
}

/** The aim on SQLite: at least half the raw rate. Postgres's aim is the scaling line below. */
const AIMS = { sqlite: 0.5 }

const lifecycleCase = (setup) => ({
  name: `${setup.database} · ${setup.api === "promise" ? "Promise" : "Effect"} API · ${setup.workers} runner${setup.workers === 1 ? "" : "s"}`,
  aim: AIMS[setup.database],
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
 * would share one database.
 */
const measureScaling = async (context) => {
  const { rounds, roundMs, warmupMs } = measurementSettings(process.env)
  const connection = { url: context.postgres.url, tablePrefix: `ops${++opened}_scaling_`, maxConnections: PG_POOL }
  const { cycle, close } = await openProject("promise", connection)
  try {
    await rateOf(cycle, 8, warmupMs)
    const one = []
    const eight = []
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 0) one.push(await rateOf(cycle, 1, roundMs))
      eight.push(await rateOf(cycle, 8, roundMs))
      if (round % 2 === 1) one.push(await rateOf(cycle, 1, roundMs))
    }
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
    const ratio = mean(eight) / mean(one)
    const perRound = eight.map((e, i) => e / one[i])
    console.log(
      `  ${"postgres · Promise API · 8 runners vs 1".padEnd(46)} ${Math.round(mean(eight)).toLocaleString("en-US").padStart(9)} ` +
        `${Math.round(mean(one)).toLocaleString("en-US").padStart(9)}  ${ratio.toFixed(2)}×  ` +
        `(${Math.min(...perRound).toFixed(2)}×–${Math.max(...perRound).toFixed(2)}×)`.padEnd(15) +
        ` ≥3.00× ${ratio >= 3 ? "met" : "MISSED"}   (columns: 8 runners/s, 1 runner/s)`
    )
  } finally {
    await close()
  }
}

/** The operation-lifecycle bench (see bench/README.md for the shape). */
export default {
  title: "operation lifecycle: claimOperation → markOperationSent → finalizeOperationAndArmWatch, lifecycles/s",
  before: async () => ({ sqlite: scratchSqliteFolder(), postgres: await scratchPostgres(), postgresRan: false }),
  after: async (context) => {
    try {
      if (context.postgresRan && context.postgres.skip === undefined) await measureScaling(context)
    } finally {
      context.sqlite.remove()
      await context.postgres.drop?.()
    }
  },
  cases: [
    lifecycleCase({ database: "sqlite", api: "promise", workers: 1 }),
    lifecycleCase({ database: "sqlite", api: "effect", workers: 1, baseline: true }),
    lifecycleCase({ database: "postgres", api: "promise", workers: 1, baseline: true }),
    lifecycleCase({ database: "postgres", api: "promise", workers: 8 })
  ]
}
