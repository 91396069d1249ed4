import type { OperatorOperationFields, OperatorWatchFields } from "../operator/queries.js"
import { Clock, Effect, Option } from "effect"
import { type ConcurrentUpdateExhausted, InvalidInput, type PersistenceError, type WinnerReadFailed } from "../errors.js"
import { asStoredJson, KEY_SHAPE, keyChecks } from "../operation/checks.js"
import { type ConnectorOperation, formatOperationKey, type OperationKey } from "../operation/ConnectorOperation.js"
import { decodeCursor, encodeCursor, positionOf } from "../operation/reads.js"
import { decideRetry } from "../operation/retry.js"
import type { SettleOperationInput, SettleResult } from "../operation/settle.js"
import {
  OPERATION_FILTER_SHAPE,
  operationFilterChecks,
  OPERATOR_RELEASE,
  REARM,
  RELIST_FILTER_SHAPE,
  relistFilterChecks,
  SETTLE_SHAPE,
  settleChecks,
  SYNC_STATE_FILTER_SHAPE,
  syncStateFilterChecks,
  WATCH_FILTER_SHAPE,
  watchFilterChecks
} from "../operator/checks.js"
import {
  decodeRunCursor,
  decodeSyncStateCursor,
  decodeWatchCursor,
  encodeRunCursor,
  encodeSyncStateCursor,
  encodeWatchCursor
} from "../operator/cursors.js"
import { type OperatorSyncState, type OperatorSyncStateFields, toOperatorSyncState } from "../operator/syncStates.js"
import { SyncStateRepository } from "../ports/SyncStateRepository.js"
import { syncStateKeyChecks } from "../syncstate/checks.js"
import { decideOperatorReleaseSyncLease } from "../syncstate/release.js"
import { formatSyncStateKey } from "../syncstate/SyncState.js"
import { OperatorActionRefused, OperatorTargetNotFound } from "../operator/errors.js"
import type { StoreStatus } from "../operator/status.js"
import { type EndFailoverDoubtResult, ServerHistory } from "../ports/ServerHistory.js"
import { unknownDurability } from "../operator/durability.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { OperatorRepository } from "../ports/OperatorRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { WinnerReader } from "../ports/WinnerReader.js"
import type { RelistRun, RelistRunState } from "../relist/RelistRun.js"
import { fieldOf, identityChecks, Rules, shapeOf, taking, validated } from "../validation.js"
import { IDENTITY_SHAPE } from "../watch/checks.js"
import { type Digest, formatWatchIdentity, type Millis, type ProjectionWatch, type WatchIdentity } from "../watch/ProjectionWatch.js"
import { decideArm } from "../watch/transitions.js"
import { makeRunners } from "./hot.js"
import { cursorOf, type OperatorPage, paged } from "./paging.js"
import { settleTransition } from "./programs.js"
import { requireWon, retryOnLostRace } from "./run.js"
import { singleWinnerReader } from "./winners.js"

/** Paging of an operator list: page size (default 50, at most 500) and the previous page's `nextCursor`. */
export interface OperatorPaging {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/** The filter of `listOperations`: every field present narrows (see `OperatorOperationFields`). */
export interface OperatorOperationFilter extends OperatorPaging, OperatorOperationFields {}

/** The filter of `listWatches` (see `OperatorWatchFields`). */
export interface OperatorWatchFilter extends OperatorPaging, OperatorWatchFields {}

/** The filter of `listRelistRuns`. */
export interface OperatorRelistFilter extends OperatorPaging {
  readonly states?: ReadonlyArray<RelistRunState> | undefined
}

/** The filter of `listSyncStates` (see `OperatorSyncStateFields`). */
export interface OperatorSyncStateFilter extends OperatorPaging, OperatorSyncStateFields {}

/** What `releaseSyncLeaseByOperator` did: `released` (the lease was `held` or `stale`), or `not-held` (nothing changed). */
export type OperatorSyncLeaseReleaseResult =
  | { readonly outcome: "released"; readonly was: "held" | "stale"; readonly state: OperatorSyncState }
  | { readonly outcome: "not-held"; readonly state: OperatorSyncState }

export type { OperatorPage } from "./paging.js"

const END_DOUBT_SHAPE = shapeOf(["by"])

type ActionErrors = InvalidInput | PersistenceError | ConcurrentUpdateExhausted | OperatorTargetNotFound | OperatorActionRefused
type ReadErrors = InvalidInput | PersistenceError

/** The operator's half of the Effect API: reads across every row, and a person's actions through the CAS loop. */
export interface OperatorMethods {
  /** A page of every operation that passes the filter, newest first. */
  readonly listOperations: (filter?: OperatorOperationFilter) => Effect.Effect<OperatorPage<ConnectorOperation>, ReadErrors>
  /** A page of every watch that passes the filter, by identity. */
  readonly listWatches: (filter?: OperatorWatchFilter) => Effect.Effect<OperatorPage<ProjectionWatch>, ReadErrors>
  /** A page of relist runs, newest first. */
  readonly listRelistRuns: (filter?: OperatorRelistFilter) => Effect.Effect<OperatorPage<RelistRun>, ReadErrors>
  /** A page of every sync state that passes the filter, by connector and owner; no lease token is shown. */
  readonly listSyncStates: (filter?: OperatorSyncStateFilter) => Effect.Effect<OperatorPage<OperatorSyncState>, ReadErrors>
  /** Releases a sync lease whoever holds it: a live one only with `force`, else `OperatorActionRefused`. */
  readonly releaseSyncLeaseByOperator: (
    connectorName: string,
    ownerDID: string,
    options?: { readonly force?: boolean | undefined }
  ) => Effect.Effect<OperatorSyncLeaseReleaseResult, ActionErrors>
  /** The store's counts and what waits longest, now, with what its deployment guarantees (see `StoreDurability`). */
  readonly getStoreStatus: () => Effect.Effect<StoreStatus, PersistenceError>
  /**
   * Ends the doubt window of a noticed failover or restore now, on behalf of `by` (who, for the record): claims after it are
   * decided as usual. For an operator who has checked that nothing acknowledged was lost (the old primary's last
   * commits compared, or the provider reconciled); `none` when no window is in force.
   */
  readonly endFailoverDoubt: (input: { readonly by: string }) => Effect.Effect<EndFailoverDoubtResult, ReadErrors>
  /** The operation of a node key, whoever called or owns it. */
  readonly findOperationByNodeKey: (nodeKey: string) => Effect.Effect<Option.Option<ConnectorOperation>, ReadErrors>
  /**
   * Settles an operation whose outcome was unknown (`decideSettle`); `committed` arms its watch as a finalize does (with the
   * watch's last winner without a reader).
   */
  readonly settleOperation: (
    key: OperationKey,
    input: SettleOperationInput
  ) => Effect.Effect<SettleResult, ActionErrors | WinnerReadFailed>
  /** Makes a dead operation due again when that is safe (see `decideRetry`). */
  readonly retryOperation: (key: OperationKey) => Effect.Effect<ConnectorOperation, ActionErrors>
  /** Opens a new generation of a watch by hand, due at `dueAt` (with its last winner without a reader). */
  readonly rearmWatch: (
    identity: WatchIdentity,
    options: { readonly dueAt: Millis }
  ) => Effect.Effect<ProjectionWatch, Exclude<ActionErrors, OperatorActionRefused> | WinnerReadFailed>
}

const RELEASE_NAMES = ["connectorName", "ownerDID", "options"]
const RELEASE_TAKINGS = [undefined, undefined, OPERATOR_RELEASE.shape]

/** Builds the operator methods over the ports. */
export const makeOperatorMethods = Effect.gen(function*() {
  const operator = yield* OperatorRepository
  const operations = yield* OperationRepository
  const watches = yield* WatchRepository
  const syncStates = yield* SyncStateRepository
  const { withTransaction } = yield* Transactor
  const readers = yield* WinnerReader
  const hasReader = readers.readWinner !== undefined || readers.readWinners !== undefined

  /** The winner a watch is opened against: read when a reader exists, else `fallback`. */
  const winnerOf = (method: string, documentID: string, fallback: Digest | null) =>
    hasReader
      ? Effect.flatMap(Effect.orDie(singleWinnerReader(method, readers)), (read) => read(documentID))
      : Effect.succeed(fallback)

  const lockOperation = (method: string, key: OperationKey) =>
    Effect.flatMap(operations.lockRead(key), (found) =>
      Effect.mapError(found, () => new OperatorTargetNotFound({ method, what: "operation", identity: formatOperationKey(key) })))

  const { onPorts } = yield* makeRunners
  const history = Option.getOrUndefined(yield* Effect.serviceOption(ServerHistory))
  // With no reader, a settle arms with the watch's last winner.
  const settleReader = hasReader ? yield* Effect.orDie(singleWinnerReader("settleOperation", readers)) : undefined

  const methods: OperatorMethods = {
    listOperations: taking("listOperations", ["filter"], [OPERATION_FILTER_SHAPE], (filter: OperatorOperationFilter = {}) =>
      validated("listOperations", operationFilterChecks(filter), () =>
        Effect.flatMap(cursorOf("listOperations", filter.cursor, decodeCursor), (after) =>
          paged(filter.limit, (limit) =>
            operator.listOperations({
              ownerDID: filter.ownerDID,
              connectorName: filter.connectorName,
              callerDID: filter.callerDID,
              states: filter.states,
              documentID: filter.documentID,
              dueBy: filter.dueBy,
              inDoubt: filter.inDoubt,
              limit,
              after
            }), (last) => encodeCursor(positionOf(last)))))),

    listWatches: taking("listWatches", ["filter"], [WATCH_FILTER_SHAPE], (filter: OperatorWatchFilter = {}) =>
      validated("listWatches", watchFilterChecks(filter), () =>
        Effect.flatMap(cursorOf("listWatches", filter.cursor, decodeWatchCursor), (after) =>
          paged(filter.limit, (limit) =>
            operator.listWatches({
              ownerDID: filter.ownerDID,
              connectorName: filter.connectorName,
              statuses: filter.statuses,
              documentID: filter.documentID,
              dueBy: filter.dueBy,
              limit,
              after
            }), encodeWatchCursor)))),

    listRelistRuns: taking("listRelistRuns", ["filter"], [RELIST_FILTER_SHAPE], (filter: OperatorRelistFilter = {}) =>
      validated("listRelistRuns", relistFilterChecks(filter), () =>
        Effect.flatMap(cursorOf("listRelistRuns", filter.cursor, decodeRunCursor), (after) =>
          paged(filter.limit, (limit) => operator.listRelistRuns({ states: filter.states, limit, after }), encodeRunCursor)))),

    listSyncStates: taking("listSyncStates", ["filter"], [SYNC_STATE_FILTER_SHAPE], (filter: OperatorSyncStateFilter = {}) =>
      validated("listSyncStates", syncStateFilterChecks(filter), () =>
        Effect.flatMap(cursorOf("listSyncStates", filter.cursor, decodeSyncStateCursor), (after) =>
          Effect.flatMap(Clock.currentTimeMillis, (at) =>
            Effect.map(
              paged(filter.limit, (limit) =>
                operator.listSyncStates({
                  connectorName: filter.connectorName,
                  ownerDID: filter.ownerDID,
                  lease: filter.lease,
                  at,
                  limit,
                  after
                }), encodeSyncStateCursor),
              (page) => ({ ...page, items: page.items.map((row) => toOperatorSyncState(row, at)) })
            ))))),

    releaseSyncLeaseByOperator: taking("releaseSyncLeaseByOperator", RELEASE_NAMES, RELEASE_TAKINGS, (
      connectorName: string,
      ownerDID: string,
      options?: { readonly force?: boolean | undefined }
    ) =>
      validated("releaseSyncLeaseByOperator", OPERATOR_RELEASE.checks(options, [...syncStateKeyChecks(connectorName, ownerDID)]), () => {
        const key = { connectorName, ownerDID }
        const identity = formatSyncStateKey(key)
        return retryOnLostRace("releaseSyncLeaseByOperator", identity, withTransaction(Effect.gen(function*() {
          const row = Option.getOrUndefined(yield* syncStates.lockRead(key))
          if (row === undefined) {
            return yield* new OperatorTargetNotFound({ method: "releaseSyncLeaseByOperator", what: "sync state", identity })
          }
          const now = yield* Clock.currentTimeMillis
          const decision = decideOperatorReleaseSyncLease(row, now, { force: options?.force === true })
          if (decision.outcome === "refused") {
            return yield* new OperatorActionRefused({ method: "releaseSyncLeaseByOperator", identity, reason: decision.reason })
          }
          if (decision.outcome === "not-held") return { outcome: "not-held" as const, state: toOperatorSyncState(row, now) }
          yield* requireWon(yield* syncStates.updateLease(decision.write.row, decision.write.expected))
          return { outcome: "released" as const, was: decision.was, state: toOperatorSyncState(decision.write.row, now) }
        })))
      })),

    getStoreStatus: () =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.zipWith(
          operator.status(now),
          history === undefined ? Effect.succeed(unknownDurability("memory")) : history.report,
          (counts, durability): StoreStatus => ({ ...counts, durability })
        )),

    endFailoverDoubt: taking("endFailoverDoubt", ["input"], [END_DOUBT_SHAPE], (input: { readonly by: string }) =>
      validated("endFailoverDoubt", [["input", input, Rules.record], ["input.by", fieldOf(input, "by"), Rules.id]], () =>
        history === undefined
          ? Effect.succeed<EndFailoverDoubtResult>({ outcome: "none" })
          : Effect.flatMap(Clock.currentTimeMillis, (now) => history.endDoubt(input.by, now)))),

    findOperationByNodeKey: (nodeKey) =>
      validated("findOperationByNodeKey", [["nodeKey", nodeKey, Rules.id]], () => operations.getByNodeKey(nodeKey)),

    settleOperation: taking("settleOperation", ["key", "input"], [KEY_SHAPE, SETTLE_SHAPE], (key: OperationKey, input: SettleOperationInput) =>
      validated("settleOperation", [...keyChecks("key", key), ...settleChecks(input)], () => {
        const stored: SettleOperationInput = input.outcome === "committed"
          ? { ...input, resultEntity: asStoredJson(input.resultEntity) }
          : { outcome: "dead" }
        return onPorts(settleTransition(key, stored), settleReader)
      })),

    retryOperation: taking("retryOperation", ["key"], [KEY_SHAPE], (key: OperationKey) =>
      validated("retryOperation", keyChecks("key", key), () =>
        retryOnLostRace("retryOperation", formatOperationKey(key), withTransaction(Effect.gen(function*() {
          const row = yield* lockOperation("retryOperation", key)
          const decision = decideRetry(row, yield* Clock.currentTimeMillis)
          if (!decision.retried) {
            return yield* new OperatorActionRefused({ method: "retryOperation", identity: formatOperationKey(key), reason: decision.reason })
          }
          yield* requireWon(yield* operations.update(row, decision.next))
          return decision.next
        }))))),

    rearmWatch: taking("rearmWatch", ["identity", "options"], [IDENTITY_SHAPE, REARM.shape], (identity: WatchIdentity, options: { readonly dueAt: Millis }) =>
      validated("rearmWatch", REARM.checks(options, identityChecks("identity", identity)), () =>
        retryOnLostRace("rearmWatch", formatWatchIdentity(identity), withTransaction(Effect.gen(function*() {
          const row = Option.getOrUndefined(yield* watches.lockRead(identity))
          if (row === undefined) {
            return yield* new OperatorTargetNotFound({ method: "rearmWatch", what: "watch", identity: formatWatchIdentity(identity) })
          }
          const winner = yield* winnerOf("rearmWatch", row.documentID, row.observedWinnerDigest)
          const decision = decideArm(row, { reason: "manual", dueAt: options.dueAt }, winner, yield* Clock.currentTimeMillis)
          if (decision.next === undefined) return yield* Effect.dieMessage("a manual arm of an existing watch decided no write")
          yield* requireWon(yield* watches.update(row, decision.next))
          return decision.next
        })))))
  }
  return methods
})
