import type { WatchIdentity } from "@connector-store/core"
import type pg from "pg"
import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { claimFor, expectTyped, sleep, storedRows, withClient } from "./faults.support.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

/** Keys driven at least; more until the killer has struck `MIN_KILLS` times and a caller has seen it, up to `MAX_KEYS`. */
const MIN_KEYS = 24
const MAX_KEYS = 120
const MIN_KILLS = 5
const WORKERS = 4
const LEASE_MS = 3_000
const APPLICATION = `cs-faults-${process.pid}`
const OWNER = "did:owner:faults"

const key = (id: string) => ({ callerDID: "did:caller:faults", operationID: id })
const identityOf = (id: string): WatchIdentity => ({
  ownerDID: OWNER,
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1",
  sourceID: `src-${id}`
})

/** What the workload saw: typed failures it retried, and the longest run of failures of one call. */
interface Seen {
  failures: number
  longestRun: number
}

/**
 * Runs a store call until it answers, checking that each failure on the way
 * is one of the store's typed errors; gives up (failing the test) after 30
 * (the killer strikes every 50-250 ms, so a slow call can die a few times in a row).
 */
const retrying = async <A>(seen: Seen, label: string, call: () => Promise<A>): Promise<A> => {
  for (let failed = 0;; failed++) {
    try {
      const answer = await call()
      seen.longestRun = Math.max(seen.longestRun, failed)
      return answer
    } catch (error) {
      expectTyped(error, label)
      seen.failures++

      if (failed >= 30) throw new Error(`${label} failed 31 times in a row: ${String(error)}`)
      await sleep(Math.min(20 * (failed + 1), 200))
    }
  }
}

/** One write-back end to end: claim, mark sent, finalize and arm; every step retried after a dropped connection. */
const driveOperation = async (store: SqlConnectorStore, seen: Seen, id: string): Promise<void> => {
  for (;;) {
    const claim = await retrying(seen, "claimOperation", () => store.claimOperation(claimFor(id, { leaseMs: LEASE_MS })))
    if (claim.outcome === "finished") return
    if (claim.outcome === "busy" || claim.outcome === "scheduled") {
      // A claim whose answer was lost holds a lease nobody knows: wait for it to lapse.
      await sleep(200)
      continue
    }
    const leaseToken = claim.lease.token
    const sent = await retrying(seen, "markOperationSent", () => store.markOperationSent(key(id), { leaseToken }))
    if (sent.outcome !== "sent" && sent.outcome !== "already-sent") continue
    const finalized = await retrying(seen, "finalizeOperationAndArmWatch", () =>
      store.finalizeOperationAndArmWatch(key(id), {
        leaseToken,
        sourceID: `src-${id}`,
        documentID: `doc-${id}`,
        providerEtag: `etag-${id}`,
        resultEntity: { id },
        watchDueAt: store.now()
      }))
    if (finalized.outcome === "committed" || finalized.outcome === "already-committed") return
  }
}

/** One verification of the watch the finalize armed: claim it, record a matching digest. */
const verifyWatch = async (store: SqlConnectorStore, seen: Seen, id: string): Promise<void> => {
  const identity = identityOf(id)
  for (let round = 0;; round++) {
    // A finalize that committed without its watch would leave nothing to verify: fail instead of waiting forever.
    if (round === 50) throw new Error(`the watch of ${id} was never verified: ${JSON.stringify(await store.getWatch(identity))}`)
    const now = store.now()
    const until = now + 1_000
    const claimed = await retrying(seen, "claimWatchAttempt", () => store.claimWatchAttempt(identity, { generation: 0, until, now }))
    if (claimed) {
      await retrying(seen, "recordVerification", () =>
        store.recordVerification(identity, { generation: 0, claimedUntil: until, fetchedDigest: "winner-1", maxAttempts: 5, dueAt: now }))
    }
    const watch = await retrying(seen, "getWatch", () => store.getWatch(identity))
    if (watch?.verificationStatus === "verified") return
    await sleep(100)
  }
}

/** Adds `id` to the sync checkpoint's list of seen keys (idempotent, so a retried write adds nothing twice). */
const recordProgress = (store: SqlConnectorStore, seen: Seen, id: string) =>
  retrying(seen, "updateSyncProgress", () =>
    store.updateSyncProgress("gcal", OWNER, (current) => {
      const keys = Array.isArray(current?.checkpoint) ? current.checkpoint as ReadonlyArray<string> : []
      return { checkpoint: keys.includes(id) ? keys : [...keys, id].sort(), recovery: null }
    }, { maxRetries: 20 }))

/**
 * Waits until the backends `pids` have exited, then a moment more for the
 * pool to read their goodbye. `pg_terminate_backend` only signals: a
 * backend under load can still be alive, its client still idle in the
 * pool, for longer than any fixed sleep (a fixed 100 ms failed once in CI).
 */
const gone = async (admin: pg.Client, pids: ReadonlyArray<number>): Promise<void> => {
  for (let tries = 0; pids.length > 0; tries++) {
    const { rows } = await admin.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])", [pids])
    if (Number(rows[0]!.n) === 0) break
    if (tries === 200) throw new Error(`backends ${pids.join(", ")} still alive 10 s after they were terminated`)
    await sleep(50)
  }
  await sleep(50)
}

/** Terminates the store's backends (found by application name) at random moments until `stop()`; `kills()` so far. */
const startKiller = (url: string) => {
  let running = true
  let kills = 0
  const done = withClient(url, async (admin) => {
    const killed: Array<number> = []
    while (running) {
      await sleep(50 + Math.floor(Math.random() * 200))
      const { rows } = await admin.query<{ pid: number; killed: boolean }>(
        "SELECT pid, pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
        [APPLICATION]
      )
      for (const row of rows) if (row.killed) killed.push(row.pid)
      kills = killed.length
    }
    // A strike's backends may still be dying: stop only once every one is gone.
    await gone(admin, killed)
  })
  return {
    kills: () => kills,
    stop: async () => {
      running = false
      await done
      return kills
    }
  }
}

describe.runIf(pgAvailable)("backends terminated at random moments under a workload, on Postgres", () => {
  let url: string
  let store: SqlConnectorStore
  const prefix = freshPrefix()

  beforeAll(async () => {
    url = await pgDatabaseForFile()
    store = await openConnectorStore({
      url,
      tablePrefix: prefix,
      maxConnections: 4,
      applicationName: APPLICATION,
      readWinner: () => "winner-1"
    })
  })

  afterAll(async () => {
    await store?.close()
  })

  it("the store's connections are found in pg_stat_activity by its application name", async () => {
    await store.getOperation(key("none"))
    const { rows } = await withClient(url, (admin) =>
      admin.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1", [APPLICATION]))
    expect(Number(rows[0]!.n)).toBeGreaterThan(0)
  })

  it("after its backends are terminated, each next call succeeds at its first try", async () => {
    const terminate = () =>
      withClient(url, async (admin) => {
        const { rows } = await admin.query<{ pid: number; killed: boolean }>(
          "SELECT pid, pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1",
          [APPLICATION]
        )
        const killed = rows.filter((row) => row.killed).map((row) => row.pid)
        await gone(admin, killed)
        return killed
      })
    // Every connection of the pool busy once, so that every one of them is killed.
    await Promise.all(Array.from({ length: 4 }, (_, i) => store.claimOperation(claimFor(`warm-${i}`))))
    const calls: ReadonlyArray<readonly [string, () => Promise<unknown>]> = [
      ["claimOperation", () => store.claimOperation(claimFor("after-kill"))],
      ["getOperation", () => store.getOperation(key("after-kill"))],
      ["updateSyncProgress", () => store.updateSyncProgress("gcal", "did:owner:other", () => ({ checkpoint: 1, recovery: null }))],
      ["listDueOperations", () => store.listDueOperations(store.now(), {})]
    ]
    for (const [label, call] of calls) {
      const terminated = await terminate()
      expect(terminated.length, `backends of the store before ${label}`).toBeGreaterThan(0)
      await expect(call(), label).resolves.toBeDefined()
    }
  })

  it("writes nothing partial, answers only typed errors, and every call succeeds after a reconnect", async () => {
    const seen: Seen = { failures: 0, longestRun: 0 }
    const killer = startKiller(url)
    // A fast machine can finish a fixed set of keys between two strikes, which
    // would make the test vacuous: the workload goes on until the killer has
    // struck often enough and a caller has met a dead backend (bounded, so it
    // always ends).
    const ids: Array<string> = []
    const nextID = (): string | undefined => {
      const struck = killer.kills() >= MIN_KILLS && seen.failures >= 1
      if (ids.length >= MAX_KEYS || (ids.length >= MIN_KEYS && struck)) return undefined
      const id = `k${String(ids.length).padStart(3, "0")}`
      ids.push(id)
      return id
    }
    await Promise.all(Array.from({ length: WORKERS }, async () => {
      for (let id = nextID(); id !== undefined; id = nextID()) {
        await driveOperation(store, seen, id)
        await verifyWatch(store, seen, id)
        await recordProgress(store, seen, id)
      }
    }))
    const kills = await killer.stop()
    // Not vacuous: backends died under the workload and callers saw it.
    expect(kills).toBeGreaterThanOrEqual(MIN_KILLS)
    expect(seen.failures).toBeGreaterThanOrEqual(1)
    console.info(`faults: ${ids.length} keys, ${kills} backends terminated, ${seen.failures} typed failures retried, longest run ${seen.longestRun}`)

    // With the killer stopped (once every backend it struck is gone, and the
    // pool has heard of it), every call answers at its first try.
    expect((await store.claimOperation(claimFor("after"))).outcome).toBe("claimed")
    expect(await store.getSyncState("gcal", OWNER)).not.toBeNull()

    const { operations, watches } = await storedRows(url, prefix)
    const driven = operations.filter((row) => /^k\d+$/.test(row.operation_id))
    expect(driven.map((row) => row.operation_id)).toEqual(ids)
    for (const row of driven) {
      // Committed whole: the commit, its marker, and the watch it armed.
      expect(row).toMatchObject({ state: "committed", source_id: `src-${row.operation_id}`, document_id: `doc-${row.operation_id}` })
      expect(row.send_marker).not.toBeNull()
      // Inserted at version 0, then at least a mark and a commit, each counted once.
      expect(row.version).toBeGreaterThanOrEqual(2)
      expect(row.attempts).toBeGreaterThanOrEqual(1)
      expect(row.lease_token).toBeNull()
      expect(JSON.parse(row.result_entity!)).toEqual({ id: row.operation_id })
    }
    // One watch per committed operation, armed once (generation 0), verified by one claim and one verification
    // (version 2) or more when a lost answer made the verifier claim again.
    expect(watches.map((row) => row.source_id)).toEqual(ids.map((id) => `src-${id}`))
    for (const row of watches) {
      expect(row).toMatchObject({ document_id: row.source_id.replace("src-", "doc-"), repair_generation: 0, verification_status: "verified" })
      expect(row.version).toBeGreaterThanOrEqual(2)
    }
    const state = await store.getSyncState("gcal", OWNER)
    expect(state?.checkpoint).toEqual(ids)
  })
})
