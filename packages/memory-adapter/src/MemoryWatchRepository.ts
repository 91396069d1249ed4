import {
  compareCodePoints,
  isAuditCandidate,
  isScheduleDue,
  type ProjectionWatch,
  resumeReaches,
  WatchRepository,
  watchKey
} from "@connector-store/core"
import { Effect, Option } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const TABLE = "projection_watch"

const identityParts = (row: ProjectionWatch) => [row.ownerDID, row.connectorName, row.model, row.accountKey, row.sourceID]

const compareIdentities = (a: ProjectionWatch, b: ProjectionWatch): number => {
  const left = identityParts(a)
  const right = identityParts(b)
  for (let i = 0; i < left.length; i++) {
    const order = compareCodePoints(left[i]!, right[i]!)
    if (order !== 0) return order
  }
  return 0
}

/** The watch table in memory. */
export const makeMemoryWatchRepository = (db: MemoryDatabase): WatchRepository["Type"] => {
  const rows = Effect.map(db.read<ProjectionWatch>(TABLE), (table) => Array.from(table.values()))
  const find = (predicate: (row: ProjectionWatch) => boolean) => Effect.map(rows, (all) => all.filter(predicate))
  const byKey = (key: string) => Effect.map(db.read<ProjectionWatch>(TABLE), (table) => Option.fromNullable(table.get(key)))

  return {
    lockRead: (identity) => byKey(watchKey(identity)),
    get: (identity) => byKey(watchKey(identity)),
    // Several owners may watch one document: the first identity in byte order, as on SQL.
    getByDocument: (documentID) =>
      Effect.map(find((row) => row.documentID === documentID), (rows) =>
        Option.fromNullable(rows.sort((a, b) => compareIdentities(a, b))[0])),
    listByDocuments: (documentIDs) => {
      const wanted = new Set(documentIDs)
      return find((row) => wanted.has(row.documentID))
    },
    update: (next, expectedVersion) =>
      db.write<ProjectionWatch, boolean>(TABLE, (table) => {
        const key = watchKey(next)
        const stored = table.get(key)
        if (stored === undefined || stored.version !== expectedVersion) return false
        const clash = Array.from(table.values()).some((row) =>
          watchKey(row) !== key && row.ownerDID === next.ownerDID && row.model === next.model &&
          row.documentID === next.documentID
        )
        if (clash) return false
        table.set(key, next)
        return true
      }),
    insert: (row) =>
      db.write<ProjectionWatch, boolean>(TABLE, (table) => {
        const key = watchKey(row)
        const clash = table.has(key) || Array.from(table.values()).some((other) =>
          other.ownerDID === row.ownerDID && other.model === row.model && other.documentID === row.documentID
        )
        if (clash) return false
        table.set(key, row)
        return true
      }),
    delete: (identity, expectedVersion) =>
      db.write<ProjectionWatch, boolean>(TABLE, (table) => {
        const key = watchKey(identity)
        if (table.get(key)?.version !== expectedVersion) return false
        return table.delete(key)
      }),
    // Memory transactions already run one at a time.
    lockDocument: () => Effect.void,
    listScheduleDue: (now) => find((row) => isScheduleDue(row, now)),
    listAuditCandidates: find(isAuditCandidate),
    lockDeferred: (scope) => find((row) => row.verificationStatus === "pending_verification" && resumeReaches(scope, row))
  }
}
