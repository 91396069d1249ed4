// The due sweep at size: one listDueOperations call, and a full audit pass
// (calls until every settled watch has been audited once), over N watches
// and N operations: 1% of watches due by schedule, the rest settled
// (verified), 1% of operations due, a batch winner reader. Prints time and
// the process's peak RSS growth. Rows are built in one INSERT … SELECT.
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
          global.gc?.()
          const base = process.memoryUsage().rss
          let peak = base
          const sample = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 5)
          let started = performance.now()
          const one = await store.listDueOperations(NOW)
          const oneMs = performance.now() - started
          peak = Math.max(peak, process.memoryUsage().rss)
          const onePeak = peak - base
          started = performance.now()
          for (let i = 1; i < calls; i++) await store.listDueOperations(NOW)
          const passMs = oneMs + performance.now() - started
          clearInterval(sample)
          peak = Math.max(peak, process.memoryUsage().rss)
          return [
            `    one call: ${oneMs.toFixed(0)} ms, peak RSS +${mb(onePeak)} (${one.operations.length} operations, ${one.watches.length} watches due)`,
            `    full audit pass (${calls} calls of ≤${PAGE}): ${(passMs / 1000).toFixed(1)} s, peak RSS +${mb(peak - base)}`
          ]
        } finally {
          await store.close()
        }
      }
    }
  ]
}
