import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import { compareCodePoints } from "./retention.js"
import type { FairTable } from "../due/fair.js"

/** Where a due operation stands in the due order: its next attempt (`null` first) and its key. */
export interface DueOperationPosition {
  /** When the operation's next attempt is due (epoch ms), or null when it is unscheduled. */
  readonly nextAttemptAt: Millis | null
  /** The DID of the device or process that made the edit (the first part of the key). */
  readonly callerDID: string
  /** The caller's idempotency key for the write (the second part of the key). */
  readonly operationID: string
}

/** True when an operation's re-drive is due at `now`: attempted, with no next attempt or one not later. */
export const isDueOperation = (row: ConnectorOperation, now: Millis): boolean =>
  row.state === "attempted" && (row.nextAttemptAt === null || row.nextAttemptAt <= now)

/** The position of a due operation. */
export const dueOperationPositionOf = (row: DueOperationPosition): DueOperationPosition => ({
  nextAttemptAt: row.nextAttemptAt,
  callerDID: row.callerDID,
  operationID: row.operationID
})

/** The due order of operations: unscheduled first, then by next attempt, then by key in code-point order. */
export const compareDueOperations = (a: DueOperationPosition, b: DueOperationPosition): number => {
  if (a.nextAttemptAt !== b.nextAttemptAt) {
    if (a.nextAttemptAt === null) return -1
    if (b.nextAttemptAt === null) return 1
    return a.nextAttemptAt - b.nextAttemptAt
  }
  return compareCodePoints(a.callerDID, b.callerDID) || compareCodePoints(a.operationID, b.operationID)
}

/** The reference keyset page of `rows`: those `isDue`, in `compare`'s order, strictly after `after`, at most `limit`. */
export const keysetPage = <A extends P, P>(
  rows: Iterable<A>,
  isDue: (row: A) => boolean,
  compare: (a: P, b: P) => number,
  after: P | undefined,
  limit: number
): ReadonlyArray<A> => {
  const due: Array<A> = []
  for (const row of rows) {
    if (isDue(row) && (after === undefined || compare(row, after) > 0)) due.push(row)
  }
  return due.sort(compare).slice(0, limit)
}

/** The reference page of the operations due at `now`: in the due order, strictly after `after`, at most `limit`. */
export const dueOperationsPage = (
  rows: Iterable<ConnectorOperation>,
  now: Millis,
  after: DueOperationPosition | undefined,
  limit: number
): ReadonlyArray<ConnectorOperation> =>
  keysetPage(rows, (row) => isDueOperation(row, now), compareDueOperations, after, limit)

/** The operation table as `fairPage` reads it at `now`: attempted rows by owner, a row taken when due and `taken` allows it. */
export const fairOperationTable = (
  rows: Iterable<ConnectorOperation>,
  now: Millis,
  taken: (row: ConnectorOperation) => boolean = () => true
): FairTable<ConnectorOperation, DueOperationPosition> => ({
  rows: Array.from(rows).filter((row) => row.state === "attempted"),
  ownerOf: (row) => row.ownerDID,
  isDue: (row) => isDueOperation(row, now),
  isTaken: (row) => isDueOperation(row, now) && taken(row),
  positionOf: dueOperationPositionOf,
  compare: compareDueOperations
})
