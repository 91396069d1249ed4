// A due page at scale: one `listDueWork({ limit: 500 })` page and one
// `claimDueOperations({ limit: 500 })` batch on an operation table of
// `rows` rows (every tenth due, the rest committed; support/due-rows.mjs),
// on Postgres and on SQLite, each table loaded in one INSERT … SELECT
// without its indexes, which are then built from the migrations' own
// definitions. Each call is timed five times (the first on a store just
// opened), with the process's peak RSS growth while it ran; the plans of
// the statements they send are printed beside.
import Database from "better-sqlite3"
import { openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { performance } from "node:perf_hooks"
import pg from "pg"
import { dueDrainStatements } from "./due-drain-raw-steps.mjs"
import { checkDueRows, sqliteDueInsert } from "./due-rows.mjs"
import { dropTables, seedBacklog } from "./fleet-drain.mjs"
import { winnerOf } from "./operation-lifecycle.mjs"

export const SCALE_PAGE = 500
/** One row in this many is due. */
export const SCALE_DUE_EVERY = 10
const CALLS = 5

/** Runs `work` once: its result, wall time and the process's peak RSS growth while it ran (sampled every 5 ms). */
const measured = async (work) => {
  global.gc?.()
  const base = process.memoryUsage().rss
  let peak = base
  const sample = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss)
  }, 5)
  const started = performance.now()
  try {
    const value = await work()
    return { value, ms: performance.now() - started, peak: Math.max(peak, process.memoryUsage().rss) - base }
  } finally {
    clearInterval(sample)
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

/** `CALLS` pages, then `CALLS` batches, on `store`: first call's time, the median of the rest, the largest RSS growth. */
const callsOn = async (store) => {
  const pages = []
  for (let i = 0; i < CALLS; i++) pages.push(await measured(() => store.listDueWork({ now: store.now(), limit: SCALE_PAGE })))
  const batches = []
  for (let i = 0; i < CALLS; i++) batches.push(await measured(() => store.claimDueOperations({ limit: SCALE_PAGE })))
  for (const page of pages) if (page.value.operations.length !== SCALE_PAGE) throw new Error(`a due page held ${page.value.operations.length} operations`)
  for (const batch of batches) if (batch.value.claimed.length !== SCALE_PAGE) throw new Error(`a batch claimed ${batch.value.claimed.length} operations`)
  const summary = (calls) => ({
    first: calls[0].ms,
    median: median(calls.slice(1).map((c) => c.ms)),
    peak: Math.max(...calls.map((c) => c.peak))
  })
  return { page: summary(pages), batch: summary(batches) }
}

/** The plan lines worth printing: each node and its buffers, the execution time. */
const planLines = (rows) =>
  rows.map((row) => row["QUERY PLAN"]).filter((line) => /Scan|Limit|Lock|Sort|Append|Merge|Join|Loop|Update|Buffers|Execution|Planning Time/.test(line))

/** EXPLAIN ANALYZE of the due page (locked, as a batch reads it; rolled back) and of the batch's lease write. */
const pgPlans = async (url, names) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const texts = dueDrainStatements({ operation: names.operation, watch: names.projectionWatch })
    const { rows: [{ now }] } = await client.query(`SELECT (extract(epoch FROM now()) * 1000)::bigint AS now`)
    await client.query("BEGIN")
    const page = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${texts.lockDuePage}`, [SCALE_PAGE, now, SCALE_PAGE, SCALE_PAGE])
    const { rows: due } = await client.query(texts.lockDuePage, [SCALE_PAGE, now, SCALE_PAGE, SCALE_PAGE])
    const records = due.map((row) => ({
      expected_version: row.version, version: row.version + 1, updated_at: Number(now), caller_did: row.caller_did,
      operation_id: row.operation_id, next_attempt_at: Number(now) + 30_000, lease_token: "plan", lease_expires_at: Number(now) + 30_000
    }))
    const write = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${texts.writeLeases}`, [JSON.stringify(records)])
    await client.query("ROLLBACK")
    return { page: planLines(page.rows), write: planLines(write.rows) }
  } finally {
    await client.end()
  }
}

/** The Postgres half at `rows` rows: load time, the calls, the plans. Drops the tables afterwards. */
export const pgAtScale = async (url, rows) => {
  const loadStarted = performance.now()
  const { tablePrefix, names } = await seedBacklog(url, rows, { committedEvery: SCALE_DUE_EVERY, bulk: true, tablePrefix: `scale${rows}_` })
  const loadSeconds = (performance.now() - loadStarted) / 1000
  try {
    const store = await openConnectorStore({ url, tablePrefix, readWinner: winnerOf })
    let calls
    try {
      calls = await callsOn(store)
    } finally {
      await store.close()
    }
    const plans = await pgPlans(url, names)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    const { rows: [size] } = await client.query(`SELECT pg_total_relation_size($1::text::regclass) AS bytes`, [names.operation])
    await client.end()
    return { loadSeconds, bytes: Number(size.bytes), calls, plans }
  } finally {
    await dropTables(url, tablePrefix)
  }
}

/** The SQLite half at `rows` rows, in `file` (removed by the caller's folder): load time, the calls, the plan. */
export const sqliteAtScale = async (file, rows) => {
  const loadStarted = performance.now()
  await (await openConnectorStore({ url: file, readWinner: winnerOf })).close() // the store's migrations make the tables
  const table = tableNames(undefined).operation
  const db = new Database(file)
  try {
    db.pragma("cache_size = -1000000")
    const indexes = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`).all(table)
    for (const { name } of indexes) db.exec(`DROP INDEX "${name}"`)
    db.exec(sqliteDueInsert(table, rows, Date.now(), { committedEvery: SCALE_DUE_EVERY }))
    for (const { sql } of indexes) db.exec(sql)
  } finally {
    db.close()
  }
  const loadSeconds = (performance.now() - loadStarted) / 1000
  const store = await openConnectorStore({ url: file, readWinner: winnerOf })
  let calls
  try {
    await checkDueRows(store, rows, { committedEvery: SCALE_DUE_EVERY })
    calls = await callsOn(store)
  } finally {
    await store.close()
  }
  const reader = new Database(file, { readonly: true })
  try {
    // The due page as the store sends it on SQLite: the dialect's text is the Postgres one without COLLATE and row locks.
    const text = dueDrainStatements({ operation: table, watch: "" }).lockDuePage
      .replace(/ COLLATE "C"/g, "").replace(/ FOR UPDATE SKIP LOCKED/g, "").replace(/"/g, "").replace(/\$\d/g, "?")
    const plan = reader.prepare(`EXPLAIN QUERY PLAN ${text}`).all(SCALE_PAGE, Date.now(), SCALE_PAGE, SCALE_PAGE).map((row) => row.detail)
    const { bytes } = reader.prepare(`SELECT page_count * page_size AS bytes FROM pragma_page_count(), pragma_page_size()`).get()
    return { loadSeconds, bytes, calls, plans: { page: plan } }
  } finally {
    reader.close()
  }
}

/** The lines of one database's figures at two sizes. */
export const scaleLines = (database, small, large, smallRows, largeRows) => {
  const size = (n) => n.toLocaleString("en-US")
  const line = (label, s, l) =>
    `      ${label.padEnd(34)} ${`${s.first.toFixed(1)} / ${s.median.toFixed(1)} ms, +${mb(s.peak)}`.padEnd(30)} ` +
    `${`${l.first.toFixed(1)} / ${l.median.toFixed(1)} ms, +${mb(l.peak)}`.padEnd(30)} ${(l.median / s.median).toFixed(2)}×`
  return [
    `    ${database}: ${size(smallRows)} rows (${mb(small.bytes)}, loaded in ${small.loadSeconds.toFixed(0)} s) vs ` +
    `${size(largeRows)} rows (${mb(large.bytes)}, loaded in ${large.loadSeconds.toFixed(0)} s), one in ${SCALE_DUE_EVERY} due`,
    `      ${"call (first / median of next 4, peak RSS growth)".padEnd(34)} ${size(smallRows).padEnd(30)} ${size(largeRows).padEnd(30)} large ÷ small`,
    line(`listDueWork({ limit: ${SCALE_PAGE} })`, small.calls.page, large.calls.page),
    line(`claimDueOperations({ limit: ${SCALE_PAGE} })`, small.calls.batch, large.calls.batch),
    `      plan of the due page at ${size(largeRows)} rows:`,
    ...large.plans.page.map((l) => `        ${l}`),
    ...(large.plans.write === undefined ? [] : [`      plan of the batch's lease write at ${size(largeRows)} rows:`, ...large.plans.write.map((l) => `        ${l}`)])
  ]
}
