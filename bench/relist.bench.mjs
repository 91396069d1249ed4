// Issue 5's speed: a relist of 100,000 entities receipted in pages of 500,
// then its candidates listed, on SQLite (a temp file) and Postgres (a scratch
// database).
//
// The cases measure the page commit the relist is made of
// (`commitSweepCheckpoint` with 500 receipts: lock the run, check the page,
// upsert the receipts, move the cursor) through the project against the same
// transaction hand-written on the raw driver; pages/s × 500 = entities/s.
// After them, one whole relist per database through the project: 100,000
// tracked documents, the listing in 200 pages (1% of the tracked gone at the
// provider, 1% changed, 1% new), the last page completing the run and
// deriving its candidates, then every candidate listed page by page.
import { performance } from "node:perf_hooks"
import { openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import pg from "pg"
import { removeScratchDatabases, scratchDatabases } from "./support/databases.mjs"

const PAGE = 500
const ENTITIES = 100_000
const scope = { ownerDID: "did:bench:owner", connectorName: "gcal", model: "Event", accountKey: "acct" }
let opened = 0

/** A page of receipts for fresh source ids: the `n`th page a side commits. */
const pageOf = (n) => Array.from({ length: PAGE }, (_, i) => ({ sourceID: `p${n}-${i}`, digest: `d${i % 7}` }))

const connectionFor = (database, id, context) =>
  database === "sqlite"
    ? { url: context.sqlite.path(`${id}.sqlite`) }
    : { url: context.postgres.url, tablePrefix: `${id}_`, maxConnections: 4 }

/** The project's page commit: one `commitSweepCheckpoint` per cycle on an endless run. */
const openProject = async (connection) => {
  const store = await openConnectorStore(connection)
  const { runID } = await store.startRelistRun(scope)
  let page = 0
  return {
    cycle: async () => {
      page++
      const outcome = await store.commitSweepCheckpoint(runID, { page, cursor: `c${page}`, receipts: pageOf(page) })
      if (outcome !== "committed") throw new Error(`page ${page}: ${outcome}`)
    },
    close: () => store.close()
  }
}

const receiptValues = (count, placeholder) =>
  Array.from({ length: count }, (_, i) => `(${[0, 1, 2, 3].map((k) => placeholder(i * 4 + k + 1)).join(", ")})`).join(", ")

/** The same page commit on better-sqlite3: one immediate transaction, prepared statements. */
const rawSqlite = (path, t, runID) => {
  const db = new Database(path)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 10000")
  const read = db.prepare(`SELECT state, pages_committed, version FROM ${t.relistRun} WHERE run_id = ?`)
  const insert = db.prepare(
    `INSERT INTO ${t.relistReceipt} (run_id, source_id, digest, seen_at) VALUES ${receiptValues(PAGE, () => "?")}
     ON CONFLICT (run_id, source_id) DO UPDATE SET digest = excluded.digest, seen_at = excluded.seen_at`
  )
  const move = db.prepare(
    `UPDATE ${t.relistRun} SET state = 'listing', page_cursor = ?, pages_committed = ?, version = version + 1, updated_at = ?
     WHERE run_id = ? AND version = ?`
  )
  const commit = db.transaction((page, receipts, now) => {
    const run = read.get(runID)
    if ((run.state !== "started" && run.state !== "listing") || run.pages_committed + 1 !== page) throw new Error("stale")
    insert.run(receipts.flatMap((r) => [runID, r.sourceID, r.digest, now]))
    if (move.run(`c${page}`, page, now, runID, run.version).changes !== 1) throw new Error("lost race")
  })
  let page = 0
  return {
    cycle: async () => {
      page++
      commit.immediate(page, pageOf(page), Date.now())
    },
    close: async () => db.close()
  }
}

/** The same page commit on node-postgres: BEGIN, FOR UPDATE, one multi-row upsert, versioned update. */
const rawPg = async (url, t, runID) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const insert = `INSERT INTO ${t.relistReceipt} (run_id, source_id, digest, seen_at) VALUES ${receiptValues(PAGE, (n) => `$${n}`)}
    ON CONFLICT (run_id, source_id) DO UPDATE SET digest = excluded.digest, seen_at = excluded.seen_at`
  let page = 0
  return {
    cycle: async () => {
      page++
      const now = Date.now()
      await client.query("BEGIN")
      try {
        const { rows: [run] } = await client.query(
          `SELECT state, pages_committed, version FROM ${t.relistRun} WHERE run_id = $1 FOR UPDATE`,
          [runID]
        )
        if ((run.state !== "started" && run.state !== "listing") || run.pages_committed + 1 !== page) throw new Error("stale")
        await client.query(insert, pageOf(page).flatMap((r) => [runID, r.sourceID, r.digest, now]))
        const moved = await client.query(
          `UPDATE ${t.relistRun} SET state = 'listing', page_cursor = $1, pages_committed = $2, version = version + 1, updated_at = $3
           WHERE run_id = $4 AND version = $5`,
          [`c${page}`, page, now, runID, run.version]
        )
        if (moved.rowCount !== 1) throw new Error("lost race")
        await client.query("COMMIT")
      } catch (error) {
        await client.query("ROLLBACK")
        throw error
      }
    },
    close: () => client.end()
  }
}

/** The raw side: its own tables (the project's migrations), a run started by the project, then the driver alone. */
const openRaw = async (database, connection) => {
  const setup = await openConnectorStore(connection)
  const { runID } = await setup.startRelistRun(scope)
  await setup.close()
  const t = tableNames(connection.tablePrefix)
  return database === "sqlite" ? rawSqlite(connection.url, t, runID) : rawPg(connection.url, t, runID)
}

const pageCase = (database) => ({
  name: `${database} · Promise API · pages of ${PAGE} receipts`,
  open: async (context) => {
    if (database === "postgres" && context.postgres.skip !== undefined) return { skip: context.postgres.skip }
    context.ran.add(database)
    const id = `relist${++opened}`
    const raw = await openRaw(database, connectionFor(database, `${id}_raw`, context))
    const project = await openProject(connectionFor(database, `${id}_project`, context)).catch(async (error) => {
      await raw.close()
      throw error
    })
    return {
      project: project.cycle,
      raw: raw.cycle,
      close: async () => {
        await project.close()
        await raw.close()
      }
    }
  }
})

/** 100,000 tracked documents of the scope, last written long before the relist, seeded in one statement. */
const seedTracked = async (database, connection) => {
  const t = tableNames(connection.tablePrefix)
  const columns = `owner_did, connector_name, model, account_key, source_id, document_id, verified_state_digest,
    observed_winner_digest, verification_status, verification_attempts, repair_generation, version, created_at, updated_at`
  const select = (n) => `SELECT '${scope.ownerDID}', '${scope.connectorName}', '${scope.model}', '${scope.accountKey}',
    'e' || ${n}, 'doc-' || ${n}, 'v1', 'v1', 'verified', 0, 0, 0, 0, 0`
  if (database === "sqlite") {
    const db = new Database(connection.url)
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${ENTITIES - 1})
      INSERT INTO ${t.projectionWatch} (${columns}) ${select("i")} FROM n`)
    db.close()
  } else {
    const client = new pg.Client({ connectionString: connection.url })
    await client.connect()
    await client.query(`INSERT INTO ${t.projectionWatch} (${columns}) ${select("i")} FROM generate_series(0, ${ENTITIES - 1}) i`)
    await client.query(`ANALYZE ${t.projectionWatch}`)
    await client.end()
  }
}

/**
 * The provider's listing: every tracked entity but the first 1% (gone), the
 * next 1% with a new digest (diverged), and 1% new ones nobody tracks; in
 * source-id order, 200 pages of 500.
 */
const listing = () => {
  const gone = ENTITIES / 100
  const entities = []
  for (let i = gone; i < ENTITIES; i++) entities.push({ sourceID: `e${i}`, digest: i < 2 * gone ? "v2" : "v1" })
  for (let i = 0; i < gone; i++) entities.push({ sourceID: `new${i}`, digest: "v1" })
  entities.sort((a, b) => (a.sourceID < b.sourceID ? -1 : 1))
  return Array.from({ length: entities.length / PAGE }, (_, p) => entities.slice(p * PAGE, (p + 1) * PAGE))
}

const ms = (from, to) => `${(to - from).toFixed(0)} ms`

/** One whole relist through the project, timed. */
const fullRelist = async (database, context) => {
  const connection = connectionFor(database, `relist${++opened}_full`, context)
  const store = await openConnectorStore(connection)
  try {
    await seedTracked(database, connection)
    const pages = listing()
    const t0 = performance.now()
    const { runID } = await store.startRelistRun(scope)
    for (let p = 1; p < pages.length; p++) {
      const outcome = await store.commitSweepCheckpoint(runID, { page: p, cursor: `c${p}`, receipts: pages[p - 1] })
      if (outcome !== "committed") throw new Error(`page ${p}: ${outcome}`)
    }
    const t1 = performance.now()
    const last = await store.commitSweepCheckpoint(runID, { page: pages.length, cursor: null, receipts: pages.at(-1), complete: true })
    if (last !== "completed") throw new Error(`last page: ${last}`)
    const t2 = performance.now()
    let listed = 0
    let calls = 0
    let after
    for (;;) {
      const page = await store.listSweepCandidates(runID, { limit: PAGE, after, maxDeletionFraction: 0.05 })
      calls++
      listed += page.length
      if (page.length < PAGE) break
      after = page.at(-1).sourceID
    }
    const t3 = performance.now()
    const run = await store.getRelistRun(runID)
    if (run.deletionCount !== ENTITIES / 100 || run.divergenceCount !== ENTITIES / 100 || listed !== 2 * ENTITIES / 100) {
      throw new Error(`unexpected candidates: ${JSON.stringify(run)} listed ${listed}`)
    }
    const entitiesPerSecond = Math.round(run.receiptCount / ((t2 - t0) / 1000)).toLocaleString("en-US")
    console.log(
      `  ${`${database} · whole relist of ${run.receiptCount.toLocaleString("en-US")} entities`.padEnd(46)} ` +
        `${entitiesPerSecond} entities/s (${pages.length} pages in ${ms(t0, t2)}; the last one, completing the run ` +
        `and deriving ${run.deletionCount + run.divergenceCount} candidates from ${run.trackedCount.toLocaleString("en-US")} tracked: ${ms(t1, t2)})`
    )
    console.log(
      `  ${`${database} · listing its candidates`.padEnd(46)} ${ms(t2, t3)} for ${listed} candidates in ${calls} pages of ≤${PAGE}`
    )
  } finally {
    await store.close()
  }
}

/** The relist bench (see bench/README.md for the shape). */
export default {
  title: `relist sweep: commitSweepCheckpoint of a page of ${PAGE} receipts, pages/s (× ${PAGE} = entities/s); then a whole relist`,
  before: async () => ({ ...(await scratchDatabases()), ran: new Set() }),
  after: async (context) => {
    try {
      for (const database of ["sqlite", "postgres"]) if (context.ran.has(database)) await fullRelist(database, context)
    } finally {
      await removeScratchDatabases(context)
    }
  },
  cases: [pageCase("sqlite"), pageCase("postgres")]
}
