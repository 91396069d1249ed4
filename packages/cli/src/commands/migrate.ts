import { Command } from "@effect/cli"
import { Effect } from "effect"
import { databaseOptions, json } from "../options.js"
import { migrateDatabase, safeDatabaseLabel } from "../store.js"
import { output } from "../views.js"

/**
 * `migrate`: brings the schema up to date; running it again is harmless. A
 * schema a newer version migrated is left as it is, and the command fails
 * saying so, with both versions (see `StoreSchemaTooNew`).
 */
export const migrateCommand = Command.make("migrate", { ...databaseOptions, json }, (options) =>
  Effect.flatMap(migrateDatabase(options), (applied) =>
    output(
      options.json,
      () => ({ database: safeDatabaseLabel(options.database), applied }),
      () =>
        applied.length === 0
          ? `${safeDatabaseLabel(options.database)}: schema already up to date`
          : `${safeDatabaseLabel(options.database)}: applied migration${applied.length === 1 ? "" : "s"} ${applied.join(", ")}`
    ))).pipe(Command.withDescription("Create or upgrade the store's tables (forward-only, safe to run twice)"))
