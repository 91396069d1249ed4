import type { OperationPolicyOverrides, PromiseConnectorStore, PromiseWinnerReaders, StoreObservability } from "@connector-store/core"
import type { ClockSource } from "./DatabaseClock.js"

/** Where a SQL store lives. */
export interface SqlConnection {
  /**
   * A SQLite file path, `:memory:`, a SQLite `file:` URI (read as SQLite
   * reads one: `file:///path?mode=ro`), or a `postgres://` /
   * `postgresql://` URL. Any other scheme (`mysql://`, `sqlite://`) is
   * refused with `InvalidInput` naming `options.url`.
   */
  readonly url: string
  /**
   * Open for inspection only (default false): nothing is created, migrated
   * or written. A SQLite file must exist (else `database-missing`) and is
   * opened read-only; Postgres sessions are read-only transactions. The
   * schema is checked instead of migrated: a missing table prefix or
   * migration fails the open with `StoreSchemaNotReady`. Every write fails.
   * A `file:` URI with `mode=ro` is read-only too.
   */
  readonly readOnly?: boolean | undefined
  /** The table prefix; by default `kubun_connector_`, the original store's, so a database it wrote opens as it is. */
  readonly tablePrefix?: string | undefined
  /** Postgres pool size (default 10). */
  readonly maxConnections?: number | undefined
  /** How long SQLite waits for another process's write lock (default 10 s): 5 ms in the driver, then in pauses that leave the event loop free. */
  readonly busyTimeoutMs?: number | undefined
  /**
   * The longest one call of the store may take, from its start to its
   * answer (default 30 s): lock waits, statements, the winner reader and
   * the commit included. A call that runs past it rejects with a
   * `PersistenceError` of reason `timeout`; nothing of it is committed, and
   * on Postgres its connection is closed, so its pool slot is freed even
   * when the server no longer answers.
   */
  readonly callTimeoutMs?: number | undefined
  /** How long a new Postgres connection may take to be established (default 10 s). */
  readonly connectTimeoutMs?: number | undefined
  /**
   * Postgres `statement_timeout` of the store's sessions (default 15 s): the
   * server cancels a statement running longer.
   */
  readonly statementTimeoutMs?: number | undefined
  /**
   * Postgres `lock_timeout` of the store's sessions (default 10 s): how long
   * a statement waits for a row or table lock another session holds.
   */
  readonly lockTimeoutMs?: number | undefined
  /**
   * The longest `close()` waits for calls in flight before it closes the
   * connections under them (default 5 s).
   */
  readonly closeTimeoutMs?: number | undefined
  /**
   * Run SQLite's `PRAGMA quick_check` when the file is opened (default
   * false): a damaged file fails the open with reason `corrupt`.
   */
  readonly checkIntegrityOnOpen?: boolean | undefined
  /**
   * The Postgres `application_name` of the store's connections (default
   * `connector-store`), so an operator finds them in `pg_stat_activity`.
   * 1 to 63 printable ASCII characters.
   */
  readonly applicationName?: string | undefined
  /**
   * Send the store's hot statements on Postgres as named prepared
   * statements (default true): each connection parses one once, then only
   * binds and runs it. Set false behind a pooler that does not keep
   * prepared statements per client (PgBouncer in transaction mode before
   * 1.21, or without `max_prepared_statements`).
   */
  readonly prepareStatements?: boolean | undefined
  /**
   * How long claims stay in doubt after the store notices it talks to a server that may have forgotten writes it
   * acknowledged (default 10 minutes): a Postgres replica promoted after a failover, a point-in-time restore, or an older
   * copy of a SQLite file put back (see docs/operations.md). Within it every claim, of a known key or a new one, is handed
   * out as in doubt: re-sent only with its `reissue`, or parked `reconcile_only` for a person.
   */
  readonly failoverDoubtMs?: number | undefined
  /**
   * Refuse to open (`ReplicationNotSynchronous`, nothing written) unless every commit of the store's sessions waits for
   * a synchronous Postgres standby (`synchronous_standby_names` set, `synchronous_commit` `on`, `remote_write` or
   * `remote_apply`), so that a failover loses no acknowledged write-back. SQLite, which has no replica, always refuses.
   * Default false.
   */
  readonly requireSynchronousReplication?: boolean | undefined
  /**
   * Where a SQLite store keeps its generation, the count that tells an older copy of the file put back (default the
   * database's path with `-generation` appended; `false` for none). Keep it where restoring the database does not
   * restore it too.
   */
  readonly generationFile?: string | false | undefined
  /**
   * How often the store checks, besides every new Postgres connection, which server answers (Postgres) or raises its
   * generation and reads what other processes noticed (SQLite): default 2 s on Postgres, 1 s on SQLite; 0 for never.
   * Behind a pooler that keeps the store's connections across a failover, this is how long a failover can go unnoticed.
   */
  readonly serverCheckMs?: number | undefined
}

/**
 * What a SQL store hands winner readers: a way to query inside the very
 * transaction (and lock) the transition runs in.
 */
export interface SqlTransaction {
  readonly dialect: "sqlite" | "pg"
  /** Runs `text` with `$1`-style (Postgres) or `?` (SQLite) parameters. */
  readonly query: <Row = Record<string, unknown>>(text: string, params?: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Row>>
}

/** The options of `openConnectorStore`. */
export interface OpenConnectorStoreOptions extends SqlConnection, PromiseWinnerReaders<SqlTransaction>, StoreObservability {
  /** The machine's clock; the system clock when absent (see `clock` for what the store decides with). */
  readonly now?: (() => number) | undefined
  /**
   * Where the store's clock comes from (see docs/time.md). `database`
   * follows the Postgres server's clock (`now` plus an offset measured at
   * open and every 30 s), so runners whose machine clocks disagree never
   * hold one lease at once; `local` decides with `now` as it is. The
   * default is `database` on Postgres, unless `now` is injected (a test's
   * or an already synchronized clock), which is then taken as it is. On
   * SQLite every runner shares one machine, so both mean `now`.
   */
  readonly clock?: ClockSource | undefined
  /** Lease, attempt and backoff settings of write-back operations, over the defaults. */
  readonly operationPolicy?: OperationPolicyOverrides | undefined
  /**
   * Whether claims honour provider limits (pauses and caps, see
   * `setProviderLimit` and `pauseProvider`) and a retryable 429 pauses its
   * account for every runner. Off by default; give every runner of a
   * database the same setting (see `ProviderLimitEnforcement`).
   */
  readonly providerLimits?: boolean | undefined
}

/** A SQL store with the Promise API. */
export interface SqlConnectorStore extends PromiseConnectorStore<SqlTransaction> {
  /**
   * The store's clock: the time every decision of this store is made at.
   * Methods whose contract takes a time (`claimWatchAttempt`'s `now` and
   * `until`, sync lease terms, `listDueOperations`, a `dueAt`) expect it on
   * this clock: pass `store.now()` (plus a duration), never `Date.now()`.
   */
  now(): number
}
