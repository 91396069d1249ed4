import * as Sql from "@connector-store/sql-adapter"
import { migrate, migrations, tableNames, type TableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { collectFinishedLocked, collectFinishedStatement } from "../packages/sql-adapter/src/internal/retention.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The retention delete's plan: candidates read in order from the updated_at
// index (the scan stops at the limit) and every keep-rule probe a seek into
// its partition from the candidate's created_at on. Today's cost otherwise
// grows with the table (docs/performance.md).

const withClient = <A>(url: string, use: (sql: SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
    Effect.provide(Effect.flatMap(SqlClient, use), context))))

/** Committed rows 1…count of one caller and owner, 100 per document, as a store writes them. */
const fill = (sql: SqlClient, t: TableNames, count: number) =>
  sql.unsafe(`${sql.onDialectOrElse({
    pg: () => "",
    orElse: () => `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${count}) `
  })}INSERT INTO ${t.operation} (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key,
      target, source_id, deterministic_event_id, payload_hash, reissue_intent, document_id, state, attempts, version,
      created_at, updated_at)
    SELECT 'did:caller:1', 'op-' || n, 'node-' || n, 'did:owner:1', 'gcal', 'Event', 'update', 'acct-1', 'calendar/primary',
      'src-' || n, 'event-' || n, 'hash-' || n, '{"kind":"conditional-update","ifMatch":"etag-0"}', 'doc-' || (n / 100), 'committed', 1, 3, n, n
    FROM ${sql.onDialectOrElse({ pg: () => `generate_series(1, ${count}) AS n`, orElse: () => "s" })}`)

// Each adapter's own pass: Postgres's locking statement is planned as the
// store runs it, from the table's statistics.
const explain = (sql: SqlClient, t: TableNames) => {
  const [text, params] = sql.onDialectOrElse({
    pg: () => collectFinishedLocked(sql, t.operation, { before: 1e12, limit: 1000 }, 1),
    orElse: () => collectFinishedStatement(sql, t.operation, { before: 1e12, limit: 1000 }, 1)
  }).compile()
  return sql.onDialectOrElse({
    pg: () =>
      sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params).pipe(
        Effect.map((rows) => rows.map((row) => row["QUERY PLAN"]).join("\n"))
      ),
    orElse: () =>
      sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params).pipe(
        Effect.map((rows) => rows.map((row) => row.detail).join("\n"))
      )
  })
}

/** Migrates (optionally only up to `upTo`), fills and explains the retention delete. */
const planOf = (url: string, count: number, upTo = Infinity) => {
  const t = tableNames(freshPrefix())
  return withClient(url, (sql) =>
    Effect.gen(function*() {
      yield* migrate(sql, t, migrations.filter((m) => m.id <= upTo))
      yield* fill(sql, t, count)
      // Postgres plans from statistics; a SQLite store never runs ANALYZE, so its plan is tested without.
      yield* sql.onDialectOrElse({ pg: () => sql.unsafe(`ANALYZE ${t.operation}`), orElse: () => Effect.void })
      return { plan: yield* explain(sql, t), index: (name: string) => t.index(name) }
    })
  )
}

describe("retention plan on SQLite", () => {
  it("reads candidates in updated_at order without sorting the table, and seeks each partition from created_at on", async () => {
    const { index, plan } = await planOf(freshSqlitePath(), 2_000)
    expect(plan).toContain(`SEARCH o USING INDEX ${index("idx_connector_operation_updated")} (updated_at<?)`)
    expect(plan).not.toContain("TEMP B-TREE FOR ORDER BY")
    for (const partition of ["caller", "owner"]) {
      expect(plan).toMatch(
        new RegExp(`SEARCH n USING (COVERING )?INDEX ${index(`idx_connector_operation_document_${partition}`)} \\(document_id=\\? AND ${partition === "caller" ? "caller" : "owner"}_did=\\? AND state=\\? AND created_at>\\?\\)`)
      )
    }
    expect(plan).not.toContain("idx_connector_operation_state_next")
  })

  it("without migration 7 the plan sorts every finished row (the test can tell)", async () => {
    const { plan } = await planOf(freshSqlitePath(), 2_000, 6)
    expect(plan).toContain("TEMP B-TREE FOR ORDER BY")
  })
})

describe.skipIf(!pgAvailable)("retention plan on Postgres", () => {
  it("reads candidates from the updated_at index without a sort, probes partitions and locks by index", async () => {
    const { index, plan } = await planOf(await pgDatabaseForFile(), 20_000)
    // The LIMIT sits right on the ordered index scan: no sort of the finished rows.
    expect(plan).toMatch(new RegExp(`Limit .*\\n\\s*->\\s+Index Scan using ${index("idx_connector_operation_updated")}`))
    expect(plan).toMatch(new RegExp(`Index (Only )?Scan using ${index("idx_connector_operation_document_caller")}`))
    expect(plan).toMatch(new RegExp(`Index (Only )?Scan using ${index("idx_connector_operation_document_owner")}`))
    // Each partition's newest rows (the witnesses) are a backward seek; each lock a primary-key seek.
    expect(plan).toMatch(new RegExp(`Index Scan Backward using ${index("idx_connector_operation_document_caller")}`))
    expect(plan).toMatch(new RegExp(`Index Scan Backward using ${index("idx_connector_operation_document_owner")}`))
    expect(plan).toMatch(/LockRows .*\n\s*->\s+Index Scan using \S+_operation_pkey/)
    expect(plan).not.toContain("Seq Scan")
  })
})
