import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import { StoreSchemaTooNew } from "./StoreSchemaTooNew.js"
import { takeWriteLock } from "./SqlTransactor.js"
import type { TableNames } from "./Tables.js"
import { workTriggerStatements } from "./PgWorkSignal.js"

/** One forward-only schema step. Every statement in it is safe to run again. */
export interface Migration {
  readonly id: number
  readonly name: string
  readonly up: (sql: SqlClient, t: TableNames) => Effect.Effect<void, SqlError>
}

const run = (sql: SqlClient, statements: ReadonlyArray<string>) =>
  Effect.forEach(statements, (statement) => sql.unsafe(statement), { discard: true })

/**
 * Adds a nullable column unless it is there already. Postgres says so in
 * one statement; SQLite has no ADD COLUMN IF NOT EXISTS, so it looks first
 * (safe under `migrate`'s lock, which a second process waits for).
 */
const addColumn = (sql: SqlClient, table: string, column: string, type: string): Effect.Effect<void, SqlError> =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql.unsafe(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column} ${type}`)),
    orElse: () =>
      Effect.flatMap(
        sql`SELECT 1 FROM pragma_table_info(${table}) WHERE name = ${column}`,
        (found) => found.length > 0 ? Effect.void : Effect.asVoid(sql.unsafe(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`))
      )
  })

/** True when `table` has a column named `column` (in the current schema on Postgres). */
const hasColumn = (sql: SqlClient, table: string, column: string): Effect.Effect<boolean, SqlError> =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () =>
        sql`SELECT 1 FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = ${table} AND column_name = ${column}`,
      orElse: () => sql`SELECT 1 FROM pragma_table_info(${table}) WHERE name = ${column}`
    }),
    (found) => found.length > 0
  )

/**
 * Rebuilds the pending-auth table this project's earlier migrations created
 * (`connector_name`, `redirect_uri`, nullable `scopes`) as the original
 * store's, moving every row: `connector_name` becomes `provider`,
 * `redirect_uri` `redirect_url`, a null `scopes` `'[]'`, and the wrappable
 * DIDs, which that layout never kept, are null. A table that already has
 * the original's columns (a database the original wrote, or this step
 * already run) is left exactly as it is. It runs inside `migrate`'s
 * transaction and lock: a failure (the row counts differ, a name is taken)
 * rolls everything back, and a second process finds the step applied.
 */
const movePendingAuthToOriginalColumns = (sql: SqlClient, t: TableNames): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    if (!(yield* hasColumn(sql, t.pendingAuth, "connector_name"))) return
    const table = t.pendingAuth
    const old = `${table}_old`
    yield* sql.unsafe(`ALTER TABLE ${table} RENAME TO ${old}`)
    // Postgres names the primary key's index after the table; it must move aside for the new table's.
    yield* sql.onDialectOrElse({
      pg: () => Effect.asVoid(sql.unsafe(`ALTER INDEX IF EXISTS ${table}_pkey RENAME TO ${old}_pkey`)),
      orElse: () => Effect.void
    })
    yield* run(sql, [
      `CREATE TABLE ${table} (
        state text NOT NULL,
        code_verifier text NOT NULL,
        provider text NOT NULL,
        owner_did text NOT NULL,
        owner_wrappable_did text,
        controller_wrappable_did text,
        created_at bigint NOT NULL,
        redirect_url text NOT NULL,
        scopes text NOT NULL,
        expires_at bigint NOT NULL,
        CONSTRAINT ${table}_pkey PRIMARY KEY (state)
      )`,
      `INSERT INTO ${table} (
        state, code_verifier, provider, owner_did, owner_wrappable_did, controller_wrappable_did,
        created_at, redirect_url, scopes, expires_at
      ) SELECT state, code_verifier, connector_name, owner_did, NULL, NULL,
        created_at, redirect_uri, COALESCE(scopes, '[]'), expires_at FROM ${old}`
    ])
    const counts = yield* sql<{ moved: unknown; kept: unknown }>`SELECT
      (SELECT count(*) FROM ${sql(table)}) AS moved, (SELECT count(*) FROM ${sql(old)}) AS kept`
    if (Number(counts[0]?.moved) !== Number(counts[0]?.kept)) {
      return yield* Effect.die(new Error(`migration 8: moved ${String(counts[0]?.moved)} of ${String(counts[0]?.kept)} pending authorizations`))
    }
    yield* run(sql, [
      `DROP TABLE ${old}`,
      `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_pending_auth_expires")} ON ${table} (expires_at)`
    ])
  })

/**
 * The schema. Table, column and index names, nullability and keys are the
 * seed's (so a database the original store wrote opens unchanged); indexes
 * marked "project" serve this project's own queries.
 */
export const migrations: ReadonlyArray<Migration> = [
  {
    id: 1,
    name: "seed_tables",
    up: (sql, t) =>
      run(sql, [
        `CREATE TABLE IF NOT EXISTS ${t.syncState} (
          connector_name text NOT NULL,
          owner_did text NOT NULL,
          checkpoint text,
          last_synced_at text NOT NULL,
          entity_count integer NOT NULL DEFAULT 0,
          status text NOT NULL,
          error text,
          lease_expires_at bigint,
          recovery text,
          version integer NOT NULL DEFAULT 0,
          incarnation text,
          CONSTRAINT ${t.syncState}_pkey PRIMARY KEY (connector_name, owner_did)
        )`,
        `CREATE TABLE IF NOT EXISTS ${t.pendingAuth} (
          state text NOT NULL,
          connector_name text NOT NULL,
          owner_did text NOT NULL,
          code_verifier text NOT NULL,
          redirect_uri text NOT NULL,
          scopes text,
          created_at bigint NOT NULL,
          expires_at bigint NOT NULL,
          CONSTRAINT ${t.pendingAuth}_pkey PRIMARY KEY (state)
        )`,
        `CREATE TABLE IF NOT EXISTS ${t.operation} (
          caller_did text NOT NULL,
          operation_id text NOT NULL,
          node_key text NOT NULL,
          owner_did text NOT NULL,
          connector_name text NOT NULL,
          model text NOT NULL,
          op text NOT NULL,
          account_key text NOT NULL,
          target text NOT NULL,
          source_id text,
          deterministic_event_id text NOT NULL,
          payload_hash text NOT NULL,
          reissue_intent text NOT NULL,
          provider_etag text,
          document_id text,
          result_entity text,
          state text NOT NULL,
          attempts integer NOT NULL DEFAULT 0,
          next_attempt_at bigint,
          defer_reason text,
          send_marker text,
          last_kind text,
          last_http_status integer,
          version integer NOT NULL DEFAULT 0,
          incarnation text,
          lease_token text,
          lease_expires_at bigint,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          CONSTRAINT ${t.operation}_pkey PRIMARY KEY (caller_did, operation_id)
        )`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${t.index("uq_connector_operation_node_key")} ON ${t.operation} (node_key)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_document")} ON ${t.operation} (document_id)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_owner")} ON ${t.operation} (owner_did)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_state_updated")} ON ${t.operation} (state, updated_at)`,
        `CREATE TABLE IF NOT EXISTS ${t.projectionWatch} (
          owner_did text NOT NULL,
          connector_name text NOT NULL,
          model text NOT NULL,
          account_key text NOT NULL,
          source_id text NOT NULL,
          document_id text NOT NULL,
          verified_state_digest text,
          observed_winner_digest text,
          verification_status text NOT NULL,
          verification_attempts integer NOT NULL DEFAULT 0,
          repair_generation integer NOT NULL DEFAULT 0,
          next_attempt_at bigint,
          claimed_until bigint,
          defer_reason text,
          version integer NOT NULL DEFAULT 0,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          CONSTRAINT ${t.projectionWatch}_pkey PRIMARY KEY (owner_did, connector_name, model, account_key, source_id)
        )`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${t.index("uq_connector_watch_ingress")} ON ${t.projectionWatch} (owner_did, model, document_id)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_watch_document")} ON ${t.projectionWatch} (document_id)`
      ])
  },
  {
    id: 2,
    name: "due_sweep_indexes",
    // Project: the due sweep reads attempted operations by next attempt and
    // watches by status and next attempt; without these both scan the table.
    up: (sql, t) =>
      run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_state_next")} ON ${t.operation} (state, next_attempt_at)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_watch_status_next")} ON ${t.projectionWatch} (verification_status, next_attempt_at)`
      ])
  },
  {
    id: 3,
    name: "sync_lease_token",
    // Project: the sync lease is fenced by a random token, so only its holder
    // can renew or release it (the seed's table has only lease_expires_at; a
    // seed row's null token just means no fenced lease). The pending-auth
    // index serves deleteExpiredPendingAuth, which reads by expiry.
    up: (sql, t) =>
      Effect.zipRight(
        addColumn(sql, t.syncState, "lease_token", "text"),
        run(sql, [
          `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_pending_auth_expires")} ON ${t.pendingAuth} (expires_at)`
        ])
      )
  },
  {
    id: 5,
    name: "relist_sweep",
    // Project: the relist sweep's own tables (the seed names its API, not its
    // schema; docs/relist-sweep.md gives the design). The partial unique index
    // is the store's own guarantee of at most one current run per scope. On
    // Postgres, ids compare in "C" (byte) order, so keyset pages come out in
    // the same order as on SQLite and in memory, straight from the indexes.
    up: (sql, t) => {
      const ordered = sql.onDialectOrElse({ pg: () => `text COLLATE "C"`, orElse: () => "text" })
      return run(sql, [
        `CREATE TABLE IF NOT EXISTS ${t.relistRun} (
          run_id ${ordered} NOT NULL,
          owner_did text NOT NULL,
          connector_name text NOT NULL,
          model text NOT NULL,
          account_key text NOT NULL,
          state text NOT NULL,
          page_cursor text,
          pages_committed integer NOT NULL DEFAULT 0,
          receipt_count integer,
          tracked_count integer,
          deletion_count integer,
          divergence_count integer,
          version integer NOT NULL DEFAULT 0,
          started_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          completed_at bigint,
          ended_at bigint,
          CONSTRAINT ${t.relistRun}_pkey PRIMARY KEY (run_id)
        )`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${t.index("uq_connector_relist_run_current")} ON ${t.relistRun}
          (owner_did, connector_name, model, account_key) WHERE state IN ('started', 'listing', 'complete')`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_relist_run_state_updated")} ON ${t.relistRun} (state, updated_at)`,
        `CREATE TABLE IF NOT EXISTS ${t.relistReceipt} (
          run_id ${ordered} NOT NULL,
          source_id ${ordered} NOT NULL,
          digest text,
          seen_at bigint NOT NULL,
          CONSTRAINT ${t.relistReceipt}_pkey PRIMARY KEY (run_id, source_id)
        )`,
        `CREATE TABLE IF NOT EXISTS ${t.relistCandidate} (
          run_id ${ordered} NOT NULL,
          source_id ${ordered} NOT NULL,
          owner_did text NOT NULL,
          connector_name text NOT NULL,
          model text NOT NULL,
          account_key text NOT NULL,
          document_id text NOT NULL,
          kind text NOT NULL,
          provider_digest text,
          local_digest text,
          status text NOT NULL,
          outcome text,
          apply_attempts integer NOT NULL DEFAULT 0,
          last_error_kind text,
          last_error_message text,
          version integer NOT NULL DEFAULT 0,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          CONSTRAINT ${t.relistCandidate}_pkey PRIMARY KEY (owner_did, connector_name, model, account_key, source_id)
        )`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_relist_candidate_run")} ON ${t.relistCandidate} (run_id, source_id)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_relist_candidate_given_up")} ON ${t.relistCandidate}
          (owner_did, connector_name, model, account_key, source_id) WHERE status = 'given_up'`
      ])
    }
  },
  {
    id: 6,
    name: "operation_in_doubt",
    // Project: the durable in-doubt fact (docs/operations.md). A row that
    // holds a send marker and is not committed was left by a run whose
    // request may have landed: it is in doubt from its last write on. Both
    // statements are idempotent (a marked row already in doubt keeps its time).
    up: (sql, t) =>
      Effect.zipRight(
        addColumn(sql, t.operation, "in_doubt_since", "bigint"),
        run(sql, [
          `UPDATE ${t.operation} SET in_doubt_since = updated_at
            WHERE send_marker IS NOT NULL AND in_doubt_since IS NULL AND state <> 'committed'`
        ])
      )
  },
  {
    id: 7,
    name: "retention_partition_indexes",
    // Project: retention's keep rule asks, per candidate, "is there a newer
    // committed/finished row of my caller (owner) for my document?". These
    // indexes make each probe a seek into that partition from the
    // candidate's created_at on, and let the candidates be read oldest
    // updated_at first with the scan stopping at the batch limit, so a batch
    // costs O(limit · log n), not a scan of every finished row per candidate
    // (docs/performance.md). CREATE INDEX IF NOT EXISTS is safe to run twice
    // and, under migrate's lock, from concurrent processes; a database that
    // already has an index of that name keeps it.
    up: (sql, t) => {
      const ordered = (column: string) =>
        sql.onDialectOrElse({ pg: () => `${column} COLLATE "C"`, orElse: () => column })
      return run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_document_caller")}
          ON ${t.operation} (document_id, caller_did, state, created_at)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_document_owner")}
          ON ${t.operation} (document_id, owner_did, state, created_at)`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_updated")}
          ON ${t.operation} (updated_at, ${ordered("caller_did")}, ${ordered("operation_id")})`
      ])
    }
  },
  {
    id: 8,
    name: "pending_auth_original_columns",
    // The original store's pending-auth table: its columns and record (see
    // movePendingAuthToOriginalColumns). Earlier releases of this project
    // created the table with columns of their own.
    up: movePendingAuthToOriginalColumns
  },
  {
    id: 9,
    name: "relist_baseline",
    // Project: what a relist run judges is decided by the store's own write
    // counter, not by clocks. At its start a run records every watch of its
    // scope with the row's version and creation time; at completion only
    // watches unchanged since then are judged, and the entries of derived
    // candidates stay for the re-derivation at every later step. CREATE ...
    // IF NOT EXISTS is safe twice and, under migrate's lock, from two
    // processes. A run that started before this step has no baseline, so it
    // judges nothing: it yields no candidates, and the next run does.
    up: (sql, t) => {
      const ordered = sql.onDialectOrElse({ pg: () => `text COLLATE "C"`, orElse: () => "text" })
      return run(sql, [
        `CREATE TABLE IF NOT EXISTS ${t.relistBaseline} (
          run_id ${ordered} NOT NULL,
          source_id ${ordered} NOT NULL,
          document_id text NOT NULL,
          watch_version integer NOT NULL,
          watch_created_at bigint NOT NULL,
          CONSTRAINT ${t.relistBaseline}_pkey PRIMARY KEY (run_id, source_id)
        )`
      ])
    }
  },
  {
    id: 10,
    name: "due_page_indexes",
    // Project: the paginated due sweep (listDueWork) reads a page in the due
    // order, next attempt then key, from its cursor. These indexes carry
    // that whole order after the state (status), ids in byte order as on
    // every adapter, so a page is one index range of `limit` rows with no
    // sort, whatever the backlog. They extend migration 2's indexes, which
    // go: every query those served is served by these as well. Safe to run
    // twice and, under migrate's lock, from two processes.
    up: (sql, t) => {
      const ordered = (column: string) =>
        sql.onDialectOrElse({ pg: () => `${column} COLLATE "C"`, orElse: () => column })
      return run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_state_next_key")}
          ON ${t.operation} (state, next_attempt_at, ${ordered("caller_did")}, ${ordered("operation_id")})`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_watch_status_next_identity")}
          ON ${t.projectionWatch} (verification_status, next_attempt_at, ${ordered("owner_did")}, ${ordered("connector_name")},
            ${ordered("model")}, ${ordered("account_key")}, ${ordered("source_id")})`,
        `DROP INDEX IF EXISTS ${t.index("idx_connector_operation_state_next")}`,
        `DROP INDEX IF EXISTS ${t.index("idx_connector_watch_status_next")}`
      ])
    }
  },
  {
    id: 11,
    name: "work_notifications",
    // Project: on Postgres, a commit that leaves work runnable notifies the
    // tables' channel, so a waiting worker (awaitWork) wakes at once instead
    // of at its next sweep (see PgWorkSignal). SQLite and memory notice
    // their own process's commits without any schema. Safe to run twice.
    up: (sql, t) => sql.onDialectOrElse({ pg: () => run(sql, workTriggerStatements(t)), orElse: () => Effect.void })
  },
  {
    id: 12,
    name: "provider_limits",
    // Project: pauses and concurrency caps per provider account (or whole
    // connector, account_key ''), kept in the database so every runner of
    // every process honours them. The partial index makes "the live leases
    // of a scope" an index range of attempted, leased rows: the unleased
    // backlog is not in it. Safe to run twice and, under migrate's lock,
    // from two processes.
    up: (sql, t) => {
      const ordered = sql.onDialectOrElse({ pg: () => `text COLLATE "C"`, orElse: () => "text" })
      return run(sql, [
        `CREATE TABLE IF NOT EXISTS ${t.providerLimits} (
          connector_name ${ordered} NOT NULL,
          account_key ${ordered} NOT NULL,
          max_in_flight integer,
          paused_until bigint,
          pause_status integer,
          version integer NOT NULL,
          updated_at bigint NOT NULL,
          CONSTRAINT ${t.providerLimits}_pkey PRIMARY KEY (connector_name, account_key)
        )`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_live_leases")}
          ON ${t.operation} (connector_name, account_key, lease_expires_at)
          WHERE state = 'attempted' AND lease_expires_at IS NOT NULL`
      ])
    }
  },
  {
    id: 13,
    name: "owner_fair_due_indexes",
    // Project: a batch claim spreads over the owners with due work (every
    // owner's oldest due row before any owner's second). Its page walks the
    // distinct owners of the attempted operations a few index probes each and
    // reads each visited owner's first due rows, in the due order, as one
    // range of this index: the cost is bounded by the batch's limit,
    // whatever one owner's backlog or the number of owners. Partial on the
    // state, so finished operations are not in it. An owner's rows are in
    // the due order (unscheduled first; SQLite puts nulls first already), so
    // its first entry says whether it has due work. Safe to run twice and,
    // under migrate's lock, from two processes.
    up: (sql, t) => {
      const ordered = (column: string) =>
        sql.onDialectOrElse({ pg: () => `${column} COLLATE "C"`, orElse: () => column })
      const nullsFirst = sql.onDialectOrElse({ pg: () => "next_attempt_at NULLS FIRST", orElse: () => "next_attempt_at" })
      return run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_owner_due")}
          ON ${t.operation} (${ordered("owner_did")}, ${nullsFirst}, ${ordered("caller_did")}, ${ordered("operation_id")})
          WHERE state = 'attempted'`
      ])
    }
  },
  {
    id: 14,
    name: "owner_fair_watch_index",
    // Project: the batch claim of watches spreads over the owners as the
    // operations' does (migration 13). Its page walks the distinct owners
    // of the pending watches a few index probes each and reads each visited
    // owner's first claimable watches, in the due order, as one range of
    // this index: the cost is bounded by the batch's limit, whatever one
    // owner's backlog or the number of owners. Partial on the status, so
    // settled watches are not in it; the claim's end rides last, so the
    // live-claim test needs no row. Safe to run twice and, under migrate's
    // lock, from two processes.
    up: (sql, t) => {
      const ordered = (column: string) =>
        sql.onDialectOrElse({ pg: () => `${column} COLLATE "C"`, orElse: () => column })
      return run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_watch_owner_due")}
          ON ${t.projectionWatch} (${ordered("owner_did")}, next_attempt_at, ${ordered("connector_name")}, ${ordered("model")},
            ${ordered("account_key")}, ${ordered("source_id")}, claimed_until)
          WHERE verification_status = 'pending_verification'`
      ])
    }
  },
  {
    id: 15,
    name: "drop_operation_document_index",
    // Project: one index fewer for every operation write to maintain. A
    // lifecycle's commit changes state and updated_at, so it is never a HOT
    // update, and each of its writes adds an entry to every index of the
    // table. The seed's index of document_id alone is covered: migration
    // 7's (document_id, caller_did, …) and (document_id, owner_did, …) lead
    // with that column and serve every lookup by document, so the seed's
    // goes, 2 of a lifecycle's 25 index entries (docs/performance.md). Safe
    // to run twice.
    up: (sql, t) => run(sql, [`DROP INDEX IF EXISTS ${t.index("idx_connector_operation_document")}`])
  },
  {
    id: 16,
    name: "watch_ingress_by_document",
    // Project: the seed's unique ingress index, (owner_did, model,
    // document_id), is built again with the document first, under its name:
    // the same constraint (one watch per owner, model and document), and
    // (document_id) alone then leads it, so the seed's index of document_id
    // goes, one index entry fewer per watch write. It also keeps every
    // lookup of a watch by its identity on the primary key. With no
    // statistics (a table never analyzed: autovacuum off, or not yet run)
    // Postgres's planner costs a probe of the old index's (owner_did,
    // model) prefix below the primary key's five columns and took it for
    // identity lookups, the finalize's arm targets among them: a read of
    // every watch of the owner's model per lifecycle (docs/performance.md).
    // No statement reads watches by owner and model without the document
    // (the primary key, owner first, serves an owner's watches). Under
    // migrate's lock and in its transaction: the table is locked from the
    // drop on, so no write goes unchecked. Safe to run twice (built again).
    up: (sql, t) =>
      run(sql, [
        `DROP INDEX IF EXISTS ${t.index("uq_connector_watch_ingress")}`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${t.index("uq_connector_watch_ingress")} ON ${t.projectionWatch} (document_id, owner_did, model)`,
        `DROP INDEX IF EXISTS ${t.index("idx_connector_watch_document")}`
      ])
  },
  {
    id: 17,
    name: "owner_scope_due_index",
    // Project: the operations' owner index (migration 13) holds an owner's
    // rows of every provider account in one due order, so a batch that
    // passes over a paused or full account read past all of that account's
    // due rows to reach the owner's others: linear in the very backlog the
    // limit holds back. With the account in the index, such a batch walks an
    // owner's accounts one probe each and reads the due rows of the accounts
    // it may take as ranges of their own; a passed-over account costs one
    // probe, whatever its backlog. Partial on the state, as migration 13's.
    // Safe to run twice and, under migrate's lock, from two processes.
    up: (sql, t) => {
      const ordered = (column: string) =>
        sql.onDialectOrElse({ pg: () => `${column} COLLATE "C"`, orElse: () => column })
      const nullsFirst = sql.onDialectOrElse({ pg: () => "next_attempt_at NULLS FIRST", orElse: () => "next_attempt_at" })
      return run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_owner_scope_due")}
          ON ${t.operation} (${ordered("owner_did")}, ${ordered("connector_name")}, ${ordered("account_key")}, ${nullsFirst},
            ${ordered("caller_did")}, ${ordered("operation_id")})
          WHERE state = 'attempted'`
      ])
    }
  },
  {
    id: 18,
    name: "server_history",
    // Project: one row of which server acknowledged the store's writes (Postgres's system identifier and timeline, or
    // SQLite's generation) and of the last failover or restore the store noticed, with its window of doubt: a store that
    // opens on a promoted replica, or on an older copy of its file, hands out claims in doubt instead of sending blind.
    // The row is written at the first open after this step, never by the step itself. Safe to run twice.
    up: (sql, t) =>
      run(sql, [
        `CREATE TABLE IF NOT EXISTS ${t.serverHistory} (
          id integer PRIMARY KEY,
          system_identifier text,
          timeline bigint,
          generation bigint,
          recorded_at bigint NOT NULL,
          noticed_at bigint,
          doubt_until bigint,
          lookback_from bigint,
          noticed_from text,
          noticed_to text,
          doubtful_claims bigint NOT NULL DEFAULT 0,
          ended_by text,
          ended_at bigint
        )`
      ])
  },
  {
    id: 19,
    name: "operator_action",
    // Project: the audit log of what people did through an operator page
    // (who, what, which rows, the store's answer), appended and read newest
    // first; the index serves that order's keyset pages. The targets are a
    // JSON array of formatted identities, kept as text on both dialects.
    // And the indexes the operator's pages read in their own order: an
    // operation page (newest first by created_at, caller, id) of every row,
    // of a state, of an owner, or in doubt, and a watch page of a status
    // (by identity), each a range of its index read from its keyset
    // position, where before a page sorted every matching row first (1.4 s
    // for a page of a million operations on SQLite). The keys never change
    // but for the state and the doubt: an operation's write touches them
    // only when it ends or falls in doubt.
    up: (sql, t) => {
      const id = sql.onDialectOrElse({ pg: () => `action_id COLLATE "C"`, orElse: () => "action_id" })
      const ordered = (column: string) => sql.onDialectOrElse({ pg: () => `${column} COLLATE "C"`, orElse: () => column })
      const newest = `created_at, ${ordered("caller_did")}, ${ordered("operation_id")}`
      const identity = ["owner_did", "connector_name", "model", "account_key", "source_id"].map(ordered).join(", ")
      return run(sql, [
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_created")} ON ${t.operation} (${newest})`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_state_created")} ON ${t.operation} (state, ${newest})`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_owner_created")} ON ${t.operation} (${ordered("owner_did")}, ${newest})`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operation_in_doubt_created")} ON ${t.operation} (${newest})
          WHERE (state <> 'committed' AND (in_doubt_since IS NOT NULL OR send_marker IS NOT NULL))`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_watch_status_identity")} ON ${t.projectionWatch} (verification_status, ${identity})`,
        `CREATE TABLE IF NOT EXISTS ${t.operatorAction} (
          action_id text NOT NULL PRIMARY KEY,
          at bigint NOT NULL,
          actor text NOT NULL,
          action text NOT NULL,
          targets text NOT NULL,
          outcome text NOT NULL,
          answer text NOT NULL
        )`,
        `CREATE INDEX IF NOT EXISTS ${t.index("idx_connector_operator_action_at")} ON ${t.operatorAction} (at DESC, ${id} DESC)`
      ])
    }
  }
]

/**
 * `StoreSchemaTooNew` when `applied` holds a migration id that neither the
 * project's `migrations` nor `steps` knows, else undefined.
 */
const schemaTooNew = (
  applied: ReadonlyArray<number>,
  t: TableNames,
  steps: ReadonlyArray<Migration> = migrations
): StoreSchemaTooNew | undefined => {
  const known = new Set([...migrations, ...steps].map((step) => step.id))
  const unknown = applied.filter((id) => !known.has(id)).sort((a, b) => a - b)
  if (unknown.length === 0) return undefined
  return new StoreSchemaTooNew({
    tablePrefix: t.prefix,
    databaseVersion: Math.max(...applied),
    codeVersion: Math.max(...known),
    unknown
  })
}

/**
 * Brings the schema up to date, forward only. Runs in one transaction under
 * a lock (an advisory lock on Postgres, the write lock on SQLite), so two
 * processes migrating at once apply each step exactly once, and running it
 * again is harmless. Returns the ids it applied. `steps` defaults to the
 * project's migrations. A schema that carries a migration this version
 * does not know (a newer version migrated it) fails with
 * `StoreSchemaTooNew`, changing nothing.
 */
export const migrate = (
  sql: SqlClient,
  t: TableNames,
  steps: ReadonlyArray<Migration> = migrations
): Effect.Effect<ReadonlyArray<number>, SqlError | StoreSchemaTooNew> => {
  const createLedger = sql.unsafe(
    `CREATE TABLE IF NOT EXISTS ${t.migrations} (id integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`
  )
  const applyPending = Effect.gen(function*() {
    const ids = (yield* sql<{ id: unknown }>`SELECT id FROM ${sql(t.migrations)}`).map((row) => Number(row.id))
    const tooNew = schemaTooNew(ids, t, steps)
    if (tooNew !== undefined) return yield* tooNew
    const applied = new Set(ids)
    const done: Array<number> = []
    for (const migration of steps) {
      if (applied.has(migration.id)) continue
      yield* migration.up(sql, t)
      const now = yield* Clock.currentTimeMillis
      yield* sql`INSERT INTO ${sql(t.migrations)} (id, name, applied_at) VALUES (${migration.id}, ${migration.name}, ${now})`
      done.push(migration.id)
    }
    return done
  })
  return sql.onDialectOrElse({
    // Concurrent CREATE TABLE IF NOT EXISTS can collide on Postgres: the
    // advisory lock comes first, the ledger is created under it.
    pg: () =>
      sql.withTransaction(
        sql`SELECT pg_advisory_xact_lock(hashtext(${t.migrations}))`.pipe(
          Effect.zipRight(createLedger),
          Effect.zipRight(applyPending)
        )
      ),
    // On SQLite the write lock must be the transaction's first statement
    // (see makeSqlTransactor), so the ledger is created before it, alone.
    orElse: () =>
      Effect.zipRight(
        createLedger,
        sql.withTransaction(Effect.zipRight(takeWriteLock(sql, t.migrations), applyPending))
      )
  })
}
