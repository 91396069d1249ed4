import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ClaimInput, DeferInput, ResumeScope } from "../watch/transitions.js"
import type { DueWatchPosition } from "../watch/due.js"
import type { FairPosition } from "../due/fair.js"
import type { DueRead, FairDueRead } from "./DueRead.js"

/** Where the unique ingress index allows one watch: an owner's document of a model. */
export interface DocumentSlot {
  readonly ownerDID: string
  readonly model: string
  readonly documentID: string
}

/**
 * The projection-watch table, as rows. Adapters implement only this; every
 * decision about what to write is made in core.
 *
 * `lock*` reads hold the rows they return until the surrounding transaction
 * ends (FOR UPDATE on Postgres; on SQLite the transaction itself holds the
 * database write lock from its first statement), so they are meant to run
 * inside `Transactor.withTransaction`.
 */
export class WatchRepository extends Context.Tag("@connector-store/core/WatchRepository")<WatchRepository, {
  /** Reads a watch and locks it until the transaction ends. */
  readonly lockRead: (identity: WatchIdentity) => Effect.Effect<Option.Option<ProjectionWatch>, PersistenceError>
  /**
   * Writes `next` over `previous` (the row as read) only if the stored
   * version is still `previous.version`. `false` means the race was lost and
   * nothing was written. Adapters may write only the columns in which `next`
   * differs from `previous` (plus `version` and `updatedAt`): at that version
   * the stored row is `previous`, so the result is `next` either way. Needs
   * no transaction: one guarded statement on its own is a compare-and-set.
   */
  readonly update: (previous: ProjectionWatch, next: ProjectionWatch) => Effect.Effect<boolean, PersistenceError>
  /**
   * `decideClaim(row, input, now, writtenAt)` applied to the stored row as
   * one guarded write, with no read, lock or transaction: `true` when it
   * claimed (the row is then exactly the decision's `next`), `false` when
   * the row is absent or not claimable (nothing written). The guard is the
   * decision's preconditions; test/guarded-writes.property.test.ts checks
   * the two agree on every adapter.
   */
  readonly claimAttempt: (
    identity: WatchIdentity,
    input: ClaimInput,
    now: Millis,
    writtenAt: Millis
  ) => Effect.Effect<boolean, PersistenceError>
  /** `decideDefer(row, input, now)` as one guarded write, as `claimAttempt`: `true` when it deferred. */
  readonly deferAttempt: (identity: WatchIdentity, input: DeferInput, now: Millis) => Effect.Effect<boolean, PersistenceError>
  /** Inserts a new row; `false` when its identity or its (owner, model, document) is taken. */
  readonly insert: (row: ProjectionWatch) => Effect.Effect<boolean, PersistenceError>
  /** Deletes a row only if its version is still `expectedVersion`. */
  readonly delete: (identity: WatchIdentity, expectedVersion: number) => Effect.Effect<boolean, PersistenceError>
  readonly get: (identity: WatchIdentity) => Effect.Effect<Option.Option<ProjectionWatch>, PersistenceError>
  readonly getByDocument: (documentID: string) => Effect.Effect<Option.Option<ProjectionWatch>, PersistenceError>
  /**
   * Holds the (owner, model, document) slot until the transaction ends, so
   * the finalizes that arm a watch on one document run one after another
   * instead of racing for the unique ingress index: an advisory lock on
   * Postgres; on SQLite and in memory the transaction already excludes
   * every other writer.
   */
  readonly lockDocument: (slot: DocumentSlot) => Effect.Effect<void, PersistenceError>
  /**
   * What a finalize arms against, in one statement: reads and locks, until
   * the transaction ends, the watch at `identity` (if any) and every watch of
   * the slot's document. Called with the slot's lock held already (taken by
   * `OperationRepository.lockReadWithSlot` in an earlier statement, so this
   * one reads what the slot's previous holder committed). Rows are locked in
   * one global order (identity, in byte order), the same for every caller,
   * so two arms that touch the same watches cannot deadlock.
   */
  readonly lockArmTargets: (
    slot: DocumentSlot,
    identity: WatchIdentity
  ) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
  /** Every watch of the given documents; any number of ids (adapters chunk). */
  readonly listByDocuments: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
  /** Unsettled watches whose next attempt is due at `now`. */
  readonly listScheduleDue: (now: Millis) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
  /**
   * One page of the watches due by schedule at `now` (as
   * `listScheduleDue`), in the due order (`compareDueWatches`), strictly
   * after `after` (from the first when absent), at most `limit` rows read
   * (`scheduleDuePage` is the reference). Reads index ranges of at most
   * `limit` rows per unsettled status, whatever the table's size.
   */
  readonly listScheduleDuePage: (
    now: Millis,
    after: DueWatchPosition | undefined,
    limit: number
  ) => Effect.Effect<DueRead<ProjectionWatch, DueWatchPosition>, PersistenceError>
  /**
   * One page of the watches a batch claims at `now`, fair between owners
   * (`fairPage` over `fairWatchTable` is the reference): the owners
   * (`ownerDID`) with pending watches visited in byte order from after
   * `at.from` and around, at most `limit` with a claimable watch (pending,
   * due by schedule, under no live claim), each giving its first claimable
   * watches in the due order (`compareDueWatches`) after its position in
   * `at`, every owner's first before any owner's second. Locked for the
   * rest of the surrounding transaction, passing over the rows another
   * transaction holds locked (Postgres `FOR UPDATE SKIP LOCKED`), so that
   * workers locking at once get disjoint pages. Only inside a transaction;
   * where one writer holds the whole database (SQLite, memory) the page is
   * already the caller's alone. Reads index ranges bounded by `limit` (and
   * the watches under live claim among an owner's due ones), whatever the
   * backlog or the number of owners.
   */
  readonly lockClaimablePage: (
    now: Millis,
    at: FairPosition<DueWatchPosition>,
    limit: number
  ) => Effect.Effect<FairDueRead<ProjectionWatch, DueWatchPosition>, PersistenceError>
  /**
   * `update` of each pair, in as few statements as the adapter can (one on
   * Postgres); answers, in order, whether each write matched its version.
   */
  readonly updateAll: (
    changes: ReadonlyArray<readonly [previous: ProjectionWatch, next: ProjectionWatch]>
  ) => Effect.Effect<ReadonlyArray<boolean>, PersistenceError>
  /**
   * One page of settled watches (verified or repair_failed), the audit
   * branch's candidates: at most `limit`, in identity order, those after
   * `after` (from the first when absent). A page shorter than `limit` ends
   * the pass. The order is the adapter's own, stable for a given store.
   */
  readonly listAuditPage: (
    after: WatchIdentity | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
  /** Locks and returns the pending watches deferred within `scope`. */
  readonly lockDeferred: (scope: ResumeScope) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
}>() {}
