import { Context, type Effect, Option } from "effect"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ClaimInput, DeferInput } from "../watch/transitions.js"
import type { OperationRepository } from "./OperationRepository.js"
import type { DocumentSlot, WatchRepository } from "./WatchRepository.js"

/**
 * The watch rows of a `DirectDatabase`: `WatchRepository`'s hot methods,
 * answered synchronously. Each throws a `PersistenceError` when the driver
 * fails, and means exactly what the `WatchRepository` method of the same
 * name means.
 */
export interface DirectWatchRows {
  readonly lockRead: (identity: WatchIdentity) => ProjectionWatch | undefined
  readonly update: (previous: ProjectionWatch, next: ProjectionWatch) => boolean
  readonly insert: (row: ProjectionWatch) => boolean
  readonly delete: (identity: WatchIdentity, expectedVersion: number) => boolean
  readonly claimAttempt: (identity: WatchIdentity, input: ClaimInput, now: Millis, writtenAt: Millis) => boolean
  readonly deferAttempt: (identity: WatchIdentity, input: DeferInput, now: Millis) => boolean
  readonly lockArmTargets: (slot: DocumentSlot, identity: WatchIdentity) => ReadonlyArray<ProjectionWatch>
}

/** The operation rows of a `DirectDatabase` (see `OperationRepository`), answered synchronously. */
export interface DirectOperationRows {
  readonly get: (key: OperationKey) => ConnectorOperation | undefined
  readonly lockRead: (key: OperationKey) => ConnectorOperation | undefined
  readonly insert: (row: ConnectorOperation) => boolean
  readonly update: (previous: ConnectorOperation, next: ConnectorOperation) => boolean
  readonly markSent: (key: OperationKey, leaseToken: string, maxAttempts: number, now: Millis) => ConnectorOperation | undefined
}

/**
 * A database that answers synchronously (SQLite through `better-sqlite3`,
 * the memory adapter), offered by its adapter beside the Effect ports so a
 * hot transition runs whole in one synchronous step: begin, lock-read,
 * decide, write, commit, with no fiber step between them. The rows mean
 * what the ports' methods mean; only how they are called differs.
 *
 * Optional: a store without it runs every transition on the Effect ports.
 * With it, a transition still takes the Effect path whenever `begin` or
 * `free` says the database is busy with another transaction (the Effect
 * path waits its turn), so the two never interleave.
 */
export interface DirectDatabaseApi {
  /**
   * True when no transaction is open: a single-statement write may run now.
   * False when one is (the caller's own, or another fiber's).
   */
  readonly free: () => boolean
  /**
   * Opens a write transaction now, or answers undefined (changing nothing)
   * when one is open already. Throws `PersistenceError` when the database
   * refuses to begin.
   */
  readonly begin: () => DirectTransaction | undefined
  readonly watches: DirectWatchRows
  readonly operations: DirectOperationRows
  /**
   * The repositories these rows are a synchronous view of. A store takes
   * the direct path only while these are the very ports it runs on: a port
   * replaced or decorated (a test injecting faults, say) turns it off, so
   * the decoration is never bypassed.
   */
  readonly repositories: {
    readonly watches: WatchRepository["Type"]
    readonly operations: OperationRepository["Type"]
  }
}

/** A transaction `DirectDatabaseApi.begin` opened; the rows' calls made while it is open run in it. */
export interface DirectTransaction {
  /** Commits; throws `PersistenceError` (after rolling back) when the commit fails. */
  readonly commit: () => void
  /** Rolls back (nothing once the transaction has ended). */
  readonly rollback: () => void
  /**
   * `effect` run inside the transaction: a winner read that queries the
   * same database sees (and waits on) nothing but this transaction. Called
   * with interruption off (a direct runner's region, or a fiber of its
   * own that nothing interrupts), so an adapter may set what the effect
   * runs with and put it back after without a region of its own; `effect`
   * keeps its own interruptibility.
   */
  readonly joined: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** The adapter's synchronous access to its database, when it has one (see `DirectDatabaseApi`). */
export class DirectDatabase extends Context.Tag("@connector-store/core/DirectDatabase")<DirectDatabase, DirectDatabaseApi>() {}

/** `direct` when it is a view of exactly `watches` and `operations` (see `DirectDatabaseApi.repositories`), else undefined. */
export const directFor = (
  direct: Option.Option<DirectDatabaseApi>,
  watches: WatchRepository["Type"],
  operations: OperationRepository["Type"]
): DirectDatabaseApi | undefined =>
  Option.isSome(direct) && direct.value.repositories.watches === watches && direct.value.repositories.operations === operations
    ? direct.value
    : undefined
