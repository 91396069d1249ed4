// Issue 2's speed aim: the watch cycle (claim → record verification (pending)
// → arm manual) through the project, against the same cycle hand-written on
// the raw driver, on SQLite (temp files) and Postgres (a scratch database).
// Project and raw each get their own, identically migrated and seeded tables;
// winners come from the same in-process map on both sides.
import { ConnectorStore } from "@connector-store/core"
import { layer, layerClient, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { scratchPostgres, scratchSqliteFolder } from "./support/databases.mjs"
import { effectSqlSteps } from "./support/effect-sql-watch-steps.mjs"
import { rawPgSteps, rawSqliteSteps } from "./support/raw-watch-steps.mjs"
import { cycleOver, effectCycleOver, insertFleet, watchFleet } from "./support/watch-fleet.mjs"

const ROWS_PER_WORKER = 4
const PG_POOL = 10
let opened = 0

/** Creates the tables at `connection` and seeds `fleet` through the project's own migrations and repository. */
const prepareTables = async (connection, fleet) => {
  const store = await openConnectorStore({ ...connection, readWinner: () => null })
  try {
    await store.runEffect(insertFleet(fleet))
  } finally {
    await store.close()
  }
}

/** The project's side of a case: the Promise API or the Effect API on `connection`. */
const openProject = async (api, connection, fleet) => {
  if (api === "promise") {
    const store = await openConnectorStore({ ...connection, readWinner: (documentID) => fleet.winners.get(documentID) ?? null })
    await store.runEffect(insertFleet(fleet))
    return { cycle: cycleOver(store, fleet), close: () => store.close() }
  }
  const runtime = ManagedRuntime.make(
    layer(connection, { readWinner: (documentID) => Effect.succeed(fleet.winners.get(documentID) ?? null) })
  )
  await runtime.runPromise(insertFleet(fleet))
  return { cycle: effectCycleOver(runtime, ConnectorStore, fleet), close: () => runtime.dispose() }
}

/** Where each side's tables live: SQLite, a file each; Postgres, a table prefix each in the run's scratch database. */
const connectionsFor = (database, id, context) => {
  const sides = ["project", "raw", "effectSql"]
  if (database === "sqlite") {
    return Object.fromEntries(sides.map((side) => [side, { url: context.sqlite.path(`${id}-${side}.sqlite`) }]))
  }
  return Object.fromEntries(sides.map((side) => [
    side,
    { url: context.postgres.url, tablePrefix: `${id}_${side.toLowerCase()}_`, maxConnections: PG_POOL }
  ]))
}

/** The diagnostic baseline (see support/effect-sql-watch-steps.mjs) on its own tables. */
const openEffectSqlBaseline = async (connection, fleet) => {
  await prepareTables(connection, fleet)
  const runtime = ManagedRuntime.make(layerClient(connection))
  const steps = await effectSqlSteps(runtime, tableNames(connection.tablePrefix).projectionWatch, fleet.winners)
  return { cycle: cycleOver(steps, fleet), close: () => runtime.dispose() }
}

/**
 * Opens one case: fresh, identically migrated and seeded tables for each
 * side. With `baseline`, also the same statements through @effect/sql alone.
 */
const openCase = async ({ database, api, workers, baseline = false }, context) => {
  if (database === "postgres" && context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const id = `c${++opened}`
  const connections = connectionsFor(database, id, context)
  const fleet = () => watchFleet({ workers, rowsPerWorker: ROWS_PER_WORKER })
  const fleets = { project: fleet(), raw: fleet(), effectSql: fleet() }
  const closers = []
  try {
    await prepareTables(connections.raw, fleets.raw)
    const table = tableNames(connections.raw.tablePrefix).projectionWatch
    const raw = database === "sqlite"
      ? rawSqliteSteps(connections.raw.url, table, fleets.raw.winners)
      : rawPgSteps(connections.raw.url, table, fleets.raw.winners, PG_POOL)
    closers.push(raw.close)
    const project = await openProject(api, connections.project, fleets.project)
    closers.push(project.close)
    const effectSql = baseline ? await openEffectSqlBaseline(connections.effectSql, fleets.effectSql) : undefined
    if (effectSql !== undefined) closers.push(effectSql.close)
    return {
      project: project.cycle,
      raw: cycleOver(raw, fleets.raw),
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

/** The aims: project / raw at least this, per database. */
const AIMS = { sqlite: 0.5, postgres: 0.8 }

/** One case of the table: its name, aim and worker count all follow from its setup. */
const watchCase = (setup) => ({
  name: `${setup.database} · ${setup.api === "promise" ? "Promise" : "Effect"} API · ${setup.workers} worker${setup.workers === 1 ? "" : "s"}`,
  aim: AIMS[setup.database],
  workers: setup.workers,
  open: (context) => openCase(setup, context)
})

/** The watch-cycle bench (see bench/README.md for the shape). */
export default {
  title: "watch cycle: claimWatchAttempt → recordVerification (pending) → armWatch (manual), cycles/s",
  before: async () => ({ sqlite: scratchSqliteFolder(), postgres: await scratchPostgres() }),
  after: async (context) => {
    context.sqlite.remove()
    await context.postgres.drop?.()
  },
  cases: [
    watchCase({ database: "sqlite", api: "promise", workers: 1 }),
    watchCase({ database: "sqlite", api: "effect", workers: 1, baseline: true }),
    watchCase({ database: "postgres", api: "promise", workers: 1 }),
    watchCase({ database: "postgres", api: "effect", workers: 1, baseline: true }),
    watchCase({ database: "postgres", api: "promise", workers: 4 })
  ]
}
