// The project's Effect API over a stock client, `@effect/sql-sqlite-node`'s
// or `@effect/sql-pg`'s: a diagnostic line under a case, showing what the
// project's own SQLite client, or its direct statements on Postgres, gain.
import { ConnectorStore, WinnerReader } from "@connector-store/core"
import { layerPorts, layerStockSqliteClient, Tables } from "@connector-store/sql-adapter"
import { PgClient } from "@effect/sql-pg"
import { Layer, ManagedRuntime, Redacted } from "effect"

/** A runtime holding `ConnectorStore` on `connection` through the stock client of `database`, winners from `readWinner` (an Effect). */
export const stockClientRuntime = (database, connection, readWinner) =>
  ManagedRuntime.make(
    ConnectorStore.layer.pipe(
      Layer.provideMerge(layerPorts),
      Layer.provideMerge(Layer.succeed(WinnerReader, { readWinner })),
      Layer.provideMerge(Tables.layer(connection.tablePrefix)),
      Layer.provideMerge(
        database === "sqlite"
          ? layerStockSqliteClient(connection.url)
          : PgClient.layer({ url: Redacted.make(connection.url), maxConnections: connection.maxConnections })
      )
    )
  )

/** The label of that line. */
export const stockClientLabel = (database) =>
  `project, Effect API, on the stock ${database === "sqlite" ? "sqlite-node" : "sql-pg"} client`
