import {
  type ConnectorOperation,
  operatorOperationPage,
  OperatorRepository,
  operatorWatchPage,
  type ProjectionWatch,
  type RelistRun,
  relistRunPage,
  storeStatusOf,
  type SweepCandidate
} from "@connector-store/core"
import { Effect } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const all = <A>(db: MemoryDatabase, table: string) => Effect.map(db.read<A>(table), (rows) => Array.from(rows.values()))

/** The operator's reads over the in-memory tables, by the reference rules of core. */
export const makeMemoryOperatorRepository = (db: MemoryDatabase): OperatorRepository["Type"] => ({
  listOperations: (query) => Effect.map(all<ConnectorOperation>(db, "operation"), (rows) => operatorOperationPage(rows, query)),
  listWatches: (query) => Effect.map(all<ProjectionWatch>(db, "projection_watch"), (rows) => operatorWatchPage(rows, query)),
  listRelistRuns: (query) => Effect.map(all<RelistRun>(db, "relist_run"), (rows) => relistRunPage(rows, query)),
  status: (now) =>
    Effect.map(
      Effect.all({
        operations: all<ConnectorOperation>(db, "operation"),
        watches: all<ProjectionWatch>(db, "projection_watch"),
        runs: all<RelistRun>(db, "relist_run"),
        candidates: all<SweepCandidate>(db, "relist_candidate")
      }),
      (tables) => storeStatusOf(tables, now)
    )
})
