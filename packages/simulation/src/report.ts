import type { ConnectorOperation, OperationState, ProjectionWatch, PromiseConnectorStore } from "@connector-store/core"
import { checkInvariants, type InvariantCheck } from "./invariants.js"
import type { SimulationScope } from "./plan.js"
import type { LedgerEntry } from "./provider.js"
import type { RelistSummary } from "./relistSweep.js"
import { CRASH_SITES, type World } from "./world.js"

/** An item an operator must look at. */
export interface AttentionItem {
  readonly what: string
  readonly document: string
  readonly detail: string
}

/** What a run did and found; `ok` is false when an invariant failed. */
export interface SimulationReport {
  readonly seed: string
  /** The owner, connector, model and account the run wrote under (its ids carry a tag of their own). */
  readonly scope: SimulationScope
  readonly database: string
  readonly runners: number
  readonly processes: number
  readonly elapsedMs: number
  /** True when every planned write-back reached a final state before the duration ran out. */
  readonly finished: boolean
  readonly operations: {
    readonly planned: number
    /** How many planned write-backs of each kind (create, update, delete). */
    readonly plannedByKind: Readonly<Record<"create" | "update" | "delete", number>>
    readonly byState: Readonly<Record<OperationState, number>>
    readonly collectedByRetention: number
    /** Attempts the store counted over the operations still stored. */
    readonly attempts: number
    readonly claims: Readonly<Record<string, number>>
    readonly failures: Readonly<Record<string, number>>
    readonly deferrals: { readonly offline: number; readonly auth: number }
    readonly reissues: {
      readonly handedOut: number
      readonly refusedByProvider: number
      readonly settledByLookup: number
    }
    readonly crashes: Readonly<Record<string, number>>
    readonly staleRunnersFenced: number
    readonly childProcessesKilled: number
  }
  readonly provider: {
    readonly requests: number
    readonly applied: number
    readonly byStatus: Readonly<Record<string, number>>
    readonly refusedOffline: number
    readonly refusedUnauthorized: number
    readonly editedElsewhere: number
    /** A digest of the ledger: per operation, the faults and answers of its requests in order. */
    readonly fingerprint: string
    /**
     * Every request that reached the provider's write path, in arrival order. The
     * fault of request `n` of an operation is drawn from the seed alone, so two
     * runs with one seed agree on it wherever both made that request.
     */
    readonly ledger: ReadonlyArray<LedgerEntry>
  }
  readonly watches: {
    readonly byStatus: Readonly<Record<string, number>>
    readonly verifications: Readonly<Record<string, number>>
    readonly repairs: number
    readonly ingressArms: Readonly<Record<string, number>>
    readonly auditArms: Readonly<Record<string, number>>
    /**
     * Verifications put off without spending an attempt, by reason
     * (`offline`, `auth`), and `refused`: deferrals the store turned down
     * because the verifier's claim had lapsed.
     */
    readonly deferrals: Readonly<Record<string, number>>
  }
  readonly resumes: { readonly offline: number; readonly auth: number }
  readonly sync: { readonly completed: number; readonly leaseBusy: number; readonly pages: number; readonly interrupted: number }
  readonly pendingAuth: {
    readonly consents: number
    readonly callbacksConsumed: number
    readonly replaysRefused: number
    readonly expiredDeleted: number
  }
  readonly relist: RelistSummary | null
  readonly attention: ReadonlyArray<AttentionItem>
  readonly invariants: ReadonlyArray<InvariantCheck>
  readonly ok: boolean
  /** The first unexpected errors runners and loops met (they carried on). */
  readonly errors: ReadonlyArray<string>
  /** Every raw counter, for scripts. */
  readonly counters: Readonly<Record<string, number>>
}

/** What the report is built from, besides the store and the world. */
export interface ReportInputs {
  readonly seed: string
  readonly database: string
  readonly runners: number
  readonly processes: number
  readonly elapsedMs: number
  readonly finished: boolean
  readonly collected: number
  readonly relist: RelistSummary | null
  /** The first unexpected errors runners and loops met (they carried on). */
  readonly errors: ReadonlyArray<string>
}

/** Every operation of the run's owner, through the public paginated read. */
export const operationsOf = async (store: PromiseConnectorStore<unknown>, ownerDID: string) => {
  const rows: Array<ConnectorOperation> = []
  let cursor: string | undefined
  for (;;) {
    const page = await store.listTrackedOperations({ visibleTo: ownerDID, limit: 500, ...(cursor === undefined ? {} : { cursor }) })
    rows.push(...page.operations)
    if (page.nextCursor === null) return rows
    cursor = page.nextCursor
  }
}

const sumWhere = (counters: ReadonlyMap<string, number>, test: (name: string) => boolean) =>
  [...counters].reduce((sum, [name, n]) => (test(name) ? sum + n : sum), 0)

/** The counters under `prefix.`, keyed by the rest of their name. */
const group = (counters: ReadonlyMap<string, number>, prefix: string): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const [name, n] of counters) if (name.startsWith(prefix + ".")) out[name.slice(prefix.length + 1)] = n
  return out
}

/** The verifier's deferral counters (`<reason>.<accepted>`) by reason, the ones the store refused apart. */
const watchDeferrals = (counters: Readonly<Record<string, number>>): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const [key, n] of Object.entries(counters)) {
    const [reason, accepted] = key.split(".")
    const name = accepted === "true" ? reason! : "refused"
    out[name] = (out[name] ?? 0) + n
  }
  return out
}

const countBy = <A>(items: ReadonlyArray<A>, key: (a: A) => string): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1
  return out
}

/**
 * Builds the report from the store (through its public reads), the
 * provider's ledger and the world's counters, and runs the invariant checks.
 */
export const buildReport = async (
  store: PromiseConnectorStore<unknown>,
  world: World,
  inputs: ReportInputs
): Promise<SimulationReport> => {
  const { plan } = world
  const c = world.counters
  const n = (name: string) => c.get(name) ?? 0
  const rows = await operationsOf(store, plan.scope.ownerDID)
  const watches = await store.listWatchesByDocuments(plan.documents.map((d) => d.documentID))
  const byState: Record<OperationState, number> = { attempted: 0, committed: 0, dead: 0, reconcile_only: 0 }
  for (const row of rows) byState[row.state]++

  const ledger = world.provider.ledger
  const present = new Set(rows.map((r) => r.operationID))
  const relist = inputs.relist
  const deletions = await Promise.all(world.localDeletions.map(async (d) => ({
    ...d,
    runState: (await store.getRelistRun(d.runID))?.state ?? "gone",
    stillAtProvider: world.provider.read(d.entityID) !== undefined
  })))
  const invariants = checkInvariants({
    plan,
    rows,
    watches,
    ledger,
    deletions,
    entitiesAtProvider: world.provider.entityIDs(),
    incompleteRefused: relist?.incompleteRefused ?? 0,
    incompleteListed: relist?.incompleteListed ?? 0,
    finished: inputs.finished,
    collected: inputs.collected
  })

  const attention: Array<AttentionItem> = [
    ...rows.filter((r) => r.state === "reconcile_only").map((r) => ({
      what: "reconcile_only operation",
      document: r.documentID ?? "-",
      detail: `${r.operationID} (${r.op} of ${r.sourceID ?? r.deterministicEventID}): the outcome is unknown; look the entity up at the provider, then settle it`
    })),
    ...rows.filter((r) => r.state === "dead").map((r) => ({
      what: "dead operation",
      document: r.documentID ?? "-",
      detail: `${r.operationID}: ${r.lastKind ?? "failed"}${r.lastHTTPStatus === null ? "" : ` (HTTP ${r.lastHTTPStatus})`} after ` +
        `${r.attempts} attempts${r.inDoubtSince === null ? "" : "; an earlier request may have landed, so it reads as unconfirmed: look it up"}`
    })),
    ...rows.filter((r) => r.state === "attempted").map((r) => ({
      what: "operation still in progress",
      document: r.documentID ?? "-",
      detail: `${r.operationID}: ${r.attempts} attempts so far${r.deferReason === null ? "" : `, deferred (${r.deferReason})`}`
    })),
    ...(inputs.finished ? [] : plan.operations.filter((op) => !present.has(op.operationID)).map((op) => ({
      what: "edit that never reached the store",
      document: op.document.documentID,
      detail: `${op.operationID}: the run ended before it was claimed${op.after === null ? "" : ` (it waits for ${plan.operations[op.after]!.operationID})`}`
    }))),
    ...watches.filter((w) => w.verificationStatus === "repair_failed").map((w: ProjectionWatch) => ({
      what: "repair_failed watch",
      document: w.documentID,
      detail: `${w.sourceID}: the provider's state never matched the local one after ${w.verificationAttempts} verifications`
    })),
    ...watches.filter((w) => w.verificationStatus === "pending_verification").map((w) => ({
      what: "watch still pending",
      document: w.documentID,
      detail: `${w.sourceID}: ${w.verificationAttempts} verifications so far${w.deferReason === null ? "" : `, deferred (${w.deferReason})`}`
    })),
    ...(relist?.givenUp ?? []).map((sourceID) => ({
      what: "given-up sweep candidate",
      document: sourceID,
      detail: `${sourceID}: its local deletion failed ${5} times; a person must look and re-arm it`
    }))
  ]

  const crashes: Record<string, number> = {}
  for (const site of CRASH_SITES) crashes[site] = n(`crash.${site}`)
  return {
    seed: inputs.seed,
    scope: plan.scope,
    database: inputs.database,
    runners: inputs.runners,
    processes: inputs.processes,
    elapsedMs: inputs.elapsedMs,
    finished: inputs.finished,
    operations: {
      planned: plan.operations.length,
      plannedByKind: {
        create: plan.operations.filter((op) => op.op === "create").length,
        update: plan.operations.filter((op) => op.op === "update").length,
        delete: plan.operations.filter((op) => op.op === "delete").length
      },
      byState,
      collectedByRetention: inputs.collected,
      attempts: rows.reduce((sum, r) => sum + r.attempts, 0),
      claims: group(c, "claim"),
      failures: group(c, "failure"),
      deferrals: {
        offline: sumWhere(c, (k) => k.startsWith("failure.offline.deferred")),
        auth: sumWhere(c, (k) => k.startsWith("failure.auth.deferred"))
      },
      reissues: {
        handedOut: sumWhere(c, (k) => k.startsWith("reissue.handed-out.")),
        refusedByProvider: n("reissue.refused-by-provider"),
        settledByLookup: n("reissue.settled-by-lookup")
      },
      crashes,
      staleRunnersFenced: n("stale-runner.lease-lost"),
      childProcessesKilled: n("process.killed")
    },
    provider: {
      requests: ledger.length,
      applied: ledger.filter((e) => e.applied).length,
      byStatus: countBy(ledger, (e) => String(e.answer)),
      refusedOffline: n("network.offline"),
      refusedUnauthorized: n("network.unauthorized"),
      editedElsewhere: n("provider.edited-elsewhere"),
      fingerprint: world.provider.fingerprint(),
      ledger
    },
    watches: {
      byStatus: countBy(watches, (w) => w.verificationStatus),
      verifications: group(c, "watch.verification"),
      repairs: n("watch.repair.pulled-provider-state"),
      ingressArms: group(c, "sync.ingress"),
      auditArms: group(c, "watch.audit-arm"),
      deferrals: watchDeferrals(group(c, "watch.deferred"))
    },
    resumes: { offline: n("resume.offline"), auth: n("resume.auth") },
    sync: {
      completed: n("sync.completed"),
      leaseBusy: n("sync.lease-busy"),
      pages: n("sync.page-checkpointed"),
      interrupted: n("sync.interrupted")
    },
    pendingAuth: {
      consents: n("oauth.pending-created"),
      callbacksConsumed: n("oauth.callback-consumed"),
      replaysRefused: n("oauth.replayed-callback-refused"),
      expiredDeleted: n("oauth.expired-deleted")
    },
    relist,
    attention,
    invariants,
    ok: invariants.every((i) => i.holds),
    errors: inputs.errors,
    counters: Object.fromEntries([...c].sort(([a], [b]) => a.localeCompare(b)))
  }
}
