import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ClaimOperationInput, ConnectorOperation, PromiseConnectorStore } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import {
  FakeProvider,
  INVARIANTS,
  type InvariantViolation,
  Interleaving,
  judgeEnd,
  judgeProviderLimits,
  keyOf,
  missedBySweep,
  type RequestFate
} from "@connector-store/testkit"
import type fc from "fast-check"
import {
  changeLimit,
  claimInputOf,
  clockActor,
  deleter,
  drive,
  ingress,
  type LimitStep,
  limiter,
  operator,
  relist,
  retention,
  runActor,
  sweeper,
  batcher,
  verify,
  writer,
  type WritePlan
} from "./actors.js"
import {
  type Account,
  allOperations,
  allWatches,
  CALLER,
  emptyKnowledge,
  type LocalDocument,
  POLICY,
  type RunnerFlavour,
  SCOPE,
  START,
  type World
} from "./world.js"

/** The documents of every run; each starts bound to one provider entity, written back and verified. */
export const DOCUMENTS = ["D1", "D2", "D3"] as const

/** One schedule's cast and fates. */
export interface ScheduleConfig {
  readonly adapter: "memory" | "sqlite"
  readonly writers: ReadonlyArray<ReadonlyArray<WritePlan>>
  /** Per due-sweep actor, how many sweeps it makes. */
  readonly sweepers: ReadonlyArray<number>
  /** Batch workers (`claimDueOperations`), each with its number of rounds. */
  readonly batchers: ReadonlyArray<number>
  /** Per ingress actor, the documents it edits at the provider, in order. */
  readonly ingress: ReadonlyArray<ReadonlyArray<string>>
  /** Per deleter, the documents whose entity it deletes at the provider. */
  readonly deleters: ReadonlyArray<ReadonlyArray<string>>
  /** Per operator, how many rounds it makes. */
  readonly operators: ReadonlyArray<number>
  /** Per retention actor, how many collections it makes. */
  readonly retention: ReadonlyArray<number>
  /** Per relist actor, its page size. */
  readonly relists: ReadonlyArray<number>
  /** The clock's steps in ms (negative: back). */
  readonly clockSteps: ReadonlyArray<number>
  /** Per actor name, the point it crashes at. */
  readonly crashes: ReadonlyArray<readonly [string, number]>
  /** The fates of provider requests in the order they leave. */
  readonly fates: ReadonlyArray<RequestFate>
  readonly flavour: RunnerFlavour
  readonly verifyAttempts: number
  readonly applierConfirms: boolean
  /** An ingress waits to move a winner while a verification of its document is in flight. */
  readonly ingressWaitsForVerifiers: boolean
  /** Senders stop waiting only for a request that will not be answered: every answer (a 429's Retry-After too) reaches its runner. */
  readonly waitsForAnswers: boolean
  /** Per limiter, the limit changes it makes. */
  readonly limiters: ReadonlyArray<ReadonlyArray<LimitStep>>
  /** Provider limits, or null: a store that does not enforce them, every document on `SCOPE`'s account. */
  readonly limits: LimitsPlan | null
}

/** A run under provider limits: the store enforces them (unless the runners' flavour ignores them). */
export interface LimitsPlan {
  /** Each document's connector and account. */
  readonly accounts: Readonly<Record<string, Pick<Account, "connectorName" | "accountKey">>>
  /** The caps set before the schedule starts. */
  readonly caps: ReadonlyArray<Extract<LimitStep, { readonly kind: "cap" }>>
  /** Edits written back while their accounts were paused before the schedule: due at the pause's end, a backlog for the runners to drain. */
  readonly backlog: ReadonlyArray<WritePlan>
  /** The Retry-After of the provider's 429s, in ms. */
  readonly retryAfterMs: number
}

/** A schedule whose senders stop waiting only for a request that will not be answered. */
class WaitingInterleaving extends Interleaving {
  readonly racesTimeouts = false
}

/** What one schedule found. */
export interface ScheduleResult {
  readonly violations: ReadonlyArray<InvariantViolation>
  readonly trace: string
  readonly requests: number
}

const openStore = async (
  adapter: ScheduleConfig["adapter"],
  now: () => number,
  readWinner: (documentID: string) => Promise<string | null>,
  providerLimits: boolean
): Promise<{ store: PromiseConnectorStore<unknown>; dispose: () => void }> => {
  const options = { now, readWinner, operationPolicy: POLICY, providerLimits }
  if (adapter === "memory") return { store: openMemoryConnectorStore(options) as PromiseConnectorStore<unknown>, dispose: () => {} }
  const dir = mkdtempSync(join(tmpdir(), "cs-interleave-"))
  const store = await openConnectorStore({ url: join(dir, "store.sqlite"), ...options })
  return { store: store as PromiseConnectorStore<unknown>, dispose: () => rmSync(dir, { recursive: true, force: true }) }
}

/** The actor names of a config, for crash plans. */
export const actorNames = (
  c: Pick<ScheduleConfig, "writers" | "sweepers" | "ingress" | "deleters" | "operators" | "retention" | "relists" | "batchers" | "limiters">
) => [
  ...c.writers.map((_, i) => `writer${i + 1}`),
  ...c.sweepers.map((_, i) => `sweeper${i + 1}`),
  ...c.ingress.map((_, i) => `ingress${i + 1}`),
  ...c.deleters.map((_, i) => `deleter${i + 1}`),
  ...c.operators.map((_, i) => `operator${i + 1}`),
  ...c.retention.map((_, i) => `retention${i + 1}`),
  ...c.relists.map((_, i) => `relist${i + 1}`),
  ...c.batchers.map((_, i) => `batcher${i + 1}`),
  ...c.limiters.map((_, i) => `limiter${i + 1}`)
]

/**
 * Runs one schedule: opens a fresh store (memory, or a SQLite file), writes
 * back and verifies one entity per document calmly, then starts every
 * actor at once under `s`, where each awaited step is released in the
 * schedule's order and may be a crash. After the last actor stopped, every
 * late request arrives, the clock moves a minute on (every lease lapses),
 * and a calm recovery drives everything due until nothing is left. The
 * invariants are judged during the schedule and at its end. Under a limits
 * plan the store enforces provider limits, each document goes out through
 * its own account, a backlog waits behind a short pause and the plan's caps
 * are set before the schedule starts.
 */
export const runSchedule = async (s: fc.Scheduler, config: ScheduleConfig): Promise<ScheduleResult> => {
  const il = config.waitsForAnswers ? new WaitingInterleaving(s, new Map(config.crashes)) : new Interleaving(s, new Map(config.crashes))
  const clock = { now: START }
  const documents = new Map<string, LocalDocument>(
    DOCUMENTS.map((id) => [id, { id, winner: `${id}@0`, rev: 0, source: `${id}-s0`, deleted: false }])
  )
  const readWinner = async (documentID: string) => {
    await il.provider(`winner read ${documentID}`)
    const doc = documents.get(documentID)
    return doc === undefined || doc.deleted ? null : doc.winner
  }
  const { limits } = config
  const enforced = limits !== null && !config.flavour.ignoresLimits
  const { store, dispose } = await openStore(config.adapter, () => clock.now, readWinner, enforced)
  const know = emptyKnowledge()
  const world: World = {
    store,
    il,
    provider: new FakeProvider({ pacer: il, fates: config.fates, retryAfterMs: limits?.retryAfterMs }),
    documents,
    clock,
    know,
    flavour: config.flavour,
    accountOf: (documentID) => ({ ...SCOPE, ...limits?.accounts[documentID] }),
    verifyAttempts: config.verifyAttempts,
    applierConfirms: config.applierConfirms,
    ingressWaitsForVerifiers: config.ingressWaitsForVerifiers
  }
  try {
    il.calm = true
    for (const doc of documents.values()) {
      const input: ClaimOperationInput = {
        callerDID: CALLER,
        operationID: `setup-${doc.id}`,
        ...world.accountOf(doc.id),
        op: "create",
        target: "calendars/primary",
        deterministicEventID: `${doc.id}-0`,
        payloadHash: doc.winner,
        reissueIntent: { kind: "deterministic-create", providerID: doc.source },
        documentID: doc.id
      }
      await drive(world, "setup", input)
    }
    for (const id of new Set(limits?.backlog.map((plan) => plan.documentID))) {
      const { connectorName, accountKey } = world.accountOf(id)
      await changeLimit(world, "setup", { kind: "pause", scope: { connectorName, accountKey }, ms: 100 })
    }
    if (limits !== null) await writer(world, "backlog", limits.backlog)()
    clock.now += 300
    for (const watch of (await store.listDueOperations(clock.now)).watches) await verify(world, "setup", watch)
    for (const cap of limits?.caps ?? []) await changeLimit(world, "setup", cap)
    il.calm = false
    il.note("— schedule starts —")

    const names = actorNames(config)
    let n = 0
    const next = () => names[n++]!
    const bodies: Array<[string, () => Promise<void>]> = [
      ...config.writers.map((plan) => { const a = next(); return [a, writer(world, a, plan)] as [string, () => Promise<void>] }),
      ...config.sweepers.map((rounds) => { const a = next(); return [a, sweeper(world, a, rounds)] as [string, () => Promise<void>] }),
      ...config.ingress.map((docs) => { const a = next(); return [a, ingress(world, a, docs)] as [string, () => Promise<void>] }),
      ...config.deleters.map((docs) => { const a = next(); return [a, deleter(world, a, docs)] as [string, () => Promise<void>] }),
      ...config.operators.map((rounds) => { const a = next(); return [a, operator(world, a, rounds)] as [string, () => Promise<void>] }),
      ...config.retention.map((rounds) => { const a = next(); return [a, retention(world, a, rounds)] as [string, () => Promise<void>] }),
      ...config.relists.map((size) => { const a = next(); return [a, relist(world, a, size)] as [string, () => Promise<void>] }),
      ...config.batchers.map((rounds) => { const a = next(); return [a, batcher(world, a, rounds)] as [string, () => Promise<void>] }),
      ...config.limiters.map((steps) => { const a = next(); return [a, limiter(world, a, steps)] as [string, () => Promise<void>] }),
      ["clock", clockActor(world, "clock", config.clockSteps)]
    ]
    await il.waitFor(Promise.all(bodies.map(([actor, body]) => runActor(world, actor, body))))
    await il.drain()
    il.calm = true
    il.note("— schedule over: late requests arrived; recovery with every lease lapsed —")

    clock.now = Math.max(clock.now, START) + 60_000
    const rows = await allOperations(store)
    const due = await store.listDueOperations(clock.now)
    const missed = missedBySweep(rows, new Set(due.operations.map(keyOf)), clock.now)
    await recover(world)
    const violations = [
      ...know.violations,
      ...(limits === null ? [] : judgeProviderLimits(know.limits)),
      ...judgeEnd({
        provider: world.provider,
        rows: await allOperations(store),
        watches: await allWatches(store),
        knownKeys: know.knownKeys,
        collected: know.collected,
        startedOver: know.replayedAfterRetention,
        missedBySweep: missed,
        ingressWinners: know.ingressWinners,
        claimedAgainst: know.claimedAgainst,
        winnerOf: (documentID) => {
          const doc = world.documents.get(documentID)
          return doc === undefined || doc.deleted ? null : doc.winner
        }
      })
    ]
    return { violations, trace: il.formatTrace(), requests: world.provider.ledger.length }
  } finally {
    await store.close()
    dispose()
  }
}

/** The calm recovery: resumes deferrals, drives every due operation and verifies every due watch until none is left. */
const recover = async (world: World): Promise<void> => {
  const { store, clock } = world
  const connectorNames = [...new Set(DOCUMENTS.map((id) => world.accountOf(id).connectorName))]
  for (let round = 0; round < 30; round++) {
    await store.resumeOfflineDeferred(clock.now)
    await store.resumeAuthDeferred({ ownerDID: SCOPE.ownerDID, connectorNames, now: clock.now })
    const due = await store.listDueOperations(clock.now)
    for (const row of due.operations) await runActor(world, "recovery", async () => void (await drive(world, "recovery", claimInputOf(row))))
    for (const watch of due.watches) await runActor(world, "recovery", () => verify(world, "recovery", watch))
    const attempted = (await allOperations(store)).filter((r: ConnectorOperation) => r.state === "attempted")
    if (attempted.length === 0 && due.operations.length === 0 && due.watches.length === 0) return
    clock.now += 2_000
  }
}

/** A failure report a person can read: the invariants broken, then the run's calls in order with their answers. */
export const formatReport = (config: ScheduleConfig, result: ScheduleResult): string =>
  [
    `${result.violations.length} violation(s) on ${config.adapter}:`,
    ...result.violations.map((v) => `  ✗ ${v.invariant} (${INVARIANTS[v.invariant]}):\n      ${v.detail}`),
    `crashes: ${config.crashes.map(([a, p]) => `${a}@${p}`).join(", ") || "none"}; fates: ${config.fates.join(", ") || "all ok"}` +
      (config.waitsForAnswers ? "; senders wait for every answer" : ""),
    ...(config.limits === null ? [] : [
      `accounts: ${Object.entries(config.limits.accounts).map(([d, a]) => `${d} on ${a.connectorName}/${a.accountKey}`).join(", ")}; ` +
      `Retry-After ${config.limits.retryAfterMs} ms${config.flavour.ignoresLimits ? "; the store does not enforce limits" : ""}`
    ]),
    "the calls in order, with each answer:",
    result.trace
  ].join("\n")
