// Bulk rows for the retention bench: committed operations, one owner, one
// caller, `perDocument` per document, built in one INSERT … SELECT over a
// generated series (a recursive CTE on SQLite, generate_series on Postgres).
// Every row is collectable but the newest of its document.

/** The one owner and caller every bulk row belongs to. */
export const BULK_OWNER = "did:bench:owner"
export const BULK_CALLER = "did:bench:caller"

const columns = `caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target,
  source_id, deterministic_event_id, payload_hash, reissue_intent, document_id, state, attempts, version,
  created_at, updated_at`

const selectFrom = (n, perDocument) => `SELECT '${BULK_CALLER}', 'op-' || ${n}, 'node-' || ${n}, '${BULK_OWNER}',
  'bench-connector', 'Event', 'update', 'bench@example.com', 'calendars/primary', 'source-' || ${n},
  'event-' || ${n}, 'hash-' || ${n}, '{"kind":"conditional-update","ifMatch":"etag-0"}', 'document-' || (${n} / ${perDocument}), 'committed', 1, 3,
  ${n}, ${n}`

/** The statement that inserts operations 1 … count on SQLite (better-sqlite3's `exec`). */
export const sqliteBulkInsert = (table, count, perDocument) =>
  `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${count})
   INSERT INTO ${table} (${columns}) ${selectFrom("n", perDocument)} FROM s`

/** The statement that inserts operations 1 … count on Postgres. */
export const pgBulkInsert = (table, count, perDocument) =>
  `INSERT INTO ${table} (${columns}) ${selectFrom("n", perDocument)} FROM generate_series(1, ${count}) AS n`
