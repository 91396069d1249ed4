import { Context, type Effect, Option } from "effect"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ClaimInput, DeferInput } from "../watch/transitions.js"
import type { OperationRepository, PairedWrite, WatchWrite } from "./OperationRepository.js"
import type { DocumentSlot, WatchRepository } from "./WatchRepository.js"

/**
 * What a row call answers: at once, or, on a database that answers later
 * (`Later` true: Postgres through `pg`), possibly a Promise of it.
 */
export type DirectAnswer<A, Later extends boolean> = Later extends true ? A | Promise<A> : A

/**
 * The watch rows of a direct database: `WatchRepository`'s hot methods,
 * answered synchronously (or, `Later`, possibly with a Promise). Each
 * throws (or rejects with) a `PersistenceError` when the driver fails, and
 * means exactly what the `WatchRepository` method of the same name means.
 */
export interface DirectWatchRowsOf<Later extends boolean> {
  readonly lockRead: (identity: WatchIdentity) => DirectAnswer<ProjectionWatch | undefined, Later>
  readonly update: (previous: ProjectionWatch, next: ProjectionWatch) => DirectAnswer<boolean, Later>
  readonly insert: (row: ProjectionWatch) => DirectAnswer<boolean, Later>
  readonly delete: (identity: WatchIdentity, expectedVersion: number) => DirectAnswer<boolean, Later>
  readonly claimAttempt: (identity: WatchIdentity, input: ClaimInput, now: Millis, writtenAt: Millis) => DirectAnswer<boolean, Later>
  readonly deferAttempt: (identity: WatchIdentity, input: DeferInput, now: Millis) => DirectAnswer<boolean, Later>
  /** With the slot's lock held already, as `WatchRepository.lockArmTargets`. */
  readonly lockArmTargets: (slot: DocumentSlot, identity: WatchIdentity) => DirectAnswer<ReadonlyArray<ProjectionWatch>, Later>
}

/** The operation rows of a direct database (see `OperationRepository`). */
export interface DirectOperationRowsOf<Later extends boolean> {
  readonly get: (key: OperationKey) => DirectAnswer<ConnectorOperation | undefined, Later>
  readonly lockRead: (key: OperationKey) => DirectAnswer<ConnectorOperation | undefined, Later>
  readonly lockReadWithSlot: (key: OperationKey, documentID: string) => DirectAnswer<ConnectorOperation | undefined, Later>
  readonly insert: (row: ConnectorOperation) => DirectAnswer<boolean, Later>
  readonly update: (previous: ConnectorOperation, next: ConnectorOperation) => DirectAnswer<boolean, Later>
  readonly updateWithWatch: (
    previous: ConnectorOperation,
    next: ConnectorOperation,
    watch: WatchWrite
  ) => DirectAnswer<PairedWrite, Later>
  readonly markSent: (
    key: OperationKey,
    leaseToken: string,
    maxAttempts: number,
    now: Millis
  ) => DirectAnswer<ConnectorOperation | undefined, Later>
}

/** The rows a direct transition reads and writes: a database's own, or a transaction's. */
export interface DirectRowsOf<Later extends boolean> {
  readonly watches: DirectWatchRowsOf<Later>
  readonly operations: DirectOperationRowsOf<Later>
}

/** The watch rows of a `DirectDatabase`, answered synchronously. */
export type DirectWatchRows = DirectWatchRowsOf<false>
/** The operation rows of a `DirectDatabase`, answered synchronously. */
export type DirectOperationRows = DirectOperationRowsOf<false>

/** A transaction a direct database's `begin` opened. */
export interface DirectTransactionOf<Later extends boolean> {
  /** Commits; throws (rejects with) `PersistenceError`, after rolling back, when the commit fails. */
  readonly commit: () => DirectAnswer<void, Later>
  /** Rolls back (nothing once the transaction has ended); never fails. */
  readonly rollback: () => DirectAnswer<void, Later>
  /**
   * `effect` run inside the transaction: a winner read that queries the
   * same database sees (and waits on) nothing but this transaction. Called
   * with interruption off (a direct runner's region, or a fiber of its
   * own that nothing interrupts), so an adapter may set what the effect
   * runs with and put it back after without a region of its own; `effect`
   * keeps its own interruptibility.
   */
  readonly joined: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * The rows that run inside this transaction, on a database of many
   * connections; absent on a database of one connection, whose own rows
   * run inside whatever transaction is open on it.
   */
  readonly rows?: DirectRowsOf<Later> | undefined
  /**
   * Gives the transaction up without waiting on the database: what it runs
   * is cancelled, its connection closed (the server rolls it back) and its
   * slot freed; what still waits on it fails. Settles once that is done
   * (briefly: an adapter waits no longer than a moment for the server).
   * For a call that ran out; absent where `rollback` never waits (one
   * connection in the process).
   */
  readonly abandon?: (() => void | Promise<void>) | undefined
}

/** A transaction `DirectDatabaseApi.begin` opened; the rows' calls made while it is open run in it. */
export type DirectTransaction = DirectTransactionOf<false>

/**
 * A database a transition can run on without a fiber: `DirectDatabaseApi`
 * when it answers synchronously, `LaneDatabaseApi` when it may answer later.
 */
export interface DirectDatabaseOf<Later extends boolean> extends DirectRowsOf<Later> {
  /**
   * True when a single-statement write may run now, outside any
   * transaction. False when the database's one connection is in a
   * transaction (the caller's own, or another fiber's).
   */
  readonly free: () => boolean
  /**
   * Opens a write transaction, or answers undefined (changing nothing)
   * when one is open already on the database's one connection. Throws
   * (rejects with) `PersistenceError` when the database refuses to begin.
   */
  readonly begin: () => DirectAnswer<DirectTransactionOf<Later> | undefined, Later>
  /**
   * The repositories these rows are a view of. A store takes the direct
   * path only while these are the very ports it runs on: a port replaced
   * or decorated (a test injecting faults, say) turns it off, so the
   * decoration is never bypassed.
   */
  readonly repositories: {
    readonly watches: WatchRepository["Type"]
    readonly operations: OperationRepository["Type"]
  }
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
export type DirectDatabaseApi = DirectDatabaseOf<false>

/**
 * A database whose rows answer with Promises (Postgres through `pg`): the
 * Promise API's hot methods run on it without a fiber, one Promise per
 * statement (see `makeDirectLane`). Each transaction has a connection of
 * its own (`DirectTransactionOf.rows`), `free` is always true, and `begin`
 * waits for a connection rather than answering undefined. The Effect
 * methods keep the ports.
 */
export type LaneDatabaseApi = DirectDatabaseOf<true>

/** The adapter's Promise-answering access to its database, when it has one (see `LaneDatabaseApi`). */
export class LaneDatabase extends Context.Tag("@connector-store/core/LaneDatabase")<LaneDatabase, LaneDatabaseApi>() {}

/** The adapter's synchronous access to its database, when it has one (see `DirectDatabaseApi`). */
export class DirectDatabase extends Context.Tag("@connector-store/core/DirectDatabase")<DirectDatabase, DirectDatabaseApi>() {}

/** `direct` when it is a view of exactly `watches` and `operations` (see `DirectDatabaseApi.repositories`), else undefined. */
export const directFor = <D extends DirectDatabaseOf<boolean>>(
  direct: Option.Option<D>,
  watches: WatchRepository["Type"],
  operations: OperationRepository["Type"]
): D | undefined =>
  Option.isSome(direct) && direct.value.repositories.watches === watches && direct.value.repositories.operations === operations
    ? direct.value
    : undefined
