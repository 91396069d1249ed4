// The reference for the fleet drain: the very statements the store sends
// on Postgres for a batch claim (`claimDueOperations`) and for each
// lifecycle of a claimed operation (`markOperationSent`,
// `finalizeOperationAndArmWatch`), issued by hand on raw `pg` clients, with
// the store's decisions for the rows a drain meets (a due row not in doubt,
// attempts left; a finalize that arms a new watch). Anything else throws:
// the reference does not cover it, and a bench must not count it.
//
//   batch claim: BEGIN; the locked due page (FOR UPDATE SKIP LOCKED, each
//     branch in the due index's order); one UPDATE … FROM
//     jsonb_to_recordset writing every lease, each guarded by its version;
//     COMMIT (4 round trips per batch)
//   mark sent:   one guarded UPDATE … RETURNING * (1)
//   finalize:    BEGIN; the operation FOR UPDATE with the document slot's
//     advisory lock in the same statement (a MATERIALIZED CTE, the row
//     first); the document's and the identity's watches FOR UPDATE; one
//     statement of two data-modifying CTEs, the versioned write of the
//     changed columns and the watch's INSERT; COMMIT (5)
//
// The statements' texts are the store's as it sends them (captured from
// the wire); the due test reads the server's clock, as the store's does on
// Postgres, from an offset measured once.
import { randomUUID } from "node:crypto"
import pg from "pg"

const COLLATED_KEY = `caller_did COLLATE "C", operation_id COLLATE "C"`
const DUE_ORDER = `next_attempt_at, ${COLLATED_KEY}`
const WATCH_ORDER = ["owner_did", "connector_name", "model", "account_key", "source_id"].map((c) => `${c} COLLATE "C"`).join(", ")
const WATCH_COLUMNS = [
  "owner_did", "connector_name", "model", "account_key", "source_id", "document_id", "verified_state_digest",
  "observed_winner_digest", "verification_status", "verification_attempts", "repair_generation", "next_attempt_at",
  "claimed_until", "defer_reason", "version", "created_at", "updated_at"
]
/** The columns a finalize may change, in the store's order (`CHANGEABLE_COLUMNS`), as bound. */
const FINALIZE_COLUMNS = [
  "source_id", "provider_etag", "document_id", "result_entity", "state", "attempts", "next_attempt_at", "defer_reason",
  "send_marker", "lease_token", "lease_expires_at"
]

/** The statements, on the operation table `operation` and the watch table `watch`. */
export const dueDrainStatements = ({ operation, watch }) => ({
  lockDuePage: `SELECT * FROM ( SELECT * FROM (SELECT * FROM "${operation}" WHERE state = 'attempted' AND next_attempt_at IS NULL
      ORDER BY ${DUE_ORDER} LIMIT $1 FOR UPDATE SKIP LOCKED) AS unscheduled
    UNION ALL SELECT * FROM (SELECT * FROM "${operation}" WHERE state = 'attempted' AND next_attempt_at <= $2
      ORDER BY ${DUE_ORDER} LIMIT $3 FOR UPDATE SKIP LOCKED) AS scheduled ) AS due
    ORDER BY next_attempt_at NULLS FIRST, ${COLLATED_KEY} LIMIT $4`,
  writeLeases: `UPDATE ${operation} AS t SET next_attempt_at = v.next_attempt_at, lease_token = v.lease_token,
      lease_expires_at = v.lease_expires_at, version = v.version, updated_at = v.updated_at
    FROM jsonb_to_recordset($1::jsonb) AS v(caller_did text, operation_id text, expected_version integer,
      next_attempt_at bigint, lease_token text, lease_expires_at bigint, version integer, updated_at bigint)
    WHERE t.caller_did = v.caller_did AND t.operation_id = v.operation_id AND t.version = v.expected_version
    RETURNING t.caller_did, t.operation_id`,
  markSent: `UPDATE "${operation}" SET send_marker = $1, attempts = attempts + 1,
      in_doubt_since = COALESCE(in_doubt_since, CASE WHEN send_marker IS NOT NULL THEN CAST($2 AS BIGINT) END),
      version = version + 1, updated_at = $3
    WHERE caller_did = $4 AND operation_id = $5 AND state = 'attempted' AND lease_token = $6
      AND (send_marker IS NULL OR send_marker <> $7) AND attempts < $8 RETURNING *`,
  lockOperationWithSlot: `WITH locked AS MATERIALIZED (SELECT * FROM "${operation}" WHERE caller_did = $1 AND operation_id = $2 FOR UPDATE)
    SELECT locked.*, pg_advisory_xact_lock(hashtextextended(concat('[', to_json($3::text), ',', to_json(locked.owner_did::text), ',',
      to_json(locked.model::text), ',', to_json($4::text), ']'), 0)) AS slot_locked FROM locked`,
  lockWatches: `SELECT * FROM "${watch}" WHERE document_id = $1 OR (owner_did = $2 AND connector_name = $3 AND model = $4
      AND account_key = $5 AND source_id = $6) ORDER BY ${WATCH_ORDER} FOR UPDATE`,
  /**
   * The versioned write of `names` (the columns a finalize changed, then
   * version and updated_at) and the watch's insert, taking its one row from
   * the write's, in one statement: which of the two matched comes back.
   */
  commit: (names) => {
    const set = [...names, "version", "updated_at"].map((name, i) => `${name} = $${i + 1}`).join(", ")
    const n = names.length + 2
    const first = n + 4
    return `WITH operation_write AS (
      UPDATE ${operation} SET ${set} WHERE caller_did = $${n + 1} AND operation_id = $${n + 2} AND version = $${n + 3} RETURNING 1
    ), watch_write AS (
      INSERT INTO ${watch} (${WATCH_COLUMNS.join(", ")})
      SELECT ${WATCH_COLUMNS.map((_, i) => `$${first + i}`).join(", ")} FROM operation_write ON CONFLICT DO NOTHING RETURNING 1
    )
    SELECT EXISTS (SELECT FROM operation_write) AS operation, EXISTS (SELECT FROM watch_write) AS watch`
  }
})

const notCovered = (what) => new Error(`raw due drain: ${what} (the reference covers a drain's rows only)`)

/** The server's clock minus this machine's, measured as the store measures it (best of 3 round trips). */
const serverOffset = async (pool) => {
  let best
  for (let i = 0; i < 3; i++) {
    const before = Date.now()
    const { rows } = await pool.query(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now`)
    const after = Date.now()
    if (best === undefined || after - before < best.roundTrip) best = { roundTrip: after - before, offset: Number(rows[0].now) - (before + after) / 2 }
  }
  return Math.round(best.offset)
}

/**
 * The drain's steps on `pg` in the Promise API's shapes (`now`,
 * `claimDueOperations`, `markOperationSent`, `finalizeOperationAndArmWatch`,
 * `close`): a pool of `maxConnections`; each transaction on one pooled
 * client. `maxAttempts` and `leaseMs` are the store's policy (8, 30 s).
 */
export const rawPgDueDrain = async (url, tables, winnerOf, { maxConnections, maxAttempts = 8, leaseMs = 30_000 }) => {
  const pool = new pg.Pool({ connectionString: url, max: maxConnections })
  pool.on("error", () => undefined)
  const offset = await serverOffset(pool)
  const now = () => Date.now() + offset
  const texts = dueDrainStatements(tables)
  const commitTexts = new Map()
  const inTransaction = async (body) => {
    const client = await pool.connect()
    try {
      await client.query("BEGIN")
      const result = await body(client)
      await client.query("COMMIT")
      return result
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined)
      throw error
    } finally {
      client.release()
    }
  }
  return {
    now,
    claimDueOperations: ({ limit }) =>
      inTransaction(async (client) => {
        const at = now()
        const { rows } = await client.query(texts.lockDuePage, [limit, at, limit, limit])
        const leased = rows.map((row) => {
          if (row.lease_token !== null && Number(row.lease_expires_at) > at) throw notCovered("a due row under a live lease")
          if (row.send_marker !== null || row.in_doubt_since !== null) throw notCovered("a due row in doubt")
          if (Number(row.attempts) >= maxAttempts) throw notCovered("a due row out of attempts")
          const token = randomUUID()
          return { row, token, version: Number(row.version) + 1, expiresAt: at + leaseMs }
        })
        if (leased.length === 0) return { claimed: [], finished: [], corrupt: [] }
        const records = leased.map(({ row, token, version, expiresAt }) => ({
          expected_version: Number(row.version), version, updated_at: at, caller_did: row.caller_did, operation_id: row.operation_id,
          next_attempt_at: expiresAt, lease_token: token, lease_expires_at: expiresAt
        }))
        const written = await client.query(texts.writeLeases, [JSON.stringify(records)])
        if (written.rowCount !== leased.length) throw new Error("raw due drain: a lease write missed although its row was locked")
        return {
          claimed: leased.map(({ row, token, version, expiresAt }) => ({
            outcome: "claimed",
            created: false,
            operation: {
              callerDID: row.caller_did, operationID: row.operation_id, sourceID: row.source_id, documentID: row.document_id,
              version, updatedAt: at
            },
            lease: { token, expiresAt },
            reissue: null
          })),
          finished: [],
          corrupt: []
        }
      }),
    markOperationSent: async (key, { leaseToken }) => {
      const at = now()
      const { rows } = await pool.query(texts.markSent, [leaseToken, at, at, key.callerDID, key.operationID, leaseToken, leaseToken, maxAttempts])
      if (rows.length !== 1) throw notCovered("a mark whose guard did not match")
      return { outcome: "sent" }
    },
    finalizeOperationAndArmWatch: (key, input) =>
      inTransaction(async (client) => {
        const { rows: [op] } = await client.query(texts.lockOperationWithSlot, [key.callerDID, key.operationID, tables.watch, input.documentID])
        if (op === undefined || op.state !== "attempted" || op.lease_token !== input.leaseToken) return { outcome: "lease-lost" }
        const at = now()
        const identity = [op.owner_did, op.connector_name, op.model, op.account_key, input.sourceID]
        const { rows: watches } = await client.query(texts.lockWatches, [input.documentID, ...identity])
        if (watches.length > 0) throw notCovered("a finalize meeting a watch")
        const winner = await winnerOf(input.documentID)
        // The changed columns only, as the store's versioned write (values as bound: JSON encoded).
        const next = {
          source_id: input.sourceID, provider_etag: input.providerEtag ?? op.provider_etag, document_id: input.documentID,
          result_entity: input.resultEntity === undefined ? op.result_entity : JSON.stringify(input.resultEntity),
          state: "committed", attempts: Number(op.attempts), next_attempt_at: null, defer_reason: null,
          send_marker: op.send_marker ?? input.leaseToken, lease_token: null, lease_expires_at: null
        }
        const previous = { ...op, attempts: Number(op.attempts), next_attempt_at: op.next_attempt_at === null ? null : Number(op.next_attempt_at), lease_expires_at: op.lease_expires_at === null ? null : Number(op.lease_expires_at) }
        const names = FINALIZE_COLUMNS.filter((name) => next[name] !== previous[name])
        const signature = names.join(",")
        if (!commitTexts.has(signature)) commitTexts.set(signature, texts.commit(names))
        const version = Number(op.version)
        const { rows: [written] } = await client.query(commitTexts.get(signature), [
          ...names.map((name) => next[name]), version + 1, at, key.callerDID, key.operationID, version,
          ...identity, input.documentID, null, winner, "pending_verification", 0, 0, input.watchDueAt, null, null, 0, at, at
        ])
        if (written.operation !== true) throw new Error("raw due drain: the commit missed although the row was locked")
        if (written.watch !== true) throw notCovered("a watch insert that met a watch")
        return { outcome: "committed" }
      }),
    close: () => pool.end()
  }
}
