import { dashboardHandler, nodeListener } from "@connector-store/dashboard"
import * as Sql from "@connector-store/sql-adapter"
import { Console, Effect } from "effect"
import { createServer, type Server } from "node:http"
import { userInfo } from "node:os"
import { CliError, type DatabaseOptions, safeDatabaseLabel, storeConnection, withStoreReadOnly } from "../store.js"
import { parseDuration } from "../time.js"
import { DEFAULT_TIMEOUT } from "../options.js"

/** The options of `dashboard`. */
interface DashboardCommandOptions extends DatabaseOptions {
  readonly port: number
  readonly host: string
  readonly readOnly: boolean
  readonly actions: boolean
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"])

const listening = (server: Server, port: number, host: string) =>
  Effect.async<string, CliError>((resume) => {
    server.once("error", (error) => resume(Effect.fail(new CliError({ message: `cannot listen on ${host}:${port}: ${error.message}` }))))
    server.listen(port, host, () => {
      const address = server.address()
      const bound = typeof address === "object" && address !== null ? address.port : port
      resume(Effect.succeed(`http://${host.includes(":") ? `[${host}]` : host}:${bound}/`))
    })
  })

/** Who the audit log names for this process's actions: the user running it. */
const actor = (): string => {
  try {
    return `${userInfo().username} (connector-store dashboard)`
  } catch {
    return "connector-store dashboard"
  }
}

/**
 * `dashboard`: opens the store (read-only unless `--actions`), serves the pages on `--host`:`--port`, prints the address, and
 * runs until interrupted; the store is checked first as every command checks it, so the dashboard never creates or migrates.
 */
export const dashboard = (options: DashboardCommandOptions) =>
  Effect.scoped(Effect.gen(function*() {
    if (options.readOnly && options.actions) return yield* new CliError({ message: "--read-only and --actions exclude each other" })
    if (!Number.isSafeInteger(options.port) || options.port < 0 || options.port > 65_535) {
      return yield* new CliError({ message: `--port must be 0 to 65535, got ${options.port}` })
    }
    yield* withStoreReadOnly(options, () => Effect.void)
    const timeoutMs = parseDuration(options.timeout ?? DEFAULT_TIMEOUT) ?? 30_000
    const store = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => Sql.openConnectorStore({ ...storeConnection(options, !options.actions, timeoutMs), maxConnections: 4 }),
        catch: (error) => new CliError({ message: `cannot open database ${safeDatabaseLabel(options.database)}: ${error instanceof Error ? error.message : String(error)}` })
      }),
      (store) => Effect.promise(() => store.close())
    )
    const name = actor()
    const server = createServer(nodeListener(dashboardHandler({ store, actions: options.actions, actorOf: () => name })))
    yield* Effect.addFinalizer(() => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    }))
    const address = yield* listening(server, options.port, options.host)
    yield* Console.log(`connector-store dashboard on ${safeDatabaseLabel(options.database)}: ${address}`)
    yield* Console.log(options.actions ? "actions are on: each is confirmed first and written to the audit log" : "read-only: no actions (give --actions to allow them)")
    if (!LOOPBACK.has(options.host)) {
      yield* Console.log(`warning: listening on ${options.host}, not loopback: anyone who reaches this address sees the pages${options.actions ? " and may act" : ""}`)
    }
    return yield* Effect.never
  }))
