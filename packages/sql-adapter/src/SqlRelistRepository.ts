import {
  PersistenceError,
  type RelistBaselineEntry,
  type RelistReceipt,
  RelistRepository,
  relistScopeKey,
  type RelistRun,
  type RelistRunState,
  type RelistScope,
  type SourcePage,
  type SweepCandidate,
  type SweepCandidateIdentity,
  type SweepCandidateKind,
  type SweepCandidateStatus,
  type SweepOutcome
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { epoch, epochOrNull, type RawRow, rowDecoder, text, textOrNull } from "./internal/columns.js"
import { forUpdate, makeSqlTransactor, takeWriteLock } from "./SqlTransactor.js"
import { decodeAll, decodeFirst, decodeHealthy, returnedAny } from "./internal/queries.js"
import { columnsOf, rowSchema } from "./internal/rows.js"
import type { TableNames } from "./Tables.js"

const runColumn = columnsOf<RelistRun>()

/** The relist-run table's row. */
export const RELIST_RUN_SCHEMA = rowSchema<RelistRun>([
  runColumn("run_id", "runID", text, "text"),
  runColumn("owner_did", "ownerDID", text, "text"),
  runColumn("connector_name", "connectorName", text, "text"),
  runColumn("model", "model", text, "text"),
  runColumn("account_key", "accountKey", text, "text"),
  runColumn("state", "state", (value) => text(value) as RelistRunState, "text"),
  runColumn("page_cursor", "cursor", textOrNull, "text"),
  runColumn("pages_committed", "pagesCommitted", epoch, "integer"),
  runColumn("receipt_count", "receiptCount", epochOrNull, "integer"),
  runColumn("tracked_count", "trackedCount", epochOrNull, "integer"),
  runColumn("deletion_count", "deletionCount", epochOrNull, "integer"),
  runColumn("divergence_count", "divergenceCount", epochOrNull, "integer"),
  runColumn("version", "version", epoch, "integer"),
  runColumn("started_at", "startedAt", epoch, "bigint"),
  runColumn("updated_at", "updatedAt", epoch, "bigint"),
  runColumn("completed_at", "completedAt", epochOrNull, "bigint"),
  runColumn("ended_at", "endedAt", epochOrNull, "bigint")
], ["run_id"])

const receiptColumn = columnsOf<RelistReceipt>()

/** The relist-receipt table's row. */
const RECEIPT_SCHEMA = rowSchema<RelistReceipt>([
  receiptColumn("run_id", "runID", text, "text"),
  receiptColumn("source_id", "sourceID", text, "text"),
  receiptColumn("digest", "digest", textOrNull, "text"),
  receiptColumn("seen_at", "seenAt", epoch, "bigint")
], ["run_id", "source_id"])

const candidateColumn = columnsOf<SweepCandidate>()

/** The relist-candidate table's row. */
const CANDIDATE_SCHEMA = rowSchema<SweepCandidate>([
  candidateColumn("owner_did", "ownerDID", text, "text"),
  candidateColumn("connector_name", "connectorName", text, "text"),
  candidateColumn("model", "model", text, "text"),
  candidateColumn("account_key", "accountKey", text, "text"),
  candidateColumn("source_id", "sourceID", text, "text"),
  candidateColumn("run_id", "runID", text, "text"),
  candidateColumn("document_id", "documentID", text, "text"),
  candidateColumn("kind", "kind", (value) => text(value) as SweepCandidateKind, "text"),
  candidateColumn("provider_digest", "providerDigest", textOrNull, "text"),
  candidateColumn("local_digest", "localDigest", textOrNull, "text"),
  candidateColumn("status", "status", (value) => text(value) as SweepCandidateStatus, "text"),
  candidateColumn("outcome", "outcome", (value) => textOrNull(value) as SweepOutcome | null, "text"),
  candidateColumn("apply_attempts", "applyAttempts", epoch, "integer"),
  candidateColumn("last_error_kind", "lastErrorKind", textOrNull, "text"),
  candidateColumn("last_error_message", "lastErrorMessage", textOrNull, "text"),
  candidateColumn("version", "version", epoch, "integer"),
  candidateColumn("created_at", "createdAt", epoch, "bigint"),
  candidateColumn("updated_at", "updatedAt", epoch, "bigint")
], ["owner_did", "connector_name", "model", "account_key", "source_id"])

const baselineColumn = columnsOf<RelistBaselineEntry & { readonly runID: string }>()

/** The relist-baseline table's row (its run id keys it and is not part of an entry). */
const BASELINE_SCHEMA = rowSchema([
  baselineColumn("run_id", "runID", text, "text"),
  baselineColumn("source_id", "sourceID", text, "text"),
  baselineColumn("document_id", "documentID", text, "text"),
  baselineColumn("watch_version", "watchVersion", epoch, "integer"),
  baselineColumn("watch_created_at", "watchCreatedAt", epoch, "bigint")
], ["run_id", "source_id"])

/** A run as read from the relist-run table. */
export const decodeRelistRun = RELIST_RUN_SCHEMA.decode

/** A receipt as read from the relist-receipt table. */
export const decodeRelistReceipt = RECEIPT_SCHEMA.decode

/** A candidate as read from the relist-candidate table. */
export const decodeSweepCandidate = CANDIDATE_SCHEMA.decode

/** A baseline entry as read from the relist-baseline table. */
export const decodeBaselineEntry = (row: RawRow): RelistBaselineEntry => {
  const { runID: _, ...entry } = BASELINE_SCHEMA.decode(row)
  return entry
}

/** `decodeRelistRun` for the rows of `table`: a row that does not decode throws `CorruptRow` keyed by its run id. */
export const relistRunDecoder = RELIST_RUN_SCHEMA.decoder

/** How many source ids go into one IN list (well under every driver's parameter limit). */
const SOURCE_CHUNK = 1000

/** How many receipts go into one INSERT (4 parameters each, well under every driver's limit). */
const RECEIPT_CHUNK = 1000

/** The run's mutable columns. */
const RUN_CHANGES = [
  "state", "page_cursor", "pages_committed", "receipt_count", "tracked_count", "deletion_count", "divergence_count",
  "version", "updated_at", "completed_at", "ended_at"
]

/** The candidate's mutable columns. */
const CANDIDATE_CHANGES = [
  "document_id", "kind", "provider_digest", "local_digest", "status", "outcome", "apply_attempts", "last_error_kind",
  "last_error_message", "version", "updated_at"
]

/** The run's mutable columns, as written. */
const runColumns = (run: RelistRun) => RELIST_RUN_SCHEMA.record(run, RUN_CHANGES)

/** The candidate's mutable columns, as written. */
const candidateColumns = (row: SweepCandidate) => CANDIDATE_SCHEMA.record(row, CANDIDATE_CHANGES)

/** The relist tables on a SQL client. */
export const makeSqlRelistRepository = (sql: SqlClient, tables: TableNames): RelistRepository["Type"] => {
  const runRow = relistRunDecoder(tables.relistRun)
  const receiptRow = RECEIPT_SCHEMA.decoder(tables.relistReceipt)
  const candidateRow = CANDIDATE_SCHEMA.decoder(tables.relistCandidate)
  const baselineRow = rowDecoder(tables.relistBaseline, BASELINE_SCHEMA.key, decodeBaselineEntry)
  const runList = sql.literal(RELIST_RUN_SCHEMA.list)
  const receiptList = sql.literal(RECEIPT_SCHEMA.list)
  const candidateList = sql.literal(CANDIDATE_SCHEMA.list)
  const baselineList = sql.literal(BASELINE_SCHEMA.list)
  const runs = sql(tables.relistRun)
  const receipts = sql(tables.relistReceipt)
  const candidates = sql(tables.relistCandidate)
  const watches = sql(tables.projectionWatch)
  const baseline = sql(tables.relistBaseline)
  const { withTransaction } = makeSqlTransactor(sql, tables.migrations)

  const inScope = (scope: RelistScope, alias?: string) => {
    const column = (name: string) => sql(alias === undefined ? name : `${alias}.${name}`)
    return sql`${column("owner_did")} = ${scope.ownerDID} AND ${column("connector_name")} = ${scope.connectorName}
      AND ${column("model")} = ${scope.model} AND ${column("account_key")} = ${scope.accountKey}`
  }
  const isCurrent = sql`state IN ('started', 'listing', 'complete')`
  const byCandidate = (id: SweepCandidateIdentity) => sql`${inScope(id)} AND source_id = ${id.sourceID}`
  const after = (page: SourcePage, column = "source_id") =>
    page.after === undefined ? sql`1 = 1` : sql`${sql(column)} > ${page.after}`

  const locked = (table: string, query: Effect.Effect<ReadonlyArray<RawRow>, unknown>) =>
    Effect.zipRight(takeWriteLock(sql, table), query)

  // On Postgres the scope itself is locked (a transaction-scoped advisory
  // lock on its name), not only its current row: a start that waited for
  // another start would otherwise re-check the row it waited on, find it
  // superseded, miss the new one, and lose its insert; serialized per scope,
  // every start reads the run the previous one left.
  const lockScope = (scope: RelistScope): Effect.Effect<void, SqlError> =>
    sql.onDialectOrElse({
      pg: () =>
        Effect.asVoid(
          sql`SELECT pg_advisory_xact_lock(hashtextextended(${JSON.stringify([tables.relistRun, relistScopeKey(scope)])}, 0))`
        ),
      orElse: () => takeWriteLock(sql, tables.relistRun)
    })
  const currentRun = (operation: string, scope: RelistScope, lock: boolean) =>
    decodeFirst(
      operation,
      runRow,
      lock
        ? Effect.zipRight(lockScope(scope), sql<RawRow>`SELECT ${runList} FROM ${runs} WHERE ${inScope(scope)} AND ${isCurrent} ${forUpdate(sql)}`)
        : sql<RawRow>`SELECT ${runList} FROM ${runs} WHERE ${inScope(scope)} AND ${isCurrent}`
    )

  // One statement per step, each set-based: the scope's old cases go (given-up
  // ones stay), then every judged watch of the scope is matched against the
  // run's receipts by index and its case written; a given-up case that is
  // derived again only follows the new run.
  const derive = (run: RelistRun, now: number) =>
    Effect.gen(function*() {
      yield* sql`DELETE FROM ${candidates} WHERE ${inScope(run)} AND status <> 'given_up'`
      yield* sql`INSERT INTO ${candidates} (
          run_id, source_id, owner_did, connector_name, model, account_key, document_id, kind,
          provider_digest, local_digest, status, outcome, apply_attempts, last_error_kind, last_error_message,
          version, created_at, updated_at
        )
        SELECT ${run.runID}, w.source_id, w.owner_did, w.connector_name, w.model, w.account_key, w.document_id,
          CASE WHEN r.source_id IS NULL THEN 'deleted' ELSE 'diverged' END,
          r.digest, w.verified_state_digest, 'open', NULL, 0, NULL, NULL, 0, ${now}, ${now}
        FROM ${watches} w
        JOIN ${baseline} b ON b.run_id = ${run.runID} AND b.source_id = w.source_id
          AND b.document_id = w.document_id AND b.watch_version = w.version AND b.watch_created_at = w.created_at
        LEFT JOIN ${receipts} r ON r.run_id = ${run.runID} AND r.source_id = w.source_id
        WHERE ${inScope(run, "w")}
          AND (r.source_id IS NULL OR (r.digest IS NOT NULL AND w.verified_state_digest IS NOT NULL
            AND r.digest <> w.verified_state_digest))
        ON CONFLICT (owner_did, connector_name, model, account_key, source_id) DO UPDATE SET
          run_id = excluded.run_id,
          document_id = excluded.document_id,
          kind = excluded.kind,
          provider_digest = excluded.provider_digest,
          local_digest = excluded.local_digest,
          version = ${candidates}.version + 1,
          updated_at = excluded.updated_at`
      // Only derived candidates' entries are read again (by the re-derivation).
      yield* sql`DELETE FROM ${baseline} WHERE run_id = ${run.runID} AND NOT EXISTS (
          SELECT 1 FROM ${candidates} c WHERE ${inScope(run, "c")} AND c.source_id = ${baseline}.source_id AND c.run_id = ${run.runID})`
      const [counts] = yield* sql<RawRow>`SELECT
          (SELECT COUNT(*) FROM ${receipts} WHERE run_id = ${run.runID}) AS receipts,
          (SELECT COUNT(*) FROM ${watches} WHERE ${inScope(run)}) AS tracked,
          (SELECT COUNT(*) FROM ${candidates} WHERE run_id = ${run.runID} AND kind = 'deleted') AS deletions,
          (SELECT COUNT(*) FROM ${candidates} WHERE run_id = ${run.runID} AND kind = 'diverged') AS divergences`
      return {
        receipts: epoch(counts?.["receipts"]),
        tracked: epoch(counts?.["tracked"]),
        deletions: epoch(counts?.["deletions"]),
        divergences: epoch(counts?.["divergences"])
      }
    }).pipe(PersistenceError.refail("relist.deriveCandidates"))

  const collect = (before: number, limit: number) =>
    withTransaction(
      Effect.gen(function*() {
        yield* takeWriteLock(sql, tables.relistRun)
        const doomed = (yield* sql<RawRow>`SELECT run_id FROM ${runs}
          WHERE state IN ('abandoned', 'superseded') AND updated_at < ${before}
          ORDER BY updated_at, run_id LIMIT ${limit} ${forUpdate(sql)}`).map((row) => text(row["run_id"]))
        if (doomed.length === 0) return 0
        yield* sql`DELETE FROM ${receipts} WHERE run_id IN ${sql.in(doomed)}`
        yield* sql`DELETE FROM ${baseline} WHERE run_id IN ${sql.in(doomed)}`
        yield* sql`DELETE FROM ${candidates} WHERE run_id IN ${sql.in(doomed)} AND status <> 'given_up'`
        return (yield* sql<RawRow>`DELETE FROM ${runs} WHERE run_id IN ${sql.in(doomed)} RETURNING run_id`).length
      }).pipe(PersistenceError.refail("relist.collectRuns"))
    )

  return {
    getRun: (runID) => decodeFirst("relist.getRun", runRow, sql<RawRow>`SELECT ${runList} FROM ${runs} WHERE run_id = ${runID}`),
    lockRun: (runID) =>
      decodeFirst(
        "relist.lockRun",
        runRow,
        locked(tables.relistRun, sql<RawRow>`SELECT ${runList} FROM ${runs} WHERE run_id = ${runID} ${forUpdate(sql)}`)
      ),
    getCurrentRun: (scope) => currentRun("relist.getCurrentRun", scope, false),
    lockCurrentRun: (scope) => currentRun("relist.lockCurrentRun", scope, true),
    insertRun: (run) =>
      returnedAny(
        "relist.insertRun",
        sql<RawRow>`INSERT INTO ${runs} ${
          sql.insert(RELIST_RUN_SCHEMA.record(run, RELIST_RUN_SCHEMA.columns.map((column) => column.name)))
        } ON CONFLICT DO NOTHING RETURNING run_id`
      ),
    updateRun: (next, expectedVersion) =>
      returnedAny(
        "relist.updateRun",
        sql<RawRow>`UPDATE ${runs} SET ${sql.update(runColumns(next))}
          WHERE run_id = ${next.runID} AND version = ${expectedVersion} RETURNING run_id`
      ),
    putBaseline: (run) =>
      sql`INSERT INTO ${baseline} (run_id, source_id, document_id, watch_version, watch_created_at)
        SELECT ${run.runID}, w.source_id, w.document_id, w.version, w.created_at FROM ${watches} w WHERE ${inScope(run, "w")}
        ON CONFLICT (run_id, source_id) DO NOTHING`.pipe(Effect.asVoid, PersistenceError.refail("relist.putBaseline")),
    getBaseline: (runID, sourceIDs) => {
      const distinct = Array.from(new Set(sourceIDs))
      return Effect.map(
        Effect.forEach(
          Array.from({ length: Math.ceil(distinct.length / SOURCE_CHUNK) }, (_, i) => distinct.slice(i * SOURCE_CHUNK, (i + 1) * SOURCE_CHUNK)),
          (chunk) =>
            decodeAll(
              "relist.getBaseline",
              baselineRow,
              sql<RawRow>`SELECT ${baselineList} FROM ${baseline} WHERE run_id = ${runID} AND source_id IN ${sql.in(chunk)}`
            )
        ),
        (pages) => pages.flat()
      )
    },
    putReceipts: (runID, list, seenAt) =>
      Effect.forEach(
        Array.from({ length: Math.ceil(list.length / RECEIPT_CHUNK) }, (_, i) => list.slice(i * RECEIPT_CHUNK, (i + 1) * RECEIPT_CHUNK)),
        (chunk) =>
          sql`INSERT INTO ${receipts} ${
            sql.insert(chunk.map((receipt) => ({ run_id: runID, source_id: receipt.sourceID, digest: receipt.digest, seen_at: seenAt })))
          } ON CONFLICT (run_id, source_id) DO UPDATE SET digest = excluded.digest, seen_at = excluded.seen_at`,
        { discard: true }
      ).pipe(PersistenceError.refail("relist.putReceipts")),
    listReceipts: (runID, page) =>
      decodeHealthy(
        "relist.listReceipts",
        receiptRow,
        sql<RawRow>`SELECT ${receiptList} FROM ${receipts} WHERE run_id = ${runID} AND ${after(page)} ORDER BY source_id LIMIT ${page.limit}`
      ),
    deriveCandidates: derive,
    listCandidates: (runID, page) =>
      decodeHealthy(
        "relist.listCandidates",
        candidateRow,
        sql<RawRow>`SELECT ${sql.literal(CANDIDATE_SCHEMA.listOf("c"))} FROM ${candidates} c JOIN ${runs} r ON r.run_id = c.run_id
          WHERE c.run_id = ${runID} AND r.state = 'complete' AND c.status IN ('open', 'decided')
            AND ${page.kind === undefined ? sql`1 = 1` : sql`c.kind = ${page.kind}`}
            AND ${after(page, "c.source_id")}
          ORDER BY c.source_id LIMIT ${page.limit}`
      ),
    listGivenUp: (scope, page) =>
      decodeHealthy(
        "relist.listGivenUp",
        candidateRow,
        sql<RawRow>`SELECT ${candidateList} FROM ${candidates} WHERE ${inScope(scope)} AND status = 'given_up' AND ${after(page)}
          ORDER BY source_id LIMIT ${page.limit}`
      ),
    getCandidate: (identity) =>
      decodeFirst("relist.getCandidate", candidateRow, sql<RawRow>`SELECT ${candidateList} FROM ${candidates} WHERE ${byCandidate(identity)}`),
    lockCandidate: (identity) =>
      decodeFirst(
        "relist.lockCandidate",
        candidateRow,
        locked(tables.relistCandidate, sql<RawRow>`SELECT ${candidateList} FROM ${candidates} WHERE ${byCandidate(identity)} ${forUpdate(sql)}`)
      ),
    updateCandidate: (next, expectedVersion) =>
      returnedAny(
        "relist.updateCandidate",
        sql<RawRow>`UPDATE ${candidates} SET ${sql.update(candidateColumns(next))}
          WHERE ${byCandidate(next)} AND run_id = ${next.runID} AND version = ${expectedVersion} RETURNING version`
      ),
    collectRuns: (params) => collect(params.before, params.limit)
  }
}
