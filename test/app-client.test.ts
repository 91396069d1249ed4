/**
 * The store on the app's own `SqlClient` (`layerOnClient`): an operation is
 * claimed in the same transaction as the app's own document write, so both
 * commit or neither does, on the stock SQLite client and on a `PgClient`.
 */
import { type ClaimOperationInput, ConnectorStore } from "@connector-store/core"
import { layerOnClient } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Exit, Layer, ManagedRuntime, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgDatabaseForFile } from "./support/databases.js"

const edit = (id: string, payloadHash = "sha256:lunch"): ClaimOperationInput => ({
  callerDID: "did:example:alice-laptop", operationID: `edit-${id}`, ownerDID: "did:example:alice", connectorName: "gcal",
  model: "Event", op: "update", accountKey: "alice@example.com", target: "calendars/primary", sourceID: `evt-${id}`,
  deterministicEventID: `local-${id}`, payloadHash, reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0", documentID: `doc-${id}`
})

const backends: ReadonlyArray<readonly [string, () => Promise<Layer.Layer<SqlClient, unknown>>]> = [
  ["SQLite (the stock @effect/sql-sqlite-node client)", async () => SqliteClient.layer({ filename: freshSqlitePath() })],
  ["Postgres (the app's own PgClient)", async () => PgClient.layer({ url: Redacted.make(await pgDatabaseForFile()) })]
]

for (const [name, clientOf] of backends) {
  describe(`the store on the app's client: ${name}`, () => {
    const documents = `${freshPrefix()}app_documents`
    let runtime: ManagedRuntime.ManagedRuntime<ConnectorStore | SqlClient, unknown>
    const run = <A, E>(effect: Effect.Effect<A, E, ConnectorStore | SqlClient>) => runtime.runPromiseExit(effect)

    beforeAll(async () => {
      const client = await clientOf()
      runtime = ManagedRuntime.make(Layer.provideMerge(layerOnClient({}, { tablePrefix: freshPrefix() }), client))
      await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql.unsafe(`CREATE TABLE ${documents} (id TEXT PRIMARY KEY, body TEXT NOT NULL)`)))
    })
    afterAll(() => runtime?.dispose())

    /** The app's document write and the claim of its write-back, in one transaction of the app's. */
    const saveAndClaim = (input: ClaimOperationInput, body: string, thenFail = false) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        const store = yield* ConnectorStore
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql.unsafe(`INSERT INTO ${documents} (id, body) VALUES (${sql.onDialectOrElse({ pg: () => "$1, $2", orElse: () => "?, ?" })})`, [input.documentID, body])
          const claim = yield* store.claimOperation(input)
          if (thenFail) return yield* Effect.fail("the app's next write failed" as const)
          return claim
        }))
      })
    const documentBody = (id: string) =>
      Effect.flatMap(SqlClient, (sql) =>
        sql.unsafe<{ body: string }>(`SELECT body FROM ${documents} WHERE id = ${sql.onDialectOrElse({ pg: () => "$1", orElse: () => "?" })}`, [id]))
        .pipe(Effect.map((rows) => rows[0]?.body))
    const operationOf = (input: ClaimOperationInput) =>
      Effect.flatMap(ConnectorStore, (store) => store.getOperation({ callerDID: input.callerDID, operationID: input.operationID }))

    it("commits the document and the claimed operation together", async () => {
      const claim = await run(saveAndClaim(edit("a"), "lunch at noon"))
      expect(Exit.isSuccess(claim) && claim.value.outcome).toBe("claimed")
      expect(await runtime.runPromise(documentBody("doc-a"))).toBe("lunch at noon")
      const operation = await runtime.runPromise(operationOf(edit("a")))
      expect(Option.map(operation, (row) => [row.state, row.documentID])).toEqual(Option.some(["attempted", "doc-a"]))
    })

    it("rolls the claim back with the app's write when the app's transaction fails", async () => {
      const failed = await run(saveAndClaim(edit("b"), "lunch at one", true))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(await runtime.runPromise(documentBody("doc-b"))).toBeUndefined()
      expect(Option.isNone(await runtime.runPromise(operationOf(edit("b"))))).toBe(true)
      // Nothing of the failed claim is left: the key claims afresh.
      const again = await run(saveAndClaim(edit("b"), "lunch at one"))
      expect(Exit.isSuccess(again) && again.value.outcome === "claimed" && again.value.created).toBe(true)
    })

    it("rolls the app's write back when the store refuses the claim", async () => {
      const refused = await run(saveAndClaim({ ...edit("a", "sha256:another-payload"), documentID: "doc-a2" }, "dinner"))
      expect(Exit.isFailure(refused) && JSON.stringify(refused.cause)).toContain("IdempotencyConflict")
      expect(await runtime.runPromise(documentBody("doc-a2"))).toBeUndefined()
    })
  })
}
