// Issue 10's speed aims: the watch cycle (claim → record verification
// (pending) → arm manual) through the project, against the same cycle
// hand-written on the raw driver, on SQLite (temp files) and Postgres (a
// scratch database). Project and raw each get their own, identically migrated
// and seeded tables; winners come from the same in-process map on both sides,
// read synchronously, or asynchronously (a Promise, awaited inside the
// transaction on both sides).
import { ConnectorStore } from "@connector-store/core"
import { layer, layerClient, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { removeScratchDatabases, scratchDatabases } from "./support/databases.mjs"
import { effectSqlSteps } from "./support/effect-sql-watch-steps.mjs"
import { stockClientLabel, stockClientRuntime } from "./support/stock-client.mjs"
import { rawPgSteps, rawSqliteSteps } from "./support/raw-watch-steps.mjs"
import { cycleOver, effectCycleOver, insertFleet, watchFleet } from "./support/watch-fleet.mjs"
import { portsOnlyRuntime, WITHOUT_DIRECT, WITHOUT_LANE, withoutLane } from "./support/runners.mjs"

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

/** The winner readers of a case: synchronous (a value), or asynchronous (a Promise; on the Effect API, an async Effect). */
const readersOf = (fleet, reader) => {
  const winnerOf = (documentID) => fleet.winners.get(documentID) ?? null
  return reader === "async"
    ? { promise: async (documentID) => winnerOf(documentID), effect: (documentID) => Effect.promise(async () => winnerOf(documentID)) }
    : { promise: winnerOf, effect: (documentID) => Effect.succeed(winnerOf(documentID)) }
}

/** The project's side of a case: the Promise API or the Effect API on `connection`. */
const openProject = async (api, connection, fleet, reader) => {
  const readers = readersOf(fleet, reader)
  if (api === "promise") {
    const store = await openConnectorStore({ ...connection, readWinner: readers.promise })
    await store.runEffect(insertFleet(fleet))
    return { cycle: cycleOver(store, fleet), close: () => store.close() }
  }
  const runtime = ManagedRuntime.make(layer(connection, { readWinner: readers.effect }))
  await runtime.runPromise(insertFleet(fleet))
  return { cycle: effectCycleOver(runtime, ConnectorStore, fleet), close: () => runtime.dispose() }
}

/** The project's Effect API over the stock client (see support/stock-client.mjs). */
const openStockClient = async (database, connection, fleet, reader) => {
  const runtime = stockClientRuntime(database, connection, readersOf(fleet, reader).effect)
  await runtime.runPromise(insertFleet(fleet))
  return { cycle: effectCycleOver(runtime, ConnectorStore, fleet), close: () => runtime.dispose() }
}

/**
 * The project without the runner its API keeps for speed (see
 * support/runners.mjs), on its own tables: the Promise API without its
 * lane, the Effect API without the direct runner (SQLite only: on Postgres
 * the Effect API has none).
 */
const openWithoutRunner = async (database, api, connection, fleet, reader) => {
  const readers = readersOf(fleet, reader)
  if (api === "promise") {
    const store = await openConnectorStore({ ...connection, readWinner: readers.promise })
    await store.runEffect(insertFleet(fleet))
    return { label: WITHOUT_LANE, cycle: cycleOver(withoutLane(store), fleet), close: () => store.close() }
  }
  if (database !== "sqlite") return undefined
  await prepareTables(connection, fleet)
  const runtime = portsOnlyRuntime(connection, readers.effect)
  return { label: WITHOUT_DIRECT, cycle: effectCycleOver(runtime, ConnectorStore, fleet), close: () => runtime.dispose() }
}

/** Where each side's tables live: SQLite, a file each; Postgres, a table prefix each in the run's scratch database. */
const connectionsFor = (database, id, context) => {
  const sides = ["project", "raw", "effectSql", "stock", "runner"]
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
 * side. With `baseline`, also the same statements through @effect/sql alone
 * and the project over the stock client.
 */
const openCase = async ({ database, api, workers, reader = "sync", baseline = false, runner = false }, context) => {
  if (database === "postgres" && context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const id = `c${++opened}`
  const connections = connectionsFor(database, id, context)
  const fleet = () => watchFleet({ workers, rowsPerWorker: ROWS_PER_WORKER })
  const fleets = { project: fleet(), raw: fleet(), effectSql: fleet(), stock: fleet(), runner: fleet() }
  const closers = []
  try {
    await prepareTables(connections.raw, fleets.raw)
    const table = tableNames(connections.raw.tablePrefix).projectionWatch
    const raw = database === "sqlite"
      ? rawSqliteSteps(connections.raw.url, table, fleets.raw.winners, reader)
      : rawPgSteps(connections.raw.url, table, fleets.raw.winners, PG_POOL)
    closers.push(raw.close)
    const project = await openProject(api, connections.project, fleets.project, reader)
    closers.push(project.close)
    const baselines = {}
    if (baseline) {
      const effectSql = await openEffectSqlBaseline(connections.effectSql, fleets.effectSql)
      closers.push(effectSql.close)
      baselines["@effect/sql alone on the project's client"] = effectSql.cycle
      const stock = await openStockClient(database, connections.stock, fleets.stock, reader)
      closers.push(stock.close)
      baselines[stockClientLabel(database)] = stock.cycle
    }
    if (runner) {
      const without = await openWithoutRunner(database, api, connections.runner, fleets.runner, reader)
      if (without !== undefined) {
        closers.push(without.close)
        baselines[without.label] = without.cycle
      }
    }
    return {
      project: project.cycle,
      raw: cycleOver(raw, fleets.raw),
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
 * reader, ≥0.60× with an asynchronous one; Postgres ≥0.85× at 1 worker,
 * ≥0.80× at 8.
 */
const aimOf = ({ database, workers, reader = "sync" }) =>
  database === "sqlite" ? (reader === "sync" ? 0.75 : 0.6) : workers === 1 ? 0.85 : 0.8

/** One case of the table: its name, aim and worker count all follow from its setup. */
const watchCase = (setup) => ({
  name: `${setup.database} · ${setup.api === "promise" ? "Promise" : "Effect"} API · ${setup.database === "sqlite" ? `${setup.reader ?? "sync"} reader · ` : ""}${setup.workers} worker${setup.workers === 1 ? "" : "s"}`,
  aim: aimOf(setup),
  cpu: setup.database === "postgres",
  workers: setup.workers,
  open: (context) => openCase(setup, context)
})

/** The watch-cycle bench (see bench/README.md for the shape). */
export default {
  title: "watch cycle: claimWatchAttempt → recordVerification (pending) → armWatch (manual), cycles/s",
  before: scratchDatabases,
  after: removeScratchDatabases,
  cases: [
    watchCase({ database: "sqlite", api: "promise", reader: "sync", workers: 1, runner: true }),
    watchCase({ database: "sqlite", api: "promise", reader: "async", workers: 1 }),
    watchCase({ database: "sqlite", api: "effect", reader: "sync", workers: 1, baseline: true, runner: true }),
    watchCase({ database: "sqlite", api: "effect", reader: "async", workers: 1 }),
    watchCase({ database: "postgres", api: "promise", workers: 1 }),
    watchCase({ database: "postgres", api: "effect", workers: 1, baseline: true }),
    watchCase({ database: "postgres", api: "promise", workers: 8, runner: true })
  ]
}
