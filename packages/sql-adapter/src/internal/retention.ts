import type { CollectParams, Millis, OperationState } from "@connector-store/core"
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
 * Postgres's retention pass (READ COMMITTED) as one statement: the same
 * candidates as `collectFinishedStatement`; their witnesses, the newest
 * committed and the newest dead row of each candidate's caller and of its
 * owner on its document (a candidate is superseded exactly when these are
 * newer than it); candidates and witnesses locked `FOR UPDATE` in key order;
 * then the whole keep rule decided again over the locked rows, and only the
 * candidates that still qualify deleted. A row Postgres locks after it
 * changed comes back as it now is (or not at all, once deleted), so the second
 * decision sees every revive, lease, settle or touch of a candidate or a
 * witness that committed while the pass waited. Rows outside the locked set
 * (written since the statement began, or older than a witness) only ever add
 * newer rows, so not seeing them only keeps more. Two passes lock in the same
 * order, so neither deadlocks the other and the second decides on what the
 * first left. Rows attempted or reconcile_only when the statement begins
 * (runners' rows) are not locked. The locks are taken one key at a time, in
 * key order, each a primary-key seek: a join over the keys plans as a hash
 * join over the whole table.
 *
 * The second decision is the keep rule over the locked rows, as window
 * counts: for each row, how many finished (and how many committed) rows of
 * its caller and of its owner on its document come after it in newest-first
 * order. Exported for the plan tests.
 */
export const collectFinishedLocked = (sql: SqlClient, tableName: string, params: CollectParams, now: Millis) => {
  const table = sql(tableName)
  const ordered = (column: string) => byteOrdered(sql, column)
  const rule = "t.caller_did, t.operation_id, t.owner_did, t.document_id, t.state, t.updated_at, t.created_at, t.lease_token, t.lease_expires_at"
  // How many rows of `party` on the same document in `states` are newer
  // (by created_at, caller_did, operation_id, byte order) than this one.
  const newer = (party: "caller_did" | "owner_did", states: ReadonlyArray<OperationState>) =>
    sql`count(*) FILTER (WHERE l.state IN ${sql.in(states)}) OVER (
      PARTITION BY l.document_id, l.${sql(party)}
      ORDER BY l.created_at DESC, ${ordered("l.caller_did")} DESC, ${ordered("l.operation_id")} DESC
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)`
  // The newest row of `party`'s partition in one state: a backward seek in
  // idx_connector_operation_document_caller / _owner.
  const newest = (party: "caller_did" | "owner_did") =>
    sql`(SELECT n.caller_did, n.operation_id FROM ${table} n
      WHERE n.document_id = p.document_id AND n.${sql(party)} = p.${sql(party)} AND n.state = s.state
      ORDER BY n.created_at DESC, ${ordered("n.caller_did")} DESC, ${ordered("n.operation_id")} DESC
      LIMIT 1)`
  return sql<{ caller_did: unknown }>`WITH chosen AS MATERIALIZED (
      ${candidates(sql, tableName, params, now, "o.caller_did, o.operation_id, o.owner_did, o.document_id")}
    ), witnesses AS MATERIALIZED (
      SELECT w.caller_did, w.operation_id
      FROM (SELECT DISTINCT c.document_id, c.caller_did, c.owner_did FROM chosen c WHERE c.document_id IS NOT NULL) p
      CROSS JOIN (VALUES ('committed'), ('dead')) AS s (state)
      CROSS JOIN LATERAL (${newest("caller_did")} UNION ALL ${newest("owner_did")}) w
    ), locked AS MATERIALIZED (
      SELECT l.* FROM (
        SELECT c.caller_did, c.operation_id FROM chosen c UNION SELECT w.caller_did, w.operation_id FROM witnesses w
        ORDER BY caller_did, operation_id
      ) k
      CROSS JOIN LATERAL (
        SELECT ${sql.literal(rule)} FROM ${table} t
        WHERE t.caller_did = k.caller_did AND t.operation_id = k.operation_id
        FOR UPDATE OF t
      ) l
    ), decided AS (
      SELECT l.caller_did, l.operation_id, l.document_id, l.state, l.updated_at, l.lease_token, l.lease_expires_at,
        (l.caller_did, l.operation_id) IN (SELECT c.caller_did, c.operation_id FROM chosen c) AS chosen,
        ${newer("caller_did", ["committed"])} AS caller_committed,
        ${newer("owner_did", ["committed"])} AS owner_committed,
        ${newer("caller_did", ["committed", "dead"])} AS caller_finished,
        ${newer("owner_did", ["committed", "dead"])} AS owner_finished
      FROM locked l
    )
    DELETE FROM ${table} d USING decided r
    WHERE d.caller_did = r.caller_did AND d.operation_id = r.operation_id
      AND r.chosen
      AND r.state IN ('committed', 'dead')
      AND r.updated_at < ${cutoff(params)}
      AND (r.lease_token IS NULL OR r.lease_expires_at < ${now})
      AND (r.document_id IS NULL OR (
        (r.state <> 'committed' OR (r.caller_committed > 0 AND r.owner_committed > 0))
        AND r.caller_finished > 0
        AND r.owner_finished > 0
      ))
    RETURNING d.caller_did`
}
