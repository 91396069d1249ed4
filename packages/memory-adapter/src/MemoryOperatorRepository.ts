import {
  type ConnectorOperation,
  type OperatorAction,
  operatorActionPage,
  operatorOperationPage,
  OperatorRepository,
  operatorWatchPage,
  type ProjectionWatch,
  type RelistRun,
  storeStatusOf,
  type SweepCandidate,
  operatorSyncStatePage,
  type SyncStateRow
} from "@connector-store/core"
import { relistRunPage, decodeJsonColumn } from "@connector-store/core/adapter"
import { Effect } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const all = <A>(db: MemoryDatabase, table: string) => Effect.map(db.read<A>(table), (rows) => Array.from(rows.values()))

/** The sync-state rows, their JSON columns decoded from the text kept in memory. */
const syncStateRows = (db: MemoryDatabase) =>
  Effect.map(all<Omit<SyncStateRow, "checkpoint" | "recovery"> & { checkpoint: string | null; recovery: string | null }>(db, "sync_state"), (rows) =>
    rows.map((row): SyncStateRow => ({ ...row, checkpoint: decodeJsonColumn(row.checkpoint), recovery: decodeJsonColumn(row.recovery) })))

/** The operator's reads over the in-memory tables, by the reference rules of core. */
export const makeMemoryOperatorRepository = (db: MemoryDatabase): OperatorRepository["Type"] => ({
  listOperations: (query) => Effect.map(all<ConnectorOperation>(db, "operation"), (rows) => operatorOperationPage(rows, query)),
  listWatches: (query) => Effect.map(all<ProjectionWatch>(db, "projection_watch"), (rows) => operatorWatchPage(rows, query)),
  listSyncStates: (query) => Effect.map(syncStateRows(db), (rows) => operatorSyncStatePage(rows, query)),
  listRelistRuns: (query) => Effect.map(all<RelistRun>(db, "relist_run"), (rows) => relistRunPage(rows, query)),
  status: (now) =>
    Effect.map(
      Effect.all({
        operations: all<ConnectorOperation>(db, "operation"),
        watches: all<ProjectionWatch>(db, "projection_watch"),
        runs: all<RelistRun>(db, "relist_run"),
        candidates: all<SweepCandidate>(db, "relist_candidate"),
        syncStates: syncStateRows(db),
        pendingAuthExpiries: Effect.map(all<{ readonly expiresAt: number }>(db, "pending_auth"), (rows) => rows.map((row) => row.expiresAt))
      }),
      (tables) => storeStatusOf(tables, now)
    ),
  recordAction: (entry) =>
    db.write<OperatorAction, void>("operator_action", (table) => {
      table.set(entry.actionID, entry)
    }),
  listActions: (query) => Effect.map(all<OperatorAction>(db, "operator_action"), (rows) => operatorActionPage(rows, query))
})
