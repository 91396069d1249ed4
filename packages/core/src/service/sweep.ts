import { Clock, Effect, Metric } from "effect"
import { type InvalidInput, type PersistenceError, WinnerReaderMissing } from "../errors.js"
import type { ConnectorOperation } from "../operation/ConnectorOperation.js"
import type { CollectParams } from "../operation/retention.js"
import { collectCorruptRows, type CorruptRowReport } from "../ports/CorruptRows.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { WinnerReader, type WinnerReaders } from "../ports/WinnerReader.js"
import { COLLECT_SHAPE } from "../operation/checks.js"
import { allOptionNames } from "../optionNames.js"
import { fieldOf, Rules, shapeOf, taking, validate } from "../validation.js"
import {
  type Millis,
  type ProjectionWatch,
  type WatchIdentity,
  watchIdentityOf,
  watchKey
} from "../watch/ProjectionWatch.js"
import { isAuditDiverged, isScheduleDue } from "../watch/transitions.js"
import { StoreMetrics } from "./metrics.js"
import { readableWinners } from "./winners.js"

/**
 * How many settled watches one `listDueOperations` call audits: a full pass
 * over every settled watch takes ⌈settled / AUDIT_PAGE⌉ calls
 * (docs/performance.md), so one call's time and memory stay bounded.
 */
export const AUDIT_PAGE = 1_000

/** What the due sweep found. */
export interface DueWork {
  /** Attempted operations whose re-drive is due. */
  readonly operations: ReadonlyArray<ConnectorOperation>
  /** Watches due by schedule, and settled watches of this call's audit page whose winner moved (each once). */
  readonly watches: ReadonlyArray<ProjectionWatch>
  /**
   * The rows the sweep read and left out because they cannot be decoded
   * (each also logged as a warning and counted in
   * `StoreMetrics.corruptRowsSkipped`): every healthy due row is still in
   * `operations` and `watches`. Empty when every row decoded. The operator
   * guide says how to repair one.
   */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
}

/** The due sweep and retention half of the store's Effect API. */
export interface SweepMethods {
  /**
   * The boot/periodic sweep. Reads winners with `readers` when given, else
   * with the store's own; a document whose winner cannot be read is skipped.
   * No transaction is held across the audit. A row that cannot be decoded
   * is left out and reported in `corrupt`; it never stops the sweep.
   */
  readonly listDueOperations: (
    now: Millis,
    readers?: WinnerReaders
  ) => Effect.Effect<DueWork, InvalidInput | WinnerReaderMissing | PersistenceError>
  /**
   * Deletes superseded finished operations last updated before `before`
   * (see `collectableOperations`), at most `limit`; returns how many. Every
   * condition holds on each row when it is deleted, also against concurrent
   * retries, settles and other passes. A deleted row's idempotency key is
   * forgotten: a claim replaying it afterwards is a new operation and sends
   * again, so `before` is the idempotency window; keep it at least 24 hours
   * in the past and longer than any caller may replay a key.
   */
  readonly collectFinishedOperations: (params: CollectParams) => Effect.Effect<number, InvalidInput | PersistenceError>
}

/** The readers `listDueOperations` may be given. */
const READERS_SHAPE = shapeOf(allOptionNames<WinnerReaders>()(["readWinner", "readWinners"]))

/** Builds the sweep methods over the ports. */
export const makeSweepMethods = Effect.gen(function*() {
  const watches = yield* WatchRepository
  const operations = yield* OperationRepository
  const configured = yield* WinnerReader
  // Where the next call's audit page starts, per store instance. The audit
  // is a re-check, so a lost or raced cursor only repeats or restarts a pass.
  let auditAfter: WatchIdentity | undefined

  const methods: SweepMethods = {
    listDueOperations: taking("listDueOperations", ["now", "readers"], [undefined, READERS_SHAPE], (now: Millis, readers?: WinnerReaders) =>
      Effect.gen(function*() {
        yield* validate("listDueOperations", [
          ["now", now, Rules.millis],
          ["readers", readers, (v) => v === undefined ? undefined : Rules.record(v)]
        ])
        const chosen = readers?.readWinner !== undefined || readers?.readWinners !== undefined ? readers : configured
        if (chosen.readWinner === undefined && chosen.readWinners === undefined) {
          return yield* new WinnerReaderMissing({ method: "listDueOperations" })
        }
        // A row that does not decode is left out and reported; every healthy one is still swept.
        const [[due, scheduledRows], dueCorrupt] = yield* collectCorruptRows(
          Effect.zip(operations.listDue(now), watches.listScheduleDue(now))
        )
        const scheduled = scheduledRows.filter((row) => isScheduleDue(row, now))
        const [candidates, auditCorrupt] = yield* collectCorruptRows(watches.listAuditPage(auditAfter, AUDIT_PAGE))
        const last = candidates.at(-1)
        // A page is full when it read AUDIT_PAGE rows, the corrupt ones included: the pass goes on after its last healthy row.
        auditAfter = candidates.length + auditCorrupt.length < AUDIT_PAGE || last === undefined
          ? undefined
          : watchIdentityOf(last)
        const winners = yield* readableWinners(chosen, candidates.map((row) => row.documentID))
        const byIdentity = new Map<string, ProjectionWatch>()
        for (const row of scheduled) byIdentity.set(watchKey(row), row)
        for (const row of candidates) {
          const winner = winners.get(row.documentID)
          if (winner !== undefined && isAuditDiverged(row, winner)) byIdentity.set(watchKey(row), row)
        }
        const dueWatches = Array.from(byIdentity.values())
        yield* Metric.update(Metric.tagged(StoreMetrics.dueSweepSize, "kind", "operations"), due.length)
        yield* Metric.update(Metric.tagged(StoreMetrics.dueSweepSize, "kind", "watches"), dueWatches.length)
        return { operations: due, watches: dueWatches, corrupt: [...dueCorrupt, ...auditCorrupt] }
      })),

    collectFinishedOperations: taking("collectFinishedOperations", ["params"], [COLLECT_SHAPE], (params: CollectParams) =>
      Effect.gen(function*() {
        yield* validate("collectFinishedOperations", [
          ["params", params, Rules.record],
          ["params.before", fieldOf(params, "before"), Rules.finite],
          ["params.limit", fieldOf(params, "limit"), Rules.positiveInt]
        ])
        const now = yield* Clock.currentTimeMillis
        return yield* operations.collectFinished({ before: params.before, limit: params.limit }, now)
      }))
  }
  return methods
})
