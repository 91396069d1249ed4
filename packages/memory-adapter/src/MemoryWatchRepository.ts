import {
  advanceFairPosition,
  compareWatchIdentities,
  type DocumentSlot,
  decideClaim,
  decideDefer,
  dueWatchPositionOf,
  isAuditCandidate,
  isScheduleDue,
  type ProjectionWatch,
  type WatchIdentity,
  resumeReaches,
  scheduleDuePage,
  fairPage,
  fairWatchTable,
  WatchRepository,
  watchKey,
  type WatchWrite
} from "@connector-store/core"
import { Effect, Option } from "effect"
import { indexed, indexTable, type MemoryDatabase, reindex } from "./MemoryDatabase.js"

const TABLE = "projection_watch"
const BY_DOCUMENT = indexTable("projection_watch.document_id")


type Rows = Map<string, ProjectionWatch>
type ByDocument = Map<string, ReadonlyArray<string>>

/** A row on the same document, owner and model as `row` under another identity: the ingress index's unique key. */
const clashes = (table: ReadonlyMap<string, ProjectionWatch>, index: ReadonlyMap<string, ReadonlyArray<string>>, row: ProjectionWatch) =>
  indexed(index, row.documentID).some((key) => {
    const other = table.get(key)
    return key !== watchKey(row) && other !== undefined && other.ownerDID === row.ownerDID && other.model === row.model
  })

/**
 * The watch table's changes over its rows and document index, shared by the
 * repository (inside a fiber's transaction) and `MemoryDirect` (inside a
 * direct one). Each answers what the port method of the same name answers.
 */
export const watchChanges = {
  table: TABLE,
  index: BY_DOCUMENT,
  update: (table: Rows, index: ByDocument, previous: ProjectionWatch, next: ProjectionWatch): boolean => {
    const key = watchKey(next)
    const stored = table.get(key)
    if (stored === undefined || stored.version !== previous.version) return false
    if (clashes(table, index, next)) return false
    table.set(key, next)
    reindex(index, key, stored.documentID, next.documentID)
    return true
  },
  insert: (table: Rows, index: ByDocument, row: ProjectionWatch): boolean => {
    const key = watchKey(row)
    if (table.has(key) || clashes(table, index, row)) return false
    table.set(key, row)
    reindex(index, key, undefined, row.documentID)
    return true
  },
  delete: (table: Rows, index: ByDocument, identity: WatchIdentity, expectedVersion: number): boolean => {
    const key = watchKey(identity)
    const stored = table.get(key)
    if (stored?.version !== expectedVersion) return false
    reindex(index, key, stored.documentID, undefined)
    return table.delete(key)
  },
  /** A watch write that goes with an operation's (see `OperationRepository.updateWithWatch`). */
  write: (table: Rows, index: ByDocument, write: WatchWrite): boolean =>
    write.kind === "insert"
      ? watchChanges.insert(table, index, write.row)
      : write.kind === "update"
      ? watchChanges.update(table, index, write.previous, write.next)
      : watchChanges.delete(table, index, write.identity, write.version),
  /** The document's watches and the identity's own row, in identity order. */
  armTargets: (
    table: ReadonlyMap<string, ProjectionWatch>,
    index: ReadonlyMap<string, ReadonlyArray<string>>,
    slot: DocumentSlot,
    identity: WatchIdentity
  ): ReadonlyArray<ProjectionWatch> => {
    const rows: Array<ProjectionWatch> = []
    for (const key of indexed(index, slot.documentID)) {
      const row = table.get(key)
      if (row !== undefined) rows.push(row)
    }
    const own = table.get(watchKey(identity))
    if (own !== undefined && own.documentID !== slot.documentID) rows.push(own)
    return rows.sort(compareWatchIdentities)
  }
}

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

  const update = (previous: ProjectionWatch, next: ProjectionWatch) =>
    db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, boolean>(TABLE, BY_DOCUMENT, (table, index) =>
      watchChanges.update(table, index, previous, next))

  return {
    lockRead: (identity) => byKey(watchKey(identity)),
    get: (identity) => byKey(watchKey(identity)),
    // Several owners may watch one document: the first identity in byte order, as on SQL.
    getByDocument: (documentID) =>
      Effect.map(byDocument([documentID]), (rows) => Option.fromNullable(rows.sort((a, b) => compareWatchIdentities(a, b))[0])),
    listByDocuments: (documentIDs) => byDocument(documentIDs),
    update,
    // The pure decisions themselves, read and written in one memory transaction.
    claimAttempt: (identity, input, now, writtenAt) =>
      decideAndWrite(identity, (row) => decideClaim(row, input, now, writtenAt).next),
    deferAttempt: (identity, input, now) => decideAndWrite(identity, (row) => decideDefer(row, input, now).next),
    insert: (row) =>
      db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, boolean>(TABLE, BY_DOCUMENT, (table, index) =>
        watchChanges.insert(table, index, row)),
    delete: (identity, expectedVersion) =>
      db.writeWithIndex<ProjectionWatch, ReadonlyArray<string>, boolean>(TABLE, BY_DOCUMENT, (table, index) =>
        watchChanges.delete(table, index, identity, expectedVersion)),
    // Memory transactions already run one at a time.
    lockDocument: () => Effect.void,
    lockArmTargets: (slot, identity) =>
      Effect.zipWith(db.read<ProjectionWatch>(TABLE), db.read<ReadonlyArray<string>>(BY_DOCUMENT), (table, index) =>
        watchChanges.armTargets(table, index, slot, identity)),
    listScheduleDue: (now) => find((row) => isScheduleDue(row, now)),
    listScheduleDuePage: (now, after, limit) =>
      Effect.map(db.read<ProjectionWatch>(TABLE), (table) => {
        const rows = scheduleDuePage(table.values(), now, after, limit)
        const last = rows.at(-1)
        return { rows, read: rows.length, last: last === undefined ? undefined : dueWatchPositionOf(last) }
      }),
    // The batch's owner-fair page, as the reference reads it; one transaction at a time holds the
    // database, so the page is already the caller's alone.
    lockClaimablePage: (now, at, limit) =>
      Effect.map(db.read<ProjectionWatch>(TABLE), (table) => {
        const page = fairPage(fairWatchTable(table.values(), now), at, limit)
        return {
          rows: page.rows,
          read: page.rows.length,
          last: advanceFairPosition(at, page.rows.map((row) => [row.ownerDID, dueWatchPositionOf(row)] as const), page.done),
          scanned: page.scanned,
          more: page.more
        }
      }),
    updateAll: (changes) => Effect.forEach(changes, ([previous, next]) => update(previous, next)),
    listAuditPage: (after, limit) =>
      Effect.map(find(isAuditCandidate), (rows) =>
        rows
          .filter((row) => after === undefined || compareWatchIdentities(row, after) > 0)
          .sort(compareWatchIdentities)
          .slice(0, limit)),
    lockDeferred: (scope) => find((row) => row.verificationStatus === "pending_verification" && resumeReaches(scope, row))
  }
}
