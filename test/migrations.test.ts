import { WatchRepository } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { type Migration, migrate, migrations, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { runProcess } from "./support/processes.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const SEED_TABLES = [
  "kubun_connector_sync_state",
  "kubun_connector_pending_auth",
  "kubun_connector_operation",
  "kubun_connector_projection_watch"
]
/** The seed's indexes a migrated store keeps (and those it drops: DROPPED_SEED_INDEXES). */
const SEED_INDEXES = [
  "uq_connector_operation_node_key",
  "idx_connector_operation_owner",
  "idx_connector_operation_state_updated",
  "uq_connector_watch_ingress"
]

/**
 * The seed's indexes migrations 15 and 16 drop, because another index leads
 * with the same column and every write would maintain both: the operations'
 * document_id index (migration 7's document/caller and document/owner
 * indexes serve every lookup by document), the watches' (the ingress index,
 * built again document first).
 */
const DROPPED_SEED_INDEXES = ["idx_connector_operation_document", "idx_connector_watch_document"]

/** Runs the migrations once on a fresh client of `url` and returns the ids applied. */
const migrateOnce = (url: string, prefix?: string) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
        Effect.provide(Effect.flatMap(SqlClient, (sql) => migrate(sql, tableNames(prefix))), context))
    )
  )

const allIds = migrations.map((m) => m.id)

/** What one racing migration reports: the ids it applied, and when it began and ended (epoch ms). */
interface MigrationRun {
  readonly applied: ReadonlyArray<number>
  readonly startedAt: number
  readonly endedAt: number
}

const parseRun = (out: string): MigrationRun => JSON.parse(out) as MigrationRun

/** The racers really raced: every one had begun before any had ended. */
const expectOverlap = (runs: ReadonlyArray<MigrationRun>) => {
  const lastStart = Math.max(...runs.map((run) => run.startedAt))
  const firstEnd = Math.min(...runs.map((run) => run.endedAt))
  expect(lastStart, JSON.stringify(runs)).toBeLessThan(firstEnd)
}

/** The project's steps with the first one holding the migration lock for `ms` before it runs. */
const holdingFirstStep = (ms: number): ReadonlyArray<Migration> =>
  migrations.map((step, i) => i === 0 ? { ...step, up: (sql, t) => Effect.zipRight(Effect.sleep(ms), step.up(sql, t)) } : step)

/** Like `migrateOnce`, timed from just before `migrate` runs (after connecting) to its end. */
const timedMigration = (url: string, prefix: string, steps: ReadonlyArray<Migration>): Promise<MigrationRun> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(Layer.build(Sql.layerClient({ url })), (context) =>
        Effect.provide(
          Effect.flatMap(SqlClient, (sql) =>
            Effect.gen(function*() {
              const startedAt = Date.now()
              const applied = yield* migrate(sql, tableNames(prefix), steps)
              return { applied, startedAt, endedAt: Date.now() }
            })),
          context
        ))
    )
  )

describe("migrations on SQLite", () => {
  it("create the seed's tables and indexes, and a second run applies nothing", async () => {
    const file = freshSqlitePath()
    expect(await migrateOnce(file)).toEqual(allIds)
    expect(await migrateOnce(file)).toEqual([])
    const db = new Database(file, { readonly: true })
    const names = db.prepare("SELECT name FROM sqlite_master").all().map((row) => (row as { name: string }).name)
    db.close()
    for (const name of [...SEED_TABLES, ...SEED_INDEXES]) expect(names).toContain(name)
    for (const name of DROPPED_SEED_INDEXES) expect(names).not.toContain(name)
  })

  it("drops the seed's document index, and a lookup by document reads the document/caller index instead", async () => {
    const file = freshSqlitePath()
    await migrateOnce(file)
    const check = new Database(file, { readonly: true })
    try {
      const plan = check.prepare("EXPLAIN QUERY PLAN SELECT * FROM kubun_connector_operation WHERE document_id IN (?, ?)").all("a", "b")
        .map((row) => (row as { detail: string }).detail).join("\n")
      expect(plan).toMatch(/USING INDEX idx_connector_operation_document_(caller|owner) \(document_id=\?\)/)
    } finally {
      check.close()
    }
  })

  it("three processes migrating one file at once apply each step exactly once", async () => {
    const file = freshSqlitePath()
    const startAt = String(Date.now() + 1_500)
    const runs = await Promise.all([1, 2, 3].map(() => runProcess("migrate", [file, startAt, "hold", "3"]).then(parseRun)))
    expectOverlap(runs)
    expect(runs.flatMap((run) => run.applied).sort((a, b) => a - b)).toEqual(allIds)
    const db = new Database(file, { readonly: true })
    const ledger = db.prepare("SELECT id FROM kubun_connector_schema_migrations ORDER BY id").all()
    db.close()
    expect(ledger).toEqual(allIds.map((id) => ({ id })))
  })

  it("processes racing over pending steps of an existing ledger apply each exactly once", async () => {
    const file = freshSqlitePath()
    const db = new Database(file)
    db.pragma("journal_mode = WAL")
    db.exec("CREATE TABLE kubun_connector_schema_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)")
    db.close()
    const startAt = String(Date.now() + 1_500)
    const runs = await Promise.all([1, 2, 3, 4].map(() => runProcess("migrate", [file, startAt, "slow", "4"]).then(parseRun)))
    expectOverlap(runs)
    expect(runs.flatMap((run) => run.applied).sort((a, b) => a - b)).toEqual(allIds)
  })

  it("opens a database the original store created, keeping its rows", async () => {
    const file = freshSqlitePath()
    const db = new Database(file)
    // The seed's watch table as the original store created it, with one row.
    db.exec(`CREATE TABLE kubun_connector_projection_watch (
      owner_did text NOT NULL, connector_name text NOT NULL, model text NOT NULL, account_key text NOT NULL,
      source_id text NOT NULL, document_id text NOT NULL, verified_state_digest text, observed_winner_digest text,
      verification_status text NOT NULL, verification_attempts integer NOT NULL DEFAULT 0,
      repair_generation integer NOT NULL DEFAULT 0, next_attempt_at bigint, claimed_until bigint, defer_reason text,
      version integer NOT NULL DEFAULT 0, created_at bigint NOT NULL, updated_at bigint NOT NULL,
      CONSTRAINT kubun_connector_projection_watch_pkey PRIMARY KEY (owner_did, connector_name, model, account_key, source_id))`)
    db.exec(`CREATE UNIQUE INDEX uq_connector_watch_ingress ON kubun_connector_projection_watch (owner_did, model, document_id)`)
    db.prepare(`INSERT INTO kubun_connector_projection_watch VALUES
      ('did:o', 'gcal', 'Event', 'acct', 'src', 'doc', 'd1', 'd1', 'verified', 0, 2, NULL, NULL, NULL, 7, 1700000000000, 1700000000001)`)
      .run()
    db.close()

    const store = await openConnectorStore({ url: file, readWinner: () => "d2" })
    const identity = { ownerDID: "did:o", connectorName: "gcal", model: "Event", accountKey: "acct", sourceID: "src" }
    expect(await store.getWatch(identity)).toMatchObject({ repairGeneration: 2, version: 7, createdAt: 1700000000000 })
    expect(await store.armWatch(identity, "manual", { dueAt: 1700000000500 })).toBe("opened")
    expect(await store.getWatch(identity)).toMatchObject({ repairGeneration: 3, observedWinnerDigest: "d2", version: 8 })
    await store.close()
  })

  it("keeps provider limits in their own table, and counts a scope's live leases on an index", async () => {
    const file = freshSqlitePath()
    await migrateOnce(file)
    const db = new Database(file, { readonly: true })
    try {
      const columns = db.prepare("SELECT name FROM pragma_table_info('kubun_connector_provider_limits')").all()
        .map((row) => (row as { name: string }).name)
      expect(columns).toEqual(["connector_name", "account_key", "max_in_flight", "paused_until", "pause_status", "version", "updated_at"])
      const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT count(*), min(lease_expires_at) FROM kubun_connector_operation
        WHERE state = 'attempted' AND lease_expires_at > ? AND connector_name = ? AND account_key = ?`).all(1, "gcal", "acct")
        .map((row) => (row as { detail: string }).detail).join("\n")
      expect(plan).toMatch(/USING (COVERING )?INDEX idx_connector_operation_live_leases \(connector_name=\? AND account_key=\? AND lease_expires_at>\?\)/)
    } finally {
      db.close()
    }
  })

  it("indexes the pending watches by owner for the fair batch claim, on a store migrated before it too", async () => {
    const file = freshSqlitePath()
    await migrateOnce(file)
    const db = new Database(file)
    try {
      db.exec("DROP INDEX idx_connector_watch_owner_due")
      db.prepare("DELETE FROM kubun_connector_schema_migrations WHERE id = 14").run()
    } finally {
      db.close()
    }
    expect(await migrateOnce(file)).toEqual([14])
    const check = new Database(file, { readonly: true })
    try {
      const row = check.prepare("SELECT sql FROM sqlite_master WHERE name = 'idx_connector_watch_owner_due'").get() as { sql: string }
      expect(row.sql).toMatch(/\(owner_did, next_attempt_at, connector_name, model,\s+account_key, source_id, claimed_until\)/)
      expect(row.sql).toContain("WHERE verification_status = 'pending_verification'")
    } finally {
      check.close()
    }
  })

  it("keeps stores under different prefixes apart in one file", async () => {
    const file = freshSqlitePath()
    expect(await migrateOnce(file, "app_one_")).toEqual(allIds)
    expect(await migrateOnce(file, "app_two_")).toEqual(allIds)
  })

  it("refuses a prefix that is not a plain identifier", () => {
    expect(() => tableNames("x; DROP TABLE y; --")).toThrow(/table prefix/)
    expect(() => tableNames("")).toThrow(/table prefix/)
  })
})

describe.runIf(pgAvailable)("migrations on Postgres", () => {
  it("five clients migrating one database at once apply each step exactly once", async () => {
    const url = await pgDatabaseForFile()
    const prefix = freshPrefix()
    const runs = await Promise.all(Array.from({ length: 5 }, () => timedMigration(url, prefix, holdingFirstStep(300))))
    expectOverlap(runs)
    expect(runs.flatMap((run) => run.applied).sort((a, b) => a - b)).toEqual(allIds)
    expect(await migrateOnce(url, prefix)).toEqual([])
  })

  it("counts a scope's live leases on an index range of leased rows, never the backlog", async () => {
    const url = await pgDatabaseForFile()
    const prefix = freshPrefix()
    await migrateOnce(url, prefix)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      const primary = await client.query(`SELECT indexdef FROM pg_indexes WHERE indexname = '${prefix}provider_limits_pkey'`)
      expect(primary.rows).toHaveLength(1)
      // A backlog of unleased attempted rows and a few leased ones, analyzed: on an empty table the
      // planner's costs tie between the partial indexes of attempted rows, and it may pick either.
      await client.query(`INSERT INTO ${prefix}operation (caller_did, operation_id, node_key, owner_did, connector_name, model, op,
          account_key, target, deterministic_event_id, payload_hash, reissue_intent, state, attempts, version, created_at, updated_at,
          next_attempt_at, lease_token, lease_expires_at)
        SELECT 'c', 'op-' || g, 'n-' || g, 'did:owner:' || (g % 20), 'gcal', 'm', 'create', 'acct-' || (g % 5), 't', 'e-' || g, 'h', 'null',
          'attempted', 0, 1, 0, 0, 5, CASE WHEN g % 10 = 0 THEN 'token' END, CASE WHEN g % 10 = 0 THEN 5 END
        FROM generate_series(1, 2000) AS g`)
      await client.query(`ANALYZE ${prefix}operation`)
      await client.query("BEGIN")
      await client.query("SET LOCAL enable_seqscan = off")
      const plan = await client.query(`EXPLAIN SELECT count(*), min(lease_expires_at) FROM ${prefix}operation
        WHERE state = 'attempted' AND connector_name = $1 AND account_key = $2 AND lease_expires_at > $3`, ["gcal", "acct", 1])
      const text = plan.rows.map((row: Record<string, string>) => row["QUERY PLAN"]).join("\n")
      expect(text).toContain(`${prefix}idx_connector_operation_live_leases`)
      expect(text).toMatch(/Index Cond: \(\(connector_name = .*\) AND \(account_key = .*\) AND \(lease_expires_at > .*\)\)/)
      await client.query("ROLLBACK")
    } finally {
      await client.end()
    }
  })

  it("creates the seed's tables with bigint epoch columns that read back as numbers", async () => {
    const url = await pgDatabaseForFile()
    await migrateOnce(url)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      const tables = await client.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
      const indexes = await client.query("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
      for (const name of SEED_TABLES) expect(tables.rows.map((r) => r.tablename)).toContain(name)
      for (const name of SEED_INDEXES) expect(indexes.rows.map((r) => r.indexname)).toContain(name)
      for (const name of DROPPED_SEED_INDEXES) expect(indexes.rows.map((r) => r.indexname)).not.toContain(name)
      const types = await client.query(
        `SELECT column_name, data_type FROM information_schema.columns
         WHERE table_name = 'kubun_connector_projection_watch' AND column_name IN ('next_attempt_at', 'created_at')`
      )
      expect(types.rows.map((r) => r.data_type)).toEqual(["bigint", "bigint"])
    } finally {
      await client.end()
    }
    const store = await openConnectorStore({ url, readWinner: () => "w" })
    const identity = { ownerDID: "did:o", connectorName: "c", model: "m", accountKey: "a", sourceID: "s" }
    const late = 8_000_000_000_000 // past int32 and past year 2200
    await store.runEffect(
      Effect.flatMap(
        WatchRepository,
        (watches) =>
          watches.insert({
            ...identity,
            documentID: "doc",
            verifiedStateDigest: null,
            observedWinnerDigest: null,
            verificationStatus: "pending_verification",
            verificationAttempts: 0,
            repairGeneration: 0,
            nextAttemptAt: late,
            claimedUntil: null,
            deferReason: null,
            version: 0,
            createdAt: late,
            updatedAt: late
          })
      )
    )
    const row = await store.getWatch(identity)
    expect(row?.nextAttemptAt).toBe(late)
    expect(typeof row?.createdAt).toBe("number")
    await store.close()
  })
})
