import {
  type ConnectorOperation,
  type DueOperationPosition,
  type FairDueRead,
  type FairPosition,
  type Millis,
  type DeferReason,
  type OperationKey,
  type OperationOp,
  OperationRepository,
  type OperationState,
  type PairedWrite,
  type ProviderScope,
  PersistenceError,
  type TrackedQuery,
  type WatchWrite
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import {
  encodeJson,
  epoch,
  epochOrNull,
  jsonOrNull,
  type RawRow,
  text,
  textOrNull
} from "./internal/columns.js"
import { forUpdate } from "./SqlTransactor.js"
import { byteOrdered, olderThanPosition } from "./internal/collation.js"
import { collectFinishedLocked, collectFinishedStatement } from "./internal/retention.js"
import { returnedAny, rowReaders, statementThen } from "./internal/queries.js"
import { pairedWriteOf, pairedWriteStatement } from "./internal/pairedWrite.js"
import { slotLock, WATCH_COLUMNS, WATCH_KEY, WATCH_ROW, watchStatements } from "./SqlWatchRepository.js"
import { rawText, rawTimeOrNull, readDuePage } from "./internal/duePages.js"
import { type FairPageTable, fairPageStatement, readFairPage } from "./internal/fairPage.js"
import { versionedUpdate, versionedUpdateAll, versionedUpdateStatement } from "./internal/versionedUpdate.js"
import { columnsOf, rowSchema } from "./internal/rows.js"
import type { TableNames } from "./Tables.js"

const operationColumn = columnsOf<ConnectorOperation>()

/**
 * The operation table's row: its key and node key, then the columns an
 * insert sets besides `created_at` (version and updated_at among them),
 * then `created_at`. JSON columns are bound encoded.
 */
export const OPERATION_SCHEMA = rowSchema<ConnectorOperation>([
  operationColumn("caller_did", "callerDID", text, "text"),
  operationColumn("operation_id", "operationID", text, "text"),
  operationColumn("node_key", "nodeKey", text, "text"),
  operationColumn("owner_did", "ownerDID", text, "text"),
  operationColumn("connector_name", "connectorName", text, "text"),
  operationColumn("model", "model", text, "text"),
  operationColumn("op", "op", (value) => text(value) as OperationOp, "text"),
  operationColumn("account_key", "accountKey", text, "text"),
  operationColumn("target", "target", text, "text"),
  operationColumn("source_id", "sourceID", textOrNull, "text"),
  operationColumn("deterministic_event_id", "deterministicEventID", text, "text"),
  operationColumn("payload_hash", "payloadHash", text, "text"),
  operationColumn("reissue_intent", "reissueIntent", jsonOrNull, "text", (value) => encodeJson(value) ?? "null"),
  operationColumn("provider_etag", "providerEtag", textOrNull, "text"),
  operationColumn("document_id", "documentID", textOrNull, "text"),
  operationColumn("result_entity", "resultEntity", jsonOrNull, "text", encodeJson),
  operationColumn("state", "state", (value) => text(value) as OperationState, "text"),
  operationColumn("attempts", "attempts", epoch, "integer"),
  operationColumn("next_attempt_at", "nextAttemptAt", epochOrNull, "bigint"),
  operationColumn("defer_reason", "deferReason", (value) => textOrNull(value) as DeferReason | null, "text"),
  operationColumn("send_marker", "sendMarker", textOrNull, "text"),
  operationColumn("in_doubt_since", "inDoubtSince", epochOrNull, "bigint"),
  operationColumn("last_kind", "lastKind", textOrNull, "text"),
  operationColumn("last_http_status", "lastHTTPStatus", epochOrNull, "integer"),
  operationColumn("version", "version", epoch, "integer"),
  operationColumn("incarnation", "incarnation", textOrNull, "text"),
  operationColumn("lease_token", "leaseToken", textOrNull, "text"),
  operationColumn("lease_expires_at", "leaseExpiresAt", epochOrNull, "bigint"),
  operationColumn("updated_at", "updatedAt", epoch, "bigint"),
  operationColumn("created_at", "createdAt", epoch, "bigint")
], ["caller_did", "operation_id"])

/** An operation row as read from the operation table. */
export const decodeOperation = OPERATION_SCHEMA.decode

/** `decodeOperation` for the rows of `table`: a row that does not decode throws `CorruptRow` keyed `callerDID/operationID`. */
export const operationDecoder = OPERATION_SCHEMA.decoder

/** Where an operation row as read stands in the due order, or `undefined` when its key or next attempt cannot be read. */
const duePositionOf = (row: RawRow): DueOperationPosition | undefined => {
  const nextAttemptAt = rawTimeOrNull(row["next_attempt_at"])
  const callerDID = rawText(row["caller_did"])
  const operationID = rawText(row["operation_id"])
  return nextAttemptAt === undefined || callerDID === undefined || operationID === undefined
    ? undefined
    : { nextAttemptAt, callerDID, operationID }
}

/** Every column of a row, in the order an insert names them. */
const OPERATION_ROW = OPERATION_SCHEMA.writes(OPERATION_SCHEMA.columns.map((column) => column.name))

/** The key a versioned write finds its row by. */
const OPERATION_KEY = OPERATION_SCHEMA.writes(OPERATION_SCHEMA.key)

/**
 * The columns a transition may change, as bound: all but the key, the node
 * key and the times and version, which every write sets.
 */
const CHANGEABLE_COLUMNS = OPERATION_SCHEMA.writes(
  OPERATION_SCHEMA.columns.map((column) => column.name).filter((name) =>
    !["caller_did", "operation_id", "node_key", "version", "updated_at", "created_at"].includes(name)
  )
)

/**
 * The statements of the operation table's hot methods, built (not run): the
 * repository runs them on the client, `SqliteDirect` compiles and runs the
 * very same ones on the connection.
 */
export const operationStatements = (sql: SqlClient, tables: TableNames) => {
  const table = sql(tables.operation)
  const columns = sql.literal(OPERATION_SCHEMA.list)
  const byKey = (key: OperationKey) => sql`caller_did = ${key.callerDID} AND operation_id = ${key.operationID}`
  // The insert runs on every claim: its text is built once, from the fixed
  // column list, not per call.
  const parameter = sql.onDialectOrElse({ pg: () => (n: number) => `$${n}`, orElse: () => (_: number) => "?" })
  const insertText = `INSERT INTO ${tables.operation} (${OPERATION_SCHEMA.list})
    VALUES (${OPERATION_ROW.map((_, i) => parameter(i + 1)).join(", ")}) ON CONFLICT DO NOTHING RETURNING version`
  const lockRead = (key: OperationKey) => sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byKey(key)} ${forUpdate(sql)}`
  const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  return {
    table,
    columns,
    get: (key: OperationKey) => sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${byKey(key)}`,
    lockRead,
    // On Postgres the row is locked, then the slot of its owner and model:
    // the lock's arguments are columns of the row the CTE's FOR UPDATE
    // returns, so the call cannot run before the row is locked (and reads
    // the row as it is once locked); no row, no slot. The arm targets are
    // read in a later statement, whose snapshot sees what the slot's
    // previous holder committed. Elsewhere the transaction's own lock
    // covers the slot.
    lockReadWithSlot: (key: OperationKey, documentID: string) =>
      pg
        ? sql<RawRow>`WITH locked AS MATERIALIZED (SELECT ${columns} FROM ${table} WHERE ${byKey(key)} FOR UPDATE)
          SELECT ${sql.literal(OPERATION_SCHEMA.listOf("locked"))}, ${
          slotLock(sql, tables, sql.literal("locked.owner_did"), sql.literal("locked.model"), documentID)
        } AS slot_locked FROM locked`
        : lockRead(key),
    /** Postgres's paired write in one statement (see `pairedWriteStatement`); undefined elsewhere (two statements). */
    updateWithWatch: pg
      ? pairedWriteStatement(
        { operation: tables.operation, watch: tables.projectionWatch },
        { columns: CHANGEABLE_COLUMNS, key: OPERATION_KEY },
        { columns: WATCH_COLUMNS, key: WATCH_KEY, row: WATCH_ROW }
      )
      : undefined,
    insert: (row: ConnectorOperation): readonly [text: string, params: ReadonlyArray<unknown>] =>
      [insertText, OPERATION_ROW.map((column) => column.value(row))],
    update: versionedUpdateStatement(sql, tables.operation, CHANGEABLE_COLUMNS, OPERATION_KEY),
    // decideMarkSent's "sent" preconditions as the WHERE and its change as
    // the SET (the SET's right-hand sides see the row as it was).
    markSent: (key: OperationKey, token: string, maxAttempts: number, now: Millis) =>
      sql<RawRow>`UPDATE ${table} SET send_marker = ${token}, attempts = attempts + 1,
          in_doubt_since = COALESCE(in_doubt_since, CASE WHEN send_marker IS NOT NULL THEN CAST(${now} AS BIGINT) END),
          version = version + 1, updated_at = ${now}
        WHERE ${byKey(key)} AND state = 'attempted' AND lease_token = ${token}
          AND (send_marker IS NULL OR send_marker <> ${token}) AND attempts < ${maxAttempts}
        RETURNING ${columns}`
  }
}

/** The operation table on a SQL client. */
export const makeSqlOperationRepository = (sql: SqlClient, tables: TableNames): OperationRepository["Type"] => {
  const statements = operationStatements(sql, tables)
  const { table, columns } = statements
  const { healthy, one } = rowReaders(operationDecoder(tables.operation))
  const changed = returnedAny
  const update = versionedUpdate(sql, "operation.update", tables.operation, CHANGEABLE_COLUMNS, OPERATION_KEY)
  const watch = watchStatements(sql, tables)
  const watchUpdate = versionedUpdate(sql, "watch.update", tables.projectionWatch, WATCH_COLUMNS, WATCH_KEY)
  const watchWrite = (write: WatchWrite): Effect.Effect<boolean, PersistenceError> =>
    write.kind === "insert"
      ? changed("watch.insert", sql.unsafe<RawRow>(...watch.insert(write.row)))
      : write.kind === "update"
      ? watchUpdate(write.previous, write.next)
      : changed("watch.delete", watch.delete(write.identity, write.version))
  const paired = statements.updateWithWatch
  // One statement on Postgres; elsewhere the operation's write, then (when it landed) the watch's.
  const updateWithWatch = paired !== undefined
    ? (previous: ConnectorOperation, next: ConnectorOperation, write: WatchWrite): Effect.Effect<PairedWrite, PersistenceError> =>
      statementThen("operation.updateWithWatch", sql.unsafe<RawRow>(...paired(previous, next, write)), pairedWriteOf)
    : (previous: ConnectorOperation, next: ConnectorOperation, write: WatchWrite): Effect.Effect<PairedWrite, PersistenceError> =>
      Effect.flatMap(update(previous, next), (won) =>
        won
          ? Effect.map(watchWrite(write), (written): PairedWrite => written ? "written" : "watch-lost")
          : Effect.succeed("operation-lost"))
  // The newest-row order is byte order on every adapter, as in the pure rule.
  const ordered = (column: string) => byteOrdered(sql, column)

  // The due order, on the index of (state, next_attempt_at, caller_did,
  // operation_id) with ids in byte order: each branch reads `limit` rows of
  // one index range from its position, never the whole backlog.
  const dueOrder = sql`next_attempt_at, ${ordered("caller_did")}, ${ordered("operation_id")}`
  // The scopes a limited batch passes over, in the statement: a paused or
  // full scope's rows never take a place of the page.
  const outside = (excluding: ReadonlyArray<ProviderScope> | undefined) => {
    if (excluding === undefined || excluding.length === 0) return sql``
    const connectors = excluding.flatMap((scope) => scope.accountKey === undefined ? [scope.connectorName] : [])
    const accounts = JSON.stringify(excluding.flatMap((scope) => scope.accountKey === undefined ? [] : [[scope.connectorName, scope.accountKey]]))
    const byConnector = connectors.length === 0 ? sql`` : sql`AND connector_name NOT IN ${sql.in(connectors)}`
    const byAccount = accounts === "[]" ? sql`` : sql.onDialectOrElse({
      pg: () => sql`AND (connector_name, account_key) NOT IN (SELECT e->>0, e->>1 FROM jsonb_array_elements(${accounts}::jsonb) AS e)`,
      orElse: () =>
        sql`AND (connector_name, account_key) NOT IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(${accounts}))`
    })
    return sql`${byConnector} ${byAccount}`
  }
  const scheduledPage = (now: Millis, after: DueOperationPosition | undefined, limit: number) =>
    sql<RawRow>`SELECT ${columns} FROM ${table} WHERE state = 'attempted' AND next_attempt_at <= ${now}
      ${after === undefined ? sql`` : sql`AND (next_attempt_at, ${ordered("caller_did")}, ${ordered("operation_id")})
        > (${after.nextAttemptAt}, ${after.callerDID}, ${after.operationID})`}
      ORDER BY ${dueOrder} LIMIT ${limit}`
  // Unscheduled rows (no next attempt) come first: while the position is
  // among them, the page is their next rows and the first scheduled ones.
  const duePage = (now: Millis, after: DueOperationPosition | undefined, limit: number) =>
    after !== undefined && after.nextAttemptAt !== null
      ? scheduledPage(now, after, limit)
      : sql<RawRow>`SELECT * FROM (
          SELECT * FROM (SELECT ${columns} FROM ${table} WHERE state = 'attempted' AND next_attempt_at IS NULL
            ${after === undefined ? sql`` : sql`AND (${ordered("caller_did")}, ${ordered("operation_id")}) > (${after.callerDID}, ${after.operationID})`}
            ORDER BY ${dueOrder} LIMIT ${limit}) AS unscheduled
          UNION ALL
          SELECT * FROM (${scheduledPage(now, undefined, limit)}) AS scheduled
        ) AS due ORDER BY next_attempt_at NULLS FIRST, ${ordered("caller_did")}, ${ordered("operation_id")} LIMIT ${limit}`

  // The batch's owner-fair page (see `fairPageStatement`), on the owner index (owner_did, next_attempt_at,
  // caller_did, operation_id) of attempted rows: an owner has due work when its first row in the due order
  // (unscheduled first) is unscheduled or due by now; its rows are the unscheduled, then the scheduled due
  // by now, each a range of the index. A page that passes over scopes reads each owner's accounts outside
  // them from the scope index (owner_did, connector_name, account_key, …), never the passed-over rows.
  const fairTable = (excluding: ReadonlyArray<ProviderScope> | undefined): FairPageTable<ConnectorOperation, DueOperationPosition> => ({
    name: tables.operation,
    schema: OPERATION_SCHEMA,
    sqliteIndex: tables.index("idx_connector_operation_owner_due"),
    held: sql`state = 'attempted'`,
    keys: ["caller_did", "operation_id"],
    unscheduledFirst: true,
    positionValues: (position) => [position.nextAttemptAt, position.callerDID, position.operationID],
    due: (time, { after, keysAfter }) => ({
      probe: {
        value: sql`CASE WHEN next_attempt_at IS NULL OR next_attempt_at <= ${time} THEN 1 ELSE 0 END`,
        where: sql``,
        order: sql`next_attempt_at NULLS FIRST`
      },
      ranges: [
        sql`next_attempt_at IS NULL AND (p.owner_did IS NULL OR (p.next_at IS NULL AND ${keysAfter}))`,
        sql`next_attempt_at <= ${time} AND (p.owner_did IS NULL OR p.next_at IS NULL OR ${after})`
      ]
    }),
    scopes: excluding === undefined || excluding.length === 0 ? undefined : {
      sqliteIndex: tables.index("idx_connector_operation_owner_scope_due"),
      columns: ["connector_name", "account_key"],
      taken: outside(excluding)
    }
  })
  const readFairOperationPage = (
    now: Millis,
    at: FairPosition<DueOperationPosition>,
    limit: number,
    excluding?: ReadonlyArray<ProviderScope>
  ): Effect.Effect<FairDueRead<ConnectorOperation, DueOperationPosition>, PersistenceError> =>
    readFairPage("operation.lockDuePage", healthy, fairPageStatement(sql, fairTable(excluding), now, at, limit), at, limit, duePositionOf)

  // Any number of document ids in one parameter, so a filtered page stays one
  // ordered query however long the list.
  const documentIn = (documentIDs: ReadonlyArray<string>) =>
    sql.onDialectOrElse({
      pg: () => sql`document_id IN (SELECT jsonb_array_elements_text(${JSON.stringify(documentIDs)}::jsonb))`,
      orElse: () => sql`document_id IN (SELECT value FROM json_each(${JSON.stringify(documentIDs)}))`
    })
  const trackedWhere = (query: TrackedQuery) => {
    const clauses = [sql`(caller_did = ${query.visibleTo} OR owner_did = ${query.visibleTo})`]
    if (query.documentIDs !== undefined) clauses.push(documentIn(query.documentIDs))
    if (query.states !== undefined) {
      clauses.push(query.states.length === 0 ? sql`1 = 0` : sql`state IN ${sql.in(query.states)}`)
    }
    if (query.connectorName !== undefined) clauses.push(sql`connector_name = ${query.connectorName}`)
    const after = query.after
    if (after !== undefined) {
      clauses.push(olderThanPosition(sql, after))
    }
    return sql.and(clauses)
  }

  return {
    // On SQLite the store's transactions take the write lock first (see makeSqlTransactor).
    lockRead: (key) => one("operation.lockRead", statements.lockRead(key)),
    lockReadWithSlot: (key, documentID) => one("operation.lockReadWithSlot", statements.lockReadWithSlot(key, documentID)),
    get: (key) => one("operation.get", statements.get(key)),
    getByNodeKey: (nodeKey) =>
      one("operation.getByNodeKey", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE node_key = ${nodeKey}`),
    insert: (row) => changed("operation.insert", sql.unsafe<RawRow>(...statements.insert(row))),
    update,
    updateWithWatch,
    markSent: (key, token, maxAttempts, now) =>
      one("operation.markSent", statements.markSent(key, token, maxAttempts, now)),
    listDue: (now) =>
      healthy(
        "operation.listDue",
        // Two index ranges of (state, next_attempt_at), so the sweep reads
        // the due rows only; the OR form read every attempted row.
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE state = 'attempted' AND next_attempt_at IS NULL
          UNION ALL
          SELECT ${columns} FROM ${table} WHERE state = 'attempted' AND next_attempt_at <= ${now}
          ORDER BY next_attempt_at, caller_did, operation_id`
      ),
    listDuePage: (now, after, limit) => readDuePage("operation.listDuePage", healthy, duePage(now, after, limit), duePositionOf),
    // On SQLite the store's transactions hold the write lock: the page is the caller's alone.
    lockDuePage: readFairOperationPage,
    updateAll: versionedUpdateAll(sql, "operation.updateAll", tables.operation, CHANGEABLE_COLUMNS, OPERATION_KEY, OPERATION_SCHEMA.types),
    lockDeferred: (scope) =>
      healthy(
        "operation.lockDeferred",
        scope.reason === "offline"
          ? sql<RawRow>`SELECT ${columns} FROM ${table} WHERE state = 'attempted' AND defer_reason = 'offline' ${forUpdate(sql)}`
          : sql<RawRow>`SELECT ${columns} FROM ${table}
              WHERE state = 'attempted' AND defer_reason = 'auth'
                AND owner_did = ${scope.ownerDID} AND connector_name IN ${sql.in(scope.connectorNames)} ${forUpdate(sql)}`
      ),
    // On Postgres the planner's cost for the LIMITed probe loop crosses
    // jit_above_cost, and compiling it takes longer than the batch itself
    // (docs/performance.md): JIT is off for this one statement.
    collectFinished: (params, now) =>
      sql.onDialectOrElse({
        pg: () =>
          sql.withTransaction(
            Effect.zipRight(sql`SET LOCAL jit = off`, collectFinishedLocked(sql, tables.operation, params, now))
          ),
        orElse: () => collectFinishedStatement(sql, tables.operation, params, now)
      }).pipe(
        Effect.map((rows) => rows.length),
        PersistenceError.refail("operation.collectFinished")
      ),
    listTracked: (query) =>
      healthy(
        "operation.listTracked",
        sql<RawRow>`SELECT ${columns} FROM ${table} WHERE ${trackedWhere(query)}
          ORDER BY created_at DESC, ${ordered("caller_did")} DESC, ${ordered("operation_id")} DESC
          LIMIT ${query.limit}`
      ),
    listByDocuments: (documentIDs) =>
      documentIDs.length === 0
        ? Effect.succeed([])
        : healthy("operation.listByDocuments", sql<RawRow>`SELECT ${columns} FROM ${table} WHERE document_id IN ${sql.in(documentIDs)}`)
  }
}
