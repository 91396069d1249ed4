// One timed drain of the fleet bench on Postgres: a fresh set of the
// store's tables (migrated by the store, under a prefix of its own) gets a
// backlog of `ops` due operations in one INSERT … SELECT (support/due-rows.mjs),
// checked through the store's own `getOperation`; then `processes` child
// processes (support/fleet-worker.mjs), each with its own store or raw
// reference and `runners` concurrent runners, drain it, all started at
// once. The time runs from the start signal to the last process's answer.
// Afterwards the drain is judged (every operation committed exactly once,
// no double claim) and its tables dropped.
import { fork } from "node:child_process"
import { dirname, join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { withClient } from "./databases.mjs"
import { judgeLeases } from "./due-drain.mjs"
import { checkDueRows, pgDueInsert, pgSettledWatchInsert } from "./due-rows.mjs"
import { winnerOf } from "./operation-lifecycle.mjs"

const WORKER = join(dirname(fileURLToPath(import.meta.url)), "fleet-worker.mjs")
/** Each process's pool, store and raw alike (as the operation-lifecycle bench's). */
export const FLEET_POOL = 10
/** Settled watches in a drain's tables, at least: the owner's other entities, written back earlier. */
const SETTLED_WATCHES = 1_000

let drains = 0

/**
 * Runs `load` (the bulk insert) on a table without its indexes, then builds
 * them again from their own definitions, primary key included: what the
 * store's migrations made, built once over the loaded rows instead of row
 * by row (for the 10,000,000-row table).
 */
const withoutIndexes = async (client, table, load) => {
  const { rows: indexes } = await client.query(
    `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1
       AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = to_regclass($1::text))`, [table])
  const { rows: constraints } = await client.query(
    `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = to_regclass($1::text) AND contype = 'p'`, [table])
  for (const { indexname } of indexes) await client.query(`DROP INDEX "${indexname}"`)
  for (const { conname } of constraints) await client.query(`ALTER TABLE ${table} DROP CONSTRAINT "${conname}"`)
  await load()
  await client.query("SET maintenance_work_mem = '1GB'")
  for (const { conname, def } of constraints) await client.query(`ALTER TABLE ${table} ADD CONSTRAINT "${conname}" ${def}`)
  for (const { indexdef } of indexes) await client.query(indexdef)
  await client.query("RESET maintenance_work_mem")
}

/**
 * A fresh table set with `ops` operations, as the store writes them: all
 * due, or with `committedEvery` only every `committedEvery`-th (the rest
 * committed), and `watches` settled watches of the owner's other entities.
 * Both tables are vacuumed and analyzed: a store that has run a while has
 * statistics (without them, finalize's locked read of the document's and
 * the identity's watches plans over the owner's whole (owner, model, document)
 * range; see docs/performance.md). `bulk` loads without the indexes and
 * builds them afterwards. Answers its prefix and table names.
 */
export const seedBacklog = async (url, ops, { committedEvery, watches = 0, bulk = false, tablePrefix = `fleet${process.pid}_${++drains}_` } = {}) => {
  const names = tableNames(tablePrefix)
  const store = await openConnectorStore({ url, tablePrefix, readWinner: winnerOf })
  try {
    await withClient(url, async (client) => {
      // The work-notification trigger would fire per row; nobody listens during the load.
      await client.query("SET session_replication_role = replica")
      const load = () => client.query(pgDueInsert(names.operation, ops, { committedEvery }))
      await (bulk ? withoutIndexes(client, names.operation, load) : load())
      if (watches > 0) await client.query(pgSettledWatchInsert(names.projectionWatch, watches))
      await client.query("RESET session_replication_role")
      // A backlog that has sat in the table: hint bits set, statistics known.
      await client.query(`VACUUM ANALYZE ${names.operation}, ${names.projectionWatch}`)
    })
    await checkDueRows(store, ops, { committedEvery })
  } finally {
    await store.close()
  }
  return { tablePrefix, names }
}

/** Drops a table set `seedBacklog` made (every table and function under its prefix). */
export const dropTables = (url, tablePrefix) =>
  withClient(url, async (client) => {
    const like = `${tablePrefix.replace(/_/g, "\\_")}%`
    const { rows: tables } = await client.query(
      `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE $1`, [like])
    if (tables.length > 0) await client.query(`DROP TABLE ${tables.map((t) => `"${t.tablename}"`).join(", ")} CASCADE`)
    const { rows: functions } = await client.query(
      `SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proname LIKE $1`, [like])
    for (const f of functions) await client.query(`DROP FUNCTION IF EXISTS "${f.proname}"()`)
  })

/** Table sets for the processes' warm-ups, migrated once per database and reseeded before each drain. */
const warmSets = new Map()

/** The warm-up table set of process slot `p` on `url`, holding `ops` due operations (and nothing else). */
const warmBacklog = async (url, p, ops) => {
  const key = `${url} ${p}`
  let tablePrefix = warmSets.get(key)
  if (tablePrefix === undefined) {
    tablePrefix = `fleetwarm${process.pid}_${p}_`
    await (await openConnectorStore({ url, tablePrefix, readWinner: winnerOf })).close()
    warmSets.set(key, tablePrefix)
  }
  const names = tableNames(tablePrefix)
  await withClient(url, async (client) => {
    await client.query(`TRUNCATE ${names.operation}, ${names.projectionWatch}`)
    await client.query("SET session_replication_role = replica")
    await client.query(pgDueInsert(names.operation, ops))
    await client.query(pgSettledWatchInsert(names.projectionWatch, SETTLED_WATCHES))
    await client.query(`ANALYZE ${names.operation}, ${names.projectionWatch}`)
  })
  return tablePrefix
}

/** Starts one worker process and resolves once its side is open. */
const startWorker = (setup) =>
  new Promise((resolve, reject) => {
    const child = fork(WORKER, [], { serialization: "advanced", stdio: ["ignore", "inherit", "inherit", "ipc"] })
    let done
    const finished = new Promise((settle, fail) => {
      done = { settle, fail }
    })
    finished.catch(() => undefined) // awaited by the drain; a failure before it is awaited is not unhandled
    child.on("message", (message) => {
      if (message.type === "ready") resolve({ child, finished })
      else if (message.type === "done") done.settle(message)
      else if (message.type === "failed") {
        const error = new Error(`fleet worker ${setup.name} failed:\n${message.error}`)
        reject(error)
        done.fail(error)
      }
    })
    child.on("exit", (code) => {
      if (code !== 0) {
        const error = new Error(`fleet worker ${setup.name} exited with ${code}`)
        reject(error)
        done.fail(error)
      }
    })
    child.send({ type: "open", ...setup })
  })

/** What the database holds after a drain of `ops`: committed rows, those a single lifecycle committed, the drained documents' watches. */
const judgeTables = (url, names, ops) =>
  withClient(url, async (client) => {
    // Seeded at version 2 with one attempt spent: one claim (3), one mark (4, attempts 2), one finalize (5).
    const { rows: [operations] } = await client.query(`SELECT count(*)::int AS total,
        count(*) FILTER (WHERE state = 'committed')::int AS committed,
        count(*) FILTER (WHERE state = 'committed' AND attempts = 2 AND version = 5)::int AS once
      FROM ${names.operation}`)
    const { rows: [watches] } = await client.query(
      `SELECT count(*)::int AS total FROM ${names.projectionWatch} WHERE document_id LIKE 'document-%'`)
    return { ...operations, watches: watches.total, ops }
  })

/**
 * One drain: `processes` × `runners`, `side` "store" or "raw", `way`
 * "batches" or "pages", batches (or pages) of `limit`. Answers the rate,
 * each process's tally, peak RSS and CPU, and the judgement. With
 * `proxied` ({ url, roundTrips }: a round-trip proxy in front of the
 * database), the workers connect through it and the answer says how many
 * round trips the drain took (from the start signal to the last answer).
 * With `warm`, each process first drains `warm` operations of its own, the
 * same way, untimed (support/fleet-worker.mjs), from a table set kept for
 * it (`fleetwarm<pid>_<p>_`, migrated once, reseeded before each drain;
 * dropped with the database).
 */
export const runDrain = async (url, { processes, runners, side, way, limit, ops, warm = 0, proxied }) => {
  const { tablePrefix, names } = await seedBacklog(url, ops, { watches: Math.max(ops, SETTLED_WATCHES) })
  const workers = []
  try {
    const workerUrl = proxied?.url ?? url
    const warmPrefixes = []
    for (let p = 0; p < processes && warm > 0; p++) warmPrefixes.push(await warmBacklog(url, p, warm))
    const starting = Array.from({ length: processes }, (_, p) =>
      startWorker({
        url: workerUrl, tablePrefix, side, way, runners, limit, name: `p${p}`, maxConnections: FLEET_POOL,
        warm, warmPrefix: warmPrefixes[p]
      }))
    const started = await Promise.allSettled(starting)
    workers.push(...started.filter((s) => s.status === "fulfilled").map((s) => s.value))
    const failed = started.find((s) => s.status === "rejected")
    if (failed !== undefined) throw failed.reason
    const tripsBefore = proxied?.roundTrips()
    const go = performance.now()
    for (const { child } of workers) child.send({ type: "go" })
    const answers = await Promise.all(workers.map((w) => w.finished))
    const seconds = (performance.now() - go) / 1000
    const roundTrips = proxied === undefined ? undefined : proxied.roundTrips() - tripsBefore
    const tallies = answers.map((a) => a.tally)
    const leases = judgeLeases(tallies.flatMap((t) => t.leases))
    const commits = tallies.flatMap((t) => t.commits)
    const tables = await judgeTables(url, names, ops)
    const sum = (pick) => tallies.reduce((total, t) => total + pick(t), 0)
    const answersByOutcome = {}
    for (const t of tallies) for (const [outcome, n] of Object.entries(t.answers)) answersByOutcome[outcome] = (answersByOutcome[outcome] ?? 0) + n
    return {
      seconds,
      rate: sum((t) => t.committed) / seconds,
      committed: sum((t) => t.committed),
      distinctCommits: new Set(commits).size,
      asked: sum((t) => t.asked),
      won: sum((t) => t.won),
      calls: sum((t) => t.calls),
      answers: answersByOutcome,
      leases,
      tables,
      roundTrips,
      peakRssBytes: answers.map((a) => a.peakRssBytes),
      cpuMicros: answers.map((a) => a.cpuMicros)
    }
  } finally {
    for (const { child } of workers) if (child.exitCode === null) child.kill()
    await dropTables(url, tablePrefix)
  }
}

/** True when a drain committed every operation exactly once with no double claim. */
export const drainedCleanly = (result) =>
  result.leases.doubleClaims === 0 && result.committed === result.tables.ops && result.distinctCommits === result.tables.ops &&
  result.tables.committed === result.tables.ops && result.tables.once === result.tables.ops && result.tables.watches === result.tables.ops
