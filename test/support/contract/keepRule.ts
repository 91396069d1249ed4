import type { ConnectorOperation } from "@connector-store/core"

// The retention keep rule, written for the tests from the contract's words
// alone (not the core's `collectableOperations`): what stays is, for every
// document, the newest committed and the newest finished row of each caller
// and of each owner; a finished row outside that set, last updated before
// the cutoff and under no live lease, may go, oldest first.

const byCodePoint = (a: string, b: string): number => {
  const x = Array.from(a, (c) => c.codePointAt(0)!)
  const y = Array.from(b, (c) => c.codePointAt(0)!)
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!
  return x.length - y.length
}

/** True when `a` is newer than `b` by (createdAt, callerDID, operationID). */
const newer = (a: ConnectorOperation, b: ConnectorOperation): boolean =>
  a.createdAt !== b.createdAt
    ? a.createdAt > b.createdAt
    : a.callerDID !== b.callerDID
    ? byCodePoint(a.callerDID, b.callerDID) > 0
    : byCodePoint(a.operationID, b.operationID) > 0

const isFinished = (row: ConnectorOperation) => row.state === "committed" || row.state === "dead"

/** The rows that decide a document's write state, which retention keeps. */
const keptRows = (rows: ReadonlyArray<ConnectorOperation>): ReadonlySet<ConnectorOperation> => {
  const newest = new Map<string, ConnectorOperation>()
  const offer = (partition: string, row: ConnectorOperation) => {
    const held = newest.get(partition)
    if (held === undefined || newer(row, held)) newest.set(partition, row)
  }
  for (const row of rows) {
    if (row.documentID === null || !isFinished(row)) continue
    for (const party of [`caller\u0000${row.callerDID}`, `owner\u0000${row.ownerDID}`]) {
      offer(`${row.documentID}\u0000${party}\u0000finished`, row)
      if (row.state === "committed") offer(`${row.documentID}\u0000${party}\u0000committed`, row)
    }
  }
  return new Set(newest.values())
}

/** `caller/operation` labels of what a pass with `before` and `limit` at `now` deletes, oldest `updatedAt` first. */
export const expectedCollection = (
  rows: ReadonlyArray<ConnectorOperation>,
  before: number,
  limit: number,
  now: number
): ReadonlyArray<string> => {
  const kept = keptRows(rows)
  // A lease is live while it has a token and its expiry (if any) is not yet past: expiring exactly now is live.
  const leaseLive = (row: ConnectorOperation) => row.leaseToken !== null && (row.leaseExpiresAt === null || row.leaseExpiresAt >= now)
  return rows
    .filter((row) => isFinished(row) && row.updatedAt < before && !leaseLive(row) && !kept.has(row))
    .sort((a, b) =>
      a.updatedAt - b.updatedAt || byCodePoint(a.callerDID, b.callerDID) || byCodePoint(a.operationID, b.operationID)
    )
    .slice(0, limit)
    .map((row) => `${row.callerDID}/${row.operationID}`)
}
