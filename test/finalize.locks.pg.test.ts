import { ConnectorStore, type FinalizeResult, type PromiseConnectorStore, StoreMetrics } from "@connector-store/core"
import { openConnectorStore, type SqlTransaction } from "@connector-store/sql-adapter"
import { Effect, Metric } from "effect"
import pg from "pg"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput, KEY, NOW, POLICY } from "./operations.fixtures.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The locks a finalize takes on Postgres, and their order, watched from
// other connections: the operation row first, then the document slot's
// advisory lock (one statement, the lock's arguments taken from the locked
// row), and only then, in a statement of its own, the arm targets, read
// with a snapshot that sees what the slot's previous holder committed.

type Store = PromiseConnectorStore<SqlTransaction>
const METHOD = "finalizeOperationAndArmWatch"
const OWNER = "did:owner:1"
const MODEL = "Event"

const opened: Array<{ close: () => Promise<void> }> = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((resource) => resource.close()))
})

const lostTries = () => Effect.runSync(Metric.value(Metric.tagged(StoreMetrics.lostRaceRetries, "method", METHOD))).count

const setup = async () => {
  const url = await pgDatabaseForFile()
  const prefix = freshPrefix()
  const store = await openConnectorStore({ url, tablePrefix: prefix, now: () => NOW, operationPolicy: POLICY, readWinner: () => "w-1" })
  opened.push(store)
  const client = async () => {
    const connected = new pg.Client({ connectionString: url })
    await connected.connect()
    opened.push({ close: () => connected.end() })
    return connected
  }
  return { store, prefix, client, observer: await client() }
}

/** A claimed and sent operation of `documentID`, ready to finalize. */
const sentOperation = async (store: Store, operationID: string, documentID: string, ids: { ownerDID?: string; model?: string } = {}) => {
  const claim = await store.claimOperation(claimInput({ operationID, documentID, ...ids }))
  if (claim.outcome !== "claimed") throw new Error(`setup claim: ${claim.outcome}`)
  await store.markOperationSent({ ...KEY, operationID }, { leaseToken: claim.lease.token })
  return {
    key: { ...KEY, operationID },
    input: { leaseToken: claim.lease.token, sourceID: "src-1", documentID, watchDueAt: NOW + 60_000 }
  }
}

/** The slot's lock key text as every version of the store has written it. */
const slotKey = (prefix: string, documentID: string, ownerDID = OWNER, model = MODEL) =>
  JSON.stringify([`${prefix}projection_watch`, ownerDID, model, documentID])

/** The backend of the finalize's lock statement, once it waits on a lock. */
const waitingFinalize = async (observer: pg.Client): Promise<{ pid: number; waitEvent: string }> => {
  for (let tries = 0; tries < 500; tries++) {
    const { rows } = await observer.query<{ pid: number; wait_event: string }>(
      `SELECT pid, wait_event FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND query LIKE '%locked AS MATERIALIZED%' AND pid <> pg_backend_pid()
          AND datname = current_database()`
    )
    if (rows[0] !== undefined) return { pid: rows[0].pid, waitEvent: rows[0].wait_event }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error("the finalize never waited on a lock")
}

type Finalize = (store: Store, key: typeof KEY, input: Parameters<Store["finalizeOperationAndArmWatch"]>[1]) => Promise<FinalizeResult>
const apis: ReadonlyArray<readonly [string, Finalize]> = [
  ["the Promise API (lane)", (store, key, input) => store.finalizeOperationAndArmWatch(key, input)],
  ["the Effect API (ports)", (store, key, input) =>
    store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key, input)))]
]

describe.runIf(pgAvailable)("a finalize's locks on Postgres", () => {
  for (const [api, finalize] of apis) {
    it(`${api}: while the operation row is held elsewhere, the finalize waits for it holding no slot lock`, async () => {
      const { store, prefix, client, observer } = await setup()
      const { key, input } = await sentOperation(store, "op-row-first", "doc-1")
      const holder = await client()
      await holder.query("BEGIN")
      await holder.query(`SELECT 1 FROM ${prefix}operation WHERE caller_did = $1 AND operation_id = $2 FOR UPDATE`, [
        key.callerDID,
        key.operationID
      ])
      const finalized = finalize(store, key, input)
      const waiting = await waitingFinalize(observer)
      expect(waiting.waitEvent).not.toBe("advisory")
      const held = await observer.query(`SELECT count(*)::int AS n FROM pg_locks WHERE pid = $1 AND locktype = 'advisory'`, [waiting.pid])
      expect(held.rows[0].n).toBe(0)
      // The slot is free meanwhile: another session takes it and lets it go.
      const slot = await observer.query(`SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS taken`, [slotKey(prefix, "doc-1")])
      expect(slot.rows[0].taken).toBe(true)
      await observer.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [slotKey(prefix, "doc-1")])
      await holder.query("ROLLBACK")
      expect((await finalized).outcome).toBe("committed")
    })

    it(`${api}: the slot's holder keeps it waiting with the row locked, and what the holder committed is armed against on the first try`, async () => {
      const { store, prefix, client, observer } = await setup()
      const { key, input } = await sentOperation(store, "op-slot-second", "doc-2")
      const holder = await client()
      await holder.query("BEGIN")
      // The key as an earlier version of the store computed it, in the client: the same lock.
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [slotKey(prefix, "doc-2")])
      const lostBefore = lostTries()
      const finalized = finalize(store, key, input)
      const waiting = await waitingFinalize(observer)
      expect(waiting.waitEvent).toBe("advisory")
      // The operation row is the finalize's already.
      await observer.query("BEGIN")
      await expect(observer.query(
        `SELECT 1 FROM ${prefix}operation WHERE caller_did = $1 AND operation_id = $2 FOR UPDATE NOWAIT`,
        [key.callerDID, key.operationID]
      )).rejects.toMatchObject({ code: "55P03" })
      await observer.query("ROLLBACK")
      // The holder arms another source's watch on the document, and commits.
      await holder.query(
        `INSERT INTO ${prefix}projection_watch (owner_did, connector_name, model, account_key, source_id, document_id,
          verified_state_digest, observed_winner_digest, verification_status, verification_attempts, repair_generation,
          next_attempt_at, claimed_until, defer_reason, version, created_at, updated_at)
        VALUES ($1, 'gcal', $2, 'acct-1', 'src-other', 'doc-2', NULL, 'w-0', 'pending_verification', 0, 0, $3, NULL, NULL, 0, $3, $3)`,
        [OWNER, MODEL, NOW]
      )
      await holder.query("COMMIT")
      const result = await finalized
      if (result.outcome !== "committed") throw new Error(result.outcome)
      expect(result.superseded).toEqual([
        { ownerDID: OWNER, connectorName: "gcal", model: MODEL, accountKey: "acct-1", sourceID: "src-other" }
      ])
      expect(lostTries()).toBe(lostBefore)
      const { rows } = await observer.query(`SELECT source_id FROM ${prefix}projection_watch WHERE document_id = 'doc-2'`)
      expect(rows).toEqual([{ source_id: "src-1" }])
    })
  }

  it("the slot's key is the text JSON.stringify writes, whatever characters the ids hold", async () => {
    const { store, prefix, client, observer } = await setup()
    const odd = [
      { ownerDID: "did:\"quoted\"\\back", model: "Ev\u0001\u001f\u007f", documentID: "doc\b\f\n\r\t" },
      { ownerDID: "did:\u2028\u2029", model: "é😀", documentID: "doc/\u00ff" }
    ]
    for (const [i, ids] of odd.entries()) {
      const { key, input } = await sentOperation(store, `op-odd-${i}`, ids.documentID, ids)
      const holder = await client()
      await holder.query("BEGIN")
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [slotKey(prefix, ids.documentID, ids.ownerDID, ids.model)])
      const finalized = store.finalizeOperationAndArmWatch(key, input)
      expect((await waitingFinalize(observer)).waitEvent).toBe("advisory")
      await holder.query("COMMIT")
      expect((await finalized).outcome).toBe("committed")
    }
  })
})
