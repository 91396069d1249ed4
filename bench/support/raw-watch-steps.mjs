// The reference: the watch cycle's three steps hand-written on the raw
// drivers, with the store's semantics — one transaction per step, the lock
// taken before the row is read (SQLite: BEGIN IMMEDIATE; Postgres: SELECT …
// FOR UPDATE), the winner read inside it, the same guards, and a write
// conditioned on the version read. Only the columns a step changes are
// written, as one would by hand. With the lock held a lost race cannot
// happen, so there is no retry loop; a write that misses throws.
import Database from "better-sqlite3"
import pg from "pg"

const BY_IDENTITY = "owner_did = ? AND connector_name = ? AND model = ? AND account_key = ? AND source_id = ?"
export const identityParams = (id) => [id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID]
const numberOrNull = (value) => value === null ? null : Number(value)

/**
 * The statements over `table`, with `?` parameters in the order they
 * appear: the SET values, then the identity, then the version read.
 */
export const statements = (table) => ({
  select: `SELECT * FROM ${table} WHERE ${BY_IDENTITY}`,
  claim: `UPDATE ${table} SET claimed_until = ?, version = ?, updated_at = ?
    WHERE ${BY_IDENTITY} AND version = ?`,
  verified: `UPDATE ${table} SET verification_status = 'verified', verified_state_digest = ?,
      observed_winner_digest = ?, next_attempt_at = NULL, claimed_until = NULL, defer_reason = NULL,
      version = ?, updated_at = ?
    WHERE ${BY_IDENTITY} AND version = ?`,
  repairFailed: `UPDATE ${table} SET verification_status = 'repair_failed', observed_winner_digest = ?,
      verification_attempts = ?, next_attempt_at = NULL, claimed_until = NULL, defer_reason = NULL,
      version = ?, updated_at = ?
    WHERE ${BY_IDENTITY} AND version = ?`,
  pending: `UPDATE ${table} SET verification_attempts = ?, next_attempt_at = ?, claimed_until = NULL,
      defer_reason = NULL, version = ?, updated_at = ?
    WHERE ${BY_IDENTITY} AND version = ?`,
  open: `UPDATE ${table} SET repair_generation = ?, verification_attempts = 0,
      verification_status = 'pending_verification', observed_winner_digest = ?, next_attempt_at = ?,
      claimed_until = NULL, defer_reason = NULL, version = ?, updated_at = ?
    WHERE ${BY_IDENTITY} AND version = ?`
})

/** `?` → `$1`, `$2`, … for Postgres. */
export const numbered = (text) => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

export const lostRace = (step) => new Error(`raw ${step}: the versioned write missed although the row was locked`)

/**
 * The three steps' decisions, hand-written: each takes the locked row (or
 * undefined) and returns `{ outcome, write }`, `write` being `[statement,
 * params]` or undefined. Shared by both drivers, so they decide identically.
 */
export const decisions = (winners) => ({
  claimWatchAttempt: (row, identity, { until, generation, now }) => {
    const claimedUntil = row === undefined ? null : numberOrNull(row.claimed_until)
    const next = row === undefined ? null : numberOrNull(row.next_attempt_at)
    if (
      row === undefined || row.verification_status !== "pending_verification" ||
      Number(row.repair_generation) !== generation || next === null || next > now ||
      (claimedUntil !== null && claimedUntil > now)
    ) return { outcome: false, write: undefined }
    const version = Number(row.version)
    return { outcome: true, write: ["claim", [until, version + 1, Date.now(), ...identityParams(identity), version]] }
  },

  recordVerification: (row, identity, { generation, claimedUntil, fetchedDigest, maxAttempts, dueAt }) => {
    if (row === undefined || Number(row.repair_generation) !== generation) {
      return { outcome: "stale-generation", write: undefined }
    }
    if (claimedUntil != null && numberOrNull(row.claimed_until) !== claimedUntil) {
      return { outcome: "stale-claim", write: undefined }
    }
    const winner = winners.get(row.document_id) ?? null
    const version = Number(row.version)
    const id = identityParams(identity)
    if (fetchedDigest !== null && fetchedDigest === winner) {
      return { outcome: "verified", write: ["verified", [winner, winner, version + 1, Date.now(), ...id, version]] }
    }
    const attempts = Number(row.verification_attempts) + 1
    if (attempts >= maxAttempts) {
      return { outcome: "repair_failed", write: ["repairFailed", [winner, attempts, version + 1, Date.now(), ...id, version]] }
    }
    return { outcome: "pending", write: ["pending", [attempts, dueAt, version + 1, Date.now(), ...id, version]] }
  },

  armWatch: (row, identity, { dueAt }) => {
    if (row === undefined) return { outcome: "noop", write: undefined }
    const winner = winners.get(row.document_id) ?? null
    const version = Number(row.version)
    const generation = Number(row.repair_generation) + 1
    return {
      outcome: "opened",
      write: ["open", [generation, winner, dueAt, version + 1, Date.now(), ...identityParams(identity), version]]
    }
  }
})

export const manualOnly = (reason) => {
  if (reason !== "manual") throw new TypeError("the raw reference arms manually only")
}

/**
 * The steps on `better-sqlite3`: prepared statements, each step one
 * `BEGIN IMMEDIATE` transaction (the write lock before the read). With a
 * synchronous winner reader (`reader` "sync"), fully synchronous as one
 * writes it by hand; with an asynchronous one ("async"), the steps that read
 * a winner await it (a Promise) between the locked read and the write, the
 * transaction held across the await. Same journal mode (WAL) and busy
 * timeout as the store's SQLite client.
 */
export const rawSqliteSteps = (file, table, winners, reader = "sync") => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 10000")
  const prepared = Object.fromEntries(
    Object.entries(statements(table)).map(([name, text]) => [name, db.prepare(text)])
  )
  const decide = decisions(winners)
  const syncStep = (name) =>
    db.transaction((identity, input) => {
      const { outcome, write } = decide[name](prepared.select.get(...identityParams(identity)), identity, input)
      if (write !== undefined && prepared[write[0]].run(...write[1]).changes !== 1) throw lostRace(name)
      return outcome
    }).immediate
  const [begin, commit, rollback] = ["BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"].map((text) => db.prepare(text))
  const readWinner = async (documentID) => winners.get(documentID) ?? null
  const asyncStep = (name, readsWinner) => async (identity, input) => {
    begin.run()
    try {
      const row = prepared.select.get(...identityParams(identity))
      // The decision reads the same map; the await is the reader's cost.
      if (readsWinner && row !== undefined) await readWinner(row.document_id)
      const { outcome, write } = decide[name](row, identity, input)
      if (write !== undefined && prepared[write[0]].run(...write[1]).changes !== 1) throw lostRace(name)
      commit.run()
      return outcome
    } catch (error) {
      if (db.inTransaction) rollback.run()
      throw error
    }
  }
  const step = (name, readsWinner) => reader === "async" ? asyncStep(name, readsWinner) : syncStep(name)
  const claim = step("claimWatchAttempt", false)
  const verify = step("recordVerification", true)
  const arm = step("armWatch", true)
  return {
    claimWatchAttempt: claim,
    recordVerification: verify,
    armWatch: (identity, reason, options) => {
      manualOnly(reason)
      return arm(identity, options)
    },
    close: () => db.close()
  }
}

/**
 * The steps on `pg`: a pool of `maxConnections`, each step one transaction
 * on one pooled client: BEGIN; SELECT … FOR UPDATE; decide (the winner read
 * inside); UPDATE … WHERE version = $n; COMMIT (ROLLBACK on any failure).
 */
export const rawPgSteps = (url, table, winners, maxConnections) => {
  const pool = new pg.Pool({ connectionString: url, max: maxConnections })
  // An idle client's connection can be cut (the scratch database is dropped
  // with FORCE); the pool replaces it, as any long-running app lets it.
  pool.on("error", () => undefined)
  const texts = Object.fromEntries(Object.entries(statements(table)).map(([name, text]) => [name, numbered(text)]))
  const lockRead = `${texts.select} FOR UPDATE`
  const decide = decisions(winners)
  const step = (name) => async (identity, input) => {
    const client = await pool.connect()
    try {
      await client.query("BEGIN")
      const { rows } = await client.query(lockRead, identityParams(identity))
      const { outcome, write } = decide[name](rows[0], identity, input)
      if (write !== undefined && (await client.query(texts[write[0]], write[1])).rowCount !== 1) throw lostRace(name)
      await client.query("COMMIT")
      return outcome
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined)
      throw error
    } finally {
      client.release()
    }
  }
  const arm = step("armWatch")
  return {
    claimWatchAttempt: step("claimWatchAttempt"),
    recordVerification: step("recordVerification"),
    armWatch: (identity, reason, options) => {
      manualOnly(reason)
      return arm(identity, options)
    },
    close: () => pool.end()
  }
}
