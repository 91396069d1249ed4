import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { TurnQueue, WorkNotices, type WorkSignalApi } from "@connector-store/core/adapter"
import Sqlite from "better-sqlite3"
import { Cause, Context, Effect, Exit, Layer, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { DATABASE_REPLACED_CODE } from "./SqlFailure.js"
import { traced, transactionSpan } from "./internal/tracing.js"
import { OWN_CONNECTION } from "./internal/ownConnections.js"
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
 *   a store never waits for a lock its own process holds. Another process's
 *   lock is waited for in the driver for `DRIVER_LOCK_WAIT_MS` at most, then
 *   in pauses that leave the event loop free (see `SharedDatabase`). The file is known by
 *   its device and inode, so two names of it (a symbolic or hard link, a
 *   relative and an absolute path) share too.
 * - Before a commit (and an autocommitted write) the path is checked, with
 *   one `stat`, to still name the file that was opened, whole (once the
 *   file changed, its header is read: SQLite's, and no more pages than the
 *   file holds); at most once per `FILE_CHECK_INTERVAL_MS`, so a burst of
 *   commits pays for one `stat`. A file deleted, replaced or truncated under
 *   the connection fails the first commit checked after, rolled back, and
 *   every later statement, with a `SqlError` whose cause has the code
 *   `DATABASE_REPLACED_CODE` (classified `database-replaced`): no write is
 *   acknowledged into a file no later open would find once that interval
 *   has passed. A file missing beside its log (`-wal`),
 *   deleted while open, is not created again: the open fails the same way.
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
  /**
   * Open the file read-only (it must exist): nothing is created or written,
   * the journal mode is left as it is. In a folder the process cannot write,
   * with no `-shm` file left by a writer, SQLite cannot read a WAL database
   * in place: the connection then reads a copy of the file in memory, as it
   * was at the open (see `openReadOnly`).
   */
  readonly readOnly?: boolean | undefined
  /** Refuse to create the file when it does not exist. */
  readonly fileMustExist?: boolean | undefined
  /** Run `PRAGMA quick_check` when the file is opened: a damaged file fails the open (`SQLITE_CORRUPT`). */
  readonly checkIntegrity?: boolean | undefined
}

/** The failure of a connection whose file is no longer the one it opened; `code` is `DATABASE_REPLACED_CODE`. */
export class DatabaseReplacedError extends Error {
  readonly code = DATABASE_REPLACED_CODE
}

/**
 * How often, at most, a connection checks that its path still names the file
 * it opened (1 ms): the writes committed within that long of a deletion may
 * be acknowledged, as are the ones committed just before it.
 */
export const FILE_CHECK_INTERVAL_MS = 1

/** The file a connection opened, as it is to stay while the connection writes to it. */
interface FileIdentity {
  /** Its real path when opened. */
  readonly path: string
  readonly dev: number
  readonly ino: number
  /** A descriptor of it its header is read through (see `headerReaders`). */
  readonly fd: number
  /** Its size and change time when last checked: the header is read again only once they change (a checkpoint). */
  size: number
  ctimeMs: number
  /** When it was last checked (`performance.now()`). */
  checkedAt: number
}

/** SQLite's file header starts with these 16 bytes. */
const SQLITE_MAGIC = Buffer.from("SQLite format 3\0", "latin1")

/**
 * Why the file at `file`, now `size` bytes long (`before` when last
 * checked), is no longer a whole SQLite database, or undefined when it is
 * one: its header is SQLite's, and it holds every page the header counts.
 */
const truncation = (file: string, fd: number, size: number, before: number): string | undefined => {
  // A database nothing was checkpointed into yet has no header.
  if (size < 100) return before < 100 && size >= before ? undefined : `${file} was truncated to ${size} bytes`
  const header = Buffer.alloc(100)
  try {
    fs.readSync(fd, header, 0, 100, 0)
  } catch (cause) {
    return `${file} cannot be read back: ${(cause as Error).message}`
  }
  if (!header.subarray(0, 16).equals(SQLITE_MAGIC)) return `${file} no longer starts with a SQLite header`
  const rawPageSize = header.readUInt16BE(16)
  const pageSize = rawPageSize === 1 ? 65_536 : rawPageSize
  const pages = header.readUInt32BE(28)
  // The header's page count holds only while its version-valid-for number matches the change counter.
  const countValid = header.readUInt32BE(92) === header.readUInt32BE(24)
  // A checkpoint (another process's too) writes page 1, with the new count, before the pages that grow the
  // file: a file that grew since the last check and is still short of its count is one being written, not
  // one cut. Only a file that shrank below its count was truncated.
  if (countValid && size < before && size < pages * pageSize) return `${file} was truncated: ${size} bytes hold fewer than its ${pages} pages of ${pageSize} bytes`
  return undefined
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

/** Whether `error` (a `SqlError` or a driver error) is SQLite's refusal because another connection holds the lock. */
export const isLockedElsewhere = (error: unknown): boolean => {
  const cause = error instanceof SqlError ? error.cause : error
  const code = (cause as { readonly code?: unknown } | null)?.code
  return typeof code === "string" && code.startsWith("SQLITE_BUSY")
}

/**
 * How long the driver itself waits for another connection's lock (its busy
 * timeout), the event loop stalled meanwhile: most locks are held for less
 * (a transaction and its commit), and are waited for at once without
 * handing the call to the ports.
 */
export const DRIVER_LOCK_WAIT_MS = 5

/** How often a pending wait for work looks for other connections' commits to the file. */
const OTHER_COMMITS_POLL_MS = 100

/**
 * Waits for work on the file of `db`: a notice is a commit of this
 * connection (`notices`) or, looked for when a wait begins and every
 * `OTHER_COMMITS_POLL_MS` while one is pending, of any other connection,
 * another process's included (`PRAGMA data_version` changes with each).
 */
const fileWork = (db: Sqlite.Database, notices: WorkNotices): WorkSignalApi => {
  const version = db.prepare("PRAGMA data_version").pluck()
  let seen: unknown
  const read = (): unknown => {
    try {
      return version.get()
    } catch {
      // A closed or lost file: its calls say so; a wait runs to its timeout.
      return seen
    }
  }
  seen = read()
  let waits = 0
  let poll: ReturnType<typeof setInterval> | undefined
  const look = () => {
    const now = read()
    if (now === seen) return
    seen = now
    notices.notify()
  }
  return {
    wait: (since, timeoutMs, method) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          look()
          if (waits++ > 0) return
          poll = setInterval(look, OTHER_COMMITS_POLL_MS)
          poll.unref?.()
        }),
        () => notices.wait(since, timeoutMs, method),
        () =>
          Effect.sync(() => {
            if (--waits === 0) clearInterval(poll)
          })
      )
  }
}

/** The pauses between tries of a statement refused for another connection's lock, as SQLite's own busy handler spaces them. */
const LOCK_PAUSES_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100]

/** The pause before the next try (`tries` made) of what another connection's lock refused; undefined once `deadline` has passed. */
const lockPause = (tries: number, deadline: number): number | undefined => {
  const left = deadline - performance.now()
  return left <= 0 ? undefined : Math.min(left, LOCK_PAUSES_MS[Math.min(tries, LOCK_PAUSES_MS.length - 1)]!)
}

/**
 * `run` tried again, after a pause that leaves the event loop free, for as
 * long as another connection's lock refuses it, at most `waitMs` from the
 * first refusal; then that refusal.
 */
const retriedWhileLocked = <A>(
  run: () => Effect.Effect<A, SqlError>,
  waitMs: number,
  deadline?: number,
  tries = 0
): Effect.Effect<A, SqlError> =>
  Effect.catchIf(Effect.suspend(run), isLockedElsewhere, (refused) => {
    const until = deadline ?? performance.now() + waitMs
    const pause = lockPause(tries, until)
    return pause === undefined ? Effect.fail(refused) : Effect.zipRight(Effect.sleep(pause), retriedWhileLocked(run, waitMs, until, tries + 1))
  })

/**
 * One `better-sqlite3` connection, its statement cache and its transaction
 * queue. The driver's busy timeout is `DRIVER_LOCK_WAIT_MS`: a statement or
 * `BEGIN` still refused for another connection's lock is tried again after
 * a pause (`lockWaitMs` in all), with the event loop free, where the driver
 * would sleep the process.
 */
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
  /** Notices of this connection's commits, for the waits of every store sharing it (see `WorkSignal`). */
  readonly notices = new WorkNotices()
  /** The waits of every store sharing the connection: its own commits, and other connections' (see `fileWork`). */
  readonly work: WorkSignalApi
  /** The file as opened, checked before each commit; undefined for a database without one (`:memory:`, read-only). */
  identity: FileIdentity | undefined
  /** The file's `dev:ino`, while this connection holds its header reader. */
  fileKey: string | undefined
  /** Set once the file is found deleted, replaced or truncated: every later statement fails with it. */
  private lost: SqlError | undefined
  private readonly connectionWith: (guard: <A>(now: RunNow<A>) => Effect.Effect<A, SqlError>) => Connection

  /**
   * `lockWaitMs`: how long a statement outside a transaction, or a `BEGIN`,
   * waits for another connection's lock (the busy timeout).
   */
  constructor(readonly key: string | undefined, readonly db: Sqlite.Database, readonly lockWaitMs: number) {
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
      attempt(() => this.runNow(this.guarded(db.prepare(text)), params, false))
    const transformed = <A extends object>(
      now: RunNow<ReadonlyArray<A>>,
      transformRows: (<B extends object>(rows: ReadonlyArray<B>) => ReadonlyArray<B>) | undefined
    ): RunNow<ReadonlyArray<A>> => transformRows === undefined ? now : () => Effect.map(now(), transformRows)
    this.connectionWith = (guard) => ({
      [OWN_CONNECTION]: spanAttributes,
      execute: (text, params, transformRows) => guard(transformed(run(text, params, false), transformRows)),
      executeRaw: (text, params) => guard(run(text, params, true)),
      executeValues: (text, params) => guard(values(text, params)),
      executeUnprepared: (text, params, transformRows) => guard(transformed(unprepared(text, params), transformRows)),
      executeStream: () => Effect.dieMessage("executeStream is not implemented on this SQLite client")
    })
    this.outside = this.connectionWith(this.whenFree)
    this.work = fileWork(db, this.notices)
  }

  /**
   * Runs `now` at once when no transaction is open, else once the open one
   * has ended (the check and the run are one synchronous step, so no other
   * fiber's transaction can begin in between); again while another
   * connection's lock refuses it.
   */
  private readonly whenFree = <A>(now: RunNow<A>): Effect.Effect<A, SqlError> =>
    retriedWhileLocked(() => this.whenOpen(now), this.lockWaitMs)

  private readonly whenOpen = <A>(now: RunNow<A>): Effect.Effect<A, SqlError> =>
    Effect.suspend(() => this.queue.held ? Effect.zipRight(this.queue.released, this.whenOpen(now)) : now())

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

  /**
   * The prepared statement of `text`, to run now. Throws the connection's
   * loss, if any; before a write outside any transaction (it commits at
   * once), checks the file first (see `checkFile`).
   */
  prepared(text: string): Sqlite.Statement {
    const cached = this.statements.get(text)
    if (cached !== undefined) return this.guarded(cached)
    const statement = this.guarded(this.db.prepare(text))
    if (this.statements.size >= STATEMENT_CACHE_SIZE) {
      const oldest = this.statements.keys().next()
      if (oldest.done !== true) this.statements.delete(oldest.value)
    }
    this.statements.set(text, statement)
    return statement
  }

  private guarded(statement: Sqlite.Statement): Sqlite.Statement {
    if (this.lost !== undefined) throw this.lost
    if (!statement.reader && this.identity !== undefined && !this.db.inTransaction) {
      const lost = this.checkFile()
      if (lost !== undefined) throw lost
    }
    return statement
  }

  /**
   * Undefined while the path still names the file opened, whole (one `stat`;
   * the header is read again only when the file changed since the last
   * check); else the connection's loss, kept for every later statement.
   */
  checkFile(): SqlError | undefined {
    if (this.lost !== undefined) return this.lost
    const identity = this.identity
    if (identity === undefined) return undefined
    const at = performance.now()
    if (at - identity.checkedAt < FILE_CHECK_INTERVAL_MS) return undefined
    identity.checkedAt = at
    let now: fs.Stats | undefined
    try {
      now = fs.statSync(identity.path, { throwIfNoEntry: false })
    } catch (cause) {
      return this.lose(`${identity.path} cannot be checked: ${(cause as Error).message}`)
    }
    if (now === undefined) return this.lose(`${identity.path} was deleted while the store had it open`)
    if (now.ino !== identity.ino || now.dev !== identity.dev) {
      return this.lose(`${identity.path} was replaced by another file while the store had it open`)
    }
    if (now.size !== identity.size || now.ctimeMs !== identity.ctimeMs) {
      const problem = truncation(identity.path, identity.fd, now.size, identity.size)
      if (problem !== undefined) return this.lose(`${problem} while the store had it open`)
      identity.size = now.size
      identity.ctimeMs = now.ctimeMs
    }
    return undefined
  }

  private lose(reason: string): SqlError {
    this.lost = new SqlError({
      cause: new DatabaseReplacedError(`${reason}; nothing more is written through this connection (reopen the store)`),
      message: "The database file is no longer the one opened"
    })
    return this.lost
  }

  private runNow(statement: Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean): ReadonlyArray<any> {
    if (statement.reader) {
      const rows = statement.all(...params)
      this.ran(statement)
      return rows
    }
    const result = statement.run(...params)
    this.ran(statement)
    return raw ? result as unknown as ReadonlyArray<any> : []
  }

  /** `statement` ran: a write outside any transaction committed at once, a notice of work. */
  ran(statement: Sqlite.Statement): void {
    if (!statement.readonly && !this.db.inTransaction) this.notices.notify()
  }

  /**
   * Runs a prepared control statement now: undefined when it succeeded, else
   * its failure. A rollback when no transaction is open (a failed statement
   * may have rolled it back already) does nothing. A commit is refused, and
   * a rollback notes it, when the file is no longer the one opened (see
   * `checkFile`).
   */
  control(statement: "begin" | "commit" | "rollback"): SqlError | undefined {
    try {
      if (statement === "begin") {
        if (this.lost !== undefined) return this.lost
        this.begin.run()
      } else if (statement === "commit") {
        const lost = this.checkFile()
        if (lost !== undefined) return lost
        this.commitStatement.run()
        this.notices.notify()
      } else {
        // A failed transaction may have read a file truncated under it: later calls are to say so.
        if (this.identity !== undefined) this.checkFile()
        if (this.db.inTransaction) this.rollbackStatement.run()
      }
      return undefined
    } catch (cause) {
      return new SqlError({ cause, message: `Failed to ${statement} transaction` })
    }
  }

  /**
   * Begins a transaction now, outside any fiber (see `SqliteDirect`), when
   * none is open and no fiber waits for one: its connection, which statements of fibers joined to it
   * run on. Undefined, changing nothing, when one is open or another
   * connection holds the lock. Throws the `SqlError` of a failed BEGIN.
   */
  beginNow(): Connection | undefined {
    if (this.queue.busy) return undefined
    const failed = this.control("begin")
    if (failed !== undefined) {
      if (isLockedElsewhere(failed)) return undefined
      throw failed
    }
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

/** Open connections by file, `dev:ino` (`ro:dev:ino` for read-only ones): stores on one file in one process share one. */
const openDatabases = new Map<string, SharedDatabase>()

/** True for a database no other store can name again (`:memory:`, a temporary or URI one): never shared. */
const isPrivate = (filename: string): boolean => filename === "" || filename === ":memory:" || filename.startsWith("file:")

/** What the path names now (following links), or undefined when nothing is there. */
const statOf = (file: string): fs.Stats | undefined => {
  try {
    return fs.statSync(file, { throwIfNoEntry: false })
  } catch {
    return undefined
  }
}

const keyOf = (stats: fs.Stats, readOnly: boolean): string => `${readOnly ? "ro:" : ""}${stats.dev}:${stats.ino}`

/**
 * One read-only descriptor per file a connection of this process has open,
 * by `dev:ino`, for reading its header. Closing any descriptor of a file
 * drops every POSIX lock the process holds on it, SQLite's included, so
 * the header is never read through a descriptor opened and closed on the
 * spot, and this one closes only after the last connection on the file.
 */
const headerReaders = new Map<string, { readonly fd: number; refs: number }>()

const takeHeaderReader = (file: string, stats: fs.Stats): number => {
  const key = keyOf(stats, false)
  const held = headerReaders.get(key)
  if (held !== undefined) {
    held.refs++
    return held.fd
  }
  const fd = fs.openSync(file, "r")
  headerReaders.set(key, { fd, refs: 1 })
  return fd
}

const releaseHeaderReader = (key: string): void => {
  const held = headerReaders.get(key)
  if (held === undefined || --held.refs > 0) return
  headerReaders.delete(key)
  fs.closeSync(held.fd)
}

/** The largest file a read-only open copies into memory when it cannot read the file in place. */
const READ_ONLY_COPY_LIMIT = 1024 * 1024 * 1024

const withCode = (message: string, code: string): Error => Object.assign(new Error(message), { code })

/**
 * Opens `file` read-only. SQLite reads a WAL database through its `-shm`
 * index, which it must create when no connection left one; in a folder the
 * process cannot write it cannot, and this reads a private in-memory copy
 * instead, taken while no connection has the file open (no `-shm`) and
 * checked unchanged across the copy. Its log must be empty then (else its
 * commits would be missed): that, and a file past `READ_ONLY_COPY_LIMIT`,
 * fail with the reason.
 */
const openReadOnly = (file: string, busyTimeoutMs: number): Sqlite.Database => {
  const db = new Sqlite(file, { readonly: true, fileMustExist: true })
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`)
    // Reading the schema opens the log's index (the -shm file).
    db.pragma("schema_version")
    return db
  } catch (cause) {
    db.close()
    const code = (cause as { code?: unknown }).code
    if (code !== "SQLITE_READONLY_DIRECTORY" && code !== "SQLITE_CANTOPEN") throw cause
    const shm = `${file}-shm`
    const wal = `${file}-wal`
    if (statOf(shm) !== undefined) throw cause
    const unreadable = `cannot open ${file} read-only: its folder is not writable, so SQLite cannot create ${shm}`
    if ((statOf(wal)?.size ?? 0) > 0) {
      throw withCode(
        `${unreadable}, and its log ${wal} holds commits only a connection with that file can read; ` +
          "open it once with write access (the log is then checkpointed) or as a user who can write the folder",
        "SQLITE_READONLY_DIRECTORY"
      )
    }
    const before = fs.statSync(file)
    if (before.size > READ_ONLY_COPY_LIMIT) {
      throw withCode(
        `${unreadable}, and at ${before.size} bytes it is too large to read as a copy in memory; open it as a user who can write the folder`,
        "SQLITE_READONLY_DIRECTORY"
      )
    }
    const image = fs.readFileSync(file)
    const after = fs.statSync(file)
    if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || statOf(shm) !== undefined) {
      throw withCode(`${unreadable}, and it changed while being copied; try again`, "SQLITE_BUSY")
    }
    // A WAL database's header (format 2) makes SQLite look for the log: the copy has none.
    if (image.length >= 20 && image[18] === 2) {
      image[18] = 1
      image[19] = 1
    }
    return new Sqlite(image, { readonly: true })
  }
}

/** Runs SQLite's quick_check on `db`: a damaged file throws `SQLITE_CORRUPT` naming `file`. */
const quickCheck = (db: Sqlite.Database, file: string): void => {
  const found = (db.pragma("quick_check") as ReadonlyArray<{ readonly quick_check: string }>).map((row) => row.quick_check)
  if (found.length === 1 && found[0] === "ok") return
  throw withCode(`${file} failed SQLite's quick_check: ${found.slice(0, 5).join("; ")}`, "SQLITE_CORRUPT")
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
  const readonly = options.readOnly === true
  const busyTimeoutMs = Math.trunc(options.busyTimeoutMs ?? 10_000)
  const shared = !isPrivate(options.filename)
  const file = shared ? path.resolve(options.filename) : options.filename
  const opened = shared ? statOf(file) : undefined
  // A read-only connection is never shared with a writing one, nor the other way round.
  const existing = opened === undefined ? undefined : openDatabases.get(keyOf(opened, readonly))
  if (existing !== undefined) {
    if (options.checkIntegrity === true) quickCheck(existing.db, file)
    existing.refs++
    return existing
  }
  if (shared && opened === undefined) {
    if (!fs.existsSync(path.dirname(file))) {
      // better-sqlite3's own message does not name the path; these words classify it `database-missing`.
      throw new TypeError(`Cannot open database ${file} because the directory does not exist: ${path.dirname(file)}`)
    }
    if (!readonly && statOf(`${file}-wal`) !== undefined) {
      throw new DatabaseReplacedError(
        `${file} does not exist but its log ${file}-wal does: the database was deleted while a connection had it open. ` +
          `Restore the file, or remove ${file}-wal and ${file}-shm to start an empty database`
      )
    }
  }
  const db = readonly ? openReadOnly(file, busyTimeoutMs) : new Sqlite(file, { fileMustExist: options.fileMustExist === true })
  let identity: FileIdentity | undefined
  try {
    if (!readonly) {
      db.pragma(`busy_timeout = ${busyTimeoutMs}`)
      walWithin(db, busyTimeoutMs)
    }
    if (options.checkIntegrity === true) quickCheck(db, file)
    // From now on the driver waits only briefly for another connection's lock; the store waits longer, the event loop free.
    if (!readonly) db.pragma(`busy_timeout = ${Math.min(busyTimeoutMs, DRIVER_LOCK_WAIT_MS)}`)
    if (shared && !readonly) {
      const real = fs.realpathSync(file)
      const stats = fs.statSync(real)
      identity = { path: real, dev: stats.dev, ino: stats.ino, fd: -1, size: stats.size, ctimeMs: stats.ctimeMs, checkedAt: performance.now() }
    }
  } catch (cause) {
    db.close()
    throw cause
  }
  const stats = shared && !db.memory ? statOf(file) : undefined
  const key = stats === undefined ? undefined : keyOf(stats, readonly)
  const connection = new SharedDatabase(key, db, readonly ? 0 : busyTimeoutMs)
  if (stats !== undefined) {
    // Read-only connections hold the descriptor too: a writing one closing first must not drop their locks.
    try {
      const fd = takeHeaderReader(file, stats)
      connection.fileKey = keyOf(stats, false)
      if (identity !== undefined) identity = { ...identity, fd }
    } catch {
      // Unreadable outside SQLite: a truncation is then reported as a file that cannot be read back.
    }
  }
  connection.identity = identity
  connection.refs = 1
  if (key !== undefined) openDatabases.set(key, connection)
  return connection
}

const closeDatabase = (shared: SharedDatabase): void => {
  shared.refs--
  if (shared.refs > 0) return
  if (shared.key !== undefined && openDatabases.get(shared.key) === shared) openDatabases.delete(shared.key)
  shared.clearStatements()
  shared.db.close()
  if (shared.fileKey !== undefined) releaseHeaderReader(shared.fileKey)
}

/** How many stores share the writing connection to the file `filename` names in this process (0 when none is open); for tests. */
export const sharedSqliteConnections = (filename: string): number => {
  const stats = isPrivate(filename) ? undefined : statOf(path.resolve(filename))
  return stats === undefined ? 0 : openDatabases.get(keyOf(stats, false))?.refs ?? 0
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
        const body = Effect.suspend(() => {
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
        // The turn is taken, and BEGIN run, in the same synchronous step as
        // the check, outside `restore`: only the waits are interruptible.
        // While another connection holds the lock the turn is handed on, so
        // this connection's reads go on, and BEGIN is tried again after a
        // pause, for at most `lockWaitMs`.
        const takeTurn = (deadline?: number, tries = 0): Effect.Effect<A, E | SqlError, R> =>
          Effect.suspend(() => {
            if (shared.queue.held) return Effect.zipRight(restore(shared.queue.released), takeTurn(deadline, tries))
            const failed = shared.control("begin")
            if (failed === undefined) {
              shared.queue.held = true
              return body
            }
            if (!isLockedElsewhere(failed)) return Effect.fail(failed)
            const until = deadline ?? performance.now() + shared.lockWaitMs
            const pause = lockPause(tries, until)
            return pause === undefined ? Effect.fail(failed) : Effect.zipRight(restore(Effect.sleep(pause)), takeTurn(until, tries + 1))
          })
        return takeTurn()
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
 * `base` with this connection's transactions (see `makeWithTransaction`):
 * a statement inside one runs on its connection at once, and any other
 * waits for the open one to end (see `SharedDatabase.outside`).
 */
const fastClient = (base: Client.SqlClient, shared: SharedDatabase): Client.SqlClient => {
  const withTransaction = makeWithTransaction(shared)
  const client: Client.SqlClient = Object.assign(base, {
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
