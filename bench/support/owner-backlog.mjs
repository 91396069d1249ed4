// One owner's backlog against a few other owners, for the fleet bench: a
// table of `rows` due operations of one owner (support/due-rows.mjs, every
// row due, oldest first), of which the `OTHERS` newest are moved to other
// owners (each on an account of its own), then batches of `limit`, timed:
//
// - plain: `claimDueOperations({ limit })` on a store that does not enforce
//   limits: the time of a batch, and how many of the other owners' rows the
//   first batch holds (fair: all of them, when `limit` allows);
// - paused: the backlog's account paused, on a store that enforces limits:
//   a batch reads past the paused rows to reach the others'.
//
// Each batch leases its rows, so the next batch reads on from there. Both
// on Postgres and on SQLite.
//
// The watches' case is the same over `claimDueWatches`: `rows` pending
// watches of one owner, every one due, oldest first, the `OTHERS` newest
// belonging to other owners; batches of `limit`, each claiming its watches
// for an hour.
import Database from "better-sqlite3"
import { openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { performance } from "node:perf_hooks"
import { withClient } from "./databases.mjs"
import { DUE_OWNER, sqliteDueInsert } from "./due-rows.mjs"
import { dropTables, seedBacklog } from "./fleet-drain.mjs"
import { winnerOf } from "./operation-lifecycle.mjs"

/** The other owners, one due row each (the newest rows of the table). */
export const OTHERS = 5
const BATCHES = 61
const BACKLOG_ACCOUNT = { connectorName: "bench-connector", accountKey: "bench@example.com" }

/** The statement moving the `OTHERS` newest rows (n = rows - OTHERS + 1 … rows) to owners and accounts of their own. */
const moveNewest = (table, rows) => {
  const ids = Array.from({ length: OTHERS }, (_, i) => `'due-${rows - i}'`).join(", ")
  return `UPDATE ${table} SET owner_did = 'did:bench:other-' || operation_id, account_key = 'other-' || operation_id
    WHERE operation_id IN (${ids})`
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** `BATCHES` batches on a store opened by `open`: the first's time and the others' rows in it, the median of the rest. */
const batchesOn = async (open, limit, { pause }) => {
  const store = await open(pause)
  try {
    if (pause) await store.pauseProvider({ ...BACKLOG_ACCOUNT, until: store.now() + 3_600_000, status: 429 })
    const times = []
    let others
    for (let i = 0; i < BATCHES; i++) {
      const started = performance.now()
      const batch = await store.claimDueOperations({ limit })
      times.push(performance.now() - started)
      if (i === 0) others = batch.claimed.filter((claim) => claim.operation.ownerDID !== DUE_OWNER).length
    }
    return { first: times[0], median: median(times.slice(1)), others }
  } finally {
    await store.close()
  }
}

/** The Postgres figures at `rows` rows, batches of `limit`. */
export const pgOwnerBacklog = async (url, rows, limit) => {
  const result = {}
  for (const pause of [false, true]) {
    const { tablePrefix, names } = await seedBacklog(url, rows, { bulk: true, tablePrefix: `owners${rows}_${pause ? "p" : "a"}_` })
    try {
      await withClient(url, async (client) => {
        await client.query(moveNewest(names.operation, rows))
        await client.query(`ANALYZE ${names.operation}`)
      })
      result[pause ? "paused" : "plain"] = await batchesOn(
        (providerLimits) => openConnectorStore({ url, tablePrefix, readWinner: winnerOf, providerLimits }),
        limit,
        { pause }
      )
    } finally {
      await dropTables(url, tablePrefix)
    }
  }
  return result
}

/** The SQLite figures at `rows` rows in files `path(name)`, batches of `limit`. */
export const sqliteOwnerBacklog = async (path, rows, limit) => {
  const result = {}
  for (const pause of [false, true]) {
    const file = path(`owners-${rows}-${pause ? "paused" : "plain"}.sqlite`)
    await (await openConnectorStore({ url: file, readWinner: winnerOf })).close()
    const table = tableNames(undefined).operation
    const db = new Database(file)
    try {
      db.exec(sqliteDueInsert(table, rows, Date.now()))
      db.exec(moveNewest(table, rows))
      db.exec("ANALYZE")
    } finally {
      db.close()
    }
    result[pause ? "paused" : "plain"] = await batchesOn(
      (providerLimits) => openConnectorStore({ url: file, readWinner: winnerOf, providerLimits }),
      limit,
      { pause }
    )
  }
  return result
}

/** The lines of one database's figures. */
export const ownerBacklogLines = (database, rows, limit, figures) => {
  const line = (label, f) =>
    `      ${label.padEnd(44)} first ${f.first.toFixed(1)} ms, median of next ${BATCHES - 1} ${f.median.toFixed(1)} ms; ` +
    `the other owners' rows in the first batch: ${f.others} of ${OTHERS}`
  return [
    `    ${database}: ${rows.toLocaleString("en-US")} due rows of one owner, the ${OTHERS} newest moved to ${OTHERS} other owners; ` +
    `claimDueOperations({ limit: ${limit} })`,
    line("plain", figures.plain),
    line("the backlog's account paused (providerLimits)", figures.paused)
  ]
}

/** The pending watches 1 … rows, due over the past day oldest first, the `OTHERS` newest of other owners, as SELECT list of row `n`. */
const watchSelect = (n, rows, now) => {
  const dueAt = `(${now} - 86400000 + CAST(${n} AS BIGINT) * 86400000 / ${rows + 1})`
  return `CASE WHEN ${n} > ${rows - OTHERS} THEN 'did:bench:other-' || ${n} ELSE '${DUE_OWNER}' END, 'bench-connector', 'Event',
    'bench@example.com', 'source-' || ${n}, 'document-' || ${n}, 'digest-0', 'digest-1', 'pending_verification', 1, 1,
    ${dueAt}, NULL, NULL, 2, ${dueAt} - 2000, ${dueAt} - 1000`
}
const WATCH_COLUMNS = `owner_did, connector_name, model, account_key, source_id, document_id, verified_state_digest,
  observed_winner_digest, verification_status, verification_attempts, repair_generation, next_attempt_at, claimed_until,
  defer_reason, version, created_at, updated_at`

/** `BATCHES` watch batches on `store`: the first's time and the others' watches in it, the median of the rest. */
const watchBatchesOn = async (store, limit) => {
  try {
    const times = []
    let others
    for (let i = 0; i < BATCHES; i++) {
      const now = Date.now()
      const started = performance.now()
      const batch = await store.claimDueWatches({ now, until: now + 3_600_000, limit })
      times.push(performance.now() - started)
      if (i === 0) others = batch.claimed.filter((watch) => watch.ownerDID !== DUE_OWNER).length
    }
    return { first: times[0], median: median(times.slice(1)), others }
  } finally {
    await store.close()
  }
}

/** The Postgres watch figures at `rows` watches, batches of `limit`. */
export const pgWatchBacklog = async (url, rows, limit) => {
  const tablePrefix = `watchowners${rows}_`
  const names = tableNames(tablePrefix)
  await (await openConnectorStore({ url, tablePrefix, readWinner: winnerOf })).close()
  try {
    await withClient(url, async (client) => {
      await client.query(`INSERT INTO ${names.projectionWatch} (${WATCH_COLUMNS})
        SELECT ${watchSelect("n", rows, Date.now())} FROM generate_series(1, ${rows}) AS n`)
      await client.query(`VACUUM ANALYZE ${names.projectionWatch}`)
    })
    return await watchBatchesOn(await openConnectorStore({ url, tablePrefix, readWinner: winnerOf }), limit)
  } finally {
    await dropTables(url, tablePrefix)
  }
}

/** The SQLite watch figures at `rows` watches in a file `path(name)`, batches of `limit`. */
export const sqliteWatchBacklog = async (path, rows, limit) => {
  const file = path(`watch-owners-${rows}.sqlite`)
  await (await openConnectorStore({ url: file, readWinner: winnerOf })).close()
  const db = new Database(file)
  try {
    db.exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${rows})
      INSERT INTO ${tableNames(undefined).projectionWatch} (${WATCH_COLUMNS}) SELECT ${watchSelect("n", rows, Date.now())} FROM g`)
    db.exec("ANALYZE")
  } finally {
    db.close()
  }
  return watchBatchesOn(await openConnectorStore({ url: file, readWinner: winnerOf }), limit)
}

/** The lines of one database's watch figures. */
export const watchBacklogLines = (database, rows, limit, f) => [
  `    ${database}: ${rows.toLocaleString("en-US")} due watches, the ${OTHERS} newest of ${OTHERS} other owners; ` +
  `claimDueWatches({ limit: ${limit} })`,
  `      ${"plain".padEnd(44)} first ${f.first.toFixed(1)} ms, median of next ${BATCHES - 1} ${f.median.toFixed(1)} ms; ` +
  `the other owners' watches in the first batch: ${f.others} of ${OTHERS}`
]
