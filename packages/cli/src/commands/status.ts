import * as Command from "@effect/cli/Command"
import { loaded } from "../lazy.js"
import { databaseOptions, json } from "../options.js"

/** `status`: counts by table and state, what waits longest, and what needs a person. */
export const statusCommand = Command.make("status", { ...databaseOptions, json }, (options) =>
  loaded(() => import("../handlers/status.js"), (handler) => handler.status(options))
).pipe(Command.withDescription(
  "Counts by table and state, leases held now, operations in doubt, repair_failed watches, relist runs in flight, " +
    "sync leases (held, stale), pending authorizations (live, expired), the oldest due items and the rows that cannot be " +
    "decoded, by table (reads only; the last reads every operation, watch, sync state and relist run)"
))
