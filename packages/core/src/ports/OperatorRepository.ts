import { Context, type Effect } from "effect"
import type { PersistenceError } from "../errors.js"
import type { ConnectorOperation } from "../operation/ConnectorOperation.js"
import { keysetPage } from "../operation/due.js"
import type { OperatorAction, OperatorActionQuery } from "../operator/actions.js"
import type { OperatorOperationQuery, OperatorWatchQuery } from "../operator/queries.js"
import type { StoreCounts } from "../operator/status.js"
import type { OperatorSyncStateQuery } from "../operator/syncStates.js"
import type { SyncStateRow } from "../syncstate/SyncState.js"
import type { RelistRun, RelistRunState } from "../relist/RelistRun.js"
import type { Millis, ProjectionWatch } from "../watch/ProjectionWatch.js"

/** A page of relist runs for an operator: newest started first, then by run id. */
export interface OperatorRelistQuery {
  readonly states?: ReadonlyArray<RelistRunState> | undefined
  readonly limit: number
  /** Only runs strictly after this one in that order. */
  readonly after?: { readonly startedAt: Millis; readonly runID: string } | undefined
}

/** The operator's reads across every table (no `visibleTo`); operator writes go through the other ports' transitions. */
export class OperatorRepository extends Context.Tag("@connector-store/core/OperatorRepository")<OperatorRepository, {
  /** A page as `operatorOperationPage` defines it. */
  readonly listOperations: (query: OperatorOperationQuery) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /** A page as `operatorWatchPage` defines it. */
  readonly listWatches: (query: OperatorWatchQuery) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
  /** The status as `storeStatusOf` defines it, read at `now`. */
  readonly status: (now: Millis) => Effect.Effect<StoreCounts, PersistenceError>
  /** A page of sync-state rows as `operatorSyncStatePage` defines it. */
  readonly listSyncStates: (query: OperatorSyncStateQuery) => Effect.Effect<ReadonlyArray<SyncStateRow>, PersistenceError>
  /** A page of relist runs as `relistRunPage` defines it. */
  readonly listRelistRuns: (query: OperatorRelistQuery) => Effect.Effect<ReadonlyArray<RelistRun>, PersistenceError>
  /** Appends one entry to the audit log. */
  readonly recordAction: (entry: OperatorAction) => Effect.Effect<void, PersistenceError>
  /** A page of the audit log as `operatorActionPage` defines it. */
  readonly listActions: (query: OperatorActionQuery) => Effect.Effect<ReadonlyArray<OperatorAction>, PersistenceError>
}>() {}

/** The reference answer to an `OperatorRelistQuery` over every run. */
export const relistRunPage = (runs: ReadonlyArray<RelistRun>, query: OperatorRelistQuery): ReadonlyArray<RelistRun> => {
  const newestFirst = (a: { startedAt: Millis; runID: string }, b: { startedAt: Millis; runID: string }) =>
    b.startedAt - a.startedAt || (a.runID < b.runID ? -1 : a.runID > b.runID ? 1 : 0)
  return keysetPage(runs, (run) => query.states === undefined || query.states.includes(run.state), newestFirst, query.after, query.limit)
}
