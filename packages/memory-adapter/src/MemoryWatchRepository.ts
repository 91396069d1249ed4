import {
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

/** The watch table in memory. */
export const makeMemoryWatchRepository = (db: MemoryDatabase): WatchRepository["Type"] => {
  const rows = Effect.map(db.read<ProjectionWatch>(TABLE), (table) => Array.from(table.values()))
  const find = (predicate: (row: ProjectionWatch) => boolean) => Effect.map(rows, (all) => all.filter(predicate))
  const first = (predicate: (row: ProjectionWatch) => boolean) =>
    Effect.map(rows, (all) => Option.fromNullable(all.find(predicate)))
  const byKey = (key: string) => Effect.map(db.read<ProjectionWatch>(TABLE), (table) => Option.fromNullable(table.get(key)))

  return {
    lockRead: (identity) => byKey(watchKey(identity)),
    get: (identity) => byKey(watchKey(identity)),
    getByDocument: (documentID) => first((row) => row.documentID === documentID),
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
    listScheduleDue: (now) => find((row) => isScheduleDue(row, now)),
    listAuditCandidates: find(isAuditCandidate),
    lockDeferred: (scope) => find((row) => row.verificationStatus === "pending_verification" && resumeReaches(scope, row))
  }
}
