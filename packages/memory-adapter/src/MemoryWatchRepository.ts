import {
  compareWatchIdentities,
  decideClaim,
  decideDefer,
  isAuditCandidate,
  isScheduleDue,
  type ProjectionWatch,
  type WatchIdentity,
  resumeReaches,
  WatchRepository,
  watchKey
} from "@connector-store/core"
import { Effect, Option } from "effect"
import { indexed, indexTable, type MemoryDatabase, reindex } from "./MemoryDatabase.js"

const TABLE = "projection_watch"
const BY_DOCUMENT = indexTable("projection_watch.document_id")


/** The watch table in memory. */
export const makeMemoryWatchRepository = (db: MemoryDatabase): WatchRepository["Type"] => {
  const rows = Effect.map(db.read<ProjectionWatch>(TABLE), (table) => Array.from(table.values()))
  const find = (predicate: (row: ProjectionWatch) => boolean) => Effect.map(rows, (all) => all.filter(predicate))
  const byKey = (key: string) => Effect.map(db.read<ProjectionWatch>(TABLE), (table) => Option.fromNullable(table.get(key)))
  // Watches by document, so lookups and the ingress check cost the document's watches, not the table.
  const byDocument = (documentIDs: Iterable<string>) =>
    Effect.zipWith(db.read<ProjectionWatch>(TABLE), db.read<ReadonlyArray<string>>(BY_DOCUMENT), (table, index) => {
      const found: Array<ProjectionWatch> = []
      for (const documentID of new Set(documentIDs)) {
        for (const key of indexed(index, documentID)) {
          const row = table.get(key)
          if (row !== undefined) found.push(row)
        }
      }
      return found
    })
  const clashes = (table: ReadonlyMap<string, ProjectionWatch>, index: ReadonlyMap<string, ReadonlyArray<string>>, row: ProjectionWatch) =>
    indexed(index, row.documentID).some((key) => {
      const other = table.get(key)
      return key !== watchKey(row) && other !== undefined && other.ownerDID === row.ownerDID && other.model === row.model
    })

  const decideAndWrite = (identity: WatchIdentity, decide: (row: ProjectionWatch | undefined) => ProjectionWatch | undefined) =>
    db.withTransaction(Effect.flatMap(byKey(watchKey(identity)), (row) => {
      const next = decide(Option.getOrUndefined(row))
      // Nothing is written (not even an empty table) unless the decision writes;
      // a claim or deferral changes no document, so the index stays as it is.
      return next === undefined ? Effect.succeed(false) : db.write<ProjectionWatch, boolean>(TABLE, (table) => {
        table.set(watchKey(identity), next)
        return true
      })
    }))

  return {
    lockRead: (identity) => byKey(watchKey(identity)),
    get: (identity) => byKey(watchKey(identity)),
    // Several owners may watch one document: the first identity in byte order, as on SQL.
    getByDocument: (documentID) =>
      Effect.map(byDocument([documentID]), (rows) => Option.fromNullable(rows.sort((a, b) => compareWatchIdentities(a, b))[0])),
    listByDocuments: (documentIDs) => byDocument(documentIDs),
    update: (previous, next) =>
      db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, boolean>(TABLE, BY_DOCUMENT, (table, index) => {
        const key = watchKey(next)
        const stored = table.get(key)
        if (stored === undefined || stored.version !== previous.version) return false
        if (clashes(table, index, next)) return false
        table.set(key, next)
        reindex(index, key, stored.documentID, next.documentID)
        return true
      }),
    // The pure decisions themselves, read and written in one memory transaction.
    claimAttempt: (identity, input, now, writtenAt) =>
      decideAndWrite(identity, (row) => decideClaim(row, input, now, writtenAt).next),
    deferAttempt: (identity, input, now) => decideAndWrite(identity, (row) => decideDefer(row, input, now).next),
    insert: (row) =>
      db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, boolean>(TABLE, BY_DOCUMENT, (table, index) => {
        const key = watchKey(row)
        if (table.has(key) || clashes(table, index, row)) return false
        table.set(key, row)
        reindex(index, key, undefined, row.documentID)
        return true
      }),
    delete: (identity, expectedVersion) =>
      db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, boolean>(TABLE, BY_DOCUMENT, (table, index) => {
        const key = watchKey(identity)
        const stored = table.get(key)
        if (stored?.version !== expectedVersion) return false
        reindex(index, key, stored.documentID, undefined)
        return table.delete(key)
      }),
    // Memory transactions already run one at a time.
    lockDocument: () => Effect.void,
    lockArmTargets: (slot, identity) =>
      Effect.zipWith(byDocument([slot.documentID]), byKey(watchKey(identity)), (rows, own) =>
        [...rows, ...Option.toArray(own).filter((row) => row.documentID !== slot.documentID)].sort(compareWatchIdentities)),
    listScheduleDue: (now) => find((row) => isScheduleDue(row, now)),
    listAuditPage: (after, limit) =>
      Effect.map(find(isAuditCandidate), (rows) =>
        rows
          .filter((row) => after === undefined || compareWatchIdentities(row, after) > 0)
          .sort(compareWatchIdentities)
          .slice(0, limit)),
    lockDeferred: (scope) => find((row) => row.verificationStatus === "pending_verification" && resumeReaches(scope, row))
  }
}
