// The dashboard's pages at scale: each page's answer time (the handler called directly, no HTTP) over an operation table of
// 100 rows and of larger ones, on SQLite and Postgres, and the ratio of each to the 100-row answer: a page whose ratio
// grows with the table reads more of it than a keyset page or a bounded count does. Rows are built in one INSERT … SELECT:
// 90% committed, 5% attempted (due), 3% dead, 2% reconcile_only in doubt.
//
//   npm run bench -- dashboard                                        100 and 10,000 rows
//   BENCH_DASHBOARD_ROWS=100,10000,1000000 npm run bench -- dashboard  and a million
import { dashboardHandler } from "@connector-store/dashboard"
import { openConnectorStore } from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import { performance } from "node:perf_hooks"
import { removeScratchDatabases, scratchDatabases, withClient } from "./support/databases.mjs"

const SIZES = (process.env.BENCH_DASHBOARD_ROWS ?? "100,10000").split(",").map(Number)
const SAMPLES = Number(process.env.BENCH_DASHBOARD_SAMPLES ?? 9)
const BASE = 1_800_000_000_000

const PAGES = [
  ["overview", "/"],
  ["operations, all", "/operations"],
  ["operations, dead", "/operations?state=dead"],
  ["operations, due now", "/operations?due=yes"],
  ["operations, in doubt", "/operations?inDoubt=yes"],
  ["operations, an owner", "/operations?owner=did:bench:owner-3"],
  ["operation detail", "/operation?caller=did:bench:caller&id=op-42"],
  ["watches", "/watches"],
  ["sync states", "/sync"],
  ["limits", "/limits"],
  ["audit log", "/audit"]
]

const columns = `caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target,
  source_id, deterministic_event_id, payload_hash, reissue_intent, document_id, state, attempts, version,
  next_attempt_at, send_marker, in_doubt_since, created_at, updated_at`

const selectFrom = (n) => `SELECT 'did:bench:caller', 'op-' || ${n}, 'node-' || ${n}, 'did:bench:owner-' || (${n} % 10),
  'bench-connector', 'Event', 'update', 'bench@example.com', 'calendars/primary', 'source-' || ${n},
  'event-' || ${n}, 'hash-' || ${n}, '{"kind":"reconcile"}', 'document-' || ${n},
  CASE WHEN ${n} % 100 < 90 THEN 'committed' WHEN ${n} % 100 < 95 THEN 'attempted' WHEN ${n} % 100 < 98 THEN 'dead' ELSE 'reconcile_only' END,
  1, 3,
  CASE WHEN ${n} % 100 >= 90 AND ${n} % 100 < 95 THEN ${BASE} + ${n} ELSE NULL END,
  CASE WHEN ${n} % 100 >= 98 THEN 'run-' || ${n} ELSE NULL END,
  CASE WHEN ${n} % 100 >= 98 THEN ${BASE} + ${n} ELSE NULL END,
  ${BASE} + ${n}, ${BASE} + ${n}`

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

/** Each page's median answer time in ms over the store's current rows. */
const timePages = async (store) => {
  const handler = dashboardHandler({ store, basePath: "/ops", statusTtlMs: 0, now: () => BASE + 10_000_000_000 })
  const out = new Map()
  for (const [name, path] of PAGES) {
    const times = []
    for (let i = 0; i < SAMPLES + 2; i++) {
      const started = performance.now()
      const answer = await handler(new Request(`http://bench/ops${path}`))
      await answer.text()
      if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}`)
      if (i >= 2) times.push(performance.now() - started)
    }
    out.set(name, median(times))
  }
  return out
}

const report = (database, results) => {
  const [small, ...larger] = SIZES
  const header = `    ${"page".padEnd(24)}${SIZES.map((n) => `${n.toLocaleString("en-US")} rows`.padStart(16)).join("")}${
    larger.map((n) => `ratio ${n.toLocaleString("en-US")}/${small}`.padStart(22)).join("")
  }`
  const lines = [`    ${database}`, header]
  for (const [name] of PAGES) {
    const base = results.get(small).get(name)
    lines.push(`    ${name.padEnd(24)}${SIZES.map((n) => `${results.get(n).get(name).toFixed(1)} ms`.padStart(16)).join("")}${
      larger.map((n) => `${(results.get(n).get(name) / base).toFixed(2)}×`.padStart(22)).join("")
    }`)
  }
  return lines
}

let context
export default {
  title: "dashboard pages at scale: median answer time per page, and its ratio to the 100-row table's",
  before: async () => {
    context = await scratchDatabases()
    return context
  },
  after: (ctx) => removeScratchDatabases(ctx),
  cases: [
    {
      name: "sqlite",
      run: async (ctx) => {
        const results = new Map()
        const built = []
        for (const size of SIZES) {
          const file = ctx.sqlite.path(`dashboard-${size}.sqlite`)
          const store = await openConnectorStore({ url: file })
          const started = performance.now()
          const db = new Database(file)
          db.exec(`WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${size})
            INSERT INTO kubun_connector_operation (${columns}) ${selectFrom("n")} FROM s`)
          db.exec("ANALYZE")
          db.close()
          built.push(`${size.toLocaleString("en-US")} rows in ${Math.round(performance.now() - started)} ms`)
          results.set(size, await timePages(store))
          await store.close()
        }
        return [`    built: ${built.join(", ")}`, ...report("SQLite", results)]
      }
    },
    {
      name: "postgres",
      run: async (ctx) => {
        if (ctx.postgres.skip !== undefined) return { skip: ctx.postgres.skip }
        const results = new Map()
        const built = []
        for (const size of SIZES) {
          const tablePrefix = `dash${size}_`
          const store = await openConnectorStore({ url: ctx.postgres.url, tablePrefix })
          const started = performance.now()
          await withClient(ctx.postgres.url, async (client) => {
            await client.query(`INSERT INTO ${tablePrefix}operation (${columns}) ${selectFrom("n")} FROM generate_series(1, ${size}) AS n`)
            await client.query(`ANALYZE ${tablePrefix}operation`)
          })
          built.push(`${size.toLocaleString("en-US")} rows in ${Math.round(performance.now() - started)} ms`)
          results.set(size, await timePages(store))
          await store.close()
        }
        return [`    built: ${built.join(", ")}`, ...report("Postgres", results)]
      }
    }
  ]
}
