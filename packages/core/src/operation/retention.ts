import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation, OperationKey, OperationState } from "./ConnectorOperation.js"

/** The parameters of a retention pass. */
export interface CollectParams {
  /** Only rows last updated strictly before this are collected. */
  readonly before: Millis
  /** At most this many rows are collected. */
  readonly limit: number
}

/** Orders strings by code point: their UTF-8 byte order, as SQLite's BINARY and Postgres's "C" collation do. */
export const compareCodePoints = (a: string, b: string): number => {
  if (a === b) return 0
  const left = a[Symbol.iterator]()
  const right = b[Symbol.iterator]()
  for (;;) {
    const l = left.next()
    const r = right.next()
    if (l.done) return r.done ? 0 : -1
    if (r.done) return 1
    const d = l.value.codePointAt(0)! - r.value.codePointAt(0)!
    if (d !== 0) return d
  }
}

/** Newest-first order of operations: by (createdAt, callerDID, operationID). */
export const compareByAge = (a: ConnectorOperation, b: ConnectorOperation): number =>
  a.createdAt - b.createdAt || compareCodePoints(a.callerDID, b.callerDID) ||
  compareCodePoints(a.operationID, b.operationID)

/** True when a runner's lease on the row has not expired at `now`. */
export const isUnderLiveLease = (row: ConnectorOperation, now: Millis): boolean =>
  row.leaseToken !== null && !(row.leaseExpiresAt !== null && row.leaseExpiresAt < now)

const finished: ReadonlyArray<OperationState> = ["committed", "dead"]

/**
 * The retention rule over every operation row: a finished row older than `before` under no live lease may go when it
 * has no document, or is not the newest committed nor the newest finished row of its caller or owner for its document
 * (those decide the write state). At most `limit` keys, oldest `updatedAt` first.
 */
export const collectableOperations = (
  rows: ReadonlyArray<ConnectorOperation>,
  params: CollectParams,
  now: Millis
): ReadonlyArray<OperationKey> => {
  const byDocument = new Map<string, Array<ConnectorOperation>>()
  for (const row of rows) {
    if (row.documentID === null) continue
    const list = byDocument.get(row.documentID)
    if (list === undefined) byDocument.set(row.documentID, [row])
    else list.push(row)
  }
  const newerExists = (
    row: ConnectorOperation,
    party: "callerDID" | "ownerDID",
    states: ReadonlyArray<OperationState>
  ): boolean =>
    (byDocument.get(row.documentID!) ?? []).some((other) =>
      other[party] === row[party] && states.includes(other.state) && compareByAge(other, row) > 0
    )
  const superseded = (row: ConnectorOperation): boolean =>
    (row.state !== "committed" || (newerExists(row, "callerDID", ["committed"]) && newerExists(row, "ownerDID", ["committed"]))) &&
    newerExists(row, "callerDID", finished) &&
    newerExists(row, "ownerDID", finished)

  return rows
    .filter((row) =>
      finished.includes(row.state) &&
      row.updatedAt < params.before &&
      !isUnderLiveLease(row, now) &&
      (row.documentID === null || superseded(row))
    )
    .sort((a, b) =>
      a.updatedAt - b.updatedAt || compareCodePoints(a.callerDID, b.callerDID) ||
      compareCodePoints(a.operationID, b.operationID)
    )
    .slice(0, params.limit)
    .map((row) => ({ callerDID: row.callerDID, operationID: row.operationID }))
}
