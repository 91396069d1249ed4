import {
  type CollectParams,
  collectableOperations,
  type ConnectorOperation,
  type Millis,
  type OperationState
} from "@connector-store/core"
import { Effect } from "effect"
import type { RawRow } from "./columns.js"
import type { SqlClient } from "@effect/sql/SqlClient"
import { byteOrdered } from "./collation.js"

// The candidates of a retention pass: every condition of the keep rule, oldest
// `updated_at` first, at most `limit`. Its cost grows with the batch, not the
// table (docs/performance.md): candidates come oldest first from
// idx_connector_operation_updated and the scan stops at `limit`; each "newer
// row in my partition" probe is a seek in idx_connector_operation_document_caller
// / _owner from the candidate's created_at on.
const candidates = (sql: SqlClient, tableName: string, params: CollectParams, now: Millis, columns: string) => {
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
  return sql`SELECT ${sql.literal(columns)} FROM ${table} o
      WHERE ${unindexed("o.state")} IN ('committed', 'dead')
        AND o.updated_at < ${cutoff(params)}
        AND (o.lease_token IS NULL OR o.lease_expires_at < ${now})
        AND (${unindexed("o.document_id")} IS NULL OR (
          (o.state <> 'committed' OR (${newerExists("caller_did", ["committed"])} AND ${newerExists("owner_did", ["committed"])}))
          AND ${newerExists("caller_did", ["committed", "dead"])}
          AND ${newerExists("owner_did", ["committed", "dead"])}
        ))
      ORDER BY o.updated_at, ${ordered("o.caller_did")}, ${ordered("o.operation_id")}
      LIMIT ${params.limit}`
}

// A whole-number cutoff within bigint range selects the same integer
// updated_at values as `before` itself; Postgres refuses a fractional or
// out-of-range bigint parameter.
const cutoff = (params: CollectParams) => Math.min(Math.max(Math.ceil(params.before), -(2 ** 53)), 2 ** 53)

/**
 * The retention delete (SPEC "collectFinishedOperations") as one statement,
 * SQLite's pass: the database has one writer, so the keep rule and the delete
 * see the same rows and two cleanups never together delete a partition's
 * newest row. Postgres re-evaluates only this outer WHERE on a row that
 * changed while the statement waited, not the rule in the subquery; it uses
 * `collectFinishedLocked`. Exported for the plan tests.
 */
export const collectFinishedStatement = (sql: SqlClient, tableName: string, params: CollectParams, now: Millis) =>
  sql<{ caller_did: unknown }>`DELETE FROM ${sql(tableName)}
    WHERE (caller_did, operation_id) IN (${candidates(sql, tableName, params, now, "o.caller_did, o.operation_id")})
    AND updated_at < ${cutoff(params)}
    AND (lease_token IS NULL OR lease_expires_at < ${now})
    RETURNING caller_did`

/**
 * Postgres's retention pass, in the caller's transaction (READ COMMITTED):
 * the same candidates as `collectFinishedStatement`, then every row of their
 * documents (and each document-less candidate) locked `FOR UPDATE` in key
 * order, then the whole keep rule decided again over the locked rows as they
 * now are, and only the candidates that still qualify deleted. A row revived,
 * leased or touched while the pass waited, or one whose newer partner was
 * revived, is kept; a row written to a partition after the lock only keeps
 * more. Two passes lock in the same order, so neither deadlocks the other and
 * the second decides on what the first left.
 */
export const collectFinishedLocked = (
  sql: SqlClient,
  tableName: string,
  params: CollectParams,
  now: Millis,
  decode: (row: RawRow) => ConnectorOperation
) =>
  Effect.gen(function*() {
    const table = sql(tableName)
    const chosen = yield* sql<{ caller_did: string; operation_id: string; document_id: string | null }>`${
      candidates(sql, tableName, params, now, "o.caller_did, o.operation_id, o.document_id")
    }`
    if (chosen.length === 0) return 0
    const documents = Array.from(new Set(chosen.flatMap((row) => row.document_id === null ? [] : [row.document_id])))
    const loose = chosen.filter((row) => row.document_id === null)
    const locked: Array<ConnectorOperation> = []
    if (documents.length > 0) {
      const rows = yield* sql<RawRow>`SELECT * FROM ${table} WHERE document_id IN ${sql.in(documents)}
        ORDER BY caller_did, operation_id FOR UPDATE`
      locked.push(...rows.map(decode))
    }
    if (loose.length > 0) {
      const rows = yield* sql<RawRow>`SELECT * FROM ${table}
        WHERE ${sql.or(loose.map((row) => sql`(caller_did = ${row.caller_did} AND operation_id = ${row.operation_id})`))}
        ORDER BY caller_did, operation_id FOR UPDATE`
      locked.push(...rows.map(decode))
    }
    // Rows outside the locked documents (a loose candidate that gained a
    // document since) are decided without their partners, so they stay.
    const wanted = new Set(chosen.map((row) => operationKey(row.caller_did, row.operation_id)))
    const still = collectableOperations(locked, { before: params.before, limit: locked.length }, now)
      .filter((key) => wanted.has(operationKey(key.callerDID, key.operationID)))
    if (still.length === 0) return 0
    const deleted = yield* sql<{ caller_did: unknown }>`DELETE FROM ${table}
      WHERE ${sql.or(still.map((key) => sql`(caller_did = ${key.callerDID} AND operation_id = ${key.operationID})`))}
      RETURNING caller_did`
    return deleted.length
  })

const operationKey = (callerDID: string, operationID: string) => JSON.stringify([callerDID, operationID])
