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

/** The projection-watch table, as rows; `lock*` reads hold their rows until the transaction ends. */
export class WatchRepository extends Context.Tag("@connector-store/core/WatchRepository")<WatchRepository, {
  /** Reads a watch and locks it until the transaction ends. */
  readonly lockRead: (identity: WatchIdentity) => Effect.Effect<Option.Option<ProjectionWatch>, PersistenceError>
  /** Writes `next` only at `previous.version` (`false`: the race was lost); only the differing columns need writing. */
  readonly update: (previous: ProjectionWatch, next: ProjectionWatch) => Effect.Effect<boolean, PersistenceError>
  /**
   * `decideClaim(row, input, now, writtenAt)` as one guarded write with no read or lock: `true` when it claimed
   * (test/guarded-writes.property.test.ts checks the guard).
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
  /** Holds the (owner, model, document) slot until the transaction ends, so finalizes arming one document queue. */
  readonly lockDocument: (slot: DocumentSlot) => Effect.Effect<void, PersistenceError>
  /** What a finalize arms against (slot locked): the watch at `identity` and the document's watches, locked in identity order. */
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
  /** One page of the watches due by schedule at `now` (`scheduleDuePage` is the reference), reading index ranges of `limit` rows. */
  readonly listScheduleDuePage: (
    now: Millis,
    after: DueWatchPosition | undefined,
    limit: number
  ) => Effect.Effect<DueRead<ProjectionWatch, DueWatchPosition>, PersistenceError>
  /**
   * One page of the claimable watches a batch claims at `now`, fair between owners (`fairPage` over `fairWatchTable` is the
   * reference), locked with rows locked elsewhere passed over (`SKIP LOCKED`); only inside a transaction.
   */
  readonly lockClaimablePage: (
    now: Millis,
    at: FairPosition<DueWatchPosition>,
    limit: number
  ) => Effect.Effect<FairDueRead<ProjectionWatch, DueWatchPosition>, PersistenceError>
  /** `update` of each pair in as few statements as the adapter can; whether each landed, in order. */
  readonly updateAll: (
    changes: ReadonlyArray<readonly [previous: ProjectionWatch, next: ProjectionWatch]>
  ) => Effect.Effect<ReadonlyArray<boolean>, PersistenceError>
  /** One page of settled watches (the audit's candidates) after `after`, at most `limit`, in the adapter's stable identity order. */
  readonly listAuditPage: (
    after: WatchIdentity | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
  /** Locks and returns the pending watches deferred within `scope`. */
  readonly lockDeferred: (scope: ResumeScope) => Effect.Effect<ReadonlyArray<ProjectionWatch>, PersistenceError>
}>() {}
