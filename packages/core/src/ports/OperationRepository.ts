import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { DueOperationPosition } from "../operation/due.js"
import type { TrackedQuery } from "../operation/reads.js"
import type { CollectParams } from "../operation/retention.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ResumeScope } from "../watch/transitions.js"
import type { DueRead, FairDueRead } from "./DueRead.js"
import type { FairPosition } from "../due/fair.js"
import type { ProviderScope } from "../limits/ProviderLimit.js"

/**
 * The write of a watch that goes with an operation's write (see
 * `OperationRepository.updateWithWatch`), guarded as the watch port's own
 * writes are: an insert meets no row of that identity or document slot, an
 * update and a delete match the version read.
 */
export type WatchWrite =
  | { readonly kind: "insert"; readonly row: ProjectionWatch }
  | { readonly kind: "update"; readonly previous: ProjectionWatch; readonly next: ProjectionWatch }
  | { readonly kind: "delete"; readonly identity: WatchIdentity; readonly version: number }

/**
 * What `OperationRepository.updateWithWatch` did: both writes landed, or
 * which guard lost. When the operation's lost, the watch's write was not
 * made; when only the watch's lost, the operation's write stands in the
 * transaction, which the caller rolls back.
 */
export type PairedWrite = "written" | "operation-lost" | "watch-lost"

/**
 * The operation table, as rows. `lock*` reads lock the rows they return for
 * the rest of the surrounding transaction.
 */
export class OperationRepository extends Context.Tag("@connector-store/core/OperationRepository")<OperationRepository, {
  readonly lockRead: (key: OperationKey) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /**
   * `lockRead`, then the lock of the document slot the operation commits
   * into (its owner, its model, `documentID`; see
   * `WatchRepository.lockDocument`), both held until the transaction ends:
   * what every transaction that commits an operation and arms or retires
   * its watch takes first, always the row before the slot. Takes no slot
   * when there is no row. On Postgres one statement; where the
   * transaction already excludes every other writer (SQLite, memory), the
   * slot needs nothing.
   */
  readonly lockReadWithSlot: (
    key: OperationKey,
    documentID: string
  ) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  readonly get: (key: OperationKey) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /** The operation with this public node key, whoever may see it. */
  readonly getByNodeKey: (nodeKey: string) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /**
   * Inserts a new row; `false` when its key (or node key) is taken. Inside a
   * transaction, an insert that meets a concurrent uncommitted insert of the
   * same key waits for it, then answers `false` if it committed.
   */
  readonly insert: (row: ConnectorOperation) => Effect.Effect<boolean, PersistenceError>
  /**
   * Writes `next` over `previous` (the row as read) only if the stored
   * version is still `previous.version`; `false` when the race was lost and
   * nothing was written. Adapters may write only the columns that differ
   * (plus `version` and `updatedAt`). Needs no transaction: one guarded
   * statement on its own is a compare-and-set.
   */
  readonly update: (previous: ConnectorOperation, next: ConnectorOperation) => Effect.Effect<boolean, PersistenceError>
  /**
   * `update(previous, next)` and, only when it landed, `watch`'s write
   * (`WatchRepository.insert`, `update` or `delete`, with their guards):
   * one statement on Postgres, the two writes in turn where the adapter
   * cannot make them one. Answers
   * which guard lost, if one did; meant for a transaction, which a lost
   * watch write leaves with the operation's write made (roll it back).
   */
  readonly updateWithWatch: (
    previous: ConnectorOperation,
    next: ConnectorOperation,
    watch: WatchWrite
  ) => Effect.Effect<PairedWrite, PersistenceError>
  /**
   * The "sent" branch of `decideMarkSent(row, token, {maxAttempts}, now)` as
   * one guarded write: when the row is attempted, held by `token`, not yet
   * marked by it and has attempts left, writes exactly that branch's `next`
   * (marker set, attempt counted, doubt folded, version bumped) and returns
   * it; otherwise writes nothing and returns none, and the caller decides
   * the other branches from a read. test/guarded-writes.property.test.ts
   * checks the guard against the decision on every adapter.
   */
  readonly markSent: (
    key: OperationKey,
    token: string,
    maxAttempts: number,
    now: Millis
  ) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /** Attempted operations whose re-drive is due at `now` (next unset or not later). */
  readonly listDue: (now: Millis) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /**
   * One page of the operations due at `now` (as `listDue`), in the due
   * order (`compareDueOperations`), strictly after `after` (from the first
   * when absent), at most `limit` rows read (`dueOperationsPage` is the
   * reference). Reads an index range of `limit` rows, whatever the table's
   * size.
   */
  readonly listDuePage: (
    now: Millis,
    after: DueOperationPosition | undefined,
    limit: number
  ) => Effect.Effect<DueRead<ConnectorOperation, DueOperationPosition>, PersistenceError>
  /**
   * One page of the operations a batch claims at `now` (due, as
   * `listDue`), fair between owners (`fairPage` over `fairOperationTable`
   * is the reference): the owners with attempted operations visited in
   * byte order from after `at.from` and around, at most `limit` with due
   * work, each giving its first rows in the due order after its position
   * in `at`, every owner's first before any owner's second. Locked for the
   * rest of the surrounding transaction, passing over the rows another
   * transaction holds locked (Postgres `FOR UPDATE SKIP LOCKED`), so that
   * workers locking at once get disjoint pages. Only inside a transaction;
   * where one writer holds the whole database (SQLite, memory) the page is
   * already the caller's alone. Rows under any of `excluding`'s scopes are
   * passed over in the statement itself, so they never take a place of the
   * page. Reads index ranges bounded by `limit`, whatever the backlog or
   * the number of owners.
   */
  readonly lockDuePage: (
    now: Millis,
    at: FairPosition<DueOperationPosition>,
    limit: number,
    excluding?: ReadonlyArray<ProviderScope>
  ) => Effect.Effect<FairDueRead<ConnectorOperation, DueOperationPosition>, PersistenceError>
  /**
   * `update` of each pair, in as few statements as the adapter can (one on
   * Postgres); answers, in order, whether each write matched its version.
   */
  readonly updateAll: (
    changes: ReadonlyArray<readonly [previous: ConnectorOperation, next: ConnectorOperation]>
  ) => Effect.Effect<ReadonlyArray<boolean>, PersistenceError>
  /** Locks and returns the attempted operations deferred within `scope`. */
  readonly lockDeferred: (scope: ResumeScope) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /**
   * Deletes what the retention keep rule (`collectableOperations`) allows,
   * at most `limit` rows, oldest first, and returns how many went. The rule
   * and the delete see the same rows: two concurrent passes can never
   * together delete a partition's newest row.
   */
  readonly collectFinished: (params: CollectParams, now: Millis) => Effect.Effect<number, PersistenceError>
  /**
   * One page of the operations `query.visibleTo` may see that pass its
   * filters, newest first by (createdAt, callerDID, operationID) in byte
   * order, strictly after `query.after`, at most `query.limit` rows
   * (`trackedPage` is the reference). Any number of document ids.
   */
  readonly listTracked: (query: TrackedQuery) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /** Every operation linked to one of `documentIDs` (at most `DOCUMENT_CHUNK` ids per call). */
  readonly listByDocuments: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
}>() {}
