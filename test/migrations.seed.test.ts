import * as Sql from "@connector-store/sql-adapter"
import { migrate, migrations, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"
import { runProcess } from "./support/processes.js"

// A complete database of the original store (every table and index, written
// out here as its schema's SQL, with rows in each table), opened by this
// project's store. A database this project's earlier releases wrote (their
// own pending-auth columns) is moved to the original's. Then every step run
// again over the objects it created: "every statement is safe to run again".

const NOW = 1_700_000_000_000

/** The original store's schema, as its migration created it (no ledger of ours). */
const SEED_SCHEMA = [
  `CREATE TABLE kubun_connector_sync_state (
    connector_name text NOT NULL, owner_did text NOT NULL, checkpoint text, last_synced_at text NOT NULL,
    entity_count integer NOT NULL DEFAULT 0, status text NOT NULL, error text, lease_expires_at bigint,
    recovery text, version integer NOT NULL DEFAULT 0, incarnation text,
    CONSTRAINT kubun_connector_sync_state_pkey PRIMARY KEY (connector_name, owner_did))`,
  `CREATE TABLE kubun_connector_pending_auth (
    state text PRIMARY KEY, code_verifier text NOT NULL, provider text NOT NULL, owner_did text NOT NULL,
    owner_wrappable_did text, controller_wrappable_did text, created_at bigint NOT NULL,
    redirect_url text NOT NULL, scopes text NOT NULL, expires_at bigint NOT NULL)`,
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

/** Rows in each table, as the original store wrote them (pending authorizations with and without wrappable DIDs). */
const SEED_ROWS = [
  `INSERT INTO kubun_connector_sync_state VALUES
    ('gcal', 'did:o', '{"cursor":"c1"}', '2025-01-01', 12, 'idle', NULL, NULL, '["r1"]', 4, 'inc-seed')`,
  `INSERT INTO kubun_connector_pending_auth VALUES
    ('state-1', 'verifier-1', 'gcal', 'did:o', NULL, NULL, ${NOW}, 'https://app/cb', '["calendar"]', ${NOW + 600_000})`,
  `INSERT INTO kubun_connector_pending_auth VALUES
    ('state-2', 'verifier-2', 'gcal', 'did:o', 'did:o:wrap', 'did:c:wrap', ${NOW}, 'https://app/cb2', '[]', ${NOW + 600_000})`,
  `INSERT INTO kubun_connector_pending_auth VALUES
    ('state-3', 'verifier-3', 'jira', 'did:p', 'did:p:wrap', NULL, ${NOW - 700_000}, 'https://app/cb3', '["a","b"]', ${NOW - 100_000})`,
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

/** The original's pending-auth columns, in its order. */
const ORIGINAL_COLUMNS = [
  "state", "code_verifier", "provider", "owner_did", "owner_wrappable_did", "controller_wrappable_did",
  "created_at", "redirect_url", "scopes", "expires_at"
]

/** The columns of a pending-auth table, in order, with whether each is nullable. */
const pendingAuthColumns = (sql: SqlClient, table = "kubun_connector_pending_auth") =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () => sql<{ name: string }>`SELECT column_name AS name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = ${table} ORDER BY ordinal_position`,
      orElse: () => sql<{ name: string }>`SELECT name FROM pragma_table_info(${table}) ORDER BY cid`
    }),
    (rows) => rows.map((row) => row.name)
  )

/**
 * Writes the original's database into `url`. On Postgres, the file's one
 * database is shared by its tests and the original's names have no prefix:
 * what an earlier test left under them is dropped first.
 */
const writeOriginal = (url: string, extra: ReadonlyArray<string> = []) =>
  withClient(url, (sql) =>
    Effect.gen(function*() {
      const left = yield* sql.onDialectOrElse({
        pg: () => sql<{ name: string }>`SELECT tablename AS name FROM pg_tables
          WHERE schemaname = current_schema() AND tablename LIKE 'kubun\_connector\_%'`,
        orElse: () => Effect.succeed([])
      })
      for (const { name } of left) yield* sql.unsafe(`DROP TABLE ${name} CASCADE`)
      yield* statements(sql, [...SEED_SCHEMA, ...SEED_ROWS, ...extra])
    }))

/** Every row of the original's pending-auth table. */
const pendingAuthRows = (sql: SqlClient) =>
  sql<{ state: string }>`SELECT * FROM kubun_connector_pending_auth ORDER BY state`

const databases: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["SQLite", async () => freshSqlitePath()],
  // The seed has no table prefix: its index names are global, so Postgres gets this file's own database.
  ...(pgAvailable ? [["Postgres", pgDatabaseForFile] as const] : [])
]

for (const [name, database] of databases) {
  describe(`a complete database of the original store on ${name}`, () => {
    it("migrates, reads every seed row back, and takes writes in every table", async () => {
      const url = await database()
      await writeOriginal(url)

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
        // Every pending authorization, read back as the original's record, once.
        expect(await store.consumePendingAuth("state-1", { now: NOW })).toEqual({
          state: "state-1", codeVerifier: "verifier-1", provider: "gcal", ownerDID: "did:o",
          createdAt: NOW, redirectURL: "https://app/cb", scopes: ["calendar"], expiresAt: NOW + 600_000
        })
        expect(await store.consumePendingAuth("state-1", { now: NOW })).toBeNull()
        expect(await store.consumePendingAuth("state-2", { now: NOW })).toEqual({
          state: "state-2", codeVerifier: "verifier-2", provider: "gcal", ownerDID: "did:o", ownerWrappableDID: "did:o:wrap",
          controllerWrappableDID: "did:c:wrap", createdAt: NOW, redirectURL: "https://app/cb2", scopes: [], expiresAt: NOW + 600_000
        })
        expect(await store.consumePendingAuth("state-2", { now: NOW })).toBeNull()
        // Created with and without the wrappable DIDs, then consumed once each.
        const created = {
          state: "state-new", codeVerifier: "v".repeat(43), provider: "gcal", ownerDID: "did:o", ownerWrappableDID: "did:o:w",
          controllerWrappableDID: "did:c:w", createdAt: NOW, redirectURL: "https://app/cb", scopes: ["x"], expiresAt: NOW + 1_000
        }
        await store.createPendingAuth(created)
        const { ownerWrappableDID: _o, controllerWrappableDID: _c, ...bare } = { ...created, state: "state-bare" }
        await store.createPendingAuth({ ...bare, ownerWrappableDID: null })
        expect(await store.consumePendingAuth("state-new", { now: NOW })).toEqual(created)
        expect(await store.consumePendingAuth("state-bare", { now: NOW })).toEqual(bare)
        expect(await store.consumePendingAuth("state-new", { now: NOW })).toBeNull()
        // The expired one is swept.
        expect(await store.deleteExpiredPendingAuth(NOW)).toBe(1)
        expect(await store.consumePendingAuth("state-3", { now: NOW - 200_000 })).toBeNull()
        const run = await store.startRelistRun({ ownerDID: "did:o", connectorName: "gcal", model: "Event", accountKey: "acct" })
        expect(await store.getRelistRun(run.runID)).toMatchObject({ state: "started" })
        expect(await store.collectFinishedOperations({ before: NOW, limit: 10 })).toBe(1)
        expect(await store.getOperation({ callerDID: "did:caller", operationID: "op-1" })).toBeNull()
      } finally {
        await store.close()
      }
    })

    it("leaves the original's pending-auth table as it is: same columns, same rows", async () => {
      const url = await database()
      await writeOriginal(url)
      const before = await withClient(url, (sql) => Effect.zip(pendingAuthColumns(sql), pendingAuthRows(sql)))
      const store = await openConnectorStore({ url, now: () => NOW })
      await store.close()
      expect(await withClient(url, (sql) => Effect.zip(pendingAuthColumns(sql), pendingAuthRows(sql)))).toEqual(before)
      expect(before[0]).toEqual(ORIGINAL_COLUMNS)
    })

    it("a database this project wrote with its own pending-auth columns moves every row to the original's", async () => {
      const url = await database()
      const prefix = `old_${name.toLowerCase()}_`
      const t = tableNames(prefix)
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          expect(yield* migrate(sql, t, migrations.filter((m) => m.id < 8))).toEqual(migrations.filter((m) => m.id < 8).map((m) => m.id))
          yield* sql.unsafe(`INSERT INTO ${t.pendingAuth} (state, connector_name, owner_did, code_verifier, redirect_uri, scopes, created_at, expires_at)
            VALUES ('a', 'gcal', 'did:o', 'verifier-a', 'https://app/a', '["s1","s2"]', ${NOW}, ${NOW + 60_000}),
                   ('b', 'jira', 'did:p', 'verifier-b', 'https://app/b', NULL, ${NOW}, ${NOW + 60_000}),
                   ('c', 'gcal', 'did:q', 'verifier-c', 'https://app/c', '[]', ${NOW - 10}, ${NOW - 1})`)
        }))
      const store = await openConnectorStore({ url, tablePrefix: prefix, now: () => NOW })
      try {
        expect(await store.consumePendingAuth("a", { now: NOW })).toEqual({
          state: "a", codeVerifier: "verifier-a", provider: "gcal", ownerDID: "did:o", createdAt: NOW,
          redirectURL: "https://app/a", scopes: ["s1", "s2"], expiresAt: NOW + 60_000
        })
        expect(await store.consumePendingAuth("b", { now: NOW })).toEqual({
          state: "b", codeVerifier: "verifier-b", provider: "jira", ownerDID: "did:p", createdAt: NOW,
          redirectURL: "https://app/b", scopes: [], expiresAt: NOW + 60_000
        })
        expect(await store.deleteExpiredPendingAuth(NOW)).toBe(1)
      } finally {
        await store.close()
      }
      expect(await withClient(url, (sql) => pendingAuthColumns(sql, t.pendingAuth))).toEqual(ORIGINAL_COLUMNS)
    })

    it("the move of the project's own layout, raced by several migrating processes, happens once and keeps every row", async () => {
      const url = await database()
      const prefix = name === "SQLite" ? "kubun_connector_" : `race_${name.toLowerCase()}_`
      const t = tableNames(prefix)
      const ROWS = 50
      await withClient(url, (sql) =>
        Effect.gen(function*() {
          yield* migrate(sql, t, migrations.filter((m) => m.id < 8))
          for (let i = 0; i < ROWS; i++) {
            yield* sql.unsafe(`INSERT INTO ${t.pendingAuth} (state, connector_name, owner_did, code_verifier, redirect_uri, scopes, created_at, expires_at)
              VALUES ('s${i}', 'gcal', 'did:o', 'verifier-${i}', 'https://app/${i}', ${i % 2 === 0 ? "NULL" : `'["s${i}"]'`}, ${NOW}, ${NOW + 60_000})`)
          }
        }))
      if (name === "SQLite") {
        // Separate OS processes (the built packages), each step slowed inside the migration transaction.
        const startAt = String(Date.now() + 1_500)
        const runs = await Promise.all([1, 2, 3].map(() => runProcess("migrate", [url, startAt, "slow", "3"])))
        expect(runs.map((out) => (JSON.parse(out) as { applied: ReadonlyArray<number> }).applied).flat().filter((id) => id === 8)).toEqual([8])
      } else {
        const applied = await Promise.all([1, 2, 3].map(() => withClient(url, (sql) => migrate(sql, t))))
        expect(applied.flat().filter((id) => id === 8)).toEqual([8])
      }
      const store = await openConnectorStore({ url, tablePrefix: prefix, now: () => NOW })
      try {
        for (let i = 0; i < ROWS; i++) {
          expect(await store.consumePendingAuth(`s${i}`, { now: NOW })).toMatchObject({
            codeVerifier: `verifier-${i}`, provider: "gcal", redirectURL: `https://app/${i}`, scopes: i % 2 === 0 ? [] : [`s${i}`]
          })
        }
        expect(await store.deleteExpiredPendingAuth(Number.MAX_SAFE_INTEGER)).toBe(0)
      } finally {
        await store.close()
      }
    })

    it("a consume never removes a row it cannot hand back: it fails, the row stays, the others are consumed", async () => {
      const url = await database()
      await writeOriginal(url, [
        `INSERT INTO kubun_connector_pending_auth VALUES
          ('bad-scopes', 'verifier-x', 'gcal', 'did:o', NULL, NULL, ${NOW}, 'https://app/cb', 'calendar', ${NOW + 600_000})`,
        `INSERT INTO kubun_connector_pending_auth VALUES
          ('bad-list', 'verifier-y', 'gcal', 'did:o', NULL, NULL, ${NOW}, 'https://app/cb', '[1]', ${NOW + 600_000})`])
      const store = await openConnectorStore({ url, now: () => NOW })
      try {
        for (const state of ["bad-scopes", "bad-list"]) {
          const error = await store.consumePendingAuth(state, { now: NOW }).then(
            (value) => expect.unreachable(`expected a rejection, got ${JSON.stringify(value)}`),
            (e: unknown) => e
          )
          expect(error).toMatchObject({ _tag: "CorruptRow", method: "consumePendingAuth", key: state, column: "scopes" })
          expect(String((error as Error).message)).toContain("scopes")
          expect(String((error as Error).message)).not.toContain("verifier-")
        }
        expect(await store.consumePendingAuth("state-1", { now: NOW })).toMatchObject({ codeVerifier: "verifier-1" })
      } finally {
        await store.close()
      }
      const left = await withClient(url, (sql) => pendingAuthRows(sql))
      expect(left.map((row) => row.state).sort()).toEqual(["bad-list", "bad-scopes", "state-2", "state-3"])
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
