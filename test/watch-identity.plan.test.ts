import * as Sql from "@connector-store/sql-adapter"
import { migrate, tableNames, watchStatements } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// A watch found by its identity reads the primary key, and a finalize's arm
// targets (the document's watches or the identity's) two index probes,
// however many watches the owner has of that model, on a table that was
// never analyzed too (autovacuum off, or not yet run). Before migration 16
// Postgres's planner, with no statistics, took the unique ingress index's
// (owner_did, model) prefix for the identity and read every watch of the
// owner's model per finalize (docs/performance.md).

const withClient = <A>(url: string, use: (sql: SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
    Effect.provide(Effect.flatMap(SqlClient, use), context))))

const IDENTITY = { ownerDID: "o", connectorName: "c", model: "m", accountKey: "a", sourceID: "s1500" }
const SLOT = { ownerDID: "o", model: "m", documentID: "d-new" }

/** The plans of the arm-target read and of a lookup by identity, on 3,000 watches of one owner and model, never analyzed. */
const plans = (url: string) => {
  const t = tableNames(freshPrefix())
  return withClient(url, (sql) =>
    Effect.gen(function*() {
      yield* migrate(sql, t)
      const series = sql.onDialectOrElse({
        pg: () => "generate_series(1, 3000) AS g(n)",
        orElse: () => "(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 3000) SELECT n FROM g) AS g"
      })
      yield* sql.unsafe(`INSERT INTO ${t.projectionWatch} (owner_did, connector_name, model, account_key, source_id, document_id,
          verification_status, next_attempt_at, version, created_at, updated_at)
        SELECT 'o', 'c', 'm', 'a', 's' || n, 'd' || n, 'verified', NULL, 1, 1, 1 FROM ${series}`)
      const statements = watchStatements(sql, t)
      const explain = (statement: { compile: () => readonly [string, ReadonlyArray<unknown>] }) => {
        const [text, params] = statement.compile()
        return sql.onDialectOrElse({
          pg: () =>
            sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params as ReadonlyArray<never>).pipe(
              Effect.map((rows) => rows.map((row) => row["QUERY PLAN"]).join("\n"))
            ),
          orElse: () =>
            sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params as ReadonlyArray<never>).pipe(
              Effect.map((rows) => rows.map((row) => row.detail).join("\n"))
            )
        })
      }
      return {
        t,
        armTargets: yield* explain(statements.lockArmTargets(SLOT, IDENTITY)),
        identity: yield* explain(statements.lockRead(IDENTITY))
      }
    })
  )
}

describe("a watch's identity and a finalize's arm targets on a table never analyzed", () => {
  it.skipIf(!pgAvailable)("on Postgres: the primary key and the ingress index by document, never the owner's watches", async () => {
    const { armTargets, identity, t } = await plans(await pgDatabaseForFile())
    expect(identity).toContain(`Index Scan using ${t.projectionWatch}_pkey`)
    expect(armTargets).toContain(`Bitmap Index Scan on ${t.projectionWatch}_pkey`)
    expect(armTargets).toContain(`Bitmap Index Scan on ${t.index("uq_connector_watch_ingress")}`)
    expect(armTargets).toMatch(/Index Cond: \(document_id = /)
    expect(armTargets).not.toMatch(/Index Cond: \(\(owner_did = \S+\) AND \(model = /)
    expect(armTargets).not.toContain("Seq Scan")
  })

  it("on SQLite: the primary key, and the ingress index by document", async () => {
    const { armTargets, identity, t } = await plans(freshSqlitePath())
    const primary = `sqlite_autoindex_${t.projectionWatch}_1`
    expect(identity).toContain(`USING INDEX ${primary} (owner_did=? AND connector_name=? AND model=? AND account_key=? AND source_id=?)`)
    expect(armTargets).toContain(`USING INDEX ${t.index("uq_connector_watch_ingress")} (document_id=?)`)
    expect(armTargets).toContain(`USING INDEX ${primary} (owner_did=? AND connector_name=? AND model=? AND account_key=? AND source_id=?)`)
  })
})
