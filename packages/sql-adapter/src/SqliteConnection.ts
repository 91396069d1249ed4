import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { TurnQueue } from "@connector-store/core/adapter"
import Sqlite from "better-sqlite3"
import { Cause, Context, Effect, Exit, Layer, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { routeStatements } from "./internal/statementRoutes.js"
import { traced, transactionSpan } from "./internal/tracing.js"
import { withConnectionThen } from "./internal/transactionContext.js"

/**
 * The project's own SQLite `SqlClient`: `@effect/sql`'s `Client.make` over
 * one `better-sqlite3` connection, built for short read-decide-write
 * transactions.
 *
 * - Statements are prepared once per SQL text and run synchronously: an
 *   effect that completes without an asynchronous boundary, so a whole
 *   transaction whose steps are synchronous (a synchronous winner reader)
 *   runs in one step of the event loop.
 * - A transaction begins `BEGIN IMMEDIATE` (it holds the write lock from its
 *   first statement: no lock statement, no stale-snapshot failure) with
 *   `BEGIN`, `COMMIT` and `ROLLBACK` prepared once.
 * - One transaction at a time per connection, in a queue: a statement or a
 *   transaction of another fiber waits asynchronously for the open one to
 *   end (the open one may be suspended on an asynchronous winner read), and
 *   never runs inside it. Within the transaction statements run with no
 *   queue, scope or semaphore.
 * - Stores on one file in one process share one connection and its queue
 *   (ref-counted, closed with the last store; `:memory:` is never shared), so
 *   a store never busy-waits inside the driver, blocking the event loop, for
 *   a lock its own process holds. The busy timeout only serves other
 *   processes.
 *
 * With a tracer installed the same statements run in the same way, each in
 * a `sql.execute` span and each transaction in a `sql.transaction` span, as
 * on the stock client; without one there are no spans (Effect's own tracer
 * exports nowhere).
 */
export interface SqliteConnectionOptions {
  /** A file path, or `:memory:`. */
  readonly filename: string
  /** How long a statement waits for another process's lock (default 10 s). */
  readonly busyTimeoutMs?: number | undefined
  /** Open the file read-only (it must exist): nothing is created or written, the journal mode is left as it is. */
  readonly readOnly?: boolean | undefined
  /** Refuse to create the file when it does not exist. */
  readonly fileMustExist?: boolean | undefined
}

const MARKER: unique symbol = Symbol.for("@connector-store/sql-adapter/SqliteConnection")
const SHARED: unique symbol = Symbol.for("@connector-store/sql-adapter/SqliteConnection/shared")

/** True when `sql` is this module's client (it begins its transactions `IMMEDIATE`). */
export const isProjectSqliteClient = (sql: Client.SqlClient): boolean =>
  (sql as unknown as Record<symbol, unknown>)[MARKER] === true

/** The connection under this module's client `sql`, for running statements outside any fiber; undefined for any other client. */
export const connectionOf = (sql: Client.SqlClient): SharedDatabase | undefined => {
  const shared = (sql as unknown as Record<symbol, unknown>)[SHARED]
  return shared instanceof SharedDatabase ? shared : undefined
}

/** How many prepared statements a connection keeps (by SQL text); the oldest go first past it. */
const STATEMENT_CACHE_SIZE = 500

const failure = (message: string) => (cause: unknown) => new SqlError({ cause, message })

/** A statement run now, synchronously: its result, or its failure. */
type RunNow<A> = () => Effect.Effect<A, SqlError>

const attempt = <A>(body: () => A): Effect.Effect<A, SqlError> => {
  try {
    return Effect.succeed(body())
  } catch (cause) {
    return Effect.fail(new SqlError({ cause, message: "Failed to execute statement" }))
  }
}

/** One `better-sqlite3` connection, its statement cache and its transaction queue. */
export class SharedDatabase {
  refs = 0
  /** One transaction at a time on the connection. */
  readonly queue = new TurnQueue()
  private readonly statements = new Map<string, Sqlite.Statement>()
  private readonly begin: Sqlite.Statement
  private readonly commitStatement: Sqlite.Statement
  private readonly rollbackStatement: Sqlite.Statement
  /** The connection of the open transaction (each transaction has its own), if any. */
  current: Connection | undefined
  /** The connection of statements outside any transaction: each waits for the open one to end. */
  readonly outside: Connection
  private readonly connectionWith: (guard: <A>(now: RunNow<A>) => Effect.Effect<A, SqlError>) => Connection

  constructor(readonly key: string | undefined, readonly db: Sqlite.Database) {
    this.begin = db.prepare("BEGIN IMMEDIATE")
    this.commitStatement = db.prepare("COMMIT")
    this.rollbackStatement = db.prepare("ROLLBACK")
    const run = (text: string, params: ReadonlyArray<unknown>, raw: boolean) => () =>
      attempt(() => this.runNow(this.prepared(text), params, raw))
    const values = (text: string, params: ReadonlyArray<unknown>) => () =>
      attempt((): ReadonlyArray<ReadonlyArray<unknown>> => {
        const statement = this.prepared(text)
        if (!statement.reader) {
          statement.run(...params)
          return []
        }
        statement.raw(true)
        try {
          return statement.all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
        } finally {
          statement.raw(false)
        }
      })
    const unprepared = (text: string, params: ReadonlyArray<unknown>) => () =>
      attempt(() => this.runNow(db.prepare(text), params, false))
    const transformed = <A extends object>(
      now: RunNow<ReadonlyArray<A>>,
      transformRows: (<B extends object>(rows: ReadonlyArray<B>) => ReadonlyArray<B>) | undefined
    ): RunNow<ReadonlyArray<A>> => transformRows === undefined ? now : () => Effect.map(now(), transformRows)
    this.connectionWith = (guard) => ({
      execute: (text, params, transformRows) => guard(transformed(run(text, params, false), transformRows)),
      executeRaw: (text, params) => guard(run(text, params, true)),
      executeValues: (text, params) => guard(values(text, params)),
      executeUnprepared: (text, params, transformRows) => guard(transformed(unprepared(text, params), transformRows)),
      executeStream: () => Effect.dieMessage("executeStream is not implemented on this SQLite client")
    })
    this.outside = this.connectionWith(this.whenFree)
  }

  /**
   * Runs `now` at once when no transaction is open, else once the open one
   * has ended. The check and the run are one synchronous step, so no other
   * fiber's transaction can begin in between.
   */
  private readonly whenFree = <A>(now: RunNow<A>): Effect.Effect<A, SqlError> =>
    Effect.suspend(() => this.queue.held ? Effect.zipRight(this.queue.released, this.whenFree(now)) : now())

  /**
   * A connection for one transaction: its statements run at once while that
   * transaction is open. Once it has ended (a handle kept past it), they run
   * as statements outside any transaction, never inside another's.
   */
  transactionConnection(): Connection {
    const connection: Connection = this.connectionWith((now) =>
      Effect.suspend(() => this.current === connection ? now() : this.whenFree(now))
    )
    return connection
  }

  /** Runs `text` now, on whatever transaction is open: the caller has checked it may. */
  executeNow(
    text: string,
    params: ReadonlyArray<unknown>,
    transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
  ): Effect.Effect<ReadonlyArray<any>, SqlError> {
    let rows: ReadonlyArray<any>
    try {
      rows = this.runNow(this.prepared(text), params, false)
    } catch (cause) {
      return Effect.fail(new SqlError({ cause, message: "Failed to execute statement" }))
    }
    return Effect.succeed(transformRows === undefined ? rows : transformRows(rows))
  }

  prepared(text: string): Sqlite.Statement {
    const cached = this.statements.get(text)
    if (cached !== undefined) return cached
    const statement = this.db.prepare(text)
    if (this.statements.size >= STATEMENT_CACHE_SIZE) {
      const oldest = this.statements.keys().next()
      if (oldest.done !== true) this.statements.delete(oldest.value)
    }
    this.statements.set(text, statement)
    return statement
  }

  private runNow(statement: Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean): ReadonlyArray<any> {
    if (statement.reader) return statement.all(...params)
    const result = statement.run(...params)
    return raw ? result as unknown as ReadonlyArray<any> : []
  }

  /**
   * Runs a prepared control statement now: undefined when it succeeded, else
   * its failure. A rollback when no transaction is open (a failed statement
   * may have rolled it back already) does nothing.
   */
  control(statement: "begin" | "commit" | "rollback"): SqlError | undefined {
    try {
      if (statement === "begin") this.begin.run()
      else if (statement === "commit") this.commitStatement.run()
      else if (this.db.inTransaction) this.rollbackStatement.run()
      return undefined
    } catch (cause) {
      return new SqlError({ cause, message: `Failed to ${statement} transaction` })
    }
  }

  /**
   * Begins a transaction now, outside any fiber (see `SqliteDirect`), when
   * none is open and no fiber waits for one: its connection, which statements of fibers joined to it
   * run on. Undefined, changing nothing, when one is open. Throws the
   * `SqlError` of a failed BEGIN.
   */
  beginNow(): Connection | undefined {
    if (this.queue.busy) return undefined
    const failed = this.control("begin")
    if (failed !== undefined) throw failed
    this.queue.held = true
    const connection = this.transactionConnection()
    this.current = connection
    return connection
  }

  /**
   * Ends the transaction `beginNow` opened: commits it (`commit`), or rolls
   * it back, and hands the lock on either way. Throws the `SqlError` of a
   * failed COMMIT (after rolling back) or ROLLBACK.
   */
  endNow(commit: boolean): void {
    try {
      const failed = commit ? this.control("commit") : this.control("rollback")
      if (failed !== undefined) {
        if (commit) this.control("rollback")
        throw failed
      }
    } finally {
      this.current = undefined
      this.queue.release()
    }
  }

  savepoint(text: string): Effect.Effect<void, SqlError> {
    return Effect.try({ try: () => void this.db.exec(text), catch: failure(`Failed to run ${text}`) })
  }

  clearStatements(): void {
    this.statements.clear()
  }
}

/** Open connections by file (its resolved real path): stores on one file in one process share one. */
const openDatabases = new Map<string, SharedDatabase>()

/** The registry key of `filename`, or undefined when it must not be shared (`:memory:`, a temporary database). */
const shareKeyOf = (filename: string): string | undefined => {
  if (filename === "" || filename === ":memory:" || filename.startsWith("file:")) return undefined
  const absolute = path.resolve(filename)
  try {
    return fs.realpathSync(absolute)
  } catch {
    // Not created yet: its folder's real path and its name.
    try {
      return path.join(fs.realpathSync(path.dirname(absolute)), path.basename(absolute))
    } catch {
      return absolute
    }
  }
}

const pause = new Int32Array(new SharedArrayBuffer(4))

/**
 * Puts the file in WAL mode, waiting up to `busyTimeoutMs` while another
 * process holds the lock the pragma needs: SQLite can answer the pragma
 * SQLITE_BUSY without calling the busy handler (another process recovering
 * the WAL of one that was killed), so the busy timeout alone does not cover it.
 */
const walWithin = (db: Sqlite.Database, busyTimeoutMs: number): void => {
  const deadline = Date.now() + busyTimeoutMs
  for (;;) {
    try {
      db.pragma("journal_mode = WAL")
      return
    } catch (cause) {
      const code = (cause as { code?: unknown }).code
      if (typeof code !== "string" || !code.startsWith("SQLITE_BUSY") || Date.now() >= deadline) throw cause
      Atomics.wait(pause, 0, 0, 20)
    }
  }
}

const openDatabase = (options: SqliteConnectionOptions): SharedDatabase => {
  const resolved = shareKeyOf(options.filename)
  // A read-only connection is never shared with a writing one, nor the other way round.
  const key = resolved === undefined ? undefined : options.readOnly === true ? `ro:${resolved}` : resolved
  const existing = key === undefined ? undefined : openDatabases.get(key)
  if (existing !== undefined) {
    existing.refs++
    return existing
  }
  const readonly = options.readOnly === true
  const db = new Sqlite(options.filename, { readonly, fileMustExist: readonly || options.fileMustExist === true })
  try {
    const busyTimeoutMs = Math.trunc(options.busyTimeoutMs ?? 10_000)
    db.pragma(`busy_timeout = ${busyTimeoutMs}`)
    if (!readonly) walWithin(db, busyTimeoutMs)
  } catch (cause) {
    db.close()
    throw cause
  }
  const shared = new SharedDatabase(key, db)
  shared.refs = 1
  if (key !== undefined) openDatabases.set(key, shared)
  return shared
}

const closeDatabase = (shared: SharedDatabase): void => {
  shared.refs--
  if (shared.refs > 0) return
  if (shared.key !== undefined && openDatabases.get(shared.key) === shared) openDatabases.delete(shared.key)
  shared.clearStatements()
  shared.db.close()
}

/** How many stores share the connection to `filename` in this process (0 when none is open); for tests. */
export const sharedSqliteConnections = (filename: string): number => {
  const key = shareKeyOf(filename)
  return key === undefined ? 0 : openDatabases.get(key)?.refs ?? 0
}

/**
 * A transaction on `shared`: top-level ones wait their turn in its queue and
 * begin IMMEDIATE; nested ones (inside a transaction on the same connection)
 * run in a savepoint. A failed COMMIT is a failure (`SqlError`), after which
 * the transaction is rolled back if still open.
 */
const makeWithTransaction = (shared: SharedDatabase) => {
  let savepoints = 0
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
        const context = fiber.currentContext
        const outer = Context.getOption(context, Client.TransactionConnection)
        if (outer._tag === "Some" && outer.value[0] === shared.current) {
          const depth = outer.value[1] + 1
          const name = `connector_store_sp_${++savepoints}`
          return Effect.zipRight(
            shared.savepoint(`SAVEPOINT ${name}`),
            withConnectionThen(
              context,
              outer.value[0],
              depth,
              restore(effect),
              (exit: Exit.Exit<A, E>): Effect.Effect<A, E | SqlError> =>
                Effect.zipRight(
                  Exit.isSuccess(exit)
                    ? shared.savepoint(`RELEASE SAVEPOINT ${name}`)
                    : Effect.orDie(shared.savepoint(`ROLLBACK TO SAVEPOINT ${name}; RELEASE SAVEPOINT ${name}`)),
                  exit
                )
            )
          )
        }
        const connection = shared.transactionConnection()
        // Once the lock is ours: begin, run the body with the transaction's
        // connection in its context, then commit or roll back and hand the
        // lock on. Everything but the body is synchronous and uninterruptible.
        const end = () => {
          shared.current = undefined
          shared.queue.release()
        }
        const transaction = Effect.suspend(() => {
          const failedBegin = shared.control("begin")
          if (failedBegin !== undefined) {
            shared.queue.release()
            return Effect.fail(failedBegin)
          }
          shared.current = connection
          return withConnectionThen(context, connection, 0, restore(effect), (exit): Effect.Effect<A, E | SqlError> => {
            if (Exit.isSuccess(exit)) {
              const failedCommit = shared.control("commit")
              if (failedCommit !== undefined) shared.control("rollback")
              end()
              return failedCommit === undefined ? exit : Effect.fail(failedCommit)
            }
            const failedRollback = shared.control("rollback")
            end()
            return failedRollback === undefined ? exit : Effect.failCause(Cause.sequential(exit.cause, Cause.die(failedRollback)))
          })
        })
        // Taken in the same synchronous step as the check, outside `restore`:
        // only the wait is interruptible.
        const takeTurn: Effect.Effect<A, E | SqlError, R> = Effect.suspend(() => {
          if (shared.queue.held) return Effect.zipRight(restore(shared.queue.released), takeTurn)
          shared.queue.held = true
          return transaction
        })
        return takeTurn
      })
    )
}

/** What every span of the client carries, as on the stock client. */
const spanAttributes: ReadonlyArray<readonly [string, unknown]> = [["db.system.name", "sqlite"]]

/**
 * The client on a connection to `options.filename` (shared with every other
 * store of this process on that file), closed with the scope.
 */
export const make = (
  options: SqliteConnectionOptions
): Effect.Effect<Client.SqlClient, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const shared = yield* Effect.acquireRelease(
      Effect.try({ try: () => openDatabase(options), catch: failure(`Failed to open ${options.filename}`) }),
      (shared) => Effect.sync(() => closeDatabase(shared))
    )
    const compiler = Statement.makeCompilerSqlite()
    const base = yield* Client.make({
      acquirer: Effect.succeed(shared.outside),
      compiler,
      spanAttributes
    })
    return fastClient(base, shared)
  })

/**
 * `base` with its statements run straight on the connection (see
 * `routeStatements`): the stock statement path opens a span and a scope per
 * statement; here a statement inside this connection's transaction, or
 * outside any while none is open, runs now, and any other goes to the
 * connection that decides (waits its turn, or is another client's
 * transaction).
 */
const fastClient = (base: Client.SqlClient, shared: SharedDatabase): Client.SqlClient => {
  const withTransaction = makeWithTransaction(shared)
  const now: Pick<Connection, "execute"> = {
    execute: (text, params, transformRows) => shared.executeNow(text, params, transformRows)
  }
  const routed = routeStatements(base, {
    execute: (fiber) => {
      const transaction = Context.getOption(fiber.currentContext, Client.TransactionConnection)
      if (transaction._tag === "Some" ? transaction.value[0] === shared.current : !shared.queue.held) return now
      return transaction._tag === "Some" ? transaction.value[0] : shared.outside
    }
  })
  if (routed === undefined) throw new Error("@effect/sql's statements are not of the shape the SQLite client relies on")
  const client: Client.SqlClient = Object.assign(routed, {
    // With a tracer installed, the same transaction in the stock client's span.
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.withFiberRuntime<A, E | SqlError, R>((fiber) =>
        traced(fiber) ? transactionSpan(withTransaction(effect), spanAttributes) : withTransaction(effect)
      ),
    withoutTransforms: () => client,
    [MARKER]: true,
    [SHARED]: shared
  })
  return client
}

/** The project's SQLite client as a layer (also see `layerClient`). */
export const layer = (options: SqliteConnectionOptions): Layer.Layer<Client.SqlClient, SqlError> =>
  Layer.scoped(Client.SqlClient, make(options)).pipe(Layer.provide(Reactivity.layer))
