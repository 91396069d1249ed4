import {
  advanceFairPosition,
  type DueWatchPosition,
  type FairDueRead,
  type FairPosition,
  type Millis,
  OWNERS_VISITED_PER_ROW,
  type PersistenceError,
  type ProjectionWatch
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import { byteOrdered } from "./collation.js"
import type { RawRow } from "./columns.js"
import { rawText } from "./duePages.js"
import { type RowQuery, statementThen } from "./queries.js"
import type { TableNames } from "../Tables.js"
import type { RowSchema } from "./rows.js"

/** The owners a page read to the end, as the statement lists them (a JSON array; null when none). */
const doneOf = (value: unknown): ReadonlyArray<string> => {
  const list: unknown = typeof value === "string" ? JSON.parse(value) : value
  return Array.isArray(list) ? list.filter((owner): owner is string => typeof owner === "string") : []
}

/**
 * The batch claim's owner-fair page of watches (`fairPage` over
 * `fairWatchTable` is the reference), one statement on the owner index
 * (owner_did, next_attempt_at, identity, claimed_until) of pending watches:
 *
 * - scan: the distinct owners from after `at.from`, around to it, one index
 *   probe each (a loose index scan), each checked for a claimable watch by
 *   one more (its first due watch under no live claim); it stops at `limit`
 *   owners with one, or `OWNERS_VISITED_PER_ROW × limit` owners in all;
 * - each such owner gives its first `cap` = ceil(limit / owners found)
 *   claimable watches after its position (`at.owners`), an index range in
 *   the due order (on Postgres locked as read, passing over the rows others
 *   hold);
 * - the rows by their rank in their owner's, then the owner's place in the
 *   scan, `limit` kept; the scan's last owner, the page's cap and the owners
 *   read to the end ride on every row (and on one empty row when the page
 *   has none).
 *
 * The rows carry `schema`'s columns.
 */
export const fairWatchPage = (
  sql: SqlClient,
  tables: TableNames,
  schema: RowSchema<ProjectionWatch>,
  now: Millis,
  at: FairPosition<DueWatchPosition>,
  limit: number
) => {
  // SQLite is held to the owner index: with no statistics it would rather sort the pending watches of the
  // due index (which covers the owner probes too) than walk a range of the partial one.
  const table = sql.onDialectOrElse({
    pg: () => sql`${sql(tables.projectionWatch)}`,
    orElse: () => sql`${sql(tables.projectionWatch)} INDEXED BY ${sql(tables.index("idx_connector_watch_owner_due"))}`
  })
  const pending = sql`verification_status = 'pending_verification'`
  const ownerKey = byteOrdered(sql, "owner_did")
  // An owner's watches as the owner index holds them.
  const dueOrder = sql`next_attempt_at, ${byteOrdered(sql, "connector_name")}, ${byteOrdered(sql, "model")}, ${
    byteOrdered(sql, "account_key")
  }, ${byteOrdered(sql, "source_id")}`
  // On Postgres the batch's time and rotation start reach the planner as subqueries, not values (as the
  // operations' page: binding the values probed the indexes' ends).
  const opaque = (value: string | number, type: "text" | "bigint") =>
    sql.onDialectOrElse({ pg: () => sql`(SELECT ${value}::${sql.literal(type)})`, orElse: () => sql`${value}` })
  const from = opaque(at.from, "text")
  const time = opaque(now, "bigint")
  const claimable = sql`next_attempt_at <= ${time} AND (claimed_until IS NULL OR claimed_until <= ${time})`
  const nextOwner = (after: Statement.Fragment, upTo: Statement.Fragment | undefined) =>
    sql`(SELECT owner_did FROM ${table} WHERE ${pending} AND ${ownerKey} > ${after}
      ${upTo === undefined ? sql`` : sql`AND ${ownerKey} <= ${upTo}`} ORDER BY ${ownerKey} LIMIT 1)`
  const firstOwner = sql`(SELECT owner_did FROM ${table} WHERE ${pending} AND ${ownerKey} <= ${from} ORDER BY ${ownerKey} LIMIT 1)`
  // The owner after `prev` in the rotation that starts after `from`.
  const stepOwner = (prev: Statement.Fragment) =>
    sql`CASE WHEN ${prev} > ${from} THEN COALESCE(${nextOwner(prev, undefined)}, ${firstOwner}) ELSE ${nextOwner(prev, from)} END`
  const jsonValues = (array: string) =>
    sql.onDialectOrElse({ pg: () => sql`jsonb_array_elements_text(${array}::jsonb)`, orElse: () => sql`json_each(${array})` })
  // Whether an owner has a claimable watch: one ordered probe of its due range, past the watches under a
  // live claim (their end is in the index). An owner an earlier page read to the end has none.
  const ownerDue = (owner: Statement.Fragment) =>
    sql`CASE WHEN ${owner} IN (SELECT value FROM ${jsonValues(JSON.stringify(at.done))}) THEN 0 ELSE COALESCE((SELECT 1
      FROM ${table} WHERE ${pending} AND ${ownerKey} = ${owner} AND ${claimable} ORDER BY ${dueOrder} LIMIT 1), 0) END`
  const visits = OWNERS_VISITED_PER_ROW * limit
  const first = sql`COALESCE(${nextOwner(from, undefined)}, ${firstOwner})`
  const scan = sql.onDialectOrElse({
    pg: () =>
      sql`scan (owner_did, n, due, d) AS (
        SELECT f.owner_did, 1, f.due, f.due FROM (SELECT ${first} AS owner_did) AS s
          CROSS JOIN LATERAL (SELECT s.owner_did, ${ownerDue(sql`s.owner_did`)} AS due) AS f
          WHERE s.owner_did IS NOT NULL
        UNION ALL
        SELECT f.owner_did, scan.n + 1, f.due, scan.d + f.due FROM scan
          CROSS JOIN LATERAL (SELECT ${stepOwner(sql`scan.owner_did COLLATE "C"`)} AS owner_did) AS s
          CROSS JOIN LATERAL (SELECT s.owner_did, ${ownerDue(sql`s.owner_did`)} AS due) AS f
          WHERE scan.n < ${visits} AND scan.d < ${limit} AND s.owner_did IS NOT NULL)`,
    // SQLite has no LATERAL: the step is written out where it is used.
    orElse: () => {
      const step = stepOwner(sql`scan.owner_did`)
      return sql`scan (owner_did, n, due, d) AS (
        SELECT first_owner, 1, ${ownerDue(sql`first_owner`)}, ${ownerDue(sql`first_owner`)}
          FROM (SELECT ${first} AS first_owner) WHERE first_owner IS NOT NULL
        UNION ALL
        SELECT ${step}, n + 1, ${ownerDue(step)}, d + ${ownerDue(step)} FROM scan
          WHERE n < ${visits} AND d < ${limit} AND ${step} IS NOT NULL)`
    }
  })
  // (The bound parameter cast: better-sqlite3 binds a number as a real, and a fractional LIMIT fails.)
  const sizing = sql`sizing AS (SELECT CASE WHEN count(*) = 0 THEN ${limit} ELSE (CAST(${limit} AS INTEGER) + count(*) - 1) / count(*) END
    AS cap FROM scan WHERE due = 1)`
  const cap = sql`(SELECT cap FROM sizing)`
  const positions = JSON.stringify(at.owners.map(([owner, p]) => [owner, p.nextAttemptAt, p.connectorName, p.model, p.accountKey, p.sourceID]))
  const positionsOf = sql.onDialectOrElse({
    pg: () =>
      sql`SELECT e->>0 AS owner_did, (e->>1)::bigint AS next_at, e->>2 AS connector_name, e->>3 AS model, e->>4 AS account_key,
          e->>5 AS source_id FROM jsonb_array_elements(${positions}::jsonb) AS e`,
    orElse: () =>
      sql`SELECT json_extract(value, '$[0]') AS owner_did, json_extract(value, '$[1]') AS next_at,
          json_extract(value, '$[2]') AS connector_name, json_extract(value, '$[3]') AS model,
          json_extract(value, '$[4]') AS account_key, json_extract(value, '$[5]') AS source_id FROM json_each(${positions})`
  })
  // One owner's claimable watches after its position, `cap` of them, in the index's order.
  const ownerRows = (columns: Statement.Fragment) =>
    sql`SELECT ${columns} FROM ${table} WHERE ${pending} AND ${ownerKey} = o.owner_did AND ${claimable}
      AND (p.owner_did IS NULL OR (${dueOrder}) > (p.next_at, p.connector_name, p.model, p.account_key, p.source_id))
      ORDER BY ${dueOrder} LIMIT ${cap} ${sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE SKIP LOCKED"), orElse: () => sql`` })}`
  const read = sql.literal(schema.list)
  const rows = sql.onDialectOrElse({
    pg: () =>
      sql`SELECT x.*, o.n AS fair_owner FROM owners AS o LEFT JOIN positions AS p ON p.owner_did = o.owner_did
        CROSS JOIN LATERAL (${ownerRows(read)}) AS x`,
    orElse: () =>
      // CROSS JOIN keeps the owners the outer loop (SQLite's planner may not reorder it): each owner's rows by rowid.
      sql`SELECT ${sql.literal(schema.listOf("x"))}, o.n AS fair_owner
        FROM owners AS o LEFT JOIN positions AS p ON p.owner_did = o.owner_did
        CROSS JOIN ${sql(tables.projectionWatch)} AS x WHERE x.rowid IN (SELECT rowid FROM (${ownerRows(sql`rowid, ${dueOrder}`)}))`
  })
  return sql<RawRow>`WITH RECURSIVE ${scan},
      owners AS (SELECT owner_did, n FROM scan WHERE due = 1),
      ${sizing},
      positions AS (${positionsOf}),
      taken AS (SELECT r.*, row_number() OVER (PARTITION BY r.fair_owner ORDER BY ${dueOrder}) AS fair_rank FROM (${rows}) AS r)
    SELECT page.*, ${cap} AS fair_cap, e.fair_scan_end, e.fair_done
    FROM (SELECT (SELECT owner_did FROM scan ORDER BY n DESC LIMIT 1) AS fair_scan_end,
      (SELECT ${sql.onDialectOrElse({ pg: () => sql`json_agg(o.owner_did)::text`, orElse: () => sql`json_group_array(o.owner_did)` })} FROM owners AS o
        WHERE (SELECT count(*) FROM taken WHERE taken.fair_owner = o.n) < ${cap}) AS fair_done) AS e
    LEFT JOIN (SELECT * FROM taken ORDER BY fair_rank, fair_owner LIMIT ${limit}) AS page ON 1 = 1
    ORDER BY page.fair_rank, page.fair_owner`
}

/**
 * A fair page statement (`fairWatchPage`, or the operations' due page) run
 * and read as the ports' `FairDueRead`: its rows decoded by `healthy` (a
 * row that does not decode is skipped and reported), the position of each
 * owner's last row read.
 */
export const readFairPage = <A, P>(
  operation: string,
  healthy: (operation: string, query: RowQuery) => Effect.Effect<ReadonlyArray<A>, PersistenceError>,
  query: RowQuery,
  at: FairPosition<P>,
  limit: number,
  positionOf: (row: RawRow) => P | undefined
): Effect.Effect<FairDueRead<A, P>, PersistenceError> =>
  Effect.flatMap(statementThen(operation, query, (raw: ReadonlyArray<RawRow>) => raw), (raw) => {
    const read = raw.filter((row) => row["fair_owner"] !== null && row["fair_owner"] !== undefined)
    return Effect.map(healthy(operation, Effect.succeed(read)), (rows) => {
      const cap = Number(raw[0]?.["fair_cap"])
      const scanEnd = raw[0]?.["fair_scan_end"]
      return {
        rows,
        read: read.length,
        last: advanceFairPosition(at, read.map((row) => {
          const position = positionOf(row)
          const owner = rawText(row["owner_did"])
          return position === undefined || owner === undefined ? undefined : [owner, position] as const
        }), doneOf(raw[0]?.["fair_done"])),
        scanned: typeof scanEnd === "string" ? scanEnd : undefined,
        more: read.length === limit || read.some((row) => Number(row["fair_rank"]) === cap)
      }
    })
  })
