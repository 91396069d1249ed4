import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation, OperationState } from "./ConnectorOperation.js"
import { decodeCursorParts, encodeCursorParts } from "../operator/cursors.js"
import { isInDoubt } from "./doubt.js"
import { compareByAge } from "./retention.js"

/** True when `viewerDID` may see the operation: its caller or its owner. */
export const isVisibleTo = (row: ConnectorOperation, viewerDID: string): boolean =>
  row.callerDID === viewerDID || row.ownerDID === viewerDID

/** A position in the newest-first order of operations: the last row of a page. */
export interface TrackedPosition {
  /** The row's `createdAt`. */
  readonly createdAt: Millis
  /** The row's `callerDID`. */
  readonly callerDID: string
  /** The row's `operationID`. */
  readonly operationID: string
}

/** A page request, as the repository sees it (the cursor already decoded). */
export interface TrackedQuery {
  /** The viewer's DID: only operations it may see (its own, as owner or caller). */
  readonly visibleTo: string
  /** Only operations of these local documents. */
  readonly documentIDs?: ReadonlyArray<string> | undefined
  /** Only operations in these states. */
  readonly states?: ReadonlyArray<OperationState> | undefined
  /** Only operations of this connector. */
  readonly connectorName?: string | undefined
  /** The page size. */
  readonly limit: number
  /** Only rows strictly older than this position. */
  readonly after?: TrackedPosition | undefined
}

/** True when `row` passes every filter of `query` (not the position or limit). */
export const matchesTracked = (row: ConnectorOperation, query: TrackedQuery): boolean =>
  isVisibleTo(row, query.visibleTo) &&
  (query.documentIDs === undefined || (row.documentID !== null && query.documentIDs.includes(row.documentID))) &&
  (query.states === undefined || query.states.includes(row.state)) &&
  (query.connectorName === undefined || row.connectorName === query.connectorName)

/** Newest first: by (createdAt, callerDID, operationID) descending, the order retention calls "newest". */
export const newestFirst = (a: ConnectorOperation, b: ConnectorOperation): number => compareByAge(b, a)

/** The position of `row` in the newest-first order. */
export const positionOf = (row: ConnectorOperation): TrackedPosition => ({
  createdAt: row.createdAt,
  callerDID: row.callerDID,
  operationID: row.operationID
})

/** True when `row` comes strictly after `position` in the newest-first order. */
export const isAfter = (row: ConnectorOperation, position: TrackedPosition): boolean =>
  compareByAge(row, { ...row, ...position }) < 0

/** The reference page of a `TrackedQuery` over every row: filtered, newest first, after the position, at most `limit`. */
export const trackedPage = (rows: ReadonlyArray<ConnectorOperation>, query: TrackedQuery): ReadonlyArray<ConnectorOperation> =>
  rows
    .filter((row) => matchesTracked(row, query) && (query.after === undefined || isAfter(row, query.after)))
    .sort(newestFirst)
    .slice(0, query.limit)

/** The opaque cursor of a position. */
export const encodeCursor = (position: TrackedPosition): string =>
  encodeCursorParts([position.createdAt, position.callerDID, position.operationID])

/** The position a cursor names, or `undefined` when it is not a cursor this store made. */
export const decodeCursor = (cursor: string): TrackedPosition | undefined => {
  const parts = decodeCursorParts(cursor)
  if (parts === undefined || parts.length !== 3) return undefined
  const [createdAt, callerDID, operationID] = parts
  if (typeof createdAt !== "number" || !Number.isSafeInteger(createdAt)) return undefined
  if (typeof callerDID !== "string" || typeof operationID !== "string") return undefined
  return { createdAt, callerDID, operationID }
}

/**
 * A document's write state from its operations: `pending` while any is attempted, else its newest ended one's:
 * `committed`, `failed` (dead, none in doubt) or `unconfirmed` (reconcile_only, or dead in doubt); `none` without
 * operations.
 */
export type DocumentWriteState = "none" | "pending" | "committed" | "failed" | "unconfirmed"

const endedAs: Readonly<Record<Exclude<OperationState, "attempted">, DocumentWriteState>> = {
  committed: "committed",
  dead: "failed",
  reconcile_only: "unconfirmed"
}

/** The write state of a document from its operations (see `DocumentWriteState`). */
export const writeStateOf = (operations: ReadonlyArray<ConnectorOperation>): DocumentWriteState => {
  if (operations.some((row) => row.state === "attempted")) return "pending"
  let newest: ConnectorOperation | undefined
  for (const row of operations) if (newest === undefined || compareByAge(row, newest) > 0) newest = row
  if (newest === undefined || newest.state === "attempted") return "none"
  return newest.state === "dead" && isInDoubt(newest) ? "unconfirmed" : endedAs[newest.state]
}

/** The write state of each of `documentIDs`, from the operations of those documents. */
export const writeStatesOf = (
  documentIDs: ReadonlyArray<string>,
  operations: ReadonlyArray<ConnectorOperation>
): ReadonlyMap<string, DocumentWriteState> => {
  const byDocument = new Map<string, Array<ConnectorOperation>>()
  for (const row of operations) {
    if (row.documentID === null) continue
    const list = byDocument.get(row.documentID)
    if (list === undefined) byDocument.set(row.documentID, [row])
    else list.push(row)
  }
  return new Map(documentIDs.map((id) => [id, writeStateOf(byDocument.get(id) ?? [])]))
}
