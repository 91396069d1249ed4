import * as Sql from "@connector-store/sql-adapter"
import { migrate, migrations, openConnectorStore, tableNames, type TableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const NOW = 1_700_000_000_000

/** Runs `use` on a fresh SQL client of `url`. */
const withClient = <A>(url: string, use: (sql: SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
    Effect.provide(Effect.flatMap(SqlClient, use), context))))

const databases: ReadonlyArray<readonly [string, () => Promise<{ url: string; prefix: string }>]> = [
  ["SQLite", async () => ({ url: freshSqlitePath(), prefix: freshPrefix() })],
  ...(pgAvailable ? [["Postgres", async () => ({ url: await pgDatabaseForFile(), prefix: freshPrefix() })] as const] : [])
]

/** One row as a store before migration 6 wrote it: `id` names it, the rest is its state. */
const insertOldRow = (sql: SqlClient, t: TableNames, id: string, state: string, sendMarker: string | null, documentID: string) =>
  sql`INSERT INTO ${sql(t.operation)} (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key,
      target, source_id, deterministic_event_id, payload_hash, reissue_intent, provider_etag, document_id, result_entity,
      state, attempts, next_attempt_at, defer_reason, send_marker, last_kind, last_http_status, version, incarnation,
      lease_token, lease_expires_at, created_at, updated_at)
    VALUES ('did:caller:1', ${id}, ${`node-${id}`}, 'did:owner:1', 'gcal', 'Event', 'update', 'acct-1',
      'calendar/primary', 'src-1', ${`event-${id}`}, 'hash-1', '{"kind":"conditional-update","ifMatch":"etag-0"}', 'etag-0',
      ${documentID}, NULL, ${state}, 1, ${state === "attempted" ? NOW - 100 : null}, NULL, ${sendMarker}, NULL, NULL, 3, 'inc',
      ${state === "attempted" && sendMarker !== null ? sendMarker : null}, ${state === "attempted" && sendMarker !== null ? NOW - 100 : null},
      ${NOW - 10_000}, ${NOW - 500})`

const claimOf = (id: string) => ({
  callerDID: "did:caller:1",
  operationID: id,
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  op: "update" as const,
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: "src-1",
  deterministicEventID: `event-${id}`,
  payloadHash: "hash-1",
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" } as const,
  documentID: `doc-${id}`
})

for (const [name, database] of databases) {
  describe(`migration 6 (the in-doubt fact) on ${name}`, () => {
    it("rows written before it: a marked row not committed is in doubt from its last write; the first re-drive after gets the reissue", async () => {
      const { prefix, url } = await database()
      const t = tableNames(prefix)
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          expect(yield* migrate(sql, t, migrations.filter((m) => m.id < 6))).toEqual([1, 2, 3, 5])
          yield* insertOldRow(sql, t, "crashed-after-send", "attempted", "run-a", "doc-crashed-after-send")
          yield* insertOldRow(sql, t, "never-sent", "attempted", null, "doc-never-sent")
          yield* insertOldRow(sql, t, "committed", "committed", "run-c", "doc-committed")
          yield* insertOldRow(sql, t, "dead", "dead", null, "doc-dead")
          yield* insertOldRow(sql, t, "dead-marked", "dead", "run-d", "doc-dead-marked")
          yield* insertOldRow(sql, t, "reconcile", "reconcile_only", "run-r", "doc-reconcile")
        }))
      const store = await openConnectorStore({ url, tablePrefix: prefix })
      try {
        const doubt = async (id: string) => (await store.getOperation({ callerDID: "did:caller:1", operationID: id }))?.inDoubtSince
        expect(await doubt("crashed-after-send")).toBe(NOW - 500)
        expect(await doubt("never-sent")).toBeNull()
        expect(await doubt("committed")).toBeNull()
        expect(await doubt("dead")).toBeNull()
        expect(await doubt("dead-marked")).toBe(NOW - 500)
        expect(await doubt("reconcile")).toBe(NOW - 500)
        const states = await store.getDocumentWriteStates(["doc-committed", "doc-dead", "doc-dead-marked", "doc-reconcile"])
        expect(Object.fromEntries(states)).toEqual({
          "doc-committed": "committed",
          "doc-dead": "failed",
          "doc-dead-marked": "unconfirmed",
          "doc-reconcile": "unconfirmed"
        })
        // The defect's scenario across the upgrade: B takes over, goes offline; C still gets the reissue.
        const key = { callerDID: "did:caller:1", operationID: "crashed-after-send" }
        const b = await store.claimOperation(claimOf("crashed-after-send"))
        expect(b).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update", ifMatch: "etag-0" } })
        if (b.outcome !== "claimed") return
        await store.recordAttemptFailure(key, { leaseToken: b.lease.token, kind: "offline", retryAt: 0 })
        const c = await store.claimOperation(claimOf("crashed-after-send"))
        expect(c).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update" }, operation: { inDoubtSince: NOW - 500 } })
        expect(await store.claimOperation(claimOf("never-sent"))).toMatchObject({ outcome: "claimed", reissue: null })
      } finally {
        await store.close()
      }
    })

    it("two clients migrating at once apply it once; run again, its statements change nothing and fail nothing", async () => {
      const { prefix, url } = await database()
      const t = tableNames(prefix)
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          yield* migrate(sql, t, migrations.filter((m) => m.id < 6))
          yield* insertOldRow(sql, t, "crashed-after-send", "attempted", "run-a", "doc-1")
        }))
      const racing = await Promise.all([withClient(url, (sql) => migrate(sql, t)), withClient(url, (sql) => migrate(sql, t))])
      // One client applies every pending step (6 and any after it) exactly once; the other finds nothing left.
      const pending = migrations.filter((m) => m.id >= 6).map((m) => m.id)
      expect(racing.map((ids) => ids.join(",")).sort()).toEqual(["", pending.join(",")])
      expect(racing.flat().filter((id) => id === 6)).toHaveLength(1)
      const step = migrations.find((m) => m.id === 6)!
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          yield* sql`UPDATE ${sql(t.operation)} SET in_doubt_since = ${NOW + 1}`
          yield* step.up(sql, t)
          yield* step.up(sql, t)
          const columns = yield* sql.onDialectOrElse({
            pg: () => sql<{ name: string }>`SELECT column_name AS name FROM information_schema.columns WHERE table_name = ${t.operation}`,
            orElse: () => sql<{ name: string }>`SELECT name FROM pragma_table_info(${t.operation})`
          })
          expect(columns.filter((c) => c.name === "in_doubt_since")).toHaveLength(1)
          // A row already in doubt keeps its time.
          const rows = yield* sql<{ t: unknown }>`SELECT in_doubt_since AS t FROM ${sql(t.operation)}`
          expect(rows.map((r) => Number(r.t))).toEqual([NOW + 1])
        }))
    })
  })
}
