// An app on Effect 4 that calls the store through @connector-store/promise:
// each call wrapped in the app's own Effect.tryPromise, the store's rejection
// kept as a typed failure, and one of them caught by its tag. SQLite at
// argv[2], Postgres at argv[3] when given.
import { isStoreError, openConnectorStore, type SqlConnectorStore, type StoreError } from "@connector-store/promise"
import { Data, Effect } from "effect"
import { claimInput, expectEqual } from "./input.js"

/** A rejection that is not one of the store's errors (a bug, not a refusal). */
class StoreDefect extends Data.TaggedError("StoreDefect")<{ readonly cause: unknown }> {}

/** A store call as an Effect of the app's Effect: its rejection a typed failure. */
const call = <A>(run: () => Promise<A>): Effect.Effect<A, StoreError | StoreDefect> =>
  Effect.tryPromise({ try: run, catch: (cause) => isStoreError(cause) ? cause : new StoreDefect({ cause }) })

const program = (store: SqlConnectorStore) =>
  Effect.gen(function*() {
    const claim = yield* call(() => store.claimOperation(claimInput("effect4")))
    expectEqual("claimOperation", claim.outcome, "claimed")
    const again = yield* call(() => store.claimOperation(claimInput("effect4", "sha256:other"))).pipe(
      Effect.map((result) => `claimed: ${result.outcome}`),
      Effect.catchTag("IdempotencyConflict", (error) => Effect.succeed(`refused: ${error.operationID}`))
    )
    expectEqual("a reused key", again, "refused: op-effect4")
    const bad = yield* Effect.flip(call(() => store.getOperation({ callerDID: "", operationID: "op-effect4" })))
    expectEqual("a bad key's _tag", bad._tag, "InvalidInput")
  })

const [sqliteFile, postgresUrl] = process.argv.slice(2)
if (sqliteFile === undefined) throw new Error("usage: effect4.js <sqlite file> [postgres url]")
for (const [name, url] of [["sqlite", sqliteFile], ...(postgresUrl === undefined ? [] : [["postgres", postgresUrl]])]) {
  const store = await openConnectorStore({ url: url!, tablePrefix: "effect4_app_", readWinner: async () => null })
  try {
    await Effect.runPromise(program(store))
  } finally {
    await store.close()
  }
  console.log(`${name}: Effect 4 app over the Promise API ok, IdempotencyConflict caught by its tag`)
}
