import * as Sql from "@connector-store/sql-adapter"
import { makeSqlOperationRepository, makeSqlWatchRepository, migrate, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The due sweep's statements, as the repositories issue them, explained: the
// operations and schedule branches read index ranges of the due rows, the
// audit page reads the primary key in order from its cursor (docs/performance.md).

const withClient = <A>(url: string, use: (sql: SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
    Effect.provide(Effect.flatMap(SqlClient, use), context))))

const AFTER = { ownerDID: "o", connectorName: "c", model: "m", accountKey: "a", sourceID: "s5" }

/** The plan of every statement the sweep's repository reads issue, by name. */
const sweepPlans = (url: string) => {
  const t = tableNames(freshPrefix())
  return withClient(url, (sql) =>
    Effect.gen(function*() {
      yield* migrate(sql, t)
      yield* sql.onDialectOrElse({
        pg: () =>
          Effect.zipRight(
            sql.unsafe(`INSERT INTO ${t.projectionWatch} (owner_did, connector_name, model, account_key, source_id, document_id,
                verification_status, next_attempt_at, version, created_at, updated_at)
              SELECT 'o', 'c', 'm', 'a', 's' || n, 'd' || n, 'verified', NULL, 1, 1, 1 FROM generate_series(1, 20000) n`),
            sql.unsafe(`ANALYZE ${t.projectionWatch}`)
          ),
        orElse: () => Effect.void
      })
      const captured: Array<readonly [string, ReadonlyArray<unknown>]> = []
      const capture: Statement.Statement.Transformer = (self) => Effect.sync(() => {
        captured.push(self.compile())
        return self
      })
      const operations = makeSqlOperationRepository(sql, t)
      const watches = makeSqlWatchRepository(sql, t)
      const statements: Record<string, Effect.Effect<unknown, unknown>> = {
        operations: operations.listDue(1_000),
        schedule: watches.listScheduleDue(1_000),
        audit: watches.listAuditPage(AFTER, 1_000)
      }
      const plans: Record<string, string> = {}
      for (const [name, run] of Object.entries(statements)) {
        captured.length = 0
        yield* Statement.withTransformer(run, capture)
        const [text, params] = captured[0]!
        plans[name] = yield* sql.onDialectOrElse({
          pg: () =>
            sql.withTransaction(Effect.zipRight(
              sql.unsafe("SET LOCAL enable_seqscan = off"),
              sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params as ReadonlyArray<never>)
            )).pipe(Effect.map((rows) => rows.map((row) => row["QUERY PLAN"]).join("\n"))),
          orElse: () =>
            sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params as ReadonlyArray<never>).pipe(
              Effect.map((rows) => rows.map((row) => row.detail).join("\n"))
            )
        })
      }
      return { plans, index: t.index, t }
    })
  )
}

describe("due sweep plans on SQLite", () => {
  it("due operations are two index ranges, the schedule one, the audit page the primary key in order without a sort", async () => {
    const { index, plans, t } = await sweepPlans(freshSqlitePath())
    const stateNext = index("idx_connector_operation_state_next")
    expect(plans["operations"]).toContain(`USING INDEX ${stateNext} (state=? AND next_attempt_at=?)`)
    expect(plans["operations"]).toContain(`USING INDEX ${stateNext} (state=? AND next_attempt_at<?)`)
    expect(plans["schedule"]).toContain(
      `USING INDEX ${index("idx_connector_watch_status_next")} (verification_status=? AND next_attempt_at>? AND next_attempt_at<?)`
    )
    expect(plans["audit"]).toContain(
      `USING INDEX sqlite_autoindex_${t.projectionWatch}_1 ((owner_did,connector_name,model,account_key,source_id)>(?,?,?,?,?))`
    )
    expect(plans["audit"]).not.toContain("TEMP B-TREE")
  })
})

describe.skipIf(!pgAvailable)("due sweep plans on Postgres", () => {
  it("due operations and the schedule are index ranges, the audit page the primary key from its cursor", async () => {
    const { index, plans, t } = await sweepPlans(await pgDatabaseForFile())
    expect(plans["operations"]).toContain(`Index Scan using ${index("idx_connector_operation_state_next")}`)
    expect(plans["schedule"]).toContain(`Index Scan using ${index("idx_connector_watch_status_next")}`)
    expect(plans["audit"]).toMatch(new RegExp(`Index Scan using ${t.projectionWatch}_pkey`))
    expect(plans["audit"]).toContain("Index Cond: (ROW(owner_did, connector_name, model, account_key, source_id) > ROW(")
    for (const plan of Object.values(plans)) expect(plan).not.toContain("Seq Scan")
  })
})
