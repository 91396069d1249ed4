import * as Sql from "@connector-store/sql-adapter"
import { migrate, migrations, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// A complete database of the original store (seed 004's migration: every
// table and index, written out here as that migration's SQL, with a row in
// each table), opened by this project's store. Then every step run again
// over the objects it created: "every statement is safe to run again".

const NOW = 1_700_000_000_000

/** Seed 004's schema, as the original store's migration created it (no ledger of ours). */
const SEED_SCHEMA = [
  `CREATE TABLE kubun_connector_sync_state (
    connector_name text NOT NULL, owner_did text NOT NULL, checkpoint text, last_synced_at text NOT NULL,
    entity_count integer NOT NULL DEFAULT 0, status text NOT NULL, error text, lease_expires_at bigint,
    recovery text, version integer NOT NULL DEFAULT 0, incarnation text,
    CONSTRAINT kubun_connector_sync_state_pkey PRIMARY KEY (connector_name, owner_did))`,
  `CREATE TABLE kubun_connector_pending_auth (
    state text NOT NULL, connector_name text NOT NULL, owner_did text NOT NULL, code_verifier text NOT NULL,
    redirect_uri text NOT NULL, scopes text, created_at bigint NOT NULL, expires_at bigint NOT NULL,
    CONSTRAINT kubun_connector_pending_auth_pkey PRIMARY KEY (state))`,
  `CREATE TABLE kubun_connector_operation (
    caller_did text NOT NULL, operation_id text NOT NULL, node_key text NOT NULL, owner_did text NOT NULL,
    connector_name text NOT NULL, model text NOT NULL, op text NOT NULL, account_key text NOT NULL, target text NOT NULL,
    source_id text, deterministic_event_id text NOT NULL, payload_hash text NOT NULL, reissue_intent text NOT NULL,
    provider_etag text, document_id text, result_entity text, state text NOT NULL, attempts integer NOT NULL DEFAULT 0,
    next_attempt_at bigint, defer_reason text, send_marker text, last_kind text, last_http_status integer,
    version integer NOT NULL DEFAULT 0, incarnation text, lease_token text, lease_expires_at bigint,
    created_at bigint NOT NULL, updated_at bigint NOT NULL,
    CONSTRAINT kubun_connector_operation_pkey PRIMARY KEY (caller_did, operation_id))`,
  `CREATE UNIQUE INDEX uq_connector_operation_node_key ON kubun_connector_operation (node_key)`,
  `CREATE INDEX idx_connector_operation_document ON kubun_connector_operation (document_id)`,
  `CREATE INDEX idx_connector_operation_owner ON kubun_connector_operation (owner_did)`,
  `CREATE INDEX idx_connector_operation_state_updated ON kubun_connector_operation (state, updated_at)`,
  `CREATE TABLE kubun_connector_projection_watch (
    owner_did text NOT NULL, connector_name text NOT NULL, model text NOT NULL, account_key text NOT NULL,
    source_id text NOT NULL, document_id text NOT NULL, verified_state_digest text, observed_winner_digest text,
    verification_status text NOT NULL, verification_attempts integer NOT NULL DEFAULT 0,
    repair_generation integer NOT NULL DEFAULT 0, next_attempt_at bigint, claimed_until bigint, defer_reason text,
    version integer NOT NULL DEFAULT 0, created_at bigint NOT NULL, updated_at bigint NOT NULL,
    CONSTRAINT kubun_connector_projection_watch_pkey PRIMARY KEY (owner_did, connector_name, model, account_key, source_id))`,
  `CREATE UNIQUE INDEX uq_connector_watch_ingress ON kubun_connector_projection_watch (owner_did, model, document_id)`,
  `CREATE INDEX idx_connector_watch_document ON kubun_connector_projection_watch (document_id)`
]

/** One row in each seed table, as the original store wrote them. */
const SEED_ROWS = [
  `INSERT INTO kubun_connector_sync_state VALUES
    ('gcal', 'did:o', '{"cursor":"c1"}', '2025-01-01', 12, 'idle', NULL, NULL, '["r1"]', 4, 'inc-seed')`,
  `INSERT INTO kubun_connector_pending_auth VALUES
    ('state-1', 'gcal', 'did:o', 'verifier-1', 'https://app/cb', '["calendar"]', ${NOW}, ${NOW + 600_000})`,
  `INSERT INTO kubun_connector_operation VALUES
    ('did:caller', 'op-1', 'node-1', 'did:o', 'gcal', 'Event', 'update', 'acct', 'cal/primary', 'src-1', 'evt-1',
     'hash-1', '{"kind":"conditional"}', NULL, NULL, NULL, 'committed', 1, NULL, NULL, NULL, NULL, NULL, 2,
     'inc-op', NULL, NULL, ${NOW - 1_000}, ${NOW - 500})`,
  `INSERT INTO kubun_connector_projection_watch VALUES
    ('did:o', 'gcal', 'Event', 'acct', 'src-1', 'doc-1', 'd1', 'd1', 'verified', 0, 2, NULL, NULL, NULL, 7,
     ${NOW - 1_000}, ${NOW - 900})`
]

/** Runs `use` on a fresh SQL client of `url`. */
const withClient = <A>(url: string, use: (sql: SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
    Effect.provide(Effect.flatMap(SqlClient, use), context))))

const statements = (sql: SqlClient, list: ReadonlyArray<string>) =>
  Effect.forEach(list, (statement) => sql.unsafe(statement), { discard: true })

const databases: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["SQLite", async () => freshSqlitePath()],
  // The seed has no table prefix: its index names are global, so Postgres gets this file's own database.
  ...(pgAvailable ? [["Postgres", pgDatabaseForFile] as const] : [])
]

for (const [name, database] of databases) {
  describe(`a complete database of the original store on ${name}`, () => {
    it("migrates, reads every seed row back, and takes writes in every table", async () => {
      const url = await database()
      await withClient(url, (sql) => statements(sql, [...SEED_SCHEMA, ...SEED_ROWS]))

      const store = await openConnectorStore({ url, readWinner: () => "d2", now: () => NOW })
      try {
        expect(await store.getSyncState("gcal", "did:o")).toMatchObject({
          checkpoint: { cursor: "c1" },
          recovery: ["r1"],
          lastSyncedAt: "2025-01-01",
          entityCount: 12,
          version: 4
        })
        expect(await store.getOperation({ callerDID: "did:caller", operationID: "op-1" })).toMatchObject({
          nodeKey: "node-1",
          state: "committed",
          reissueIntent: { kind: "conditional" },
          version: 2,
          createdAt: NOW - 1_000
        })
        const identity = { ownerDID: "did:o", connectorName: "gcal", model: "Event", accountKey: "acct", sourceID: "src-1" }
        expect(await store.getWatch(identity)).toMatchObject({ repairGeneration: 2, version: 7, documentID: "doc-1" })

        // Writes in every table, old and new.
        expect(await store.armWatch(identity, "manual", { dueAt: NOW })).toBe("opened")
        expect(await store.getWatch(identity)).toMatchObject({ repairGeneration: 3, observedWinnerDigest: "d2", version: 8 })
        await store.setSyncState("gcal", "did:o", { status: "syncing", lastSyncedAt: "2025-02-02", entityCount: 13 })
        expect(await store.getSyncState("gcal", "did:o")).toMatchObject({ status: "syncing", lastSyncedAt: "2025-02-02", entityCount: 13 })
        expect(await store.consumePendingAuth("state-1", { now: NOW })).toMatchObject({ codeVerifier: "verifier-1", scopes: ["calendar"] })
        expect(await store.consumePendingAuth("state-1", { now: NOW })).toBeNull()
        const run = await store.startRelistRun({ ownerDID: "did:o", connectorName: "gcal", model: "Event", accountKey: "acct" })
        expect(await store.getRelistRun(run.runID)).toMatchObject({ state: "started" })
        expect(await store.collectFinishedOperations({ before: NOW, limit: 10 })).toBe(1)
        expect(await store.getOperation({ callerDID: "did:caller", operationID: "op-1" })).toBeNull()
      } finally {
        await store.close()
      }
    })

    it("every migration step run again over the objects it created is harmless", async () => {
      const url = await database()
      const prefix = `again_${name.toLowerCase()}_`
      const t = tableNames(prefix)
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          expect(yield* migrate(sql, t)).toEqual(migrations.map((m) => m.id))
          for (const step of migrations) {
            // Each step alone, in its own transaction, over what it (and every other step) already created.
            yield* sql.withTransaction(step.up(sql, t)).pipe(
              Effect.mapError((error) => new Error(`step ${step.id} (${step.name}) run again: ${String(error)}`))
            )
          }
        }))
      const store = await openConnectorStore({ url, tablePrefix: prefix, now: () => NOW })
      await store.setSyncState("gcal", "did:o", { status: "idle", lastSyncedAt: "x", entityCount: 0 })
      expect(await store.getSyncState("gcal", "did:o")).toMatchObject({ status: "idle" })
      await store.close()
    })
  })
}
