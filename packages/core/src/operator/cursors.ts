import type { SyncStateKey } from "../syncstate/SyncState.js"
import type { Millis, WatchIdentity } from "../watch/ProjectionWatch.js"

/** An opaque cursor of `parts` (JSON values): base64url of their JSON array. */
export const encodeCursorParts = (parts: ReadonlyArray<unknown>): string =>
  Buffer.from(JSON.stringify(parts), "utf8").toString("base64url")

/** The parts of a cursor `encodeCursorParts` made, or `undefined` for anything else. */
export const decodeCursorParts = (cursor: string): ReadonlyArray<unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))
    return Array.isArray(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** The parts after the tag of a cursor `encodeCursorParts` made of `[tag, …]` with `length` parts in all, or `undefined`. */
export const decodeTagged = (cursor: string, tag: string, length: number): ReadonlyArray<unknown> | undefined => {
  const parts = decodeCursorParts(cursor)
  return parts !== undefined && parts.length === length && parts[0] === tag ? parts.slice(1) : undefined
}

/** The opaque cursor after a watch, in the operator's watch order. */
export const encodeWatchCursor = (id: WatchIdentity): string =>
  encodeCursorParts(["w", id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID])

/** The identity a watch cursor names, or `undefined` when it is not one this store made. */
export const decodeWatchCursor = (cursor: string): WatchIdentity | undefined => {
  const parts = decodeTagged(cursor, "w", 6)
  if (parts === undefined || !parts.every((part) => typeof part === "string")) return undefined
  const [ownerDID, connectorName, model, accountKey, sourceID] = parts as ReadonlyArray<string>
  return { ownerDID: ownerDID!, connectorName: connectorName!, model: model!, accountKey: accountKey!, sourceID: sourceID! }
}

/** The opaque cursor after a relist run, in the operator's run order. */
export const encodeRunCursor = (run: { readonly startedAt: Millis; readonly runID: string }): string =>
  encodeCursorParts(["r", run.startedAt, run.runID])

/** The position a run cursor names, or `undefined` when it is not one this store made. */
export const decodeRunCursor = (cursor: string): { startedAt: Millis; runID: string } | undefined => {
  const [startedAt, runID] = decodeTagged(cursor, "r", 3) ?? []
  return typeof startedAt === "number" && Number.isSafeInteger(startedAt) && typeof runID === "string"
    ? { startedAt, runID }
    : undefined
}

/** The opaque cursor after a sync state, in the operator's sync-state order. */
export const encodeSyncStateCursor = (key: SyncStateKey): string => encodeCursorParts(["s", key.connectorName, key.ownerDID])

/** The key a sync-state cursor names, or `undefined` when it is not one this store made. */
export const decodeSyncStateCursor = (cursor: string): SyncStateKey | undefined => {
  const [connectorName, ownerDID] = decodeTagged(cursor, "s", 3) ?? []
  return typeof connectorName === "string" && typeof ownerDID === "string" ? { connectorName, ownerDID } : undefined
}
