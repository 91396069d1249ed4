import {
  advanceFairPosition,
  type FairDueRead,
  type FairPosition,
  type Millis,
  OWNERS_VISITED_PER_ROW,
  type PersistenceError
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import { byteOrdered } from "./collation.js"
import type { RawRow } from "./columns.js"
import { rawText } from "./duePages.js"
import { type RowQuery, statementThen } from "./queries.js"
import type { RowSchema } from "./rows.js"

/** The terms `FairPageTable.due` is written in: the owner index's order, and a row's place against its owner's position (`p`). */
export interface FairPageTerms {
  /** An owner's rows in the owner index's order. */
  readonly order: Statement.Fragment
  /** The row comes after the position: (next_attempt_at, keys) > the position's. */
  readonly after: Statement.Fragment
  /** The row's keys come after the position's: the order among rows of one next attempt. */
  readonly keysAfter: Statement.Fragment
}

/**
 * The provider scopes a page passes over, and the index it reads the others
 * from: (owner_did, connector, account, next_attempt_at, keys) over the
 * same rows as the owner index.
 */
export interface FairPageScopes {
  /** The scope index SQLite is held to (`INDEXED BY`). */
  readonly sqliteIndex: string
  /** The scope's columns, connector then account, as the scope index holds them. */
  readonly columns: readonly [connector: string, account: string]
  /** The scopes the page may take: a condition on the unqualified scope columns, after an `AND`. */
  readonly taken: Statement.Fragment
}

/**
 * A table as its owner-fair due page reads it: an owner index of
 * (owner_did, next_attempt_at, keys) over the rows `held` picks, what makes
 * an owner's row due and, when the page passes over some provider scopes,
 * those scopes.
 */
export interface FairPageTable<A, P> {
  /** The table's name. */
  readonly name: string
  /** The rows' columns, as the page returns them. */
  readonly schema: RowSchema<A>
  /** The owner index SQLite is held to (`INDEXED BY`): without statistics its planner reads another, every held row of an owner. */
  readonly sqliteIndex: string
  /** The rows of the owner index: the page reads no other. */
  readonly held: Statement.Fragment
  /** The index's text columns after next_attempt_at, compared in byte order. */
  readonly keys: ReadonlyArray<string>
  /** Rows with no next attempt are due, and come first. */
  readonly unscheduledFirst: boolean
  /** A position's next attempt, then its keys' values. */
  readonly positionValues: (position: P) => ReadonlyArray<unknown>
  /**
   * What makes a row due at `time`: `probe` tells whether an owner has any
   * (`value`, 1 or 0, of its first held row under `where`, in `order`), and
   * `ranges` are the index ranges an owner's due rows after its position
   * are read from, each a condition.
   */
  readonly due: (time: Statement.Fragment, terms: FairPageTerms) => {
    readonly probe: { readonly value: Statement.Fragment; readonly where: Statement.Fragment; readonly order: Statement.Fragment }
    readonly ranges: ReadonlyArray<Statement.Fragment>
  }
  /** Present when the page passes over some scopes: each owner's rows are then read scope by scope. */
  readonly scopes?: FairPageScopes | undefined
}

/**
 * The owner-fair page of `table`'s due rows (`fairPage` is the reference),
 * one statement on its owner index:
 *
 * - scan: the distinct owners from after `at.from`, around to it, one index
 *   probe each (a loose index scan), each checked for a due row by one
 *   more; it stops at `limit` owners with one, or
 *   `OWNERS_VISITED_PER_ROW × limit` owners in all, so it never walks the
 *   table's owners;
 * - each such owner gives its first `cap` = ceil(limit / owners found) due
 *   rows after its position (`at.owners`), from its index ranges in the
 *   index's order (on Postgres locked as read, passing over the rows others
 *   hold);
 * - with `table.scopes`, an owner's scopes are walked on the scope index a
 *   few probes each, and each scope it may take gives its first `cap` rows, of
 *   which the owner's first `cap` are kept: a passed-over scope is never
 *   read, whatever its backlog (an owner with s scopes reads up to s · cap
 *   rows, and on Postgres locks them until the batch commits);
 * - the rows by their rank in their owner's, then the owner's place in the
 *   scan, `limit` kept; the scan's last owner, the page's cap and the owners
 *   read to the end ride on every row (and on one empty row when the page
 *   has none).
 */
export const fairPageStatement = <A, P>(
  sql: SqlClient,
  table: FairPageTable<A, P>,
  now: Millis,
  at: FairPosition<P>,
  limit: number
) => {
  const plain = sql(table.name)
  const source = heldTo(sql, table.name, table.sqliteIndex)
  const keys = table.keys
  const ownerKey = byteOrdered(sql, "owner_did")
  const keyOrder = sql.csv(keys.map((key) => byteOrdered(sql, key)))
  const order = sql`next_attempt_at${sql.literal(table.unscheduledFirst ? " NULLS FIRST" : "")}, ${keyOrder}`
  // On Postgres the batch's time and rotation start reach the planner as subqueries, not values: with the
  // values, binding (planning) the statement probed the indexes' ends and took several times its execution.
  const opaque = (value: string | number, type: "text" | "bigint") =>
    sql.onDialectOrElse({ pg: () => sql`(SELECT ${value}::${sql.literal(type)})`, orElse: () => sql`${value}` })
  const from = opaque(at.from, "text")
  const time = opaque(now, "bigint")
  const positionKeys = sql.literal(keys.map((key) => `p.${key}`).join(", "))
  const due = table.due(time, {
    order,
    after: sql`(next_attempt_at, ${keyOrder}) > (p.next_at, ${positionKeys})`,
    keysAfter: sql`(${keyOrder}) > (${positionKeys})`
  })
  const nextOwner = (after: Statement.Fragment, upTo: Statement.Fragment | undefined) =>
    sql`(SELECT owner_did FROM ${source} WHERE ${table.held} AND ${ownerKey} > ${after}
      ${upTo === undefined ? sql`` : sql`AND ${ownerKey} <= ${upTo}`} ORDER BY ${ownerKey} LIMIT 1)`
  const firstOwner = sql`(SELECT owner_did FROM ${source} WHERE ${table.held} AND ${ownerKey} <= ${from} ORDER BY ${ownerKey} LIMIT 1)`
  // The owner after `prev` in the rotation that starts after `from`.
  const stepOwner = (prev: Statement.Fragment) =>
    sql`CASE WHEN ${prev} > ${from} THEN COALESCE(${nextOwner(prev, undefined)}, ${firstOwner}) ELSE ${nextOwner(prev, from)} END`
  // The text values of a JSON array, as a table of one column, `value`.
  const jsonValues = (array: string) =>
    sql.onDialectOrElse({ pg: () => sql`jsonb_array_elements_text(${array}::jsonb)`, orElse: () => sql`json_each(${array})` })
  // Whether an owner has a due row: one ordered probe of its rows (ORDER BY keeps the planner on the index).
  // An owner an earlier page read to the end has none.
  const ownerDue = (owner: Statement.Fragment) =>
    sql`CASE WHEN ${owner} IN (SELECT value FROM ${jsonValues(JSON.stringify(at.done))}) THEN 0 ELSE COALESCE((SELECT ${due.probe.value}
      FROM ${source} WHERE ${table.held} AND ${ownerKey} = ${owner} ${due.probe.where} ORDER BY ${due.probe.order} LIMIT 1), 0) END`
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
  const positions = JSON.stringify(at.owners.map(([owner, position]) => [owner, ...table.positionValues(position)]))
  const positionsOf = sql.onDialectOrElse({
    pg: () =>
      sql`SELECT e->>0 AS owner_did, (e->>1)::bigint AS next_at, ${
        sql.literal(keys.map((key, i) => `e->>${i + 2} AS ${key}`).join(", "))
      } FROM jsonb_array_elements(${positions}::jsonb) AS e`,
    orElse: () =>
      sql`SELECT json_extract(value, '$[0]') AS owner_did, json_extract(value, '$[1]') AS next_at, ${
        sql.literal(keys.map((key, i) => `json_extract(value, '$[${i + 2}]') AS ${key}`).join(", "))
      } FROM json_each(${positions})`
  })
  const skipLocked = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE SKIP LOCKED"), orElse: () => sql`` })
  const scopes = table.scopes
  const scoped = scopes === undefined ? undefined : scopeWalk(sql, table, scopes)
  // One owner's due rows after its position (with scopes, one scope's: `s`), `cap` of them, in the index's
  // order: `cap` of each range, merged.
  const ownerRows = (columns: Statement.Fragment) => {
    const ranges = due.ranges.map((range) =>
      sql`SELECT ${columns} FROM ${scoped?.source ?? source} WHERE ${table.held} AND ${ownerKey} = o.owner_did ${
        scoped?.inScope ?? sql``
      } AND ${range}
        ORDER BY ${order} LIMIT ${cap} ${skipLocked}`
    )
    if (ranges.length === 1) return ranges[0]!
    const merged = sql.join(" UNION ALL ", false)(ranges.map((range, i) => sql`SELECT * FROM (${range}) AS ${sql.literal(`range${i}`)}`))
    return sql`SELECT * FROM (${merged}) AS b ORDER BY ${order} LIMIT ${cap}`
  }
  const picked = sql.literal(table.schema.listOf("x"))
  // With scopes, the owners' rows are read for each scope they may take (`s`).
  const owners = scoped === undefined ? sql`owners AS o` : sql`owners AS o JOIN taken_scopes AS s ON s.n = o.n`
  const rows = sql.onDialectOrElse({
    pg: () =>
      sql`SELECT ${picked}, o.n AS fair_owner FROM ${owners} LEFT JOIN positions AS p ON p.owner_did = o.owner_did
        CROSS JOIN LATERAL (${ownerRows(sql.literal(table.schema.list))}) AS x`,
    orElse: () =>
      // CROSS JOIN keeps the owners the outer loop (SQLite's planner may not reorder it): each owner's rows by rowid.
      sql`SELECT ${picked}, o.n AS fair_owner FROM ${owners} LEFT JOIN positions AS p ON p.owner_did = o.owner_did
        CROSS JOIN ${plain} AS x WHERE x.rowid IN (SELECT rowid FROM (${
        ownerRows(sql.literal(["rowid", "next_attempt_at", ...keys].join(", ")))
      }))`
  })
  // An owner read scope by scope gives up to `cap` rows of each: its first `cap` are kept.
  const ranked = sql`SELECT r.*, row_number() OVER (PARTITION BY r.fair_owner ORDER BY ${order}) AS fair_rank FROM (${rows}) AS r`
  return sql<RawRow>`WITH RECURSIVE ${scan},
      owners AS (SELECT owner_did, n FROM scan WHERE due = 1),
      ${scoped === undefined ? sql`` : sql`${scoped.walk},`}
      ${sizing},
      positions AS (${positionsOf}),
      taken AS (${scoped === undefined ? ranked : sql`SELECT * FROM (${ranked}) AS ranked WHERE fair_rank <= ${cap}`})
    SELECT page.*, ${cap} AS fair_cap, e.fair_scan_end, e.fair_done
    FROM (SELECT (SELECT owner_did FROM scan ORDER BY n DESC LIMIT 1) AS fair_scan_end,
      (SELECT ${sql.onDialectOrElse({ pg: () => sql`json_agg(o.owner_did)::text`, orElse: () => sql`json_group_array(o.owner_did)` })} FROM owners AS o
        WHERE (SELECT count(*) FROM taken WHERE taken.fair_owner = o.n) < ${cap}) AS fair_done) AS e
    LEFT JOIN (SELECT * FROM taken ORDER BY fair_rank, fair_owner LIMIT ${limit}) AS page ON 1 = 1
    ORDER BY page.fair_rank, page.fair_owner`
}

/** `table` as a read names it, held to `sqliteIndex` on SQLite (Postgres's planner picks its own). */
const heldTo = (sql: SqlClient, table: string, sqliteIndex: string) =>
  sql.onDialectOrElse({ pg: () => sql`${sql(table)}`, orElse: () => sql`${sql(table)} INDEXED BY ${sql(sqliteIndex)}` })

/**
 * The walk of the owners' scopes on the scope index, for `fairPageStatement`:
 * `scopes (n, owner_did, c, a)` lists every scope of each owner of `owners`
 * that has held rows, a few index probes each (a loose index scan), and
 * `taken_scopes` those the page may take; `inScope` is an owner's read
 * narrowed to scope `s`, and `source` the index that read is held to.
 */
const scopeWalk = <A, P>(sql: SqlClient, table: FairPageTable<A, P>, scopes: FairPageScopes) => {
  const source = heldTo(sql, table.name, scopes.sqliteIndex)
  const [connector, account] = scopes.columns
  const ownerKey = byteOrdered(sql, "owner_did")
  const connectorKey = byteOrdered(sql, connector)
  const accountKey = byteOrdered(sql, account)
  const probe = (column: string, owner: Statement.Fragment, where: Statement.Fragment, order: Statement.Fragment) =>
    sql`(SELECT ${sql(column)} FROM ${source} WHERE ${table.held} AND ${ownerKey} = ${owner} ${where} ORDER BY ${order} LIMIT 1)`
  // An owner's first account of `c`, its next after `a` in `c`, and its next connector after `c`.
  const firstAccount = (owner: Statement.Fragment, c: Statement.Fragment) =>
    probe(account, owner, sql`AND ${connectorKey} = ${c}`, accountKey)
  const nextAccount = probe(account, sql`s.owner_did`, sql`AND ${connectorKey} = s.c AND ${accountKey} > s.a`, accountKey)
  const nextConnector = probe(connector, sql`s.owner_did`, sql`AND ${connectorKey} > s.c`, connectorKey)
  const firstConnector = probe(connector, sql`o.owner_did`, sql``, sql`${connectorKey}, ${accountKey}`)
  const walk = sql`scopes (n, owner_did, c, a) AS (
      SELECT o.n, o.owner_did, o.c, ${firstAccount(sql`o.owner_did`, sql`o.c`)}
        FROM (SELECT o.n, o.owner_did, ${firstConnector} AS c FROM owners AS o) AS o WHERE o.c IS NOT NULL
      UNION ALL
      SELECT s.n, s.owner_did, CASE WHEN ${nextAccount} IS NULL THEN ${nextConnector} ELSE s.c END,
        COALESCE(${nextAccount}, ${firstAccount(sql`s.owner_did`, nextConnector)})
        FROM scopes AS s WHERE ${nextAccount} IS NOT NULL OR ${nextConnector} IS NOT NULL),
    taken_scopes AS (SELECT * FROM (SELECT n, c AS ${sql(connector)}, a AS ${sql(account)} FROM scopes) AS named WHERE 1 = 1 ${scopes.taken})`
  return { walk, source, inScope: sql`AND ${connectorKey} = s.${sql(connector)} AND ${accountKey} = s.${sql(account)}` }
}

/** The owners a page read to the end, as the statement lists them (a JSON array; null when none). */
const doneOf = (value: unknown): ReadonlyArray<string> => {
  const list: unknown = typeof value === "string" ? JSON.parse(value) : value
  return Array.isArray(list) ? list.filter((owner): owner is string => typeof owner === "string") : []
}

/**
 * A fair page statement (`fairPageStatement`) run and read as the ports'
 * `FairDueRead`: its rows decoded by `healthy` (a row that does not decode
 * is skipped and reported), the position of each owner's last row read.
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
