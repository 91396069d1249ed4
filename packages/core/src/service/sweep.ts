import { Clock, Effect, Metric } from "effect"
import { type InvalidInput, type PersistenceError, WinnerReaderMissing } from "../errors.js"
import type { ConnectorOperation } from "../operation/ConnectorOperation.js"
import type { DueOperationPosition } from "../operation/due.js"
import type { CollectParams } from "../operation/retention.js"
import { decodeTagged, encodeCursorParts } from "../operator/cursors.js"
import { collectCorruptRows, type CorruptRowReport } from "../ports/CorruptRows.js"
import type { DueRead } from "../ports/DueRead.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { WinnerReader, type WinnerReaders } from "../ports/WinnerReader.js"
import { COLLECT_SHAPE } from "../operation/checks.js"
import { allOptionNames } from "../optionNames.js"
import { atMost, fieldOf, optional, type Rule, Rules, shapeOf, taking, validate } from "../validation.js"
import type { DueWatchPosition } from "../watch/due.js"
import {
  type Millis,
  type ProjectionWatch,
  type WatchIdentity,
  watchIdentityOf,
  watchKey
} from "../watch/ProjectionWatch.js"
import { isAuditDiverged, isScheduleDue } from "../watch/transitions.js"
import { StoreMetrics } from "./metrics.js"
import { badCursor } from "./paging.js"
import { readableWinners } from "./winners.js"

/**
 * How many settled watches one `listDueOperations` call audits (a
 * `listDueWork` call audits at most its `limit` of them, and never more
 * than this): a full pass over every settled watch takes
 * ⌈settled / AUDIT_PAGE⌉ calls (docs/performance.md), so one call's time
 * and memory stay bounded.
 */
export const AUDIT_PAGE = 1_000

/** The largest `limit` of `listDueWork`. */
export const MAX_DUE_PAGE = 10_000

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

/** The parameters of `listDueWork`. */
export interface DueWorkParams {
  /** What is due by (epoch ms): pass `store.now()`. */
  readonly now: Millis
  /** At most this many operations, and this many watches due by schedule, per page: 1 to `MAX_DUE_PAGE`. */
  readonly limit: number
  /** The `cursor` of the previous page of the pass; absent for its first page. */
  readonly cursor?: string | undefined
  /** Winner readers for this page's audit; the store's own when absent. */
  readonly readers?: WinnerReaders | undefined
}

/** One page of the due sweep (see `listDueWork`). */
export interface DuePage {
  /** At most `limit` attempted operations whose re-drive is due, in the due order (unscheduled first, then by next attempt, then by key). */
  readonly operations: ReadonlyArray<ConnectorOperation>
  /**
   * At most `limit` watches due by schedule, in the due order (by next
   * attempt, then by identity), then the settled watches of this page's
   * audit whose winner moved; each watch once.
   */
  readonly watches: ReadonlyArray<ProjectionWatch>
  /**
   * The rows this page read and left out because they cannot be decoded
   * (each also logged as a warning and counted in
   * `StoreMetrics.corruptRowsSkipped`). The cursor moves past them, so a
   * page may hold fewer rows than `limit` and the pass still goes on.
   */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
  /**
   * An opaque string to pass as the next call's `cursor` for the next page
   * of this pass, or `null` when the pass has read every due operation and
   * every watch due by schedule.
   */
  readonly cursor: string | null
}

/** The due sweep and retention half of the store's Effect API. */
export interface SweepMethods {
  /**
   * The boot/periodic sweep, in one answer: every due operation and every
   * watch due by schedule, however many. Reads winners with `readers` when
   * given, else with the store's own; a document whose winner cannot be
   * read is skipped. No transaction is held across the audit. A row that
   * cannot be decoded is left out and reported in `corrupt`; it never stops
   * the sweep. For a backlog that may be large (after an outage), page
   * through it with `listDueWork`, whose time and memory are bounded by its
   * `limit`.
   */
  readonly listDueOperations: (
    now: Millis,
    readers?: WinnerReaders
  ) => Effect.Effect<DueWork, InvalidInput | WinnerReaderMissing | PersistenceError>
  /**
   * The due sweep a page at a time: at most `limit` due operations and at
   * most `limit` watches due by schedule, each in the due order, from where
   * `cursor` left off, and one audit page of at most `limit` settled
   * watches (`AUDIT_PAGE` at most) as `listDueOperations` audits them.
   * Each page reads index ranges of `limit` rows, so its time and memory
   * do not grow with the backlog. Pass the page's `cursor` back until it is
   * `null`: the pass returns every row due when it reaches it exactly once,
   * in order. A row that falls due, or is rescheduled, after the position
   * the pass reached in its kind shows up in a later page; one due before
   * that position waits for the next pass (a call with no `cursor`). A row
   * that cannot be decoded is reported in `corrupt` and passed over.
   * `limit` above `MAX_DUE_PAGE`, or a `cursor` this store did not return,
   * is refused with `InvalidInput`.
   */
  readonly listDueWork: (
    params: DueWorkParams
  ) => Effect.Effect<DuePage, InvalidInput | WinnerReaderMissing | PersistenceError>
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

/** The readers `listDueOperations` and `listDueWork` may be given. */
const READERS_SHAPE = shapeOf(allOptionNames<WinnerReaders>()(["readWinner", "readWinners"]))

/** The parameters of `listDueWork`; its readers are taken as `listDueOperations` takes them. */
const DUE_WORK_SHAPE = shapeOf(allOptionNames<DueWorkParams>()(["now", "limit", "cursor", "readers"]), { readers: READERS_SHAPE })

/** A page size from 1 to `MAX_DUE_PAGE`. */
const duePageSize: Rule = atMost(Rules.positiveInt, MAX_DUE_PAGE)

/** A kind whose pass has read its last page. */
const DONE = "done"

/** Where a pass stands in one kind: after a position, from the first (`undefined`), or `DONE`. */
type KindPosition<P> = P | undefined | typeof DONE

/** Where a pass of `listDueWork` stands, in each kind. */
interface DuePosition {
  readonly operations: KindPosition<DueOperationPosition>
  readonly watches: KindPosition<DueWatchPosition>
}

const FIRST_PAGE: DuePosition = { operations: undefined, watches: undefined }

/**
 * The cursor of a position: base64url of the JSON array `["due", operations,
 * watches]`, each kind `"done"` or its last row's position as an array
 * (`[nextAttemptAt, callerDID, operationID]`, `[nextAttemptAt, ownerDID,
 * connectorName, model, accountKey, sourceID]`).
 */
const encodeDueCursor = (position: DuePosition): string => {
  const { operations: ops, watches: due } = position
  return encodeCursorParts([
    "due",
    ops === DONE || ops === undefined ? DONE : [ops.nextAttemptAt, ops.callerDID, ops.operationID],
    due === DONE || due === undefined
      ? DONE
      : [due.nextAttemptAt, due.ownerDID, due.connectorName, due.model, due.accountKey, due.sourceID]
  ])
}

const isTimeOrNull = (value: unknown): value is number | null => value === null || Number.isSafeInteger(value)
const areStrings = (values: ReadonlyArray<unknown>): values is ReadonlyArray<string> =>
  values.every((value) => typeof value === "string")

/** The position a cursor names, or `undefined` when it is not one `encodeDueCursor` made. */
const decodeDueCursor = (cursor: string): DuePosition | undefined => {
  const parts = decodeTagged(cursor, "due", 3)
  if (parts === undefined) return undefined
  const [ops, due] = parts
  let operations: KindPosition<DueOperationPosition>
  if (ops === DONE) operations = DONE
  else if (Array.isArray(ops) && ops.length === 3 && isTimeOrNull(ops[0]) && areStrings(ops.slice(1))) {
    operations = { nextAttemptAt: ops[0], callerDID: ops[1], operationID: ops[2] }
  } else return undefined
  let watches: KindPosition<DueWatchPosition>
  if (due === DONE) watches = DONE
  else if (Array.isArray(due) && due.length === 6 && Number.isSafeInteger(due[0]) && areStrings(due.slice(1))) {
    const [nextAttemptAt, ownerDID, connectorName, model, accountKey, sourceID] = due as [number, ...Array<string>]
    watches = { nextAttemptAt, ownerDID: ownerDID!, connectorName: connectorName!, model: model!, accountKey: accountKey!, sourceID: sourceID! }
  } else return undefined
  return { operations, watches }
}

/** Where a kind's pass goes on after a page: `DONE` after a page shorter than `limit` (or one with no readable position). */
const nextPosition = <P>(page: DueRead<unknown, P>, limit: number): KindPosition<P> =>
  page.read < limit || page.last === undefined ? DONE : page.last

const NOTHING_READ: DueRead<never, never> = { rows: [], read: 0, last: undefined }

/** The due watches of a sweep: those due by schedule, then the diverged ones of its audit, each once. */
const dueWatchesOf = (
  scheduled: ReadonlyArray<ProjectionWatch>,
  diverged: ReadonlyArray<ProjectionWatch>
): ReadonlyArray<ProjectionWatch> => {
  const byIdentity = new Map<string, ProjectionWatch>()
  for (const row of scheduled) byIdentity.set(watchKey(row), row)
  for (const row of diverged) byIdentity.set(watchKey(row), row)
  return Array.from(byIdentity.values())
}

/** Builds the sweep methods over the ports. */
export const makeSweepMethods = Effect.gen(function*() {
  const watches = yield* WatchRepository
  const operations = yield* OperationRepository
  const configured = yield* WinnerReader
  // Where the next call's audit page starts, per store instance. The audit
  // is a re-check, so a lost or raced cursor only repeats or restarts a pass.
  let auditAfter: WatchIdentity | undefined

  /** The readers a sweep reads winners with: `readers` when they hold one, else the store's own. */
  const readersFor = (method: string, readers: WinnerReaders | undefined) => {
    const chosen = readers?.readWinner !== undefined || readers?.readWinners !== undefined ? readers : configured
    return chosen.readWinner === undefined && chosen.readWinners === undefined
      ? Effect.fail(new WinnerReaderMissing({ method }))
      : Effect.succeed(chosen)
  }

  /**
   * The next page of the audit, at most `size` settled watches from where
   * the last page ended: the ones whose current winner is news to both
   * watermarks, and the rows it left out because they do not decode.
   */
  const auditPage = (readers: WinnerReaders, size: number) =>
    Effect.gen(function*() {
      const [candidates, corrupt] = yield* collectCorruptRows(watches.listAuditPage(auditAfter, size))
      const last = candidates.at(-1)
      // A page is full when it read `size` rows, the corrupt ones included: the pass goes on after its last healthy row.
      auditAfter = candidates.length + corrupt.length < size || last === undefined
        ? undefined
        : watchIdentityOf(last)
      const winners = yield* readableWinners(readers, candidates.map((row) => row.documentID))
      const diverged = candidates.filter((row) => {
        const winner = winners.get(row.documentID)
        return winner !== undefined && isAuditDiverged(row, winner)
      })
      return { diverged, corrupt }
    })

  const methods: SweepMethods = {
    listDueOperations: taking("listDueOperations", ["now", "readers"], [undefined, READERS_SHAPE], (now: Millis, readers?: WinnerReaders) =>
      Effect.gen(function*() {
        yield* validate("listDueOperations", [
          ["now", now, Rules.millis],
          ["readers", readers, (v) => v === undefined ? undefined : Rules.record(v)]
        ])
        const chosen = yield* readersFor("listDueOperations", readers)
        // A row that does not decode is left out and reported; every healthy one is still swept.
        const [[due, scheduledRows], dueCorrupt] = yield* collectCorruptRows(
          Effect.zip(operations.listDue(now), watches.listScheduleDue(now))
        )
        const audit = yield* auditPage(chosen, AUDIT_PAGE)
        const dueWatches = dueWatchesOf(scheduledRows.filter((row) => isScheduleDue(row, now)), audit.diverged)
        yield* Metric.update(Metric.tagged(StoreMetrics.dueSweepSize, "kind", "operations"), due.length)
        yield* Metric.update(Metric.tagged(StoreMetrics.dueSweepSize, "kind", "watches"), dueWatches.length)
        return { operations: due, watches: dueWatches, corrupt: [...dueCorrupt, ...audit.corrupt] }
      })),

    listDueWork: taking("listDueWork", ["params"], [DUE_WORK_SHAPE], (params: DueWorkParams) =>
      Effect.gen(function*() {
        yield* validate("listDueWork", [
          ["params", params, Rules.record],
          ["params.now", fieldOf(params, "now"), Rules.millis],
          ["params.limit", fieldOf(params, "limit"), duePageSize],
          ["params.cursor", fieldOf(params, "cursor"), optional(Rules.text)],
          ["params.readers", fieldOf(params, "readers"), optional(Rules.record)]
        ])
        const { cursor, limit, now } = params
        const position = cursor === undefined ? FIRST_PAGE : decodeDueCursor(cursor)
        if (position === undefined) {
          return yield* badCursor("listDueWork", "params.cursor")
        }
        const chosen = yield* readersFor("listDueWork", params.readers)
        const [[due, scheduled], dueCorrupt] = yield* collectCorruptRows(Effect.zip(
          position.operations === DONE ? Effect.succeed(NOTHING_READ) : operations.listDuePage(now, position.operations, limit),
          position.watches === DONE ? Effect.succeed(NOTHING_READ) : watches.listScheduleDuePage(now, position.watches, limit)
        ))
        const audit = yield* auditPage(chosen, Math.min(limit, AUDIT_PAGE))
        const next: DuePosition = { operations: nextPosition(due, limit), watches: nextPosition(scheduled, limit) }
        return {
          operations: due.rows,
          watches: dueWatchesOf(scheduled.rows.filter((row) => isScheduleDue(row, now)), audit.diverged),
          corrupt: [...dueCorrupt, ...audit.corrupt],
          cursor: next.operations === DONE && next.watches === DONE ? null : encodeDueCursor(next)
        }
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
