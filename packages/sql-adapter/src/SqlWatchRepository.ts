import {
  type ClaimInput,
  type DeferInput,
  type Millis,
  type DeferReason,
  type DocumentSlot,
  type DueWatchPosition,
  type ProjectionWatch,
  type VerificationStatus,
  type WatchIdentity,
  WatchRepository
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql/Statement"
import { Effect } from "effect"
import { byteOrdered } from "./internal/collation.js"
import { epoch, epochOrNull, type RawRow, text, textOrNull } from "./internal/columns.js"
import { columnsOf, rowSchema } from "./internal/rows.js"
import { forUpdate } from "./SqlTransactor.js"
import { rawThen, returnedAny, rowReaders, statementThen } from "./internal/queries.js"
import { rawText, rawTimeOrNull, readDuePage } from "./internal/duePages.js"
import { type FairPageTable, fairPageStatement, readFairPage } from "./internal/fairPage.js"
import { affectedRows, type ColumnOf, versionedUpdate, versionedUpdateAll, versionedUpdateStatement } from "./internal/versionedUpdate.js"
import type { TableNames } from "./Tables.js"
import type { Compiled } from "./internal/directStatements.js"

const watchColumn = columnsOf<ProjectionWatch>()

/** The projection-watch table's row: its identity, then the columns a transition may change, then version and times. */
export const WATCH_SCHEMA = rowSchema<ProjectionWatch>([
  watchColumn("owner_did", "ownerDID", text, "text"),
  watchColumn("connector_name", "connectorName", text, "text"),
  watchColumn("model", "model", text, "text"),
  watchColumn("account_key", "accountKey", text, "text"),
  watchColumn("source_id", "sourceID", text, "text"),
  watchColumn("document_id", "documentID", text, "text"),
  watchColumn("verified_state_digest", "verifiedStateDigest", textOrNull, "text"),
  watchColumn("observed_winner_digest", "observedWinnerDigest", textOrNull, "text"),
  watchColumn("verification_status", "verificationStatus", (value) => text(value) as VerificationStatus, "text"),
  watchColumn("verification_attempts", "verificationAttempts", epoch, "integer"),
  watchColumn("repair_generation", "repairGeneration", epoch, "integer"),
  watchColumn("next_attempt_at", "nextAttemptAt", epochOrNull, "bigint"),
  watchColumn("claimed_until", "claimedUntil", epochOrNull, "bigint"),
  watchColumn("defer_reason", "deferReason", (value) => textOrNull(value) as DeferReason | null, "text"),
  watchColumn("version", "version", epoch, "integer"),
  watchColumn("created_at", "createdAt", epoch, "bigint"),
  watchColumn("updated_at", "updatedAt", epoch, "bigint")
], ["owner_did", "connector_name", "model", "account_key", "source_id"])

/** A watch row as read from the projection-watch table. */
export const decodeWatch = WATCH_SCHEMA.decode

/**
 * `decodeWatch` for the rows of `table`: a row that does not decode throws
 * `CorruptRow` keyed by its identity (`ownerDID/connectorName/model/accountKey/sourceID`).
 */
export const watchDecoder = WATCH_SCHEMA.decoder

/** Where a watch row as read stands in the due order, or `undefined` when its identity or next attempt cannot be read. */
const duePositionOf = (row: RawRow): DueWatchPosition | undefined => {
  const nextAttemptAt = rawTimeOrNull(row["next_attempt_at"])
  const ownerDID = rawText(row["owner_did"])
  const connectorName = rawText(row["connector_name"])
  const model = rawText(row["model"])
  const accountKey = rawText(row["account_key"])
  const sourceID = rawText(row["source_id"])
  return nextAttemptAt === undefined || nextAttemptAt === null || ownerDID === undefined || connectorName === undefined ||
      model === undefined || accountKey === undefined || sourceID === undefined
    ? undefined
    : { nextAttemptAt, ownerDID, connectorName, model, accountKey, sourceID }
}

/** The identity columns: the key a versioned write finds its row by (they read only a row's identity fields). */
export const WATCH_KEY = WATCH_SCHEMA.writes(WATCH_SCHEMA.key) as ReadonlyArray<ColumnOf<WatchIdentity>>

/** The columns a transition may change (version and updated_at are always written). */
export const WATCH_COLUMNS = WATCH_SCHEMA.writes([
  "document_id", "verified_state_digest", "observed_winner_digest", "verification_status", "verification_attempts",
  "repair_generation", "next_attempt_at", "claimed_until", "defer_reason"
])

/** Every column of a row, in the order an insert names them. */
export const WATCH_ROW: ReadonlyArray<ColumnOf<ProjectionWatch>> = WATCH_SCHEMA.writes(WATCH_SCHEMA.columns.map((column) => column.name))

/**
 * The Postgres advisory lock of a document slot (`lockDocument`), held to
 * the end of the transaction: its key is the hash of the JSON array [watch
 * table, owner, model, document], written by the server (`to_json` escapes
 * a text as `JSON.stringify` does), so the owner and the model may be
 * values or a row's columns and the key is the same.
 */
export const slotLock = (sql: SqlClient, tables: TableNames, ownerDID: unknown, model: unknown, documentID: unknown) =>
  sql`pg_advisory_xact_lock(hashtextextended(concat('[', to_json(${tables.projectionWatch}::text), ',', to_json(${ownerDID}::text), ',',
    to_json(${model}::text), ',', to_json(${documentID}::text), ']'), 0))`

/**
 * The statements of the projection-watch table's hot methods, built (not
 * run): the repository runs them on the client, `SqliteDirect` compiles and
 * runs the very same ones on the connection.
 */
export const watchStatements = (sql: SqlClient, tables: TableNames) => {
  const table = sql(tables.projectionWatch)
  const columns = sql.literal(WATCH_SCHEMA.list)
  // The insert runs on every arm: its text is built once, from the schema.
  const parameter = sql.onDialectOrElse({ pg: () => (n: number) => `$${n}`, orElse: () => (_: number) => "?" })
  const insertText = `INSERT INTO ${tables.projectionWatch} (${WATCH_SCHEMA.list})
    VALUES (${WATCH_ROW.map((_, i) => parameter(i + 1)).join(", ")}) ON CONFLICT DO NOTHING RETURNING version`
  const byIdentity = (id: WatchIdentity) =>
    sql`owner_did = ${id.ownerDID} AND connector_name = ${id.connectorName} AND model = ${id.model} AND account_key = ${id.accountKey} AND source_id = ${id.sourceID}`
  return {
    table,
    columns,
    byIdentity,
    lockRead: (identity: WatchIdentity) => sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byIdentity(identity)} ${forUpdate(sql)}`,
    update: versionedUpdateStatement(sql, tables.projectionWatch, WATCH_COLUMNS, WATCH_KEY),
    // decideClaim's preconditions as the WHERE, its change as the SET: one
    // statement, no RETURNING (the row count answers).
    claimAttempt: (identity: WatchIdentity, input: ClaimInput, now: Millis, writtenAt: Millis) =>
      sql`UPDATE ${table} SET claimed_until = ${input.until}, version = version + 1, updated_at = ${writtenAt}
        WHERE ${byIdentity(identity)} AND verification_status = 'pending_verification'
          AND repair_generation = ${input.generation}
          AND next_attempt_at IS NOT NULL AND next_attempt_at <= ${now}
          AND (claimed_until IS NULL OR claimed_until <= ${now})`,
    // decideDefer's: only the holder of the current claim of a pending row of that generation.
    deferAttempt: (identity: WatchIdentity, input: DeferInput, now: Millis) =>
      sql`UPDATE ${table} SET next_attempt_at = ${input.nextAttemptAt}, defer_reason = ${input.reason ?? null},
          claimed_until = NULL, version = version + 1, updated_at = ${now}
        WHERE ${byIdentity(identity)} AND verification_status = 'pending_verification'
          AND repair_generation = ${input.generation} AND claimed_until = ${input.claimedUntil}`,
    insert: (row: ProjectionWatch): Compiled => [insertText, WATCH_ROW.map((column) => column.value(row))],
    delete: (identity: WatchIdentity, expectedVersion: number) =>
      sql<RawRow>`DELETE FROM ${table} WHERE ${byIdentity(identity)} AND version = ${expectedVersion} RETURNING version`,
    /** The Postgres advisory lock of a document slot, held to the end of the transaction (see `slotLock`). */
    lockDocument: (slot: DocumentSlot) => sql`SELECT ${slotLock(sql, tables, slot.ownerDID, slot.model, slot.documentID)}`,
    /**
     * Every arm target of a finalize, locked, in identity order (byte-wise);
     * on Postgres after the slot's lock, taken in an earlier statement.
     */
    lockArmTargets: (slot: DocumentSlot, identity: WatchIdentity) =>
      sql<RawRow>`SELECT ${columns} FROM ${table} WHERE document_id = ${slot.documentID} OR (${byIdentity(identity)})
        ORDER BY ${byteOrdered(sql, "owner_did")}, ${byteOrdered(sql, "connector_name")}, ${byteOrdered(sql, "model")},
          ${byteOrdered(sql, "account_key")}, ${byteOrdered(sql, "source_id")}
        ${forUpdate(sql)}`
  }
}

/** The projection-watch table on a SQL client. */
export const makeSqlWatchRepository = (sql: SqlClient, tables: TableNames): WatchRepository["Type"] => {
  const statements = watchStatements(sql, tables)
  const { table, columns, byIdentity } = statements
  const { healthy, many, one } = rowReaders(watchDecoder(tables.projectionWatch))
  const changed = returnedAny
  /** Whether a write without RETURNING touched any row. */
  const touchedAny = (operation: string, statement: Statement<object>) => rawThen(operation, statement, (raw) => affectedRows(raw) > 0)
  // The due order, on the index of (verification_status, next_attempt_at,
  // identity) with ids in byte order: `limit` rows of one index range per
  // unsettled status from the position, merged, never the whole backlog.
  const dueKey = sql`next_attempt_at, ${byteOrdered(sql, "owner_did")}, ${byteOrdered(sql, "connector_name")}, ${
    byteOrdered(sql, "model")
  }, ${byteOrdered(sql, "account_key")}, ${byteOrdered(sql, "source_id")}`
  const scheduleDueOf = (status: string, now: Millis, after: DueWatchPosition | undefined, limit: number) =>
    sql`SELECT ${columns} FROM ${table} WHERE verification_status = ${status} AND next_attempt_at <= ${now}
      ${after === undefined ? sql`` : sql`AND (${dueKey}) > (${after.nextAttemptAt}, ${after.ownerDID}, ${after.connectorName}, ${after.model},
        ${after.accountKey}, ${after.sourceID})`}
      ORDER BY ${dueKey} LIMIT ${limit}`
  const scheduleDuePage = (now: Millis, after: DueWatchPosition | undefined, limit: number) =>
    sql<RawRow>`SELECT * FROM (
        SELECT * FROM (${scheduleDueOf("pending_verification", now, after, limit)}) AS pending
        UNION ALL
        SELECT * FROM (${scheduleDueOf("repair_failed", now, after, limit)}) AS failed
      ) AS due ORDER BY ${dueKey} LIMIT ${limit}`
  // The batch claim's owner-fair page (see `fairPageStatement`), on the owner index (owner_did,
  // next_attempt_at, identity, claimed_until) of pending watches: a watch is due when it is due by now and
  // under no live claim, so an owner's probe passes over its claimed watches (their end is in the index).
  const fairTable: FairPageTable<ProjectionWatch, DueWatchPosition> = {
    name: tables.projectionWatch,
    schema: WATCH_SCHEMA,
    // With no statistics SQLite would rather sort the pending watches of the due index (which covers the
    // owner probes too) than walk a range of the partial one.
    sqliteIndex: tables.index("idx_connector_watch_owner_due"),
    held: sql`verification_status = 'pending_verification'`,
    keys: ["connector_name", "model", "account_key", "source_id"],
    unscheduledFirst: false,
    positionValues: (position) => [position.nextAttemptAt, position.connectorName, position.model, position.accountKey, position.sourceID],
    due: (time, { order, after }) => {
      const claimable = sql`next_attempt_at <= ${time} AND (claimed_until IS NULL OR claimed_until <= ${time})`
      return {
        probe: { value: sql`1`, where: sql`AND ${claimable}`, order },
        ranges: [sql`${claimable} AND (p.owner_did IS NULL OR ${after})`]
      }
    }
  }
  const lockDocument = (slot: DocumentSlot) =>
    sql.onDialectOrElse({
      pg: () =>
        statementThen("watch.lockDocument", statements.lockDocument(slot), (): void => undefined),
      // The store's SQLite transactions hold the database write lock already.
      orElse: () => Effect.void
    })

  return {
    lockRead: (identity) => one("watch.lockRead", statements.lockRead(identity)),
    get: (identity) => one("watch.get", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byIdentity(identity)}`),
    getByDocument: (documentID) =>
      one(
        "watch.getByDocument",
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE document_id = ${documentID}
          ORDER BY ${byteOrdered(sql, "owner_did")}, ${byteOrdered(sql, "connector_name")}, ${byteOrdered(sql, "model")},
            ${byteOrdered(sql, "account_key")}, ${byteOrdered(sql, "source_id")}
          LIMIT 1`
      ),
    listByDocuments: (documentIDs) =>
      documentIDs.length === 0
        ? Effect.succeed([])
        : healthy("watch.listByDocuments", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE document_id IN ${sql.in(documentIDs)}`),
    update: versionedUpdate(sql, "watch.update", tables.projectionWatch, WATCH_COLUMNS, WATCH_KEY),
    claimAttempt: (identity, input, now, writtenAt) =>
      touchedAny("watch.claimAttempt", statements.claimAttempt(identity, input, now, writtenAt)),
    deferAttempt: (identity, input, now) =>
      touchedAny("watch.deferAttempt", statements.deferAttempt(identity, input, now)),
    insert: (row) => changed("watch.insert", sql.unsafe<RawRow>(...statements.insert(row))),
    delete: (identity, expectedVersion) => changed("watch.delete", statements.delete(identity, expectedVersion)),
    lockDocument,
    // Every target locked in identity order, byte-wise, with the slot's lock
    // held already (`lockReadWithSlot`). The slot lock comes in an earlier
    // statement: a statement that waited for it would still read with the
    // snapshot taken before the wait, and miss the watch the previous holder
    // just inserted.
    lockArmTargets: (slot, identity) => many("watch.lockArmTargets", statements.lockArmTargets(slot, identity)),
    listScheduleDue: (now) =>
      healthy(
        "watch.listScheduleDue",
        sql<RawRow>`SELECT ${columns} FROM ${table}
          WHERE verification_status IN ('pending_verification', 'repair_failed')
            AND next_attempt_at IS NOT NULL AND next_attempt_at <= ${now}`
      ),
    listScheduleDuePage: (now, after, limit) =>
      readDuePage("watch.listScheduleDuePage", healthy, scheduleDuePage(now, after, limit), duePositionOf),
    // On SQLite the store's transactions hold the write lock: the page is the caller's alone.
    lockClaimablePage: (now, at, limit) =>
      readFairPage("watch.lockClaimablePage", healthy, fairPageStatement(sql, fairTable, now, at, limit), at, limit, duePositionOf),
    updateAll: versionedUpdateAll(sql, "watch.updateAll", tables.projectionWatch, WATCH_COLUMNS, WATCH_KEY, WATCH_SCHEMA.types),
    // Keyset pages along the primary key, so a page reads `limit` settled
    // rows (and the unsettled ones between them), never the whole table.
    listAuditPage: (after, limit) =>
      healthy(
        "watch.listAuditPage",
        // SQLite (no statistics) would rather search the status index and
        // sort every settled row: `+` leaves it the primary key's order.
        sql<RawRow>`SELECT ${columns} FROM ${table}
          WHERE ${sql.onDialectOrElse({ pg: () => sql.literal("verification_status"), orElse: () => sql.literal("+verification_status") })}
            IN ('verified', 'repair_failed')
          ${after === undefined ? sql`` : sql`AND (owner_did, connector_name, model, account_key, source_id)
            > (${after.ownerDID}, ${after.connectorName}, ${after.model}, ${after.accountKey}, ${after.sourceID})`}
          ORDER BY owner_did, connector_name, model, account_key, source_id
          LIMIT ${limit}`
      ),
    lockDeferred: (scope) =>
      healthy(
        "watch.lockDeferred",
        scope.reason === "offline"
          ? sql<RawRow>`SELECT ${columns} FROM ${table}
              WHERE verification_status = 'pending_verification' AND defer_reason = 'offline' ${forUpdate(sql)}`
          : sql<RawRow>`SELECT ${columns} FROM ${table}
              WHERE verification_status = 'pending_verification' AND defer_reason = 'auth'
                AND owner_did = ${scope.ownerDID} AND connector_name IN ${sql.in(scope.connectorNames)} ${forUpdate(sql)}`
      )
  }
}
