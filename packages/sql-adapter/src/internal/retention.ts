import type { CollectParams, Millis, OperationState } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { byteOrdered } from "./collation.js"

/**
 * The retention delete (SPEC "collectFinishedOperations") as one statement,
 * so the keep rule and the delete see the same rows and two concurrent
 * cleanups never together delete a partition's newest row. The outer WHERE
 * re-checks the lease and age on the row being deleted: on Postgres a lease
 * taken between the candidate read and the delete is seen there (the row is
 * re-evaluated at its newest version) and kept.
 *
 * Its cost grows with the batch, not the table (docs/performance.md):
 * candidates come oldest first from idx_connector_operation_updated and the
 * scan stops at `limit`; each "newer row in my partition" probe is a seek in
 * idx_connector_operation_document_caller / _owner from the candidate's
 * created_at on. Exported for the plan tests.
 */
export const collectFinishedStatement = (sql: SqlClient, tableName: string, params: CollectParams, now: Millis) => {
  const table = sql(tableName)
  // The newest-row order is byte order on every adapter, as in the pure rule.
  const ordered = (column: string) => byteOrdered(sql, column)
  // SQLite's planner prefers any equality on state (then sorts every finished
  // row) or a multi-index OR on document_id over the ordered scan the LIMIT
  // wants: `+` takes those columns out of its index choice. Postgres costs
  // the LIMIT itself.
  const unindexed = (column: string) =>
    sql.onDialectOrElse({ pg: () => sql.literal(column), orElse: () => sql.literal(`+${column}`) })
  // Newer by (created_at, caller_did, operation_id); the created_at lower
  // bound is what lets the probe seek instead of reading the whole partition.
  const newerExists = (party: "caller_did" | "owner_did", states: ReadonlyArray<OperationState>) =>
    sql`EXISTS (SELECT 1 FROM ${table} n
      WHERE n.document_id = o.document_id AND n.${sql(party)} = o.${sql(party)} AND n.state IN ${sql.in(states)}
        AND n.created_at >= o.created_at
        AND (n.created_at > o.created_at
          OR ${ordered("n.caller_did")} > ${ordered("o.caller_did")}
          OR (n.caller_did = o.caller_did AND ${ordered("n.operation_id")} > ${ordered("o.operation_id")})))`
  // A whole-number cutoff within bigint range selects the same integer
  // updated_at values as `before` itself; Postgres refuses a fractional or
  // out-of-range bigint parameter.
  const before = Math.min(Math.max(Math.ceil(params.before), -(2 ** 53)), 2 ** 53)
  return sql<{ caller_did: unknown }>`DELETE FROM ${table}
    WHERE (caller_did, operation_id) IN (
      SELECT o.caller_did, o.operation_id FROM ${table} o
      WHERE ${unindexed("o.state")} IN ('committed', 'dead')
        AND o.updated_at < ${before}
        AND (o.lease_token IS NULL OR o.lease_expires_at < ${now})
        AND (${unindexed("o.document_id")} IS NULL OR (
          (o.state <> 'committed' OR (${newerExists("caller_did", ["committed"])} AND ${newerExists("owner_did", ["committed"])}))
          AND ${newerExists("caller_did", ["committed", "dead"])}
          AND ${newerExists("owner_did", ["committed", "dead"])}
        ))
      ORDER BY o.updated_at, ${ordered("o.caller_did")}, ${ordered("o.operation_id")}
      LIMIT ${params.limit}
    )
    AND updated_at < ${before}
    AND (lease_token IS NULL OR lease_expires_at < ${now})
    RETURNING caller_did`
}
