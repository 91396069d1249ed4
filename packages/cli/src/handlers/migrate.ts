import { Effect } from "effect"
import { type DatabaseOptions, migrateDatabase, safeDatabaseLabel } from "../store.js"
import { output } from "../views.js"

/** `migrate`: brings the schema up to date and says which migrations it applied. */
export const migrate = (options: DatabaseOptions & { readonly json: boolean }) =>
  Effect.flatMap(migrateDatabase(options), (applied) =>
    output(
      options.json,
      () => ({ database: safeDatabaseLabel(options.database), applied }),
      () =>
        applied.length === 0
          ? `${safeDatabaseLabel(options.database)}: schema already up to date`
          : `${safeDatabaseLabel(options.database)}: applied migration${applied.length === 1 ? "" : "s"} ${applied.join(", ")}`
    ))
