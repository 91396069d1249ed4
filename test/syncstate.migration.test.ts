import { randomBytes } from "node:crypto"
import * as Sql from "@connector-store/sql-adapter"
import { migrate, migrations, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
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

for (const [name, database] of databases) {
  describe(`migration 3 (sync lease token, pending-auth expiry index) on ${name}`, () => {
    it("a database migrated before step 3, holding the seed store's rows, opens with them and leases normally", async () => {
      const { prefix, url } = await database()
      const t = tableNames(prefix)
      const verifier = randomBytes(32).toString("base64url")
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          expect(yield* migrate(sql, t, migrations.filter((m) => m.id < 3))).toEqual([1, 2])
          yield* sql`INSERT INTO ${sql(t.syncState)} (connector_name, owner_did, checkpoint, last_synced_at, entity_count, status, lease_expires_at)
            VALUES ('gcal', 'did:o', '{"cursor":"c1"}', '2025-01-01', 12, 'syncing', ${NOW + 100})`
          yield* sql`INSERT INTO ${sql(t.pendingAuth)} (state, connector_name, owner_did, code_verifier, redirect_uri, scopes, created_at, expires_at)
            VALUES ('st', 'gcal', 'did:o', ${verifier}, 'https://x/cb', '["a","b"]', ${NOW}, ${NOW + 60_000})`
        }))
      const store = await openConnectorStore({ url, tablePrefix: prefix })
      try {
        expect(await store.getSyncState("gcal", "did:o")).toEqual({
          checkpoint: { cursor: "c1" },
          recovery: null,
          lastSyncedAt: "2025-01-01",
          entityCount: 12,
          status: "syncing",
          leaseExpiresAt: NOW + 100,
          version: 0
        })
        expect(await store.claimSyncLease("gcal", "did:o", { now: NOW + 99, leaseMs: 1_000 })).toEqual({ outcome: "busy", leaseExpiresAt: NOW + 100 })
        const claim = await store.claimSyncLease("gcal", "did:o", { now: NOW + 100, leaseMs: 1_000 })
        expect(claim.outcome).toBe("claimed")
        const progressed = await store.updateSyncProgress("gcal", "did:o", (current) => {
          expect(current).toEqual({ checkpoint: { cursor: "c1" }, recovery: null, version: 0, incarnation: null })
          return { checkpoint: { cursor: "c2" }, recovery: { pending: [] } }
        })
        expect(progressed).toMatchObject({ checkpoint: { cursor: "c2" }, version: 1, leaseExpiresAt: NOW + 1_100 })
        const taken = await store.consumePendingAuth("st", { now: NOW })
        expect(taken).toMatchObject({ codeVerifier: verifier, scopes: ["a", "b"], expiresAt: NOW + 60_000 })
      } finally {
        await store.close()
      }
    })

    it("its statements run again change nothing and fail nothing", async () => {
      const { prefix, url } = await database()
      const t = tableNames(prefix)
      const step = migrations.find((m) => m.id === 3)!
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          yield* migrate(sql, t)
          yield* step.up(sql, t)
          yield* step.up(sql, t)
          const columns = yield* sql.onDialectOrElse({
            pg: () => sql<{ name: string }>`SELECT column_name AS name FROM information_schema.columns WHERE table_name = ${t.syncState}`,
            orElse: () => sql<{ name: string }>`SELECT name FROM pragma_table_info(${t.syncState})`
          })
          expect(columns.filter((c) => c.name === "lease_token")).toHaveLength(1)
        }))
    })
  })
}
