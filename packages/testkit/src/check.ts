import type {
  ClaimOperationInput,
  ClaimResult,
  ConnectorOperation,
  OperationKey,
  ProjectionWatch,
  PromiseConnectorStore,
  PromiseWinnerReaders,
  SafeReissue,
  WatchIdentity
} from "@connector-store/core"
import fc from "fast-check"
import { requestFate } from "./arbitraries.js"
import { FaultController, openFaultyMemoryStore, type WriteKind } from "./faults.js"
import {
  INVARIANTS,
  type InvariantName,
  judgeLeases,
  judgeRejection,
  judgeWriteBackEnd,
  LEASE_METHODS,
  type LeaseCall,
  missedBySweep,
  type SentWrite,
  shortToken
} from "./invariants.js"
import { FakeProvider, type ProviderClient, type ProviderEntity, type RequestFate, type WriteRequest, keyOf } from "./provider.js"
import { brief, Crash, Interleaving } from "./scheduler.js"

/** The one scope every write-back of a check runs in. */
export const CHECK_SCOPE = { ownerDID: "did:example:owner", connectorName: "calendar", model: "Event", accountKey: "owner@example.com" } as const

/** The caller every write-back of a check comes from. */
export const CHECK_CALLER = "did:example:device"

/** The store's policy in every check: short times, so lapses and limits happen within a schedule. */
export const CHECK_POLICY = {
  leaseMs: 1_000,
  maxAttempts: 4,
  backoff: { baseDelayMs: 100, maxDelayMs: 400, jitter: "none" as const },
  deferMs: 500
}

/** The start of every check's clock. */
export const CHECK_START = 1_700_000_000_000

/** The local documents of a check; each starts bound to one provider entity. */
export const CHECK_DOCUMENTS = ["D1", "D2"] as const

/**
 * The edit a runner loop is handed: a complete `claimOperation` input (its
 * `payloadHash` is what the write sends), with the local document it comes
 * from. An update names its entity (`sourceID`) and bases its
 * `reissueIntent` on the etag it read; a create names its deterministic id
 * in `reissueIntent.providerID`; a delete names its entity (`sourceID`)
 * under `idempotent-delete` (a 404 or 410 for it means it is gone: applied)
 * or `reconcile` (a 404 or 410 proves nothing: the provider may answer so
 * for another reason).
 */
export interface CheckEdit extends ClaimOperationInput {
  /** The local document the write comes from. */
  readonly documentID: string
}

/** The store a runner loop is handed: the Promise API on the store's clock. */
export interface CheckedStore extends PromiseConnectorStore<unknown> {
  /** The store's clock: the time every decision of the check is made at. */
  now(): number
}

/**
 * Your runner loop: one pass of the write-back of `edit` (claim → mark sent
 * → provider call → finalize or record the failure; a delete finalizes with
 * `finalizeDeleteOperation`). It is called for each
 * edit by each runner, and again for every operation the due sweep lists.
 */
export type RunnerLoop = (store: CheckedStore, provider: ProviderClient, edit: CheckEdit) => Promise<unknown>

/**
 * Your verifier loop: one pass over the due watches (claim a batch with
 * `claimDueWatches`, or list them with `listDueOperations(store.now())` and
 * claim each; fetch the entity, record what was found), calling
 * `repair(documentID, digest)` where the local document is to take the
 * provider's state. Given as `verifier`, the check runs it wherever it would
 * verify due watches itself.
 */
export type VerifierLoop = (
  store: CheckedStore,
  provider: ProviderClient,
  repair: (documentID: string, digest: string) => void
) => Promise<unknown>

/** The kinds of local edit a check generates. */
export type EditKind = "update" | "create" | "delete"

/** The edit kinds the checker generates: an update of a document, a create of a new one, a delete of a document's entity. */
export const EDIT_KINDS: ReadonlyArray<EditKind> = ["update", "create", "delete"]

/** The reissue intents a delete edit is made under. */
export type DeleteIntent = "idempotent-delete" | "reconcile"

/** The reissue intents the checker makes deletes under: both by default. */
export const DELETE_INTENTS: ReadonlyArray<DeleteIntent> = ["idempotent-delete", "reconcile"]

/** How far recovery moves the clock past its start, at most, to reach a pending due time (one hour). */
export const DEFAULT_RECOVERY_HORIZON_MS = 3_600_000

/** The most rounds of recovery (list what is due, drive it, move the clock). */
export const DEFAULT_RECOVERY_ROUNDS = 40

/** What happens between the runners' steps, one at a time, in the order drawn. */
export type Disturbance =
  | { readonly kind: "clock"; readonly ms: number }
  | { readonly kind: "sweep" }
  | { readonly kind: "takeover" }
  | { readonly kind: "verify" }
  | { readonly kind: "retention" }
  | { readonly kind: "offline"; readonly requests: number }
  | { readonly kind: "reconnect" }
  | { readonly kind: "expire-grant" }
  | { readonly kind: "reauth" }
  | { readonly kind: "fail-writes"; readonly rows: WriteKind; readonly count: number; readonly method?: string | undefined }
  | { readonly kind: "lose-race"; readonly rows: WriteKind }
  | { readonly kind: "fail-winner-read" }

/** One run's plan: each runner's edits, the disturbances, the crashes and the request fates. */
export interface CheckPlan {
  /**
   * Per runner, the edits it makes, in order (a create makes a new document;
   * its `documentID` is not used; a delete is made under `deleteIntent`).
   */
  readonly runners: ReadonlyArray<ReadonlyArray<{ readonly documentID: string; readonly kind: EditKind; readonly deleteIntent: DeleteIntent }>>
  /** What happens between steps. */
  readonly disturbances: ReadonlyArray<Disturbance>
  /** Per runner name, the point (1-based, of its own) at which it crashes. */
  readonly crashes: ReadonlyArray<readonly [string, number]>
  /**
   * The provider requests' fates in the order they leave (past the end:
   * `ok`). A 404 or 410 a delete under `idempotent-delete` draws is `ok`:
   * that intent presumes a provider that answers so only for an entity
   * that is gone.
   */
  readonly fates: ReadonlyArray<RequestFate>
  /** The seed of the schedule: the order in which every awaited step is released. */
  readonly schedule: number
}

/**
 * The invariants `checkRunnerLoop` judges, each with what it says: a part
 * of `INVARIANTS`, judged by the functions a harness of your own calls
 * (`judgeWriteBackEnd` at a run's end, `judgeLeases` over its calls and
 * sends), and `typed-rejections` as each call answers.
 */
export const RUNNER_INVARIANTS = {
  "no-double-apply": INVARIANTS["no-double-apply"],
  "nothing-lost": INVARIANTS["nothing-lost"],
  "no-failed-that-applied": INVARIANTS["no-failed-that-applied"],
  "nothing-stuck": INVARIANTS["nothing-stuck"],
  "no-pending-watch-never-due": INVARIANTS["no-pending-watch-never-due"],
  "committed-has-watch": INVARIANTS["committed-has-watch"],
  "delete-removed": INVARIANTS["delete-removed"],
  "lease-token-from-claim": INVARIANTS["lease-token-from-claim"],
  "sent-under-lease": INVARIANTS["sent-under-lease"],
  "typed-rejections": INVARIANTS["typed-rejections"]
} as const satisfies { readonly [Name in InvariantName]?: string }

/** The name of an invariant `checkRunnerLoop` judges. */
export type RunnerInvariant = keyof typeof RUNNER_INVARIANTS

/** One broken invariant of a run. */
export interface RunnerViolation {
  /** Which invariant. */
  readonly invariant: RunnerInvariant
  /** What broke it, naming keys, requests and runners. */
  readonly detail: string
}

/** What one run found. */
export interface RunResult {
  /** The violations, empty when the loop held. */
  readonly violations: ReadonlyArray<RunnerViolation>
  /** The calls in order, with each answer, one a line. */
  readonly trace: string
  /** The provider requests the run made. */
  readonly requests: number
}

/** A store answer for the trace; a claim shows the lease token it handed out. */
const showAnswer = (method: string) => (answer: unknown): string => {
  const lease = method === "claimOperation" ? (answer as { lease?: { token?: unknown } } | null)?.lease?.token : undefined
  return typeof lease === "string" ? `${brief(answer)} lease ${shortToken(lease)}` : brief(answer)
}

/** How a check opens its store: given the clock, the winner reader and the policy. The faulty memory store by default. */
export type OpenCheckedStore = (options: {
  readonly now: () => number
  readonly readWinner: NonNullable<PromiseWinnerReaders<unknown>["readWinner"]>
  readonly operationPolicy: typeof CHECK_POLICY
  readonly faults: FaultController
}) => Promise<PromiseConnectorStore<unknown>> | PromiseConnectorStore<unknown>

/** The options of `checkRunnerLoop`. */
export interface CheckRunnerLoopOptions {
  /** Concurrent runners (2 by default, 1 to 4). */
  readonly runners?: number | undefined
  /** Edits per runner (1 to `editsPerRunner`, 2 by default). */
  readonly editsPerRunner?: number | undefined
  /** At most this many crashes per run (2 by default; 0 for none). */
  readonly crashes?: number | undefined
  /** The fates provider requests may meet (every fate by default; `["ok"]` for a provider that never fails). */
  readonly fates?: ReadonlyArray<RequestFate> | undefined
  /** Storage faults (failing writes, lost races, failing winner reads) among the disturbances (true by default). */
  readonly storeFaults?: boolean | undefined
  /** Runs (`CONNECTOR_STORE_MODEL_RUNS` / 200 × 40 by default, at least 1). */
  readonly numRuns?: number | undefined
  /** Replays one run: the seed a failure printed. */
  readonly seed?: number | undefined
  /** Replays one run: the path a failure printed (with `seed`); the shrunk run, call for call. */
  readonly path?: string | undefined
  /** Prints each failing run's report as fast-check finds and shrinks it, and a line at the end. */
  readonly verbose?: boolean | undefined
  /**
   * The kinds of edit the runners make (every kind by default): only those
   * your connector sends, e.g. `["update"]`, or `["update", "delete"]`.
   * Without `"create"`, an update of a document whose entity is gone at the
   * provider is not made (it would be a create).
   */
  readonly kinds?: ReadonlyArray<EditKind> | undefined
  /** The reissue intents deletes are made under (both by default; `["idempotent-delete"]` for a provider whose 404 and 410 mean gone). */
  readonly deleteIntents?: ReadonlyArray<DeleteIntent> | undefined
  /**
   * How far, in ms past its start, recovery moves the clock to reach a
   * pending due time: a watch your loop armed due in 30 s or 5 min is
   * verified; one due later than this is judged stuck (one hour by default).
   */
  readonly recoveryHorizonMs?: number | undefined
  /** The most rounds of recovery, each listing what is due, driving it, and moving the clock (40 by default, 1 to 1000). */
  readonly recoveryRounds?: number | undefined
  /** Your verifier loop, run in place of the check's own wherever due watches are verified (see `VerifierLoop`). */
  readonly verifier?: VerifierLoop | undefined
  /**
   * Opens the store each run uses; the faulty memory store by default. A
   * SQLite file: `(o) => openConnectorStore({ url: join(dir, \`\${n++}.sqlite\`), now: o.now, readWinner: o.readWinner, operationPolicy: o.operationPolicy })`
   * (storage faults then do nothing: they live in the memory store's ports).
   */
  readonly openStore?: OpenCheckedStore | undefined
}

/** An option of `checkRunnerLoop` (or `planArbitrary`, `runPlan`) that it cannot run with: it names the option and what is wrong. The check runs nothing. */
export class CheckOptionInvalid extends Error {
  /** Always `"CheckOptionInvalid"`. */
  override readonly name = "CheckOptionInvalid"
  constructor(
    /** The option, e.g. `kinds`. */
    readonly option: string,
    /** What is wrong with the value given. */
    readonly reason: string
  ) {
    super(`checkRunnerLoop: option ${option} ${reason}`)
  }
}

/** A value as an error names it. */
const shown = (value: unknown): string => typeof value === "number" ? String(value) : JSON.stringify(value) ?? String(value)

const listOption = <A extends string>(option: string, value: ReadonlyArray<A> | undefined, known: ReadonlyArray<A>): ReadonlyArray<A> => {
  if (value === undefined) return known
  if (!Array.isArray(value) || value.length === 0) throw new CheckOptionInvalid(option, `must be a non-empty array of ${known.map((k) => JSON.stringify(k)).join(", ")}, got ${shown(value)}`)
  const unknown = value.filter((v) => !known.includes(v))
  if (unknown.length > 0) throw new CheckOptionInvalid(option, `has ${unknown.map((v) => JSON.stringify(v)).join(", ")}, which is none of ${known.map((k) => JSON.stringify(k)).join(", ")}`)
  return [...new Set(value)]
}

const wholeOption = (option: string, value: number | undefined, fallback: number, min: number, max: number): number => {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new CheckOptionInvalid(option, `must be a whole number from ${min} to ${max}, got ${shown(value)}`)
  return value
}

/** The settings of a run besides its plan: which edits it may make, and how far recovery goes. */
export interface RunSettings {
  /** The kinds of edit the runners make. */
  readonly kinds: ReadonlyArray<EditKind>
  /** How far recovery moves the clock past its start to reach a pending due time, in ms. */
  readonly recoveryHorizonMs: number
  /** The most rounds of recovery. */
  readonly recoveryRounds: number
  /** Your verifier loop, or the check's own when undefined. */
  readonly verifier?: VerifierLoop | undefined
}

/** The run settings of `options`, checked: `CheckOptionInvalid` names an option it cannot run with. */
export const runSettings = (options: CheckRunnerLoopOptions = {}): RunSettings => ({
  kinds: listOption("kinds", options.kinds, EDIT_KINDS),
  recoveryHorizonMs: wholeOption("recoveryHorizonMs", options.recoveryHorizonMs, DEFAULT_RECOVERY_HORIZON_MS, 0, 366 * 86_400_000),
  recoveryRounds: wholeOption("recoveryRounds", options.recoveryRounds, DEFAULT_RECOVERY_ROUNDS, 1, 1_000),
  verifier: verifierOption(options.verifier)
})

const verifierOption = (value: unknown): VerifierLoop | undefined => {
  if (value === undefined || typeof value === "function") return value as VerifierLoop | undefined
  throw new CheckOptionInvalid("verifier", `must be a function (store, provider, repair), got ${shown(value)}`)
}

/** What a passing check ran. */
export interface CheckRunnerLoopReport {
  /** Runs made. */
  readonly runs: number
  /** The seed, to replay the same runs. */
  readonly seed: number
  /** Wall time, in ms. */
  readonly elapsedMs: number
}

/** A failed check: the shrunk counterexample, readable by a person, and how to replay it. */
export class RunnerLoopCheckFailed extends Error {
  /** Always `"RunnerLoopCheckFailed"`. */
  override readonly name = "RunnerLoopCheckFailed"
  constructor(
    /** The invariants the shrunk run broke. */
    readonly invariants: ReadonlyArray<RunnerInvariant>,
    /** The seed to replay with. */
    readonly seed: number,
    /** The path to replay with. */
    readonly path: string,
    /** The report: the violations, the plan, the calls in order with each answer. */
    readonly report: string
  ) {
    super(report)
  }
}

/** Each task is released once the work already running (the store's fibers) has settled: a run's order is its seed's alone. */
const settled = async (release: () => Promise<void>): Promise<void> => {
  await new Promise<void>((resolve) => setImmediate(resolve))
  await release()
}

/** The default runs: 40, scaled by `CONNECTOR_STORE_MODEL_RUNS` / 200 (every property of the project scales so). */
export const defaultRuns = (): number => {
  const raw = typeof process === "undefined" ? undefined : process.env["CONNECTOR_STORE_MODEL_RUNS"]
  const configured = raw === undefined ? 200 : Number(raw)
  if (!Number.isSafeInteger(configured) || configured <= 0) {
    throw new Error(`CONNECTOR_STORE_MODEL_RUNS must be a positive whole number of runs, got ${JSON.stringify(raw)}`)
  }
  return Math.max(1, Math.round(40 * configured / 200))
}

/** A local document of a run. */
interface LocalDocument {
  winner: string
  rev: number
  source: string
}

/** The claim input of an edit of `doc` of kind `kind` by `actor`, its `n`-th. The one place an edit's input is made. */
const editInput = (
  actor: string,
  n: number,
  documentID: string,
  doc: LocalDocument,
  kind: EditKind,
  deleteIntent: DeleteIntent,
  current: ProviderEntity | undefined
): CheckEdit => {
  const base = {
    callerDID: CHECK_CALLER,
    operationID: `${actor}-${n}`,
    ...CHECK_SCOPE,
    target: "calendars/primary",
    deterministicEventID: `${documentID}-${doc.rev}`,
    payloadHash: doc.winner,
    documentID
  }
  // A delete names the document's entity, whether or not the provider still has it.
  if (kind === "delete") {
    return { ...base, op: "delete", sourceID: doc.source, reissueIntent: { kind: deleteIntent }, providerEtag: current?.etag ?? null }
  }
  // An update of an entity deleted at the provider creates it again.
  if (kind === "update" && current !== undefined) {
    return { ...base, op: "update", sourceID: current.id, reissueIntent: { kind: "conditional-update", ifMatch: current.etag }, providerEtag: current.etag }
  }
  return { ...base, op: "create", sourceID: null, reissueIntent: { kind: "deterministic-create", providerID: `${documentID}-s${doc.rev}` } }
}

/** A due time for the trace: on the check's clock (`+ms` since its start), and how far ahead of `now`. */
const showDue = (at: number, now: number): string => `+${at - CHECK_START}${at > now ? ` (in ${at - now} ms)` : ""}`

const describeCall = (method: string, args: ReadonlyArray<unknown>, now: number): string => {
  const dueOf = (at: unknown) => typeof at === "number" ? `, watch due ${showDue(at, now)}` : ""
  const [first, second] = args as [Record<string, unknown> | undefined, Record<string, unknown> | undefined]
  const key = first !== undefined && typeof first === "object" && "operationID" in first ? ` ${keyOf(first as unknown as OperationKey)}` : ""
  const token = typeof second?.leaseToken === "string" ? ` token ${shortToken(second.leaseToken)}` : ""
  switch (method) {
    case "recordAttemptFailure":
      return `${method}${key} ${String(second?.kind)}${second?.httpStatus === undefined || second.httpStatus === null ? "" : ` ${String(second.httpStatus)}`}${token}`
    case "finalizeOperationAndArmWatch":
      return `${method}${key} → ${String(second?.sourceID)} ${String(second?.providerEtag ?? "")}${token}${dueOf(second?.watchDueAt)}`
    case "finalizeDeleteOperation":
      return `${method}${key} → ${String(second?.sourceID)} deleted${token}`
    case "listDueOperations":
      return `${method} at +${Number(first) - CHECK_START}`
    case "armWatch":
      return `${method} ${String(first?.sourceID)} ${String(second)}${dueOf((args[2] as { dueAt?: unknown } | undefined)?.dueAt)}`
    case "recordVerification":
      return `${method} ${String(first?.sourceID)} g${String(second?.generation)}${typeof second?.dueAt === "number" ? `, due again ${showDue(second.dueAt, now)} if it does not match` : ""}`
    default:
      return `${method}${key}${token}`
  }
}

/** Runs one plan of `loop` under `s` (`schedulerOf(plan.schedule)` is the check's own); never rejects for the loop's sake. */
export const runPlan = async (
  loop: RunnerLoop,
  s: fc.Scheduler,
  plan: CheckPlan,
  openStore?: OpenCheckedStore,
  settings: RunSettings = runSettings()
): Promise<RunResult> => {
  const il = new Interleaving(s, new Map(plan.crashes))
  const faults = new FaultController(CHECK_START)
  const clock = faults.clock
  const edits = new Map<string, CheckEdit>()
  let fateIndex = 0
  const fateOf = (request: WriteRequest): RequestFate => {
    const fate = plan.fates[fateIndex++] ?? "ok"
    const intent = edits.get(request.key)?.reissueIntent.kind
    return request.op === "delete" && intent === "idempotent-delete" && (fate === "404" || fate === "410") ? "ok" : fate
  }
  const provider = new FakeProvider({ fates: fateOf, pacer: il })
  let tokens = 0
  const documents = new Map<string, LocalDocument>(CHECK_DOCUMENTS.map((id) => [id, { winner: `${id}@0`, rev: 0, source: `${id}-s0` }]))
  for (const [id, doc] of documents) provider.seed(doc.source, doc.winner, id)
  const readWinner = async (documentID: string): Promise<string | null> => {
    await il.provider(`winner read ${documentID}`)
    return documents.get(documentID)?.winner ?? null
  }
  const store = openStore === undefined
    ? openFaultyMemoryStore({ faults, readWinner, operationPolicy: CHECK_POLICY, token: () => `lease-${++tokens}` }) as PromiseConnectorStore<unknown>
    : await openStore({ now: clock.now, readWinner, operationPolicy: CHECK_POLICY, faults })
  const violations: Array<RunnerViolation> = []
  let seq = 0
  const leaseCalls: Array<LeaseCall> = []
  const sends: Array<SentWrite & { readonly request: Omit<WriteRequest, "reissue"> }> = []
  const committedAt = new Map<string, number>()
  const lastReissue = new Map<string, SafeReissue | null>()
  const collected = new Set<string>()
  const startedOver = new Set<string>()
  /** Keys some claim answered for: the store knows them. */
  const answered = new Set<string>()

  const storeFor = (actor: string): CheckedStore => {
    const view: Record<string, unknown> = { now: clock.now }
    for (const [method, fn] of Object.entries(store)) {
      if (typeof fn !== "function" || method === "now" || method === "close" || method === "runEffect") continue
      view[method] = (...args: Array<unknown>) =>
        il.call(actor, describeCall(method, args, clock.now()), async () => {
          const k = typeof args[0] === "object" && args[0] !== null && "operationID" in args[0] ? keyOf(args[0] as OperationKey) : null
          const token = typeof (args[1] as { leaseToken?: unknown } | undefined)?.leaseToken === "string" ? (args[1] as { leaseToken: string }).leaseToken : null
          const judged = (outcome: string | null, lease: string | null, markedSent = false) => {
            if (k !== null && LEASE_METHODS.has(method)) leaseCalls.push({ seq: ++seq, actor, key: k, method, token, outcome, lease, markedSent })
          }
          try {
            const answer = await (fn as (...a: Array<unknown>) => Promise<unknown>).apply(store, args)
            const outcome = (answer as { outcome?: unknown } | null)?.outcome
            const claimed = method === "claimOperation" && outcome === "claimed" ? answer as Extract<ClaimResult, { outcome: "claimed" }> : undefined
            judged(typeof outcome === "string" ? outcome : null, claimed?.lease.token ?? null, claimed !== undefined && claimed.operation.sendMarker === claimed.lease.token)
            if (k !== null && outcome === "committed") committedAt.set(k, seq)
            if (method === "claimOperation") {
              const claim = answer as ClaimResult
              answered.add(k!)
              if (claim.outcome === "claimed") {
                lastReissue.set(`${actor} ${k}`, claim.reissue)
                if (claim.created && collected.has(k!)) {
                  collected.delete(k!)
                  startedOver.add(k!)
                  il.note(`${k} claimed again after retention removed it: a new operation`)
                }
              }
            }
            return answer
          } catch (error) {
            judged(null, null)
            violations.push(...judgeRejection(`${actor}: ${method}`, error))
            throw error
          }
        }, showAnswer(method))
    }
    return view as unknown as CheckedStore
  }
  const reissueOf = (actor: string) => (request: Omit<WriteRequest, "reissue">): WriteRequest["reissue"] => {
    sends.push({ seq: ++seq, actor, key: request.key, what: `${request.op === "update" ? "an" : "a"} ${request.op}${request.entityID === undefined ? "" : ` of ${request.entityID}`}`, request })
    const reissue = lastReissue.get(`${actor} ${request.key}`) ?? null
    if (reissue?.kind === "conditional-update" && request.op === "update" && request.ifMatch === reissue.ifMatch) return reissue.kind
    if (reissue?.kind === "deterministic-create" && request.op === "create" && request.providerID === reissue.providerID) return reissue.kind
    return null
  }
  const runLoop = async (actor: string, edit: CheckEdit): Promise<"ok" | "crashed"> => {
    try {
      await loop(storeFor(actor), provider.client(actor, reissueOf(actor)), edit)
    } catch (error) {
      if (error instanceof Crash) return "crashed"
      violations.push(...judgeRejection(`${actor}'s loop for ${keyOf(edit)}`, error))
    }
    return "ok"
  }
  const verify = async (actor: string, watch: ProjectionWatch): Promise<void> => {
    const identity: WatchIdentity = { ...CHECK_SCOPE, sourceID: watch.sourceID }
    const s = storeFor(actor)
    try {
      const until = clock.now() + 1_000
      if (!(await s.claimWatchAttempt(identity, { generation: watch.repairGeneration, now: clock.now(), until }))) return
      const entity = await provider.get(actor, watch.sourceID)
      const outcome = await s.recordVerification(identity, {
        generation: watch.repairGeneration, claimedUntil: until, fetchedDigest: entity?.digest ?? null, maxAttempts: 3, dueAt: clock.now()
      })
      const doc = documents.get(watch.documentID)
      if (outcome === "pending" && entity !== null && doc !== undefined) {
        doc.winner = entity.digest // the repair: the local document takes the provider's state
        il.note(`verifier repairs ${watch.documentID} from ${entity.id}: winner ${entity.digest}`)
      }
    } catch (error) {
      violations.push(...judgeRejection(`${actor}: verify`, error))
    }
  }
  /** One verification pass over `watches` (listed due): the check's own verifier, or the loop's given as `verifier`. */
  const verifyDue = async (actor: string, watches: ReadonlyArray<ProjectionWatch>): Promise<void> => {
    if (settings.verifier === undefined) {
      for (const watch of watches) await verify(actor, watch)
      return
    }
    if (watches.length === 0) return
    const repair = (documentID: string, digest: string) => {
      const doc = documents.get(documentID)
      if (doc === undefined) return
      doc.winner = digest
      il.note(`${actor}'s verifier repairs ${documentID}: winner ${digest}`)
    }
    try {
      await settings.verifier(storeFor(actor), provider.client(actor, reissueOf(actor)), repair)
    } catch (error) {
      if (!(error instanceof Crash)) violations.push(...judgeRejection(`${actor}'s verifier`, error))
    }
  }
  const editOf = (row: ConnectorOperation): CheckEdit => edits.get(keyOf(row)) ?? {
    callerDID: row.callerDID, operationID: row.operationID, ownerDID: row.ownerDID, connectorName: row.connectorName, model: row.model,
    op: row.op, accountKey: row.accountKey, target: row.target, sourceID: row.sourceID, deterministicEventID: row.deterministicEventID,
    payloadHash: row.payloadHash, reissueIntent: row.reissueIntent as ClaimOperationInput["reissueIntent"], providerEtag: row.providerEtag,
    documentID: row.documentID ?? ""
  }
  let sweeps = 0
  const sweep = async (rounds: { verify: boolean; drive: boolean }) => {
    const actor = `sweep${++sweeps}`
    let due: { operations: ReadonlyArray<ConnectorOperation>; watches: ReadonlyArray<ProjectionWatch> }
    try {
      due = await storeFor(actor).listDueOperations(clock.now())
    } catch {
      return
    }
    if (rounds.drive) for (const row of due.operations) await runLoop(actor, editOf(row))
    if (rounds.verify) await verifyDue(actor, due.watches)
  }
  const allOperations = async (): Promise<ReadonlyArray<ConnectorOperation>> => {
    const out: Array<ConnectorOperation> = []
    let cursor: string | undefined
    for (;;) {
      const page = await store.listOperations({ limit: 500, cursor })
      out.push(...page.items)
      if (page.nextCursor === null) return out
      cursor = page.nextCursor
    }
  }
  const disturb = async (d: Disturbance): Promise<void> => {
    switch (d.kind) {
      case "clock":
        clock.advance(d.ms)
        il.note(`clock ${d.ms >= 0 ? "+" : ""}${d.ms} ms → +${clock.now() - CHECK_START}`)
        return
      case "sweep":
        return sweep({ verify: false, drive: true })
      case "takeover":
        clock.advance(CHECK_POLICY.leaseMs + 1)
        il.note(`clock +${CHECK_POLICY.leaseMs + 1} ms (every lease lapses) → +${clock.now() - CHECK_START}; the sweep takes over`)
        return sweep({ verify: false, drive: true })
      case "verify":
        return sweep({ verify: true, drive: false })
      case "retention": {
        const before = new Set((await allOperations()).map(keyOf))
        await storeFor("retention").collectFinishedOperations({ before: clock.now() - 500, limit: 50 }).catch(() => 0)
        const after = new Set((await allOperations()).map(keyOf))
        for (const k of before) if (!after.has(k)) collected.add(k)
        return
      }
      case "offline":
        provider.goOffline(d.requests)
        il.note(`network down for the next ${d.requests} request(s)`)
        return
      case "reconnect":
        provider.comeOnline()
        await storeFor("world").resumeOfflineDeferred(clock.now()).catch(() => undefined)
        return
      case "expire-grant":
        provider.expireGrant()
        il.note("the OAuth grant expires")
        return
      case "reauth":
        provider.renewGrant()
        await storeFor("world").resumeAuthDeferred({ ownerDID: CHECK_SCOPE.ownerDID, connectorNames: [CHECK_SCOPE.connectorName], now: clock.now() })
          .catch(() => undefined)
        return
      case "fail-writes":
        faults.failNextWrites(d.rows, d.count, d.method)
        il.note(`storage: the next ${d.count} ${d.rows}${d.method === undefined ? "" : ` ${d.method}`} write(s) fail`)
        return
      case "lose-race":
        faults.loseNextRaces(d.rows)
        il.note(`storage: the next versioned ${d.rows} write loses its race`)
        return
      case "fail-winner-read":
        faults.failNextWinnerReads()
        il.note("the next winner read fails")
        return
    }
  }

  try {
    const runner = (actor: string, steps: CheckPlan["runners"][number]) => async () => {
      for (const [i, step] of steps.entries()) {
        try {
          await il.point(actor, `edit ${step.documentID}`)
        } catch {
          return
        }
        // A create is a new local document; an update edits one bound to an entity (or creates it again); a delete deletes its entity.
        const documentID = step.kind === "create" ? `${actor}-new${i + 1}` : step.documentID
        if (step.kind === "update" && !settings.kinds.includes("create") && !provider.entities.has(documents.get(documentID)?.source ?? "")) {
          il.note(`${actor} leaves ${documentID} alone: its entity is gone, and an update of it would be a create, not among the kinds`)
          continue
        }
        const doc = documents.get(documentID) ?? { winner: "", rev: 0, source: "" }
        documents.set(documentID, doc)
        doc.rev++
        doc.winner = `${documentID}@${doc.rev}`
        const edit = editInput(actor, i + 1, documentID, doc, step.kind, step.deleteIntent, provider.entities.get(doc.source))
        if (edit.reissueIntent.kind === "deterministic-create") doc.source = edit.reissueIntent.providerID
        edits.set(keyOf(edit), edit)
        const verb = step.kind === "create" ? "creates" : step.kind === "delete" ? `deletes (${step.deleteIntent})` : "edits"
        il.note(`${actor} ${verb} ${documentID}${step.kind === "delete" ? ` (${edit.sourceID})` : ` → ${doc.winner}`}: ${edit.op} as ${keyOf(edit)}`)
        if ((await runLoop(actor, edit)) === "crashed") return
      }
    }
    const world = async () => {
      for (const d of plan.disturbances) {
        await il.point("world", d.kind === "clock" ? `clock ${d.ms}` : d.kind)
        await disturb(d)
      }
    }
    // The store's runtime is built by its first call: before the schedule, so no run depends on how long that takes.
    await store.getOperation({ callerDID: CHECK_CALLER, operationID: "warm-up" })
    il.note("— schedule starts —")
    await il.waitFor(Promise.all([...plan.runners.map((steps, i) => runner(`runner${i + 1}`, steps)()), world()]))
    await il.drain()
    il.calm = true
    faults.clear()
    provider.comeOnline()
    provider.renewGrant()
    clock.set(Math.max(clock.now(), CHECK_START) + 60_000)
    il.note("— schedule over: late requests arrived; recovery with every lease lapsed, the network and the grant back —")
    const listed = new Set((await store.listDueOperations(clock.now())).operations.map(keyOf))
    const missed = missedBySweep(await allOperations(), listed, clock.now())
    const horizon = clock.now() + settings.recoveryHorizonMs
    il.note(`recovery drives what is due, moving the clock to each pending due time up to +${horizon - CHECK_START} (${settings.recoveryHorizonMs} ms on), in at most ${settings.recoveryRounds} rounds`)
    for (let round = 0; round < settings.recoveryRounds; round++) {
      await store.resumeOfflineDeferred(clock.now())
      await store.resumeAuthDeferred({ ownerDID: CHECK_SCOPE.ownerDID, connectorNames: [CHECK_SCOPE.connectorName], now: clock.now() })
      const due = await store.listDueOperations(clock.now())
      for (const row of due.operations) await runLoop("recovery", editOf(row))
      await verifyDue("recovery", due.watches)
      if (due.operations.length > 0 || due.watches.length > 0) {
        clock.advance(2_000)
        continue
      }
      // Nothing due now: move the clock to the next time something falls due, within the horizon.
      const attempted = (await allOperations()).filter((r) => r.state === "attempted")
      const pending = (await store.listWatches({ limit: 500 })).items.filter((w) => w.verificationStatus === "pending_verification" && w.nextAttemptAt !== null)
      const next = Math.min(
        ...attempted.map((r) => Math.max(r.nextAttemptAt ?? 0, r.leaseExpiresAt ?? 0)),
        ...pending.map((w) => w.nextAttemptAt!)
      )
      if (!Number.isFinite(next)) {
        if (attempted.length === 0) break
        clock.advance(2_000)
        continue
      }
      if (next <= clock.now()) {
        clock.advance(2_000)
        continue
      }
      if (next > horizon) {
        il.note(`recovery stops: the next due time, +${next - CHECK_START}, is past its horizon +${horizon - CHECK_START}`)
        break
      }
      const what = [...attempted.filter((r) => Math.max(r.nextAttemptAt ?? 0, r.leaseExpiresAt ?? 0) === next).map(keyOf),
        ...pending.filter((w) => w.nextAttemptAt === next).map((w) => `watch ${w.sourceID} g${w.repairGeneration}`)]
      clock.set(next)
      il.note(`recovery: clock → +${clock.now() - CHECK_START}, when ${what.join(", ")} fall(s) due`)
    }

    const numberedSends = (): Array<SentWrite> => {
      const left = new Map<string, Array<number>>()
      for (const e of provider.ledger) left.set(`${e.actor} ${e.request.key}`, [...(left.get(`${e.actor} ${e.request.key}`) ?? []), e.n])
      return sends.map((send) => {
        const n = left.get(`${send.actor} ${send.key}`)?.shift()
        return { ...send, what: `${send.what} (${n === undefined ? "it crashed before the request left" : `request #${n}`})` }
      })
    }
    violations.push(...judgeWriteBackEnd({
      provider,
      rows: await allOperations(),
      watches: (await store.listWatches({ limit: 500 })).items,
      knownKeys: answered,
      collected,
      startedOver,
      missedBySweep: missed,
      committedAt: (key) => committedAt.get(key),
      deleteTargetOf: (key) => edits.get(key)?.sourceID,
      judgedAt: clock.now()
    }))
    violations.push(...judgeLeases(leaseCalls, numberedSends()))
    return { violations, trace: il.formatTrace(), requests: provider.ledger.length }
  } finally {
    await store.close()
  }
}

const disturbanceArbitrary = (storeFaults: boolean): fc.Arbitrary<Disturbance> => {
  const plain: Array<fc.Arbitrary<Disturbance>> = [
    fc.constantFrom(300, 1_001, 1_500, 3_000, -2_000, 0).map((ms) => ({ kind: "clock" as const, ms })),
    fc.constant({ kind: "sweep" as const }),
    fc.constant({ kind: "takeover" as const }),
    fc.constant({ kind: "takeover" as const }),
    fc.constant({ kind: "verify" as const }),
    fc.constant({ kind: "retention" as const }),
    fc.integer({ min: 1, max: 3 }).map((requests) => ({ kind: "offline" as const, requests })),
    fc.constant({ kind: "reconnect" as const }),
    fc.constant({ kind: "expire-grant" as const }),
    fc.constant({ kind: "reauth" as const })
  ]
  const faulty: Array<fc.Arbitrary<Disturbance>> = [
    fc.record({
      kind: fc.constant("fail-writes" as const),
      rows: fc.constantFrom<WriteKind>("operation", "watch"),
      count: fc.integer({ min: 1, max: 2 }),
      method: fc.constantFrom<string | undefined>(undefined, "update", "insert")
    }),
    fc.record({ kind: fc.constant("lose-race" as const), rows: fc.constantFrom<WriteKind>("operation", "watch") }),
    fc.constant({ kind: "fail-winner-read" as const })
  ]
  return fc.oneof(...plain, ...(storeFaults ? faulty : []))
}

/** The plans `checkRunnerLoop` draws, for `options` (exported for your own properties over `runPlan`). */
export const planArbitrary = (options: CheckRunnerLoopOptions = {}): fc.Arbitrary<CheckPlan> => {
  const kinds = runSettings(options).kinds
  const deleteIntents = listOption("deleteIntents", options.deleteIntents, DELETE_INTENTS)
  const runners = Math.min(4, Math.max(1, options.runners ?? 2))
  const perRunner = Math.max(1, options.editsPerRunner ?? 2)
  const crashes = Math.max(0, options.crashes ?? 2)
  const fate = requestFate(options.fates)
  const names = Array.from({ length: runners }, (_, i) => `runner${i + 1}`)
  return fc.record({
    runners: fc.array(
      fc.array(fc.record({
        documentID: fc.constantFrom(...CHECK_DOCUMENTS),
        kind: fc.constantFrom(...kinds),
        deleteIntent: fc.constantFrom(...deleteIntents)
      }), { minLength: 1, maxLength: perRunner }),
      { minLength: runners, maxLength: runners }
    ),
    disturbances: fc.array(disturbanceArbitrary(options.storeFaults ?? true), { maxLength: 8 }),
    crashes: crashes === 0 ? fc.constant([]) : fc.array(fc.tuple(fc.constantFrom(...names), fc.integer({ min: 1, max: 30 })), { maxLength: crashes }),
    fates: fc.array(fate, { maxLength: 10 }),
    // Never shrunk: a shrunk plan is judged under the schedule it failed under.
    schedule: fc.noShrink(fc.integer())
  })
}

/**
 * A fresh scheduler (fast-check's, releasing each task once the store's
 * work has settled) whose order is `seed`'s alone. Every run makes its own:
 * fast-check's clones of one drawn scheduler share its random source, so a
 * run while shrinking would see another order than the same run replayed.
 */
export const schedulerOf = (seed: number): fc.Scheduler => fc.sample(fc.scheduler({ act: settled }), { seed, numRuns: 1 })[0]!

const describePlan = (plan: CheckPlan): string =>
  [
    ...plan.runners.map((steps, i) =>
      `  runner${i + 1}: ${steps.map((s) => s.kind === "create" ? "create a document" : s.kind === "delete" ? `delete ${s.documentID} (${s.deleteIntent})` : `update ${s.documentID}`).join(", ")}`),
    `  between steps: ${plan.disturbances.map((d) => d.kind === "clock" ? `clock ${d.ms}` : d.kind === "fail-writes" ? `fail ${d.count} ${d.rows}${d.method === undefined ? "" : ` ${d.method}`} write(s)` : d.kind === "lose-race" ? `lose a ${d.rows} race` : d.kind === "offline" ? `offline for ${d.requests}` : d.kind).join(", ") || "nothing"}`,
    `  crashes: ${plan.crashes.map(([a, p]) => `${a} at its point ${p}`).join(", ") || "none"}`,
    `  schedule: ${plan.schedule}`,
    `  request fates: ${plan.fates.join(", ") || "all ok"}`
  ].join("\n")

/** A failing run's report: the invariants broken, the plan, and the calls in order with their answers. */
export const formatRunReport = (plan: CheckPlan, result: RunResult): string =>
  [
    `${result.violations.length} violation(s):`,
    ...result.violations.map((v) => `  ✗ ${v.invariant} (${RUNNER_INVARIANTS[v.invariant]}):\n      ${v.detail}`),
    "the run:",
    describePlan(plan),
    "the calls in order, with each answer:",
    result.trace
  ].join("\n")

/**
 * Checks your runner loop the way connector-store checks itself: runs it as
 * several runners over a fresh memory store (or the store `openStore`
 * opens) against a `FakeProvider`, under fast-check's scheduler, so every
 * await is a possible interleaving and a possible crash. Between steps the
 * clock moves (leases lapse, and a runner takes another's operation over),
 * the due sweep re-drives what it lists through your loop, the verifier
 * and retention run, the network goes down and the grant expires, and
 * storage writes fail or lose their race. After the schedule every lease
 * lapses and a calm recovery drives everything due, moving the clock to
 * each pending due time up to `recoveryHorizonMs` ahead (your watches due
 * in 30 s are verified), in at most `recoveryRounds` rounds. Resolves with what it
 * ran; rejects with `RunnerLoopCheckFailed` (the shrunk counterexample: its
 * seed and path, the plan, and the calls in order with each answer) when
 * a write was applied twice outside a sanctioned reissue, lost, recorded
 * as failed although it landed, left stuck (or a watch pending never due),
 * committed without a watch, a committed delete left its entity or its
 * watch, the loop called the store under a token its claim did not hand
 * out or sent without holding the lease, or a call rejected untyped
 * (`RUNNER_INVARIANTS`, judged by the invariants module's judges). The
 * printed seed and path replay the shrunk run call for call.
 */
export const checkRunnerLoop = async (loop: RunnerLoop, options: CheckRunnerLoopOptions = {}): Promise<CheckRunnerLoopReport> => {
  const started = Date.now()
  const settings = runSettings(options)
  const plans = planArbitrary(options)
  const numRuns = options.numRuns ?? defaultRuns()
  const property = fc.asyncProperty(plans, async (plan) => {
    const result = await runPlan(loop, schedulerOf(plan.schedule), plan, options.openStore, settings)
    if (result.violations.length > 0) {
      const report = formatRunReport(plan, result)
      if (options.verbose === true) console.log(report)
      throw new Error(report)
    }
  })
  const replay = options.seed === undefined ? {} : options.path === undefined ? { seed: options.seed } : { seed: options.seed, path: options.path, endOnFailure: true }
  const details = await fc.check(property, { numRuns, ...replay })
  const elapsedMs = Date.now() - started
  if (!details.failed) {
    if (options.verbose === true) console.log(`checkRunnerLoop: ${details.numRuns} runs passed in ${elapsedMs} ms (seed ${details.seed})`)
    return { runs: details.numRuns, seed: details.seed, elapsedMs }
  }
  const message = String((details.errorInstance as Error | undefined)?.message ?? details.errorInstance)
  const invariants = [...new Set([...message.matchAll(/✗ ([a-z-]+) \(/g)].map((m) => m[1] as RunnerInvariant))]
  const path = details.counterexamplePath ?? ""
  const report = [
    `checkRunnerLoop: your runner loop broke ${invariants.join(", ") || "the check"} (after ${details.numRuns} run(s), shrunk ${details.numShrinks} time(s))`,
    `replay it: checkRunnerLoop(loop, { seed: ${details.seed}, path: ${JSON.stringify(path)} })`,
    message
  ].join("\n")
  throw new RunnerLoopCheckFailed(invariants, details.seed, path, report)
}

