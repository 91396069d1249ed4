import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions } from "../options.js"

/** `dashboard`: the operator pages over the store, served on a local port. */
export const dashboardCommand = Command.make("dashboard", {
  ...databaseOptions,
  port: Options.integer("port").pipe(Options.withDefault(4850), Options.withDescription("The port to listen on (0: any free port)")),
  host: Options.text("host").pipe(
    Options.withDefault("127.0.0.1"),
    Options.withDescription("The address to listen on (default loopback: only this machine can open the pages)")
  ),
  readOnly: Options.boolean("read-only").pipe(Options.withDescription("Pages only, no actions (the default)")),
  actions: Options.boolean("actions").pipe(
    Options.withDescription("Allow the actions (retry, give up, reconcile, re-arm, pause, cap, release…), each confirmed and written to the audit log")
  )
}, (options) => loaded(() => import("../handlers/dashboard.js"), (handler) => handler.dashboard(options))).pipe(
  Command.withDescription(
    "Serve the operator dashboard: overview, lists, details and (with --actions) guarded actions, in a browser; prints the address"
  )
)
