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
import type { TableNames } from "./Tables.js"

/** A run as read from the relist-run table. */
export const decodeRelistRun = (row: RawRow): RelistRun => ({
  runID: text(row["run_id"]),
  ownerDID: text(row["owner_did"]),
  connectorName: text(row["connector_name"]),
  model: text(row["model"]),
  accountKey: text(row["account_key"]),
  state: text(row["state"]) as RelistRunState,
  cursor: textOrNull(row["page_cursor"]),
  pagesCommitted: epoch(row["pages_committed"]),
  receiptCount: epochOrNull(row["receipt_count"]),
  trackedCount: epochOrNull(row["tracked_count"]),
  deletionCount: epochOrNull(row["deletion_count"]),
  divergenceCount: epochOrNull(row["divergence_count"]),
  version: epoch(row["version"]),
  startedAt: epoch(row["started_at"]),
  updatedAt: epoch(row["updated_at"]),
  completedAt: epochOrNull(row["completed_at"]),
  endedAt: epochOrNull(row["ended_at"])
})

/** A receipt as read from the relist-receipt table. */
export const decodeRelistReceipt = (row: RawRow): RelistReceipt => ({
  runID: text(row["run_id"]),
  sourceID: text(row["source_id"]),
  digest: textOrNull(row["digest"]),
  seenAt: epoch(row["seen_at"])
})

/** A candidate as read from the relist-candidate table. */
export const decodeSweepCandidate = (row: RawRow): SweepCandidate => ({
  ownerDID: text(row["owner_did"]),
  connectorName: text(row["connector_name"]),
  model: text(row["model"]),
  accountKey: text(row["account_key"]),
  sourceID: text(row["source_id"]),
  runID: text(row["run_id"]),
  documentID: text(row["document_id"]),
  kind: text(row["kind"]) as SweepCandidateKind,
  providerDigest: textOrNull(row["provider_digest"]),
  localDigest: textOrNull(row["local_digest"]),
  status: text(row["status"]) as SweepCandidateStatus,
  outcome: textOrNull(row["outcome"]) as SweepOutcome | null,
  applyAttempts: epoch(row["apply_attempts"]),
  lastErrorKind: textOrNull(row["last_error_kind"]),
  lastErrorMessage: textOrNull(row["last_error_message"]),
  version: epoch(row["version"]),
  createdAt: epoch(row["created_at"]),
  updatedAt: epoch(row["updated_at"])
})

/** A baseline entry as read from the relist-baseline table. */
export const decodeBaselineEntry = (row: RawRow): RelistBaselineEntry => ({
  sourceID: text(row["source_id"]),
  documentID: text(row["document_id"]),
  watchVersion: epoch(row["watch_version"]),
  watchCreatedAt: epoch(row["watch_created_at"])
})

/** `decodeRelistRun` for the rows of `table`: a row that does not decode throws `CorruptRow` keyed by its run id. */
export const relistRunDecoder = (table: string) => rowDecoder(table, ["run_id"], decodeRelistRun)

const CANDIDATE_KEY = ["owner_did", "connector_name", "model", "account_key", "source_id"]

/** How many source ids go into one IN list (well under every driver's parameter limit). */
const SOURCE_CHUNK = 1000

/** How many receipts go into one INSERT (4 parameters each, well under every driver's limit). */
const RECEIPT_CHUNK = 1000

/** The run's mutable columns, as written. */
const runColumns = (run: RelistRun) => ({
  state: run.state,
  page_cursor: run.cursor,
  pages_committed: run.pagesCommitted,
  receipt_count: run.receiptCount,
  tracked_count: run.trackedCount,
  deletion_count: run.deletionCount,
  divergence_count: run.divergenceCount,
  version: run.version,
  updated_at: run.updatedAt,
  completed_at: run.completedAt,
  ended_at: run.endedAt
})

/** The candidate's mutable columns, as written. */
const candidateColumns = (row: SweepCandidate) => ({
  document_id: row.documentID,
  kind: row.kind,
  provider_digest: row.providerDigest,
  local_digest: row.localDigest,
  status: row.status,
  outcome: row.outcome,
  apply_attempts: row.applyAttempts,
  last_error_kind: row.lastErrorKind,
  last_error_message: row.lastErrorMessage,
  version: row.version,
  updated_at: row.updatedAt
})

/** The relist tables on a SQL client. */
export const makeSqlRelistRepository = (sql: SqlClient, tables: TableNames): RelistRepository["Type"] => {
  const runRow = relistRunDecoder(tables.relistRun)
  const receiptRow = rowDecoder(tables.relistReceipt, ["run_id", "source_id"], decodeRelistReceipt)
  const candidateRow = rowDecoder(tables.relistCandidate, CANDIDATE_KEY, decodeSweepCandidate)
  const baselineRow = rowDecoder(tables.relistBaseline, ["run_id", "source_id"], decodeBaselineEntry)
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
        ? Effect.zipRight(lockScope(scope), sql<RawRow>`SELECT * FROM ${runs} WHERE ${inScope(scope)} AND ${isCurrent} ${forUpdate(sql)}`)
        : sql<RawRow>`SELECT * FROM ${runs} WHERE ${inScope(scope)} AND ${isCurrent}`
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
    getRun: (runID) => decodeFirst("relist.getRun", runRow, sql<RawRow>`SELECT * FROM ${runs} WHERE run_id = ${runID}`),
    lockRun: (runID) =>
      decodeFirst(
        "relist.lockRun",
        runRow,
        locked(tables.relistRun, sql<RawRow>`SELECT * FROM ${runs} WHERE run_id = ${runID} ${forUpdate(sql)}`)
      ),
    getCurrentRun: (scope) => currentRun("relist.getCurrentRun", scope, false),
    lockCurrentRun: (scope) => currentRun("relist.lockCurrentRun", scope, true),
    insertRun: (run) =>
      returnedAny(
        "relist.insertRun",
        sql<RawRow>`INSERT INTO ${runs} ${
          sql.insert({
            run_id: run.runID,
            owner_did: run.ownerDID,
            connector_name: run.connectorName,
            model: run.model,
            account_key: run.accountKey,
            ...runColumns(run),
            started_at: run.startedAt
          })
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
              sql<RawRow>`SELECT * FROM ${baseline} WHERE run_id = ${runID} AND source_id IN ${sql.in(chunk)}`
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
        sql<RawRow>`SELECT * FROM ${receipts} WHERE run_id = ${runID} AND ${after(page)} ORDER BY source_id LIMIT ${page.limit}`
      ),
    deriveCandidates: derive,
    listCandidates: (runID, page) =>
      decodeHealthy(
        "relist.listCandidates",
        candidateRow,
        sql<RawRow>`SELECT c.* FROM ${candidates} c JOIN ${runs} r ON r.run_id = c.run_id
          WHERE c.run_id = ${runID} AND r.state = 'complete' AND c.status IN ('open', 'decided')
            AND ${page.kind === undefined ? sql`1 = 1` : sql`c.kind = ${page.kind}`}
            AND ${after(page, "c.source_id")}
          ORDER BY c.source_id LIMIT ${page.limit}`
      ),
    listGivenUp: (scope, page) =>
      decodeHealthy(
        "relist.listGivenUp",
        candidateRow,
        sql<RawRow>`SELECT * FROM ${candidates} WHERE ${inScope(scope)} AND status = 'given_up' AND ${after(page)}
          ORDER BY source_id LIMIT ${page.limit}`
      ),
    getCandidate: (identity) =>
      decodeFirst("relist.getCandidate", candidateRow, sql<RawRow>`SELECT * FROM ${candidates} WHERE ${byCandidate(identity)}`),
    lockCandidate: (identity) =>
      decodeFirst(
        "relist.lockCandidate",
        candidateRow,
        locked(tables.relistCandidate, sql<RawRow>`SELECT * FROM ${candidates} WHERE ${byCandidate(identity)} ${forUpdate(sql)}`)
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
