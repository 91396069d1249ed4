// The due sweep at size over N watches and N operations: 1% of watches due by
// schedule, the rest settled (verified), 1% of operations due, a batch winner
// reader. Prints time and the process's peak RSS growth for one call (every
// due row plus one audit page), for one call before the due times (its audit
// page alone) and for a full audit pass (calls until every settled watch has
// been audited once) with nothing due: a sweeper works the due rows off, so
// re-reading the same 1% on each of the pass's calls would measure the
// bench, not the audit. Rows are built in one INSERT … SELECT.
//
//   npm run bench -- sweep                             100,000 + 100,000
//   BENCH_SWEEP_ROWS=1000000 npm run bench -- sweep    1,000,000 + 1,000,000
import { openConnectorStore } from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import { performance } from "node:perf_hooks"
import { scratchSqliteFolder } from "./support/databases.mjs"
import { sqliteBulkInsert } from "./support/retention-rows.mjs"

const ROWS = Number(process.env.BENCH_SWEEP_ROWS ?? 100_000)
const PAGE = 1_000
const NOW = 2_000_000_000_000

const watches = (count) =>
  `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${count})
   INSERT INTO kubun_connector_projection_watch (owner_did, connector_name, model, account_key, source_id, document_id,
     verified_state_digest, observed_winner_digest, verification_status, next_attempt_at, version, created_at, updated_at)
   SELECT 'did:bench:owner', 'bench-connector', 'Event', 'bench@example.com', 'source-' || n, 'document-' || n,
     'digest-' || n, 'digest-' || n,
     CASE WHEN n % 100 = 0 THEN 'pending_verification' ELSE 'verified' END,
     CASE WHEN n % 100 = 0 THEN ${NOW - 1} ELSE NULL END, 1, 1, 1
   FROM s`

/** Runs `work` once: its result, wall time and the process's peak RSS growth while it ran (sampled every 5 ms). */
const measured = async (work) => {
  global.gc?.()
  const base = process.memoryUsage().rss
  let peak = base
  const sample = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 5)
  const started = performance.now()
  try {
    const value = await work()
    const ms = performance.now() - started
    return { value, ms, peak: Math.max(peak, process.memoryUsage().rss) - base }
  } finally {
    clearInterval(sample)
  }
}

const mb = (bytes) => `${Math.round(bytes / 1024 / 1024)} MB`

export default {
  title: `due sweep: listDueOperations over ${ROWS.toLocaleString("en-US")} watches + ${ROWS.toLocaleString("en-US")} operations (1% due, batch reader)`,
  before: async () => ({ sqlite: scratchSqliteFolder() }),
  after: async (context) => context.sqlite.remove(),
  cases: [
    {
      name: "sqlite · one call and a full audit pass",
      run: async (context) => {
        const url = context.sqlite.path("sweep.sqlite")
        // The winner of every document is its watch's digest: nothing diverges, every winner is read.
        const readWinners = (documentIDs) => new Map(documentIDs.map((id) => [id, `digest-${id.slice("document-".length)}`]))
        const store = await openConnectorStore({ url, readWinners })
        try {
          const db = new Database(url)
          try {
            db.exec(watches(ROWS))
            db.exec(sqliteBulkInsert("kubun_connector_operation", ROWS, 1))
            db.exec(`UPDATE kubun_connector_operation SET state = 'attempted', next_attempt_at = ${NOW - 1} WHERE created_at % 100 = 0`)
          } finally {
            db.close()
          }
          const settled = ROWS - ROWS / 100
          const calls = Math.ceil((settled + 1) / PAGE)
          // One call at NOW: the schedule branch returns every due row (1%) and the audit reads one page.
          const one = await measured(() => store.listDueOperations(NOW))
          // Before the due times nothing is due by schedule, so a call is its audit page alone:
          // what a full pass costs apart from the due rows a sweeper would have worked off.
          const page = await measured(() => store.listDueOperations(NOW - 2))
          const pass = await measured(async () => {
            for (let i = 1; i < calls; i++) await store.listDueOperations(NOW - 2)
          })
          return [
            `    one call: ${one.ms.toFixed(0)} ms, peak RSS +${mb(one.peak)} (${one.value.operations.length} operations, ${one.value.watches.length} watches due)`,
            `    one call with nothing due (its audit page alone): ${page.ms.toFixed(1)} ms, peak RSS +${mb(page.peak)}`,
            `    full audit pass (${calls} calls of ≤${PAGE}, nothing due): ${((page.ms + pass.ms) / 1000).toFixed(2)} s, ` +
            `${((page.ms + pass.ms) / calls).toFixed(1)} ms per call, peak RSS +${mb(Math.max(page.peak, pass.peak))}`
          ]
        } finally {
          await store.close()
        }
      }
    }
  ]
}
