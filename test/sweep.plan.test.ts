import * as Sql from "@connector-store/sql-adapter"
import { makeSqlOperationRepository, makeSqlWatchRepository, migrate, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The due sweep's statements, as the repositories issue them, explained: the
// operations and schedule branches read index ranges of the due rows, the
// audit page reads the primary key in order from its cursor, and each page of
// listDueWork reads `limit` rows of an index range in the due order from its
// position, with no sort of the range (docs/performance.md).

const withClient = <A>(url: string, use: (sql: SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
    Effect.provide(Effect.flatMap(SqlClient, use), context))))

const AFTER = { ownerDID: "o", connectorName: "c", model: "m", accountKey: "a", sourceID: "s5" }
const DUE_AFTER = { ...AFTER, nextAttemptAt: 500 }
const OPERATION_AFTER = { nextAttemptAt: 500, callerDID: "c", operationID: "o5" }

/** The plan of every statement the sweep's repository reads issue, by name. */
const sweepPlans = (url: string) => {
  const t = tableNames(freshPrefix())
  return withClient(url, (sql) =>
    Effect.gen(function*() {
      yield* migrate(sql, t)
      yield* sql.onDialectOrElse({
        pg: () =>
          Effect.all([
            sql.unsafe(`INSERT INTO ${t.projectionWatch} (owner_did, connector_name, model, account_key, source_id, document_id,
                verification_status, next_attempt_at, version, created_at, updated_at)
              SELECT 'o', 'c', 'm', 'a', 's' || n, 'd' || n,
                (ARRAY['verified', 'pending_verification', 'repair_failed'])[1 + n % 3], CASE WHEN n % 3 = 0 THEN NULL ELSE n % 2000 END,
                1, 1, 1 FROM generate_series(1, 20000) n`),
            sql.unsafe(`INSERT INTO ${t.operation} (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key,
                target, deterministic_event_id, payload_hash, reissue_intent, state, next_attempt_at, version, created_at, updated_at)
              SELECT 'c', 'o' || n, 'node-' || n, 'o', 'c', 'm', 'update', 'a', 't', 'e' || n, 'h' || n, 'null',
                CASE WHEN n % 2 = 0 THEN 'committed' ELSE 'attempted' END, CASE WHEN n % 5 = 0 THEN NULL ELSE n % 2000 END,
                1, 1, 1 FROM generate_series(1, 20000) n`),
            sql.unsafe(`ANALYZE ${t.projectionWatch}`),
            sql.unsafe(`ANALYZE ${t.operation}`)
          ], { discard: true }),
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
        audit: watches.listAuditPage(AFTER, 1_000),
        operationsFirstPage: operations.listDuePage(1_000, undefined, 100),
        operationsPage: operations.listDuePage(1_000, OPERATION_AFTER, 100),
        unscheduledPage: operations.listDuePage(1_000, { ...OPERATION_AFTER, nextAttemptAt: null }, 100),
        schedulePage: watches.listScheduleDuePage(1_000, DUE_AFTER, 100),
        // The batch claim's owner-fair page (locked on Postgres), from an owner's position.
        fairPage: operations.lockDuePage(1_000, { from: "", owners: [["o", OPERATION_AFTER]], done: [] }, 100),
        // The same page passing over a scope: each owner's rows read scope by scope.
        fairScopedPage: operations.lockDuePage(1_000, { from: "", owners: [["o", OPERATION_AFTER]], done: [] }, 100, [
          { connectorName: "c", accountKey: "paused" }
        ]),
        // The watch batch claim's owner-fair page, likewise.
        fairWatchPage: watches.lockClaimablePage(1_000, { from: "", owners: [["o", DUE_AFTER]], done: [] }, 100)
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
    const stateNext = index("idx_connector_operation_state_next_key")
    expect(plans["operations"]).toContain(`USING INDEX ${stateNext} (state=? AND next_attempt_at=?)`)
    expect(plans["operations"]).toContain(`USING INDEX ${stateNext} (state=? AND next_attempt_at<?)`)
    expect(plans["schedule"]).toContain(
      `USING INDEX ${index("idx_connector_watch_status_next_identity")} (verification_status=? AND next_attempt_at>? AND next_attempt_at<?)`
    )
    expect(plans["audit"]).toContain(
      `USING INDEX sqlite_autoindex_${t.projectionWatch}_1 ((owner_did,connector_name,model,account_key,source_id)>(?,?,?,?,?))`
    )
    expect(plans["audit"]).not.toContain("TEMP B-TREE")
  })

  it("a due page is an index range in the due order from its position: no sort of the range, only of the page's branches", async () => {
    const { index, plans } = await sweepPlans(freshSqlitePath())
    const operations = index("idx_connector_operation_state_next_key")
    const watches = index("idx_connector_watch_status_next_identity")
    expect(plans["operationsPage"]).toContain(
      `USING INDEX ${operations} (state=? AND (next_attempt_at,caller_did,operation_id)>(?,?,?) AND next_attempt_at<?)`
    )
    expect(plans["operationsPage"]).not.toContain("TEMP B-TREE")
    expect(plans["unscheduledPage"]).toContain(`USING INDEX ${operations} (state=? AND next_attempt_at=? AND (caller_did,operation_id)>(?,?))`)
    expect(plans["unscheduledPage"]).toContain(`USING INDEX ${operations} (state=? AND next_attempt_at<?)`)
    expect(plans["operationsFirstPage"]).toContain(`USING INDEX ${operations} (state=? AND next_attempt_at=?)`)
    expect(plans["schedulePage"]).toContain(
      `USING INDEX ${watches} (verification_status=? AND (next_attempt_at,owner_did,connector_name,model,account_key,source_id)>(?,?,?,?,?,?) AND next_attempt_at<?)`
    )
    // Each branch is a co-routine that stops after `limit` rows of its range; only the merge of at most
    // `limit` rows a branch is sorted, never the range itself.
    for (const name of ["operationsFirstPage", "unscheduledPage", "schedulePage"]) {
      const lines = plans[name]!.split("\n")
      lines.forEach((line, i) => {
        if (line.startsWith("SEARCH")) expect(lines[i + 1], `${name}: ${line}`).toMatch(/^SCAN /)
      })
    }
  })
})

describe("the batch claim's owner-fair page", () => {
  it("on SQLite reads each owner's rows from the owner index, the owners the outer loop, never a scan of the table", async () => {
    const { index, plans, t } = await sweepPlans(freshSqlitePath())
    const ownerDue = index("idx_connector_operation_owner_due")
    expect(plans["fairPage"]).toContain(`USING COVERING INDEX ${ownerDue} (owner_did=? AND next_attempt_at<?)`)
    expect(plans["fairPage"]).toContain("SEARCH x USING INTEGER PRIMARY KEY (rowid=?)")
    expect(plans["fairPage"]).not.toMatch(new RegExp(`SCAN (x|${t.operation})\\b`))
    expect(plans["fairPage"]).not.toContain("idx_connector_operation_state_next_key")
    // Every index it reads is the owner index: any other holds the owner's settled rows too, and a table never
    // analyzed (SQLite keeps no statistics unless asked) was read through one, every row of the owner per batch.
    expect(new Set([...String(plans["fairPage"]).matchAll(/USING (?:COVERING )?INDEX (\S+)/g)].map((m) => m[1]))).toEqual(new Set([ownerDue]))
  })

  it.skipIf(!pgAvailable)("on Postgres reads the owner index only: the due index would read the whole backlog per owner", async () => {
    const { index, plans } = await sweepPlans(await pgDatabaseForFile())
    expect(plans["fairPage"]).toContain(index("idx_connector_operation_owner_due"))
    expect(plans["fairPage"]).not.toContain(index("idx_connector_operation_state_next_key"))
    expect(plans["fairPage"]).not.toContain("Seq Scan")
  })

  // With a scope passed over, an owner's rows are read scope by scope: the owner index would read past every
  // due row of the passed-over scope.
  it("passing over a scope, on SQLite reads each taken scope's rows as ranges of the scope index", async () => {
    const { index, plans, t } = await sweepPlans(freshSqlitePath())
    const scopeDue = index("idx_connector_operation_owner_scope_due")
    expect(plans["fairScopedPage"]).toContain(
      `USING COVERING INDEX ${scopeDue} (owner_did=? AND connector_name=? AND account_key=? AND next_attempt_at<?)`
    )
    expect(plans["fairScopedPage"]).toContain(`USING COVERING INDEX ${scopeDue} (owner_did=? AND connector_name=? AND account_key>?)`)
    expect(plans["fairScopedPage"]).toContain("SEARCH x USING INTEGER PRIMARY KEY (rowid=?)")
    expect(plans["fairScopedPage"]).not.toMatch(new RegExp(`SCAN (x|${t.operation})\\b`))
    const read = new Set([...String(plans["fairScopedPage"]).matchAll(/USING (?:COVERING )?INDEX (\S+)/g)].map((m) => m[1]))
    expect(read).toEqual(new Set([index("idx_connector_operation_owner_due"), scopeDue]))
  })

  it.skipIf(!pgAvailable)("passing over a scope, on Postgres reads each taken scope's rows as ranges of the scope index", async () => {
    const { index, plans } = await sweepPlans(await pgDatabaseForFile())
    const scopeDue = index("idx_connector_operation_owner_scope_due")
    expect(plans["fairScopedPage"]).toMatch(new RegExp(
      `Index Scan using ${scopeDue} .*\\n\\s*Index Cond: \\(\\(\\(owner_did\\)::text = \\w+\\.owner_did\\) AND \\(\\(connector_name\\)::text = \\w+\\.c\\) AND \\(\\(account_key\\)::text = \\w+\\.a\\) AND \\(next_attempt_at <= `
    ))
    expect(plans["fairScopedPage"]).not.toContain(index("idx_connector_operation_state_next_key"))
    expect(plans["fairScopedPage"]).not.toContain("Seq Scan")
  })
})

describe("the watch batch claim's owner-fair page", () => {
  it("on SQLite reads each owner's watches from the owner index, the owners the outer loop, never a scan of the table", async () => {
    const { index, plans, t } = await sweepPlans(freshSqlitePath())
    expect(plans["fairWatchPage"]).toContain(`USING COVERING INDEX ${index("idx_connector_watch_owner_due")} (owner_did=? AND next_attempt_at<?)`)
    expect(plans["fairWatchPage"]).toContain("SEARCH x USING INTEGER PRIMARY KEY (rowid=?)")
    expect(plans["fairWatchPage"]).not.toMatch(new RegExp(`SCAN (x|${t.projectionWatch})\\b`))
    expect(plans["fairWatchPage"]).not.toContain("idx_connector_watch_status_next_identity")
  })

  it.skipIf(!pgAvailable)("on Postgres reads the owner index only: the due index would read the whole backlog per owner", async () => {
    const { index, plans } = await sweepPlans(await pgDatabaseForFile())
    expect(plans["fairWatchPage"]).toContain(index("idx_connector_watch_owner_due"))
    expect(plans["fairWatchPage"]).not.toContain(index("idx_connector_watch_status_next_identity"))
    expect(plans["fairWatchPage"]).not.toContain("Seq Scan")
  })
})

describe.skipIf(!pgAvailable)("due sweep plans on Postgres", () => {
  it("due operations and the schedule are index ranges, the audit page the primary key from its cursor", async () => {
    const { index, plans, t } = await sweepPlans(await pgDatabaseForFile())
    // The whole sweep reads every due row: an index range, walked or as a bitmap.
    expect(plans["operations"]).toMatch(new RegExp(`Index Scan (using|on) ${index("idx_connector_operation_state_next_key")} `))
    expect(plans["schedule"]).toMatch(new RegExp(`Index (Only )?Scan (using|on) ${index("idx_connector_watch_status_next_identity")} `))
    expect(plans["audit"]).toMatch(new RegExp(`Index Scan using ${t.projectionWatch}_pkey`))
    expect(plans["audit"]).toContain("Index Cond: (ROW(owner_did, connector_name, model, account_key, source_id) > ROW(")
    for (const plan of Object.values(plans)) expect(plan).not.toContain("Seq Scan")
  })

  it("a due page is a LIMIT right on an index scan from its position, per branch", async () => {
    const { index, plans } = await sweepPlans(await pgDatabaseForFile())
    const onIndex = (name: string) => new RegExp(`Limit .*\\n\\s*->\\s+Index (Only )?Scan using ${index(name)} `)
    expect(plans["operationsPage"]).toMatch(onIndex("idx_connector_operation_state_next_key"))
    expect(plans["operationsPage"]).toContain("ROW(next_attempt_at, (caller_did)::text, (operation_id)::text) > ROW(")
    expect(plans["operationsPage"]).not.toContain("Sort")
    for (const name of ["operationsFirstPage", "unscheduledPage"]) {
      expect(plans[name]!.match(new RegExp(onIndex("idx_connector_operation_state_next_key").source, "g"))).toHaveLength(2)
    }
    expect(plans["unscheduledPage"]).toContain("ROW((caller_did)::text, (operation_id)::text) > ROW(")
    expect(plans["schedulePage"]!.match(new RegExp(onIndex("idx_connector_watch_status_next_identity").source, "g"))).toHaveLength(2)
    expect(plans["schedulePage"]).toContain("ROW(next_attempt_at, (owner_did)::text, (connector_name)::text, (model)::text")
  })
})
