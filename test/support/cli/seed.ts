import type { PromiseConnectorStore } from "@connector-store/core"
import type { SqlTransaction } from "@connector-store/sql-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"

/** A store the CLI opens: the `--database` and `--table-prefix` arguments that name it. */
export interface CliDatabase {
  readonly url: string
  readonly tablePrefix?: string | undefined
}

/** The CLI arguments naming `db`. */
export const dbArgs = (db: CliDatabase): ReadonlyArray<string> =>
  ["--database", db.url, ...(db.tablePrefix === undefined ? [] : ["--table-prefix", db.tablePrefix])]

const claim = (operationID: string, overrides: Record<string, unknown> = {}) => ({
  callerDID: "did:caller:1",
  operationID,
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  op: "update" as const,
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: `src-${operationID}`,
  deterministicEventID: `event-${operationID}`,
  payloadHash: `hash-${operationID}`,
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" } as const,
  documentID: `doc-${operationID}`,
  ...overrides
})

const leaseOf = (result: { outcome: string; lease?: { token: string } }) => {
  if (result.outcome !== "claimed" || result.lease === undefined) throw new Error(`seed claim was ${result.outcome}`)
  return result.lease.token
}

/**
 * Seeds `db` through the library (never raw SQL), as runners would leave it:
 *
 * - `committed`: committed on `doc-committed`, its watch (source `src-committed`) pending;
 * - `unknown`: reconcile_only, its request in doubt (a timeout after it was sent);
 * - `failed`: dead after a permanent failure, not in doubt, no document;
 * - `running`: attempted, under a live lease;
 * - `broken`: committed on `doc-broken`, its watch (`src-broken`) repair_failed;
 * - one relist run of (did:owner:1, gcal, Event, acct-1), started;
 * - sync states: `gcal/did:owner:1` under a live lease, `jira/did:owner:2`
 *   under a stale one (expired, never released), `slack/did:owner:3` with none;
 * - pending authorizations: one live, two expired.
 *
 * Returns the relist run id.
 */
export const seedStore = async (db: CliDatabase): Promise<{ readonly runID: string }> => {
  const store: PromiseConnectorStore<SqlTransaction> = await openConnectorStore({
    ...db,
    maxConnections: 2,
    readWinner: async (documentID) => `winner-of-${documentID}`
  })
  try {
    const commit = async (id: string) => {
      const token = leaseOf(await store.claimOperation(claim(id)))
      await store.markOperationSent({ callerDID: "did:caller:1", operationID: id }, { leaseToken: token })
      await store.finalizeOperationAndArmWatch({ callerDID: "did:caller:1", operationID: id }, {
        leaseToken: token,
        sourceID: `src-${id}`,
        documentID: `doc-${id}`,
        providerEtag: "etag-1",
        resultEntity: { id: `src-${id}` },
        watchDueAt: 0
      })
    }
    await commit("committed")
    await commit("broken")
    const watch = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1", sourceID: "src-broken" }
    const until = Date.now() + 60_000
    if (!await store.claimWatchAttempt(watch, { until, generation: 0, now: Date.now() })) throw new Error("seed watch claim")
    const verified = await store.recordVerification(watch, {
      generation: 0,
      claimedUntil: until,
      fetchedDigest: "provider-differs",
      maxAttempts: 1,
      dueAt: Date.now()
    })
    if (verified !== "repair_failed") throw new Error(`seed verification was ${verified}`)

    const unknown = leaseOf(await store.claimOperation(claim("unknown", { reissueIntent: { kind: "reconcile" } })))
    await store.markOperationSent({ callerDID: "did:caller:1", operationID: "unknown" }, { leaseToken: unknown })
    await store.recordAttemptFailure({ callerDID: "did:caller:1", operationID: "unknown" }, { leaseToken: unknown, kind: "unknown" })

    const failed = leaseOf(await store.claimOperation(claim("failed", { documentID: null, sourceID: null })))
    await store.recordAttemptFailure({ callerDID: "did:caller:1", operationID: "failed" }, {
      leaseToken: failed,
      kind: "permanent",
      httpStatus: 400
    })

    leaseOf(await store.claimOperation(claim("running", { ownerDID: "did:owner:2", connectorName: "jira" })))
    const run = await store.startRelistRun({ ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" })

    const now = Date.now()
    const live = await store.claimSyncLease("gcal", "did:owner:1", { now, leaseMs: 3_600_000 })
    const stale = await store.claimSyncLease("jira", "did:owner:2", { now: now - 3_600_000, leaseMs: 60_000 })
    if (live.outcome !== "claimed" || stale.outcome !== "claimed") throw new Error("seed sync leases")
    await store.setSyncState("slack", "did:owner:3", { lastSyncedAt: "2026-11-30T10:00:00Z", entityCount: 3, status: "idle" })
    for (const [state, expiresAt] of [["auth-live", now + 600_000], ["auth-old-1", now - 60_000], ["auth-old-2", now - 120_000]] as const) {
      await store.createPendingAuth({
        state,
        provider: "gcal",
        ownerDID: "did:owner:1",
        codeVerifier: "v".repeat(43),
        redirectURL: "https://app.example/callback",
        scopes: [],
        createdAt: now - 300_000,
        expiresAt
      })
    }
    return { runID: run.runID }
  } finally {
    await store.close()
  }
}

/**
 * After `seedStore`: a complete relist of (did:owner:1, gcal, Event, acct-1)
 * that saw `src-committed` but not `src-broken`, whose deletion candidate
 * then failed to apply five times and was given up.
 */
export const seedGivenUpCandidate = async (db: CliDatabase): Promise<void> => {
  const store = await openConnectorStore({ ...db, maxConnections: 2 })
  try {
    // The watches must predate the run to be judged by it.
    await new Promise((resolve) => setTimeout(resolve, 5))
    const run = await store.startRelistRun({ ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" })
    const page = await store.commitSweepCheckpoint(run.runID, {
      page: 1,
      cursor: null,
      complete: true,
      receipts: [{ sourceID: "src-committed", digest: null }]
    })
    if (page !== "completed") throw new Error(`seed relist page was ${page}`)
    const ref = { runID: run.runID, sourceID: "src-broken" }
    const decided = await store.recordSweepOutcome(ref, "delete_local")
    if (decided !== "recorded") throw new Error(`seed outcome was ${String(decided)}`)
    for (let i = 0; i < 5; i++) await store.recordSweepApplyFailure(ref, { kind: "permission", message: "not allowed" })
  } finally {
    await store.close()
  }
}

/** Opens `db` through the library to check what a CLI command did. */
export const openForCheck = (db: CliDatabase) => openConnectorStore({ ...db, maxConnections: 2 })
