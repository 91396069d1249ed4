import { DirectDatabase, type DirectDatabaseApi } from "@connector-store/core"
import { layerClient, layerPorts, Tables } from "@connector-store/sql-adapter"
import { Layer } from "effect"

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
  begin: () => {
    const transaction = db.begin()
    if (transaction === undefined) seen.busy++
    else seen.begun++
    return transaction
  },
  watches: {
    ...db.watches,
    update: (previous, next) => lose.watchUpdates-- > 0 ? false : db.watches.update(previous, next)
  },
  operations: {
    ...db.operations,
    update: (previous, next) =>
      lose.operationUpdates !== undefined && lose.operationUpdates-- > 0 ? false : db.operations.update(previous, next)
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
