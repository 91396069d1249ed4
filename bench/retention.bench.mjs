// Retention at scale: collectFinishedOperations in batches of 1,000 over a
// table of committed operations (one owner, 100 per document, every row
// collectable but the newest of its document), and the latency of a claim
// loop running beside it. Rows are built in one INSERT … SELECT.
//
//   npm run bench -- retention                          100,000 rows
//   BENCH_RETENTION_ROWS=1000000 npm run bench -- retention   the big table
import { openConnectorStore } from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import pg from "pg"
import { performance } from "node:perf_hooks"
import { removeScratchDatabases, scratchDatabases } from "./support/databases.mjs"
import { pgBulkInsert, sqliteBulkInsert } from "./support/retention-rows.mjs"

const ROWS = Number(process.env.BENCH_RETENTION_ROWS ?? 100_000)
const BATCH = 1_000
const BATCHES = 10
const LOOP_MS = Number(process.env.BENCH_RETENTION_LOOP_MS ?? 2_000)

const claimOf = (n) => ({
  callerDID: "did:bench:claimer",
  operationID: `claim-${n}`,
  ownerDID: "did:bench:owner",
  connectorName: "bench-connector",
  model: "Event",
  op: "update",
  accountKey: "bench@example.com",
  target: "calendars/primary",
  sourceID: `claim-source-${n}`,
  deterministicEventID: `claim-event-${n}`,
  payloadHash: `claim-hash-${n}`,
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  documentID: `claim-document-${n}`,
  leaseMs: 30_000
})

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]

/** Claims new keys one after another for `ms`; returns each call's latency. */
const claimLoop = async (store, ms, serial) => {
  const latencies = []
  const end = performance.now() + ms
  while (performance.now() < end) {
    const started = performance.now()
    const claim = await store.claimOperation(claimOf(serial.next++))
    if (claim.outcome !== "claimed") throw new Error(`claimOperation returned ${claim.outcome}`)
    latencies.push(performance.now() - started)
  }
  return latencies.sort((a, b) => a - b)
}

const ms = (n) => `${n.toFixed(2)} ms`

/** Fills, then measures batches alone and the claim loop without and with cleanup beside it. */
const measure = async (store, fill) => {
  const built = performance.now()
  await fill()
  const lines = [`    ${ROWS.toLocaleString("en-US")} rows built in ${Math.round(performance.now() - built)} ms`]
  let deleted = 0
  const started = performance.now()
  for (let i = 0; i < BATCHES; i++) deleted += await store.collectFinishedOperations({ before: Number.MAX_SAFE_INTEGER, limit: BATCH })
  const seconds = (performance.now() - started) / 1000
  if (deleted !== BATCHES * BATCH) throw new Error(`expected ${BATCHES * BATCH} deleted, got ${deleted}`)
  lines.push(`    ${BATCHES} batches of ${BATCH}: ${Math.round(deleted / seconds).toLocaleString("en-US")} rows/s (${ms(seconds * 1000 / BATCHES)} per batch)`)
  const serial = { next: 0 }
  const quiet = await claimLoop(store, LOOP_MS, serial)
  let running = true
  let beside = 0
  const cleanup = (async () => {
    while (running) beside += await store.collectFinishedOperations({ before: Number.MAX_SAFE_INTEGER, limit: BATCH })
  })()
  const busy = await claimLoop(store, LOOP_MS, serial)
  running = false
  await cleanup
  lines.push(`    claim loop alone:        p50 ${ms(percentile(quiet, 0.5))}  p99 ${ms(percentile(quiet, 0.99))}  (${quiet.length} claims)`)
  lines.push(`    claim loop with cleanup: p50 ${ms(percentile(busy, 0.5))}  p99 ${ms(percentile(busy, 0.99))}  (${busy.length} claims, ${beside} rows collected beside)`)
  return lines
}

export default {
  title: `retention: collectFinishedOperations({limit: ${BATCH}}) over ${ROWS.toLocaleString("en-US")} committed rows`,
  before: scratchDatabases,
  after: removeScratchDatabases,
  cases: [
    {
      name: "sqlite · retention batches + claim loop",
      run: async (context) => {
        const url = context.sqlite.path("retention.sqlite")
        const store = await openConnectorStore({ url, readWinner: () => undefined })
        try {
          return await measure(store, async () => {
            const db = new Database(url)
            try {
              db.exec(sqliteBulkInsert("kubun_connector_operation", ROWS, 100))
            } finally {
              db.close()
            }
          })
        } finally {
          await store.close()
        }
      }
    },
    {
      name: "postgres · retention batches + claim loop",
      run: async (context) => {
        if (context.postgres.skip !== undefined) return { skip: context.postgres.skip }
        const store = await openConnectorStore({ url: context.postgres.url, readWinner: () => undefined, maxConnections: 4 })
        try {
          return await measure(store, async () => {
            const client = new pg.Client({ connectionString: context.postgres.url })
            await client.connect()
            try {
              await client.query(pgBulkInsert("kubun_connector_operation", ROWS, 100))
              await client.query("ANALYZE kubun_connector_operation")
            } finally {
              await client.end()
            }
          })
        } finally {
          await store.close()
        }
      }
    }
  ]
}
