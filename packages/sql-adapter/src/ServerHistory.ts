import {
  type EndFailoverDoubtResult,
  type FailoverDoubt,
  type NoticedFailover,
  PersistenceError,
  type ReplicationReport,
  type ServerHistory,
  type ServerIdentity,
  type StoreDurability,
  StoreMetrics
} from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Data, Duration, Effect, Fiber, Runtime, type Scope, Schedule } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { TableNames } from "./Tables.js"

/** How long claims stay in doubt after a failover or restore is noticed, by default (10 minutes; see docs/operations.md). */
export const FAILOVER_DOUBT_MS = 10 * 60_000

/** How often a Postgres store checks which server answers, beside every new connection's own check (2 s). */
export const IDENTITY_CHECK_MS = 2_000

/** How often, at most, a SQLite store raises its generation while it writes (1 s). */
export const GENERATION_INTERVAL_MS = 1_000

/** The `synchronous_commit` levels under which a commit waits for a synchronous standby. */
const WAITING_COMMITS = ["on", "remote_write", "remote_apply"]

/**
 * A store asked to `requireSynchronousReplication` found a server that cannot give it: an acknowledged write could be
 * lost on a failover. Nothing was written. `reason` says what is missing.
 */
export class ReplicationNotSynchronous extends Data.TaggedError("ReplicationNotSynchronous")<{
  /** What the server lacks, in words. */
  readonly reason: string
  /** The store's sessions' `synchronous_commit`; null on SQLite. */
  readonly synchronousCommit: string | null
  /** The server's `synchronous_standby_names`; null on SQLite. */
  readonly synchronousStandbyNames: string | null
  /** The method that refused to open. */
  readonly method?: string | undefined
}> {
  override get message(): string {
    const where = this.method === undefined ? "" : `${this.method}: `
    return `${where}synchronous replication was required, but ${this.reason}`
  }
}

/** What the store needs to keep its server history. */
export interface ServerHistoryOptions {
  /** The window of doubt a noticed failover opens (default `FAILOVER_DOUBT_MS`). */
  readonly failoverDoubtMs?: number | undefined
  /** The SQLite generation's file beside the database, or false for none (no restore is noticed then). */
  readonly generationFile?: string | false | undefined
  /** Read-only: the history is read and compared, never written. */
  readonly readOnly: boolean
  /** The store's clock. */
  readonly now: () => number
  /** How often the scheduled check runs (default `IDENTITY_CHECK_MS` on Postgres, `GENERATION_INTERVAL_MS` on SQLite); 0: never. */
  readonly checkEveryMs?: number | undefined
  /** How long a new Postgres connection's identity check may take before the connection is let through unchecked. */
  readonly connectTimeoutMs?: number | undefined
}

interface HistoryRow {
  readonly system_identifier: string | null
  readonly timeline: number | string | null
  readonly generation: number | string | null
  readonly noticed_at: number | string | null
  readonly doubt_until: number | string | null
  readonly lookback_from: number | string | null
  readonly noticed_from: string | null
  readonly noticed_to: string | null
  readonly doubtful_claims: number | string
  readonly ended_by: string | null
  readonly ended_at: number | string | null
}

const num = (value: number | string | null): number | null => value === null ? null : Number(value)

const identityOfRow = (row: HistoryRow): ServerIdentity => ({
  systemIdentifier: row.system_identifier,
  timeline: num(row.timeline),
  generation: num(row.generation)
})

const parsedIdentity = (text: string | null): ServerIdentity => {
  try {
    const parsed = JSON.parse(text ?? "null") as Partial<ServerIdentity> | null
    return { systemIdentifier: parsed?.systemIdentifier ?? null, timeline: parsed?.timeline ?? null, generation: parsed?.generation ?? null }
  } catch {
    return { systemIdentifier: null, timeline: null, generation: null }
  }
}

/** The failover a history row records, if it records one. */
const failoverOfRow = (row: HistoryRow): NoticedFailover | undefined => {
  const noticedAt = num(row.noticed_at)
  if (noticedAt === null) return undefined
  const endedAt = num(row.ended_at)
  return {
    noticedAt,
    until: num(row.doubt_until) ?? noticedAt,
    lookbackFrom: num(row.lookback_from) ?? noticedAt,
    from: parsedIdentity(row.noticed_from),
    to: parsedIdentity(row.noticed_to),
    doubtfulClaims: Number(row.doubtful_claims),
    ended: row.ended_by === null || endedAt === null ? null : { by: row.ended_by, at: endedAt }
  }
}

/**
 * True when the server `current` is not the one `recorded` says acknowledged the store's writes: on Postgres another
 * system or timeline (a promoted replica, a point-in-time restore, a dump restored elsewhere); on SQLite a file whose
 * generation is behind the one kept beside it (an older copy put back).
 */
export const forgetsWrites = (recorded: ServerIdentity, current: ServerIdentity): boolean => {
  if (current.generation !== null && recorded.generation !== null) return current.generation > recorded.generation
  if (current.timeline === null || recorded.timeline === null) return false
  return current.systemIdentifier !== recorded.systemIdentifier || current.timeline !== recorded.timeline
}

const sameServer = (a: ServerIdentity, b: ServerIdentity): boolean =>
  a.systemIdentifier === b.systemIdentifier && a.timeline === b.timeline && a.generation === b.generation

/** The failover doubt `noticed` puts on claims (its window and lookback as they stand). */
const doubtOf = (noticed: NoticedFailover): FailoverDoubt => ({
  noticedAt: noticed.noticedAt,
  until: noticed.until,
  lookbackFrom: noticed.lookbackFrom
})

/** Which Postgres server answers: its system identifier and its current timeline (a standby's replayed one). */
export const IDENTITY_SQL = `SELECT (SELECT system_identifier::text FROM pg_control_system()) AS system_identifier,
  CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::bigint
    ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END AS timeline`

/** How the server replicates for this session. */
const REPLICATION_SQL = `SELECT current_setting('synchronous_commit') AS synchronous_commit,
  current_setting('synchronous_standby_names') AS synchronous_standby_names,
  COALESCE((SELECT json_agg(json_build_object('name', application_name, 'state', state, 'syncState', sync_state,
    'replayLagMs', (EXTRACT(EPOCH FROM replay_lag) * 1000)::bigint)) FROM pg_stat_replication), '[]'::json)::text AS standbys`

const identityOfPg = (row: { readonly system_identifier: string | null; readonly timeline: number | string | null } | undefined): ServerIdentity => ({
  systemIdentifier: row?.system_identifier ?? null,
  timeline: row === undefined ? null : num(row.timeline),
  generation: null
})

/** Whether `replication` makes every commit of the store's sessions wait for a synchronous standby. */
export const synchronousProblem = (replication: ReplicationReport): string | undefined => {
  if (replication.synchronousStandbyNames.trim() === "") return "the server names no synchronous standby (synchronous_standby_names is empty)"
  if (!WAITING_COMMITS.includes(replication.synchronousCommit)) {
    return `the store's sessions commit with synchronous_commit = ${replication.synchronousCommit}, which does not wait for a standby`
  }
  return undefined
}

/** The durability a Postgres deployment gives, in words, from its replication settings. */
const pgDurability = (replication: ReplicationReport | null): Pick<StoreDurability, "canLoseAcknowledgedWrites" | "explanation"> => {
  if (replication === null) return { canLoseAcknowledgedWrites: null, explanation: "the server did not say how it replicates" }
  const problem = synchronousProblem(replication)
  if (problem === undefined) {
    const live = replication.standbys.filter((standby) => standby.syncState === "sync" || standby.syncState === "quorum").length
    return {
      canLoseAcknowledgedWrites: false,
      explanation: `commits wait for a synchronous standby (${replication.synchronousStandbyNames}; ${live} connected now): ` +
        "a failover to it loses no acknowledged write"
    }
  }
  const standbys = replication.standbys.length
  return {
    canLoseAcknowledgedWrites: true,
    explanation: standbys === 0
      ? `${problem}; a failover to an asynchronous replica, or a restore, may forget acknowledged writes`
      : `${problem}; ${standbys} standby(s) stream asynchronously, and a failover to one may forget the newest acknowledged writes`
  }
}

const parsedStandbys = (text: string): ReplicationReport["standbys"] => {
  try {
    const rows = JSON.parse(text) as ReadonlyArray<{ name: string; state: string; syncState: string; replayLagMs: number | null }>
    return rows.map((row) => ({ name: row.name ?? "", state: row.state ?? "", syncState: row.syncState ?? "", replayLagMs: row.replayLagMs ?? null }))
  } catch {
    return []
  }
}

/** How `sql`'s server replicates for the store's sessions; null on SQLite. */
const replicationOf = (sql: SqlClient, dialect: "pg" | "sqlite"): Effect.Effect<ReplicationReport | null, SqlError> =>
  dialect !== "pg"
    ? Effect.succeed(null)
    : Effect.map(
      sql.unsafe<{ synchronous_commit: string; synchronous_standby_names: string; standbys: string }>(REPLICATION_SQL),
      (rows) =>
        rows[0] === undefined ? null : {
          synchronousCommit: rows[0].synchronous_commit,
          synchronousStandbyNames: rows[0].synchronous_standby_names,
          standbys: parsedStandbys(rows[0].standbys)
        }
    )

/**
 * Fails with `ReplicationNotSynchronous` unless every commit of `sql`'s sessions waits for a synchronous standby (see
 * `synchronousProblem`); read before the store writes anything.
 */
export const requireSynchronousReplication = (
  sql: SqlClient,
  dialect: "pg" | "sqlite"
): Effect.Effect<void, PersistenceError | ReplicationNotSynchronous> =>
  Effect.flatMap(
    Effect.mapError(replicationOf(sql, dialect), (cause) => new PersistenceError({ operation: "serverHistory", cause })),
    (replication) => {
      const problem = replication === null ? "SQLite has no replica" : synchronousProblem(replication)
      return problem === undefined ? Effect.void : Effect.fail(
        new ReplicationNotSynchronous({
          reason: problem,
          synchronousCommit: replication?.synchronousCommit ?? null,
          synchronousStandbyNames: replication?.synchronousStandbyNames ?? null
        })
      )
    }
  )

/**
 * The part of a `pg` pool the history checks new connections through: its options' `onConnect` (pg-pool 3.14), run on
 * each new client before the pool hands it out. Structural, so that this module's types name no driver.
 */
export interface IdentityCheckedPool {
  readonly options: {
    /** Called with each new client; the pool waits for it before handing the client to anyone. */
    onConnect?: ((client: { query: (text: string) => Promise<{ readonly rows: ReadonlyArray<unknown> }> }) => Promise<void>) | undefined
  }
}

/** What one process knows of its server's history, between checks. */
class HistoryState {
  /** The identity this process last confirmed; undefined until the first check answered. */
  known: ServerIdentity | undefined
  private noticed: NoticedFailover | undefined
  /** The last failover noticed (by this process, or another's, read from the row); its window's end in the metrics. */
  get failover(): NoticedFailover | undefined {
    return this.noticed
  }
  set failover(noticed: NoticedFailover | undefined) {
    this.noticed = noticed
    StoreMetrics.failoverDoubtUntil.unsafeUpdate(noticed === undefined || noticed.ended !== null ? 0 : noticed.until, [])
  }
  /** Claims counted in doubt not yet added to the row. */
  unflushed = 0
  /** Whether the server tells its identity at all. */
  detecting = false
}

/**
 * The server history of a SQL store (see `ServerHistory`), kept in the `server_history` table: checked when the store
 * opens, on every new Postgres connection (before any statement runs on it), and every `IDENTITY_CHECK_MS`. A change of
 * server opens the window at once in this process and is then recorded for every other, which adopts it at its next check.
 */
export const makeSqlServerHistory = (
  sql: SqlClient,
  tables: TableNames,
  dialect: "pg" | "sqlite",
  options: ServerHistoryOptions,
  pool?: IdentityCheckedPool | undefined
): Effect.Effect<ServerHistory["Type"], PersistenceError, Scope.Scope> =>
  Effect.gen(function*() {
    const windowMs = options.failoverDoubtMs ?? FAILOVER_DOUBT_MS
    const table = tables.serverHistory
    const state = new HistoryState()
    const runtime = yield* Effect.runtime<never>()
    const generationFile = dialect === "sqlite" && options.generationFile !== false ? options.generationFile : undefined

    const run = (text: string, params: ReadonlyArray<unknown>) => {
      const statement = statementFor(dialect, text, params)
      return sql.unsafe(statement.text, statement.params)
    }

    const readRow = Effect.map(
      sql.unsafe<HistoryRow>(`SELECT * FROM ${table} WHERE id = 1`),
      (rows) => rows[0]
    )

    const readReplication = replicationOf(sql, dialect)

    /** Which server answers; on SQLite the generation kept beside the file (null when there is none). */
    const readIdentity: Effect.Effect<ServerIdentity | undefined, SqlError> = dialect === "pg"
      ? sql.unsafe<{ system_identifier: string | null; timeline: number | string | null }>(IDENTITY_SQL).pipe(
        Effect.map((rows) => identityOfPg(rows[0])),
        // A server that hides its control data (some managed services): nothing to compare, said in the report.
        Effect.catchAll(() => Effect.succeed(undefined))
      )
      : Effect.sync(() => {
        if (generationFile === undefined) return undefined
        const kept = readGeneration(generationFile)
        return { systemIdentifier: null, timeline: null, generation: kept ?? 0 }
      })

    /** The row's failover adopted, this process's claims counted in doubt added to it. */
    const adopt = (row: HistoryRow | undefined) =>
      Effect.gen(function*() {
        const recorded = row === undefined ? undefined : failoverOfRow(row)
        const local = state.failover
        // A window noticed here and not yet on the row stays until the row records it (the same server noticed, by
        // whichever process first) or a later one.
        state.failover = recorded !== undefined &&
            (local === undefined || local.ended !== null || recorded.noticedAt >= local.noticedAt || sameServer(recorded.to, local.to))
          ? recorded
          : local
        if (state.unflushed > 0 && recorded !== undefined && state.failover === recorded && !options.readOnly) {
          const n = state.unflushed
          state.unflushed = 0
          yield* run(`UPDATE ${table} SET doubtful_claims = doubtful_claims + $1 WHERE id = 1 AND noticed_at = $2`, [n, recorded.noticedAt])
            .pipe(Effect.catchAll(() => Effect.sync(() => state.unflushed += n)))
          state.failover = { ...recorded, doubtfulClaims: recorded.doubtfulClaims + n }
        }
      })

    /** Records `current` as noticed in place of `from` (unless another process did first), then adopts the row. */
    const notice = (from: ServerIdentity, current: ServerIdentity) =>
      Effect.gen(function*() {
        const now = options.now()
        const noticed: NoticedFailover = {
          noticedAt: now,
          until: now + windowMs,
          lookbackFrom: now - windowMs,
          from,
          to: current,
          doubtfulClaims: 0,
          ended: null
        }
        if (state.failover === undefined || state.failover.noticedAt < now - 1 || state.failover.ended !== null) {
          state.failover = noticed
        }
        if (options.readOnly) return
        yield* run(
          `UPDATE ${table} SET system_identifier = $1, timeline = $2, generation = $3, noticed_at = $4,
            doubt_until = $5, lookback_from = $6, noticed_from = $7, noticed_to = $8, doubtful_claims = 0,
            ended_by = NULL, ended_at = NULL, recorded_at = $4
          WHERE id = 1`,
          [current.systemIdentifier, current.timeline, current.generation, now, noticed.until, noticed.lookbackFrom, JSON.stringify(from), JSON.stringify(current)]
        )
      })

    /** One check: which server answers, against the row; a change noticed and recorded, the row's window adopted. */
    const check =
      Effect.gen(function*() {
        const current = yield* readIdentity
        state.detecting = current !== undefined
        const row = yield* readRow
        if (current === undefined) return yield* adopt(row)
        if (row === undefined) {
          if (!options.readOnly) {
            yield* run(
              `INSERT INTO ${table} (id, system_identifier, timeline, generation, recorded_at, doubtful_claims)
                VALUES (1, $1, $2, $3, $4, 0) ON CONFLICT (id) DO NOTHING`,
              [current.systemIdentifier, current.timeline, current.generation, options.now()]
            )
          }
          state.known = current
          return
        }
        const recorded = identityOfRow(row)
        if (forgetsWrites(recorded, current)) {
          yield* notice(recorded, current)
          state.known = current
          return yield* adopt(yield* readRow)
        }
        state.known = current
        yield* adopt(row)
      })

    /** SQLite: the generation raised in the file, then beside it (the file is never behind what is kept beside it). */
    const raiseGeneration = generationFile === undefined || options.readOnly ? Effect.void : sql.withTransaction(
      Effect.flatMap(
        sql.unsafe<{ generation: number | string }>(`UPDATE ${table} SET generation = COALESCE(generation, 0) + 1 WHERE id = 1 RETURNING generation`),
        (rows) => Effect.sync(() => {
          if (rows[0] !== undefined) writeGeneration(generationFile, Number(rows[0].generation))
        })
      )
    )
    /** The rows this connection has changed since it opened (SQLite's `total_changes()`), when the generation was last raised. */
    let changesAtRaise = -1
    const changes = Effect.map(sql.unsafe<{ n: number | string }>("SELECT total_changes() AS n"), (rows) => Number(rows[0]?.n ?? 0))
    /** The generation raised when the store wrote since it was last raised. */
    const raiseIfWritten = Effect.gen(function*() {
      if (generationFile === undefined || options.readOnly) return
      if ((yield* changes) === changesAtRaise) return
      yield* raiseGeneration
      changesAtRaise = yield* changes
    })

    const failed = (cause: SqlError) => new PersistenceError({ operation: "serverHistory", cause })
    yield* Effect.mapError(check, failed)
    // Opened: the file and its generation agree from now on (a first open writes the file beside it).
    yield* Effect.mapError(raiseIfWritten, failed)

    if (pool !== undefined) {
      // Every new connection asks which server it reached before the pool hands it to any call of the store (pg-pool's
      // `onConnect`): a call on a promoted server is decided under the doubt it opens.
      const noticeFrom = (current: ServerIdentity) =>
        Effect.gen(function*() {
          const row = yield* readRow
          if (row !== undefined && forgetsWrites(identityOfRow(row), current)) yield* notice(identityOfRow(row), current)
          yield* adopt(yield* readRow)
        })
      const settings = pool
      settings.options.onConnect = async (client) => {
        let current: ServerIdentity
        try {
          // A server that accepts the connection but never answers is left to the call's own bound.
          const answer = await Promise.race([client.query(IDENTITY_SQL), unanswered(options.connectTimeoutMs ?? 10_000)])
          if (answer === undefined) return
          current = identityOfPg(answer.rows[0] as Parameters<typeof identityOfPg>[0])
        } catch {
          return
        }
        const known = state.known
        if (known === undefined || !forgetsWrites(known, current)) return
        const now = options.now()
        state.failover = { noticedAt: now, until: now + windowMs, lookbackFrom: now - windowMs, from: known, to: current, doubtfulClaims: 0, ended: null }
        state.known = current
        Runtime.runFork(runtime)(Effect.ignore(noticeFrom(current)))
      }
      yield* Effect.addFinalizer(() => Effect.sync(() => {
        settings.options.onConnect = undefined
      }))
    }

    // Between connections (a pooler keeps the store's connections across a failover), and to adopt what other processes
    // noticed or an operator ended: a check on a schedule.
    const every = options.checkEveryMs ?? (dialect === "pg" ? IDENTITY_CHECK_MS : GENERATION_INTERVAL_MS)
    const tick = dialect === "pg" ? check : Effect.zipRight(raiseIfWritten, Effect.flatMap(readRow, adopt))
    if (every > 0) {
      // On the machine's own clock: these are checks of the world, paced in real time even under a test's clock.
      const loop = yield* Effect.forkDaemon(
        Effect.withClock(Effect.repeat(Effect.ignore(tick), Schedule.spaced(Duration.millis(every))), Clock.make())
      )
      yield* Effect.addFinalizer(() => Fiber.interrupt(loop))
    }

    const service: ServerHistory["Type"] = {
      doubtAt: (now) => {
        const noticed = state.failover
        if (noticed === undefined) return undefined
        return now < noticed.until || noticed.lookbackFrom < noticed.noticedAt ? doubtOf(noticed) : undefined
      },
      countDoubtful: (n) => {
        state.unflushed += n
        if (state.failover !== undefined) state.failover = { ...state.failover, doubtfulClaims: state.failover.doubtfulClaims + n }
      },
      report: Effect.gen(function*() {
        const replicationNow = yield* readReplication
        yield* adopt(yield* readRow)
        const failover = state.failover === undefined ? null : { ...state.failover, doubtfulClaims: state.failover.doubtfulClaims }
        const said = dialect === "pg"
          ? pgDurability(replicationNow)
          : {
            canLoseAcknowledgedWrites: true,
            explanation: generationFile === undefined
              ? "a restored copy of the file forgets the writes after it, and with no generation file kept beside it no restore is noticed"
              : `a restored copy of the file forgets the writes after it; its generation, kept in ${generationFile}, tells a restored copy`
          }
        return {
          backend: dialect === "pg" ? "postgres" : "sqlite",
          ...said,
          server: state.known ?? null,
          replication: replicationNow,
          failover,
          detecting: state.detecting
        } satisfies StoreDurability
      }).pipe(Effect.mapError(failed)),
      endDoubt: (by, now) =>
        Effect.gen(function*() {
          yield* adopt(yield* readRow)
          const noticed = state.failover
          if (noticed === undefined || (now >= noticed.until && noticed.lookbackFrom >= noticed.noticedAt)) {
            return { outcome: "none" } satisfies EndFailoverDoubtResult
          }
          if (!options.readOnly) {
            yield* run(
              `UPDATE ${table} SET doubt_until = $1, lookback_from = noticed_at, ended_by = $2, ended_at = $1
                WHERE id = 1 AND noticed_at = $3`,
              [now, by, noticed.noticedAt]
            )
          }
          const ended: NoticedFailover = { ...noticed, until: now, lookbackFrom: noticed.noticedAt, ended: { by, at: now } }
          state.failover = ended
          return { outcome: "ended", failover: ended } satisfies EndFailoverDoubtResult
        }).pipe(Effect.mapError(failed))
    }
    return service
  })

/** Resolves with nothing after `ms`, holding no process open. */
const unanswered = (ms: number): Promise<undefined> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms)
    timer.unref?.()
  })

/** `text` with `$n` parameters as `dialect` takes them: as they are on Postgres, `?` in order (params repeated) on SQLite. */
const statementFor = (dialect: "pg" | "sqlite", text: string, params: ReadonlyArray<unknown>) => {
  if (dialect === "pg") return { text, params }
  const ordered: Array<unknown> = []
  return { text: text.replace(/\$(\d+)/g, (_, n: string) => (ordered.push(params[Number(n) - 1]), "?")), params: ordered }
}

/** The generation kept in `file`, if it holds one. */
export const readGeneration = (file: string): number | undefined => {
  try {
    const value = Number(fs.readFileSync(file, "utf8").trim())
    return Number.isSafeInteger(value) && value >= 0 ? value : undefined
  } catch {
    return undefined
  }
}

/** Keeps `generation` in `file` unless it already holds a later one (written aside, then renamed over it). */
const writeGeneration = (file: string, generation: number): void => {
  const kept = readGeneration(file)
  if (kept !== undefined && kept >= generation) return
  const aside = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`)
  fs.writeFileSync(aside, `${generation}\n`)
  fs.renameSync(aside, file)
}

/** Where a SQLite file's generation is kept by default: beside it. */
export const defaultGenerationFile = (filename: string): string => `${path.resolve(filename)}-generation`
