import { Context, type Effect, Option } from "effect"
import type { OperationRepository } from "./OperationRepository.js"
import type { WatchRepository } from "./WatchRepository.js"

/** What a row call answers: at once, or (`Later`: Postgres through `pg`) possibly a Promise of it. */
export type DirectAnswer<A, Later extends boolean> = Later extends true ? A | Promise<A> : A

/** The methods `K` of a port, each answering its effect's value directly (an `Option` as its value or `undefined`). */
type DirectMethods<Port, K extends keyof Port, Later extends boolean> = {
  readonly [M in K]: Port[M] extends (...args: infer P) => Effect.Effect<infer A, infer _E>
    ? (...args: P) => DirectAnswer<A extends Option.Option<infer V> ? V | undefined : A, Later>
    : never
}

/** `WatchRepository`'s hot methods, answered directly (or by a Promise); each throws a `PersistenceError` on a driver failure. */
export interface DirectWatchRowsOf<Later extends boolean> extends DirectMethods<
  WatchRepository["Type"],
  "lockRead" | "update" | "insert" | "delete" | "claimAttempt" | "deferAttempt" | "lockArmTargets",
  Later
> {}

/** `OperationRepository`'s hot methods, answered as `DirectWatchRowsOf` answers. */
export interface DirectOperationRowsOf<Later extends boolean> extends DirectMethods<
  OperationRepository["Type"],
  "get" | "lockRead" | "lockReadWithSlot" | "insert" | "update" | "updateWithWatch" | "markSent",
  Later
> {}

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
   * `effect` run inside the transaction (a winner read querying the same database sees only it); called with interruption off,
   * so an adapter may set and restore what it runs with.
   */
  readonly joined: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The rows that run inside this transaction on a database of many connections; absent with one connection. */
  readonly rows?: DirectRowsOf<Later> | undefined
  /**
   * Gives the transaction up without waiting (cancels what it runs, closes its connection, frees its slot), for a call that ran
   * out; absent where `rollback` never waits.
   */
  readonly abandon?: (() => void | Promise<void>) | undefined
}

/** A transaction `DirectDatabaseApi.begin` opened; the rows' calls made while it is open run in it. */
export type DirectTransaction = DirectTransactionOf<false>

/**
 * What a direct database's statement outside any transaction throws when
 * another process holds the database's lock: the call goes on on the ports,
 * which wait for the lock without holding the event loop. Nothing of the
 * statement ran.
 */
export const LOCKED_ELSEWHERE: unique symbol = Symbol.for("@connector-store/core/LockedElsewhere")

/** A database a transition runs on without a fiber: `DirectDatabaseApi` answers synchronously, `LaneDatabaseApi` maybe later. */
export interface DirectDatabaseOf<Later extends boolean> extends DirectRowsOf<Later> {
  /** True when a single-statement write may run now, outside any transaction (the one connection is not in one). */
  readonly free: () => boolean
  /**
   * Opens a write transaction (undefined when the one connection has one open, or another process holds the lock); throws
   * `PersistenceError` when refused.
   */
  readonly begin: () => DirectAnswer<DirectTransactionOf<Later> | undefined, Later>
  /** The ports these rows are a view of: a port replaced or decorated (a test injecting faults) turns the direct path off. */
  readonly repositories: {
    readonly watches: WatchRepository["Type"]
    readonly operations: OperationRepository["Type"]
  }
}

/**
 * A database that answers synchronously (SQLite, memory), offered beside the ports so a hot transition runs whole in one
 * synchronous step; a busy database (`begin`, `free`) sends it to the ports instead.
 */
export type DirectDatabaseApi = DirectDatabaseOf<false>

/**
 * A database whose rows answer with Promises (Postgres through `pg`): the Promise API's hot methods run on it with no fiber
 * (`makeDirectLane`), each transaction on a connection of its own.
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
