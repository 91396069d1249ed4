// The packed SQL adapter, from an app with its own `effect` and `@effect/*`:
// SQLite on the file in argv[2], and Postgres at argv[3] when one is given.
import { layer, openConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import { effectCycle, mixedCall, promiseCycle } from "./cycle.js"

const [sqliteFile, postgresUrl] = process.argv.slice(2)
if (sqliteFile === undefined) throw new Error("usage: sql.js <sqlite file> [postgres url]")

const winners = new Map<string, string>([["doc-promise", "w1"], ["doc-effect", "w1"]])
const databases: ReadonlyArray<readonly [string, string]> = [
  ["sqlite", sqliteFile],
  ...(postgresUrl === undefined ? [] : [["postgres", postgresUrl] as const])
]

for (const [name, url] of databases) {
  const store = await openConnectorStore({ url, tablePrefix: "app_promise_", readWinner: async (id) => winners.get(id) ?? null })
  await promiseCycle(store, "promise")
  await mixedCall(store, "promise")
  await store.close()
  console.log(`${name}: Promise API ok`)

  await Effect.runPromise(effectCycle("effect").pipe(
    Effect.provide(layer({ url, tablePrefix: "app_effect_" }, { readWinner: (id) => Effect.succeed(winners.get(id) ?? null) }))
  ))
  console.log(`${name}: Effect API ok`)
}
