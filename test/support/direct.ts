import { WatchRepository } from "@connector-store/core"
import { DirectDatabase, type DirectDatabaseApi, type DirectRowsOf, type LaneDatabase, type LaneDatabaseApi } from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import { layerClient, layerPorts, Tables } from "@connector-store/sql-adapter"
import { Context, Effect, Layer, Option } from "effect"

/** What a test saw a direct database do: transactions begun, and begins refused because it was busy. */
export interface Seen {
  begun: number
  busy: number
}

/** How many of the direct rows' next versioned writes lose (answer false without writing). */
export interface Losses {
  watchUpdates: number
  operationUpdates?: number
}

/** `db` counting its transactions in `seen`, its rows' versioned writes losing as `lose` says. */
export const watchedDirect = (db: DirectDatabaseApi, seen: Seen, lose: Losses): DirectDatabaseApi => ({
  ...db,
  ...losing(db, lose),
  begin: () => {
    const transaction = db.begin()
    if (transaction === undefined) seen.busy++
    else seen.begun++
    return transaction
  }
})

/**
 * The SQL ports on the project's SQLite client at `url`, typed with the
 * `DirectDatabase` that `layerPorts` adds there outside its type (the
 * service is optional).
 */
export const sqlitePortsWithDirect = (url: string) => {
  const base = layerPorts.pipe(Layer.provideMerge(Tables.layer(undefined)), Layer.provideMerge(layerClient({ url })))
  return base as Layer.Layer<Layer.Layer.Success<typeof base> | DirectDatabase, Layer.Layer.Error<typeof base>>
}

/**
 * The memory adapter's ports over a fresh database, typed with the
 * `DirectDatabase` that `portsOf` adds outside its type.
 */
export const memoryPortsWithDirect = (): Layer.Layer<Memory.MemoryPorts | DirectDatabase> =>
  Layer.effectContext(Effect.sync(() => Memory.portsOf(new Memory.MemoryDatabase()) as Context.Context<Memory.MemoryPorts | DirectDatabase>))

/** `ports` without the `DirectDatabase` they offer: a store over them runs every call on the ports. */
export const withoutDirect = <P, E>(ports: Layer.Layer<P, E>): Layer.Layer<Exclude<P, DirectDatabase>, E> =>
  Layer.map(ports, (context) => Context.omit(DirectDatabase)(context as Context.Context<P | DirectDatabase>) as Context.Context<Exclude<P, DirectDatabase>>)

/**
 * `context` with its watch port replaced by `port` and, when it offers a
 * `DirectDatabase`, that database replaced by `direct(db)` speaking for the
 * new port (its `repositories.watches` is `port`): a store over it keeps
 * taking the direct rows, and what it hands over to the ports (a busy
 * database, a lost race) reaches the same decorated port.
 */
export const withWatchPort = <C>(
  context: Context.Context<C>,
  port: WatchRepository["Type"],
  direct: (db: DirectDatabaseApi) => DirectDatabaseApi = (db) => db
): Context.Context<C> => {
  const ctx = Context.add(context as Context.Context<C | WatchRepository | DirectDatabase>, WatchRepository, port)
  const offered = Context.getOption(ctx, DirectDatabase)
  if (Option.isNone(offered)) return ctx as Context.Context<C>
  const db = direct(offered.value)
  return Context.add(ctx, DirectDatabase, { ...db, repositories: { ...db.repositories, watches: port } }) as Context.Context<C>
}

/** `rows` with their versioned writes losing as `lose` says. */
const losing = <Later extends boolean>(rows: DirectRowsOf<Later>, lose: Losses): DirectRowsOf<Later> => ({
  watches: {
    ...rows.watches,
    update: (previous, next) => lose.watchUpdates-- > 0 ? false : rows.watches.update(previous, next)
  },
  operations: {
    ...rows.operations,
    update: (previous, next) =>
      lose.operationUpdates !== undefined && lose.operationUpdates-- > 0 ? false : rows.operations.update(previous, next),
    // The operation's versioned write, then the watch's (an update among them), lose as on their own.
    updateWithWatch: (previous, next, watch) =>
      lose.operationUpdates !== undefined && lose.operationUpdates-- > 0
        ? "operation-lost"
        : watch.kind === "update" && lose.watchUpdates-- > 0
        ? "watch-lost"
        : rows.operations.updateWithWatch(previous, next, watch)
  }
})

/** A Postgres `LaneDatabase` counting its transactions in `seen`, its rows' versioned writes (its transactions' too) losing as `lose` says. */
export const watchedLane = (db: LaneDatabaseApi, seen: Seen, lose: Losses): LaneDatabaseApi => ({
  ...db,
  ...losing(db, lose),
  begin: async () => {
    const transaction = await db.begin()
    if (transaction === undefined) {
      seen.busy++
      return transaction
    }
    seen.begun++
    return { ...transaction, rows: losing(transaction.rows ?? db, lose) }
  }
})

/**
 * The SQL ports on the project's Postgres client at `url` (tables under
 * `tablePrefix`), typed with the `LaneDatabase` that `layerPorts` adds
 * there outside its type.
 */
export const pgPortsWithLane = (url: string, tablePrefix: string) => {
  const base = layerPorts.pipe(Layer.provideMerge(Tables.layer(tablePrefix)), Layer.provideMerge(layerClient({ url, tablePrefix })))
  return base as Layer.Layer<Layer.Layer.Success<typeof base> | LaneDatabase, Layer.Layer.Error<typeof base>>
}
