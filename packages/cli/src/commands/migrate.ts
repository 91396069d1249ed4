import * as Command from "@effect/cli/Command"
import { loaded } from "../lazy.js"
import { databaseOptions, json } from "../options.js"

/**
 * `migrate`: brings the schema up to date; running it again is harmless. A
 * schema a newer version migrated is left as it is, and the command fails
 * saying so, with both versions (see `StoreSchemaTooNew`).
 */
export const migrateCommand = Command.make("migrate", { ...databaseOptions, json }, (options) =>
  loaded(() => import("../handlers/migrate.js"), (handler) => handler.migrate(options))
).pipe(Command.withDescription("Create or upgrade the store's tables (forward-only, safe to run twice)"))
