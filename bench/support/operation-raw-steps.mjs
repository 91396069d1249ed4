// The reference: the operation lifecycle hand-written on the raw drivers,
// with the store's semantics. A new key's claim is one INSERT … ON CONFLICT
// DO NOTHING of its own; mark-sent and finalize are one transaction each,
// the lock taken before the operation is read (SQLite: BEGIN IMMEDIATE;
// Postgres: SELECT … FOR UPDATE), the lease holder checked, writes
// conditioned on the version read. Finalize also reads the document's
// watches (to supersede), locks the watch's identity, reads the winner and
// inserts or reopens the watch, in the same transaction. Only the columns a
// step changes are written, as one would by hand.
import { randomUUID } from "node:crypto"
import Database from "better-sqlite3"
import pg from "pg"

const OPERATION_COLUMNS = [
  "caller_did", "operation_id", "node_key", "owner_did", "connector_name", "model", "op", "account_key", "target",
  "source_id", "deterministic_event_id", "payload_hash", "reissue_intent", "provider_etag", "document_id",
  "result_entity", "state", "attempts", "next_attempt_at", "defer_reason", "send_marker", "last_kind",
  "last_http_status", "version", "incarnation", "lease_token", "lease_expires_at", "created_at", "updated_at"
]
const WATCH_COLUMNS = [
  "owner_did", "connector_name", "model", "account_key", "source_id", "document_id", "verified_state_digest",
  "observed_winner_digest", "verification_status", "verification_attempts", "repair_generation", "next_attempt_at",
  "claimed_until", "defer_reason", "version", "created_at", "updated_at"
]
const BY_KEY = "caller_did = ? AND operation_id = ?"
const BY_IDENTITY = "owner_did = ? AND connector_name = ? AND model = ? AND account_key = ? AND source_id = ?"
const marks = (n) => Array(n).fill("?").join(", ")

/** The statements over the two tables, `?` parameters in the order they appear. */
export const statements = ({ operation, watch }) => ({
  claim: `INSERT INTO ${operation} (${OPERATION_COLUMNS.join(", ")}) VALUES (${marks(OPERATION_COLUMNS.length)})
    ON CONFLICT DO NOTHING RETURNING version`,
  selectOperation: `SELECT * FROM ${operation} WHERE ${BY_KEY}`,
  markSent: `UPDATE ${operation} SET send_marker = ?, attempts = ?, version = ?, updated_at = ? WHERE ${BY_KEY} AND version = ?`,
  commit: `UPDATE ${operation} SET state = 'committed', source_id = ?, document_id = ?, provider_etag = ?, result_entity = ?,
      attempts = ?, send_marker = ?, lease_token = NULL, lease_expires_at = NULL, next_attempt_at = NULL,
      defer_reason = NULL, version = ?, updated_at = ?
    WHERE ${BY_KEY} AND version = ?`,
  watchesOfDocument: `SELECT * FROM ${watch} WHERE document_id = ?`,
  selectWatch: `SELECT * FROM ${watch} WHERE ${BY_IDENTITY}`,
  deleteWatch: `DELETE FROM ${watch} WHERE ${BY_IDENTITY} AND version = ?`,
  insertWatch: `INSERT INTO ${watch} (${WATCH_COLUMNS.join(", ")}) VALUES (${marks(WATCH_COLUMNS.length)})`,
  openWatch: `UPDATE ${watch} SET document_id = ?, repair_generation = ?, verification_attempts = 0,
      verification_status = 'pending_verification', observed_winner_digest = ?, next_attempt_at = ?,
      claimed_until = NULL, defer_reason = NULL, version = ?, updated_at = ?
    WHERE ${BY_IDENTITY} AND version = ?`
})

export const identityOf = (op, sourceID) => [op.owner_did, op.connector_name, op.model, op.account_key, sourceID]
export const missed = (step) => new Error(`raw ${step}: a conditioned write missed although the row was locked`)

/** The claim's row, as the column list orders it. */
export const claimRow = (input, now) => {
  const lease = randomUUID()
  const expires = now + input.leaseMs
  return {
    lease,
    params: [
      input.callerDID, input.operationID, randomUUID(), input.ownerDID, input.connectorName, input.model, input.op,
      input.accountKey, input.target, input.sourceID ?? null, input.deterministicEventID, input.payloadHash,
      JSON.stringify(input.reissueIntent), input.providerEtag ?? null, input.documentID ?? null, null, "attempted", 0,
      expires, null, null, null, null, 0, randomUUID(), lease, expires, now, now
    ]
  }
}

/**
 * The lifecycle's steps over a `run(name, params)` → rows function that
 * executes inside the current transaction, with the same decisions on both
 * drivers. `tx(body)` runs `body` in one locked transaction. `winnerOf`
 * answers a winner or a Promise of one (an asynchronous reader, awaited
 * inside the transaction).
 */
const lifecycleSteps = (run, tx, winnerOf) => ({
  claim: async (input) => {
    const { lease, params } = claimRow(input, Date.now())
    const inserted = await run("claim", params)
    if (inserted.length !== 1) throw new Error("raw claim: the bench's keys are new; replays are not in the reference")
    return { outcome: "claimed", lease: { token: lease } }
  },
  markSent: (key, { leaseToken }) =>
    tx(async () => {
      const [op] = await run("selectOperation", [key.callerDID, key.operationID], true)
      if (op === undefined || op.state !== "attempted" || op.lease_token !== leaseToken) return { outcome: "lease-lost" }
      if (op.send_marker === leaseToken) return { outcome: "already-sent" }
      const version = Number(op.version)
      const written = await run("markSent", [leaseToken, Number(op.attempts) + 1, version + 1, Date.now(), key.callerDID, key.operationID, version])
      if (written.changes !== 1) throw missed("markSent")
      return { outcome: "sent" }
    }),
  finalize: (key, input) =>
    tx(async () => {
      const [op] = await run("selectOperation", [key.callerDID, key.operationID], true)
      if (op === undefined || op.state !== "attempted" || op.lease_token !== input.leaseToken) return { outcome: "lease-lost" }
      const now = Date.now()
      const identity = identityOf(op, input.sourceID)
      const others = (await run("watchesOfDocument", [input.documentID])).filter((w) =>
        w.owner_did === op.owner_did && w.model === op.model && w.source_id !== input.sourceID)
      const [existing] = await run("selectWatch", identity, true)
      const read = winnerOf(input.documentID)
      const winner = read instanceof Promise ? await read : read
      const version = Number(op.version)
      const attempts = op.send_marker === input.leaseToken ? Number(op.attempts) : Number(op.attempts) + 1
      const committed = await run("commit", [
        input.sourceID, input.documentID, input.providerEtag ?? null, JSON.stringify(input.resultEntity ?? null), attempts,
        input.leaseToken, version + 1, now, key.callerDID, key.operationID, version
      ])
      if (committed.changes !== 1) throw missed("commit")
      for (const other of others) {
        const gone = await run("deleteWatch", [...identityOf(other, other.source_id), Number(other.version)])
        if (gone.changes !== 1) throw missed("supersede")
      }
      const armed = existing === undefined
        ? await run("insertWatch", [...identity, input.documentID, null, winner, "pending_verification", 0, 0, input.watchDueAt, null, null, 0, now, now])
        : await run("openWatch", [
          input.documentID, Number(existing.repair_generation) + 1, winner, input.watchDueAt, Number(existing.version) + 1, now,
          ...identity, Number(existing.version)
        ])
      if (armed.changes !== 1) throw missed("arm")
      return { outcome: "committed" }
    })
})

/** The steps in the Promise API's shape. */
const asPromiseSteps = (steps, close) => ({
  claimOperation: steps.claim,
  markOperationSent: steps.markSent,
  finalizeOperationAndArmWatch: steps.finalize,
  close
})

/**
 * The lifecycle on `better-sqlite3`: prepared statements, each transaction
 * `BEGIN IMMEDIATE` (the write lock before the read), as synchronous as one
 * writes it by hand. Same journal mode (WAL) and busy timeout as the store.
 */
export const rawSqliteLifecycle = (file, tables, winnerOf) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 10000")
  const prepared = Object.fromEntries(Object.entries(statements(tables)).map(([name, text]) => [name, db.prepare(text)]))
  const run = (name, params) => {
    const statement = prepared[name]
    return statement.reader ? statement.all(...params) : statement.run(...params)
  }
  // better-sqlite3 is synchronous: the async bodies above never yield
  // inside a transaction, so a plain BEGIN IMMEDIATE … COMMIT wraps them.
  const tx = async (body) => {
    db.exec("BEGIN IMMEDIATE")
    try {
      const result = await body()
      db.exec("COMMIT")
      return result
    } catch (error) {
      db.exec("ROLLBACK")
      throw error
    }
  }
  return asPromiseSteps(lifecycleSteps(async (name, params) => run(name, params), tx, winnerOf), () => db.close())
}

/** `?` → `$1`, `$2`, … for Postgres. */
export const numbered = (text) => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/**
 * The lifecycle on `pg`: a pool of `maxConnections`; the claim one
 * autocommitted statement; each transaction BEGIN; SELECT … FOR UPDATE; …;
 * COMMIT (ROLLBACK on any failure) on one pooled client.
 */
export const rawPgLifecycle = (url, tables, winnerOf, maxConnections) => {
  const pool = new pg.Pool({ connectionString: url, max: maxConnections })
  pool.on("error", () => undefined)
  const texts = Object.fromEntries(Object.entries(statements(tables)).map(([name, text]) => [name, numbered(text)]))
  const query = async (on, name, params, lock) => {
    const result = await on.query(lock ? `${texts[name]} FOR UPDATE` : texts[name], params)
    return Object.assign(result.rows, { changes: result.rowCount })
  }
  // A transaction runs on one pooled client, whose BEGIN/COMMIT wrap the step.
  const stepsOn = (on) => lifecycleSteps((name, params, lock) => query(on, name, params, lock), (body) => body(), winnerOf)
  const inTransaction = (use) => async (...args) => {
    const on = await pool.connect()
    try {
      await on.query("BEGIN")
      const result = await use(stepsOn(on))(...args)
      await on.query("COMMIT")
      return result
    } catch (error) {
      await on.query("ROLLBACK").catch(() => undefined)
      throw error
    } finally {
      on.release()
    }
  }
  return {
    claimOperation: async (input) => stepsOn(pool).claim(input),
    markOperationSent: inTransaction((steps) => steps.markSent),
    finalizeOperationAndArmWatch: inTransaction((steps) => steps.finalize),
    close: () => pool.end()
  }
}
