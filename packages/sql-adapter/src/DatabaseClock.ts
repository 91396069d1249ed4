import { clockFrom, PersistenceError } from "@connector-store/core"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, type Scope } from "effect"

/**
 * Where a store's clock comes from. `database`: the database server's clock
 * (Postgres), so runners on machines whose clocks disagree still decide with
 * one clock. `local`: the machine's own clock (or the injected `now`).
 */
export type ClockSource = "database" | "local"

/** The clock sources an open option may name. */
export const CLOCK_SOURCES: ReadonlyArray<ClockSource> = ["database", "local"]

/**
 * The clock source a store opened with `options` (on Postgres or not) decides with: the one it
 * names, else `database` on Postgres unless a machine clock (`now`) is
 * injected, which is then taken as it is; always `local` on SQLite, where
 * every runner shares one machine.
 */
export const clockSourceOf = (
  onPostgres: boolean,
  options: { readonly clock?: ClockSource | undefined; readonly now?: (() => number) | undefined }
): ClockSource => !onPostgres ? "local" : options.clock ?? (options.now === undefined ? "database" : "local")

/** How often a database clock re-measures its offset from the local clock. */
export const CLOCK_REFRESH_MS = 30_000

/** Samples per measurement; the one with the shortest round trip wins. */
const SAMPLES = 3

/**
 * A store clock that follows the database server: the local clock plus the
 * last measured offset (`server - local`). Reading it costs no round trip.
 */
export interface DatabaseClock {
  /** The server's time now, in epoch milliseconds, as the last measurement places it. */
  readonly now: () => number
  /** The last measured `server - local` offset, in milliseconds. */
  readonly offsetMs: () => number
}

interface Sample {
  readonly offset: number
  readonly roundTrip: number
}

const sample = (sql: SqlClient, local: () => number): Effect.Effect<Sample, SqlError> =>
  Effect.gen(function*() {
    const before = local()
    const rows = yield* sql<{ readonly now: number | string }>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now`
    const after = local()
    return { offset: Number(rows[0]?.now) - (before + after) / 2, roundTrip: after - before }
  })

/**
 * Measures `server - local` on Postgres (midpoint of the round trip, best of
 * a few samples); 0 on SQLite, where every runner shares one machine's clock.
 */
export const measureOffset = (sql: SqlClient, local: () => number): Effect.Effect<number, SqlError> =>
  sql.onDialectOrElse({
    pg: () =>
      Effect.map(Effect.replicateEffect(sample(sql, local), SAMPLES), (samples) => {
        const best = samples.reduce((a, b) => b.roundTrip < a.roundTrip ? b : a)
        return Number.isFinite(best.offset) ? Math.round(best.offset) : 0
      }),
    orElse: () => Effect.succeed(0)
  })

/**
 * A clock that follows the server behind `sql`: measured once now (a failure
 * fails the caller, so a store does not open with an unknown offset), then
 * every `refreshMs` (`CLOCK_REFRESH_MS`) while `scope` lasts, so a machine
 * clock that jumps or drifts is caught up with. A failed refresh keeps the
 * last offset.
 */
export const makeDatabaseClock = (
  sql: SqlClient,
  local: () => number,
  refreshMs: number = CLOCK_REFRESH_MS
): Effect.Effect<DatabaseClock, PersistenceError, Scope.Scope> =>
  Effect.gen(function*() {
    let offset = yield* measureOffset(sql, local).pipe(PersistenceError.refail("clock"))
    yield* measureOffset(sql, local).pipe(
      Effect.tap((measured) => Effect.sync(() => { offset = measured })),
      Effect.ignore,
      Effect.delay(Duration.millis(refreshMs)),
      Effect.forever,
      Effect.forkScoped
    )
    return { now: () => local() + offset, offsetMs: () => offset }
  })

/**
 * For the Effect API: makes the database server's clock the default Effect
 * `Clock` of whatever this layer is provided to (a `ManagedRuntime`, or an
 * effect), so the store's decisions follow the server like the Promise
 * API's do. Needs the store's `SqlClient`; a no-op offset on SQLite.
 */
export const layerDatabaseClock = (local: () => number = Date.now): Layer.Layer<never, PersistenceError, SqlClient> =>
  Layer.unwrapScoped(Effect.map(Effect.flatMap(SqlClient, (sql) => makeDatabaseClock(sql, local)), (clock) =>
    Layer.setClock(clockFrom(clock.now))))
