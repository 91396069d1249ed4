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
import { COLLECT } from "../operation/checks.js"
import { allOptionNames } from "../optionNames.js"
import { atMost, fieldsOf, optional, Rules, shapeOf, taking, validate, validated } from "../validation.js"
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

/** How many settled watches one `listDueOperations` call audits (a `listDueWork` call at most its `limit`), so a call stays bounded. */
export const AUDIT_PAGE = 1_000

/** The largest `limit` of `listDueWork`. */
export const MAX_DUE_PAGE = 10_000

/** What the due sweep found. */
export interface DueWork {
  /** Attempted operations whose re-drive is due. */
  readonly operations: ReadonlyArray<ConnectorOperation>
  /** Watches due by schedule, and settled watches of this call's audit page whose winner moved (each once). */
  readonly watches: ReadonlyArray<ProjectionWatch>
  /** The rows the sweep left out because they cannot be decoded (logged and counted too); every healthy due row is still listed. */
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
  /** At most `limit` watches due by schedule in the due order, then this page's audited watches whose winner moved; each once. */
  readonly watches: ReadonlyArray<ProjectionWatch>
  /** The rows this page left out because they cannot be decoded; the cursor moves past them. */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
  /** The next call's `cursor` for this pass, or `null` once it read every due operation and watch. */
  readonly cursor: string | null
}

/** The due sweep and retention half of the store's Effect API. */
export interface SweepMethods {
  /**
   * The boot/periodic sweep in one answer: every due operation and watch due by schedule, and an audit page, winners read with
   * `readers` (else the store's); an undecodable row is reported in `corrupt`. Page a large backlog with `listDueWork`.
   */
  readonly listDueOperations: (
    now: Millis,
    readers?: WinnerReaders
  ) => Effect.Effect<DueWork, InvalidInput | WinnerReaderMissing | PersistenceError>
  /**
   * The due sweep a page at a time: at most `limit` due operations and scheduled watches each, in the due order from `cursor`,
   * and an audit page; pass the `cursor` back until `null`. A pass returns each row due when it reaches it once; a row due
   * behind its position waits for the next pass.
   */
  readonly listDueWork: (
    params: DueWorkParams
  ) => Effect.Effect<DuePage, InvalidInput | WinnerReaderMissing | PersistenceError>
  /**
   * Deletes superseded finished operations last updated before `before` (`collectableOperations`), at most `limit`. A deleted
   * key is forgotten (a replay sends again), so keep `before` at least 24 hours back and past any replay.
   */
  readonly collectFinishedOperations: (params: CollectParams) => Effect.Effect<number, InvalidInput | PersistenceError>
}

/** The readers `listDueOperations` and `listDueWork` may be given. */
const READERS_SHAPE = shapeOf(allOptionNames<WinnerReaders>()(["readWinner", "readWinners"]))

/** The parameters of `listDueWork`; its readers are taken as `listDueOperations` takes them. */
const DUE_WORK = fieldsOf<DueWorkParams>("params", {
  now: Rules.millis,
  limit: atMost(Rules.positiveInt, MAX_DUE_PAGE),
  cursor: optional(Rules.text),
  readers: optional(Rules.record)
}, { nested: { readers: READERS_SHAPE } })

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

/** The cursor of a position: `["due", operations, watches]` encoded, each kind `"done"` or its last row's position. */
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

  /** The audit's next page of at most `size` settled watches: those whose winner moved, and the rows that did not decode. */
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

    listDueWork: taking("listDueWork", ["params"], [DUE_WORK.shape], (params: DueWorkParams) =>
      Effect.gen(function*() {
        yield* validate("listDueWork", DUE_WORK.checks(params))
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

    collectFinishedOperations: taking("collectFinishedOperations", ["params"], [COLLECT.shape], (params: CollectParams) =>
      validated("collectFinishedOperations", COLLECT.checks(params), () =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => operations.collectFinished({ before: params.before, limit: params.limit }, now))))
  }
  return methods
})
