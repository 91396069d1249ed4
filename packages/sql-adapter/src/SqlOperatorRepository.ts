import {
  type OperationState,
  OPERATION_STATES,
  type OperatorOperationQuery,
  OperatorRepository,
  type OperatorWatchQuery,
  PersistenceError,
  RELIST_RUN_STATES,
  type RelistRunState,
  type StoreCounts,
  type VerificationStatus,
  WATCH_STATUSES
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { epoch, type RawRow, text } from "./internal/columns.js"
import { byteOrdered, olderThanPosition } from "./internal/collation.js"
import { rowReaders } from "./internal/queries.js"
import { OPERATION_SCHEMA } from "./SqlOperationRepository.js"
import { RELIST_RUN_SCHEMA } from "./SqlRelistRepository.js"
import { WATCH_SCHEMA } from "./SqlWatchRepository.js"
import { SYNC_STATE_SCHEMA } from "./SqlSyncStateRepository.js"
import type { TableNames } from "./Tables.js"
import { makeSqlOperatorActions } from "./SqlOperatorActions.js"

const countsOf = <K extends string>(keys: ReadonlyArray<K>, rows: ReadonlyArray<RawRow>, column: string): Record<K, number> => {
  const out = Object.fromEntries(keys.map((key) => [key, 0])) as Record<K, number>
  for (const row of rows) {
    const key = text(row[column]) as K
    if (key in out) out[key] = epoch(row["n"])
  }
  return out
}

/** The operator's reads over the SQL tables: filtered keyset pages and the status counts. */
export const makeSqlOperatorRepository = (sql: SqlClient, tables: TableNames): OperatorRepository["Type"] => {
  const operations = sql(tables.operation)
  const watches = sql(tables.projectionWatch)
  const runs = sql(tables.relistRun)
  const candidates = sql(tables.relistCandidate)
  const syncStates = sql(tables.syncState)
  // Only expires_at is read of pending authorizations: the one column every layout of that table has.
  const pendingAuths = sql(tables.pendingAuth)
  const syncRows = rowReaders(SYNC_STATE_SCHEMA.decoder(tables.syncState))
  const ordered = (column: string) => byteOrdered(sql, column)
  const operationRows = rowReaders(OPERATION_SCHEMA.decoder(tables.operation))
  const watchRows = rowReaders(WATCH_SCHEMA.decoder(tables.projectionWatch))
  const runRows = rowReaders(RELIST_RUN_SCHEMA.decoder(tables.relistRun))
  // The in-doubt fact as `isInDoubt` states it.
  const inDoubt = sql`(state <> 'committed' AND (in_doubt_since IS NOT NULL OR send_marker IS NOT NULL))`

  const operationWhere = (query: OperatorOperationQuery) => {
    const clauses = [sql`1 = 1`]
    if (query.ownerDID !== undefined) clauses.push(sql`owner_did = ${query.ownerDID}`)
    if (query.connectorName !== undefined) clauses.push(sql`connector_name = ${query.connectorName}`)
    if (query.callerDID !== undefined) clauses.push(sql`caller_did = ${query.callerDID}`)
    if (query.documentID !== undefined) clauses.push(sql`document_id = ${query.documentID}`)
    if (query.states !== undefined) {
      clauses.push(query.states.length === 0 ? sql`1 = 0` : sql`state IN ${sql.in(query.states)}`)
    }
    if (query.dueBy !== undefined) {
      clauses.push(sql`state = 'attempted' AND (next_attempt_at IS NULL OR next_attempt_at <= ${query.dueBy})`)
    }
    if (query.inDoubt !== undefined) clauses.push(query.inDoubt ? inDoubt : sql`NOT ${inDoubt}`)
    const after = query.after
    if (after !== undefined) {
      clauses.push(olderThanPosition(sql, after))
    }
    return sql.and(clauses)
  }

  const watchWhere = (query: OperatorWatchQuery) => {
    const clauses = [sql`1 = 1`]
    if (query.ownerDID !== undefined) clauses.push(sql`owner_did = ${query.ownerDID}`)
    if (query.connectorName !== undefined) clauses.push(sql`connector_name = ${query.connectorName}`)
    if (query.documentID !== undefined) clauses.push(sql`document_id = ${query.documentID}`)
    if (query.statuses !== undefined) {
      clauses.push(query.statuses.length === 0 ? sql`1 = 0` : sql`verification_status IN ${sql.in(query.statuses)}`)
    }
    if (query.dueBy !== undefined) {
      clauses.push(sql`verification_status <> 'verified' AND next_attempt_at IS NOT NULL AND next_attempt_at <= ${query.dueBy}`)
    }
    const after = query.after
    if (after !== undefined) {
      clauses.push(sql`(${ordered("owner_did")}, ${ordered("connector_name")}, ${ordered("model")}, ${ordered("account_key")}, ${ordered("source_id")})
        > (${after.ownerDID}, ${after.connectorName}, ${after.model}, ${after.accountKey}, ${after.sourceID})`)
    }
    return sql.and(clauses)
  }

  const status = (now: number) =>
    Effect.gen(function*() {
      const byState = yield* sql<RawRow>`SELECT state, COUNT(*) AS n FROM ${operations} GROUP BY state`
      const byStatus = yield* sql<RawRow>`SELECT verification_status, COUNT(*) AS n FROM ${watches} GROUP BY verification_status`
      const byRunState = yield* sql<RawRow>`SELECT state, COUNT(*) AS n FROM ${runs} GROUP BY state`
      const [facts] = yield* sql<RawRow>`SELECT
          (SELECT COUNT(*) FROM ${operations}
            WHERE state = 'attempted' AND lease_token IS NOT NULL AND lease_expires_at > ${now}) AS leases,
          (SELECT COUNT(*) FROM ${operations} WHERE ${inDoubt}) AS in_doubt,
          (SELECT COUNT(*) FROM ${candidates} WHERE status = 'given_up') AS given_up`
      const [oldestOperation] = yield* sql<RawRow>`SELECT caller_did, operation_id, COALESCE(next_attempt_at, created_at) AS due_at
        FROM ${operations} WHERE state = 'attempted' AND (next_attempt_at IS NULL OR next_attempt_at <= ${now})
        ORDER BY due_at, ${ordered("caller_did")}, ${ordered("operation_id")} LIMIT 1`
      const [oldestWatch] = yield* sql<RawRow>`SELECT ${sql.literal(WATCH_SCHEMA.list)} FROM ${watches}
        WHERE verification_status <> 'verified' AND next_attempt_at IS NOT NULL AND next_attempt_at <= ${now}
        ORDER BY next_attempt_at, ${ordered("owner_did")}, ${ordered("connector_name")}, ${ordered("model")},
          ${ordered("account_key")}, ${ordered("source_id")} LIMIT 1`
      const [sync] = yield* sql<RawRow>`SELECT COUNT(*) AS total,
          COUNT(CASE WHEN lease_expires_at > ${now} THEN 1 END) AS held,
          COUNT(CASE WHEN (lease_token IS NOT NULL OR lease_expires_at IS NOT NULL)
            AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}) THEN 1 END) AS stale
        FROM ${syncStates}`
      const [auth] = yield* sql<RawRow>`SELECT COUNT(CASE WHEN expires_at >= ${now} THEN 1 END) AS live,
          COUNT(CASE WHEN expires_at < ${now} THEN 1 END) AS expired
        FROM ${pendingAuths}`
      return {
        at: now,
        operations: countsOf<OperationState>(OPERATION_STATES, byState, "state"),
        watches: countsOf<VerificationStatus>(WATCH_STATUSES, byStatus, "verification_status"),
        relistRuns: countsOf<RelistRunState>(RELIST_RUN_STATES, byRunState, "state"),
        leasesHeld: epoch(facts?.["leases"] ?? 0),
        inDoubt: epoch(facts?.["in_doubt"] ?? 0),
        givenUpCandidates: epoch(facts?.["given_up"] ?? 0),
        oldestDueOperation: oldestOperation === undefined ? null : {
          callerDID: text(oldestOperation["caller_did"]),
          operationID: text(oldestOperation["operation_id"]),
          dueAt: epoch(oldestOperation["due_at"])
        },
        // Only the identity and the due time are read: a due watch whose other columns do not decode still counts.
        oldestDueWatch: oldestWatch === undefined ? null : {
          identity: {
            ownerDID: text(oldestWatch["owner_did"]),
            connectorName: text(oldestWatch["connector_name"]),
            model: text(oldestWatch["model"]),
            accountKey: text(oldestWatch["account_key"]),
            sourceID: text(oldestWatch["source_id"])
          },
          dueAt: epoch(oldestWatch["next_attempt_at"])
        },
        syncStates: {
          total: epoch(sync?.["total"] ?? 0),
          leasesHeld: epoch(sync?.["held"] ?? 0),
          staleLeases: epoch(sync?.["stale"] ?? 0)
        },
        pendingAuthorizations: { live: epoch(auth?.["live"] ?? 0), expired: epoch(auth?.["expired"] ?? 0) }
      } satisfies StoreCounts
    }).pipe(PersistenceError.refail("operator.status"))

  return {
    listOperations: (query) =>
      operationRows.healthy(
        "operator.listOperations",
        sql<RawRow>`SELECT ${sql.literal(OPERATION_SCHEMA.list)} FROM ${operations} WHERE ${operationWhere(query)}
          ORDER BY created_at DESC, ${ordered("caller_did")} DESC, ${ordered("operation_id")} DESC LIMIT ${query.limit}`
      ),
    listWatches: (query) =>
      watchRows.healthy(
        "operator.listWatches",
        sql<RawRow>`SELECT ${sql.literal(WATCH_SCHEMA.list)} FROM ${watches} WHERE ${watchWhere(query)}
          ORDER BY ${ordered("owner_did")}, ${ordered("connector_name")}, ${ordered("model")}, ${ordered("account_key")},
            ${ordered("source_id")} LIMIT ${query.limit}`
      ),
    listRelistRuns: (query) => {
      const clauses = [sql`1 = 1`]
      if (query.states !== undefined) {
        clauses.push(query.states.length === 0 ? sql`1 = 0` : sql`state IN ${sql.in(query.states)}`)
      }
      if (query.after !== undefined) {
        clauses.push(sql`(started_at < ${query.after.startedAt}
          OR (started_at = ${query.after.startedAt} AND ${ordered("run_id")} > ${query.after.runID}))`)
      }
      return runRows.healthy(
        "operator.listRelistRuns",
        sql<RawRow>`SELECT ${sql.literal(RELIST_RUN_SCHEMA.list)} FROM ${runs} WHERE ${sql.and(clauses)}
          ORDER BY started_at DESC, ${ordered("run_id")} LIMIT ${query.limit}`
      )
    },
    listSyncStates: (query) => {
      const clauses = [sql`1 = 1`]
      if (query.connectorName !== undefined) clauses.push(sql`connector_name = ${query.connectorName}`)
      if (query.ownerDID !== undefined) clauses.push(sql`owner_did = ${query.ownerDID}`)
      // The lease states as `syncLeaseStateOf` states them.
      if (query.lease === "none") clauses.push(sql`lease_token IS NULL AND lease_expires_at IS NULL`)
      if (query.lease === "held") clauses.push(sql`lease_expires_at > ${query.at}`)
      if (query.lease === "stale") {
        clauses.push(sql`(lease_token IS NOT NULL OR lease_expires_at IS NOT NULL)
          AND (lease_expires_at IS NULL OR lease_expires_at <= ${query.at})`)
      }
      if (query.after !== undefined) {
        clauses.push(sql`(${ordered("connector_name")}, ${ordered("owner_did")}) > (${query.after.connectorName}, ${query.after.ownerDID})`)
      }
      return syncRows.healthy(
        "operator.listSyncStates",
        sql<RawRow>`SELECT ${sql.literal(SYNC_STATE_SCHEMA.list)} FROM ${syncStates} WHERE ${sql.and(clauses)}
          ORDER BY ${ordered("connector_name")}, ${ordered("owner_did")} LIMIT ${query.limit}`
      )
    },
    status,
    ...makeSqlOperatorActions(sql, tables)
  }
}
