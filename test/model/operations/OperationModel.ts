import type { DeferReason, OperationState, SafeReissue } from "@connector-store/core"
import { FakeProvider, keyOf, type LedgerEntry, type RequestFate, type WriteAnswer, type WriteRequest } from "@connector-store/testkit"

/** The store's policy in every model run: small numbers, so limits and lapses happen often. */
export const MODEL_POLICY = {
  leaseMs: 1_000,
  maxAttempts: 3,
  backoff: { baseDelayMs: 100, maxDelayMs: 400, jitter: "equal" as const },
  deferMs: 5_000
}

/** Every operation of a run shares these, so finalizes of different keys meet on the same watches. */
export const PARTY = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" } as const

/**
 * The idempotency keys a run uses, each with its own way to re-send after a
 * request in doubt (the conditional update's If-Match is the etag of the
 * entity its provider holds before any write).
 */
export const KEYS = [
  { callerDID: "did:caller:1", operationID: "op-a", reissue: { kind: "conditional-update", ifMatch: "etag-1" }, documentID: "d1" },
  { callerDID: "did:caller:1", operationID: "op-b", reissue: { kind: "deterministic-create", providerID: "evt-b" }, documentID: "d1" },
  { callerDID: "did:caller:2", operationID: "op-a", reissue: { kind: "reconcile" }, documentID: "d2" }
] as const

/** Provider sources a finalize may report, and the document each projects into (two share `d1`). */
export const SOURCES = { s1: "d1", s2: "d1", s3: "d2" } as const
export type SourceName = keyof typeof SOURCES

/** The documents of a run; every winner is `w` (finalize reads it as observed). */
export const DOCUMENTS = ["d1", "d2"] as const

/** The start of every run's clock. */
export const START = 1_700_000_000_000

/** One operation as the model remembers it. */
export interface ModelOperation {
  readonly callerDID: string
  readonly operationID: string
  payloadHash: string
  safeReissue: boolean
  state: OperationState
  attempts: number
  lease: { readonly token: string; readonly expiresAt: number } | null
  sendMarker: string | null
  /** The store's durable doubt, by the model's own reading of the rule. */
  inDoubtSince: number | null
  nextAttemptAt: number | null
  deferReason: DeferReason | null
  documentID: string | null
  sourceID: string | null
  createdAt: number
  updatedAt: number
  version: number
}

/** One watch as the model remembers it, by source (the rest of the identity is `PARTY`). */
export interface ModelWatch {
  documentID: string
  generation: number
  nextAttemptAt: number
  version: number
}

/**
 * What a runner's own provider request got back: not sent yet; applied and
 * answered (`ok`); no answer at all (`none`: the request or its answer was
 * lost); or an answer proving it did not apply (`not-applied`: a 429, a 412
 * on a conditional re-send, a 409 on a taken id).
 */
export type RunAnswer = "unsent" | "ok" | "none" | "not-applied"

/** One runner's run (one claim), as the runner itself knows it. */
export interface RunnerRun {
  readonly key: number
  /** The reissue the claim handed out: how this run must send (null: a plain send). */
  readonly reissue: SafeReissue | null
  /** `markOperationSent` answered `sent` or `already-sent`: the run may send its one request. */
  marked: boolean
  answer: RunAnswer
}

/** The model: plain tables and the clock. */
export interface OperationModel {
  now: number
  readonly operations: Map<number, ModelOperation>
  readonly watches: Map<string, ModelWatch>
  /** Every lease token a runner ever got for a key, oldest first: the runners of that key. */
  readonly runners: Map<number, Array<string>>
  /** Every run by its lease token. */
  readonly runs: Map<string, RunnerRun>
  /** The provider of each key (a key retention forgot starts with a new one). */
  readonly provider: Map<number, KeyProvider>
}

/** The provider entity each key's updates write; the create key has none (its write creates its deterministic id). */
const TARGETS: ReadonlyArray<string | null> = ["evt-a", null, "evt-c"]

/** How each of the model's fates meets the testkit provider. */
export const PROVIDER_FATES: Readonly<Record<SendFate, RequestFate>> = {
  answered: "ok",
  "answer-lost": "applied-no-answer",
  lost: "lost",
  "rate-limited": "429"
}

/**
 * The provider side of one key's life: the testkit's `FakeProvider`, with
 * the entity the key's updates write already in place (its etag is the
 * conditional update's If-Match), each request meeting the fate its command
 * drew. A request goes out as a runner would send it: with the reissue its
 * claim handed out, exactly as that says (If-Match, deterministic id);
 * without one, plainly (an update without If-Match; a deterministic create
 * under its id). So a plain send applies, and a conditional re-send applies
 * only while nothing applied: the provider's own 412 / 409 refuse it.
 */
export class KeyProvider {
  readonly provider: FakeProvider
  private fate: RequestFate = "ok"

  constructor(readonly key: number) {
    this.provider = new FakeProvider({ fates: () => this.fate })
    const target = TARGETS[key]
    if (target === null || target === undefined) return
    const entity = this.provider.seed(target, "before", KEYS[key]!.documentID)
    const reissue = KEYS[key]!.reissue
    if (reissue.kind === "conditional-update" && reissue.ifMatch !== entity.etag) {
      throw new Error(`${keyLabel(key)}: its If-Match ${reissue.ifMatch} is not the etag of the entity in place (${entity.etag})`)
    }
  }

  /** The request a run sends under `reissue`, writing `digest`. */
  request(reissue: SafeReissue | null, digest: string): WriteRequest {
    const spec = KEYS[this.key]!
    const base = { key: keyOf(spec), documentID: spec.documentID, digest }
    const entityID = TARGETS[this.key] ?? undefined
    if (reissue?.kind === "conditional-update") return { ...base, op: "update", entityID, ifMatch: reissue.ifMatch, reissue: reissue.kind }
    if (reissue?.kind === "deterministic-create") return { ...base, op: "create", providerID: reissue.providerID, reissue: reissue.kind }
    if (reissue !== null) throw new Error(`${keyLabel(this.key)}: no key of the model deletes, yet its claim handed out ${reissue.kind}`)
    return spec.reissue.kind === "deterministic-create"
      ? { ...base, op: "create", providerID: spec.reissue.providerID, reissue: null }
      : { ...base, op: "update", entityID, reissue: null }
  }

  /** Run `actor` sends its request under `reissue`; it meets `fate`. */
  send(actor: string, reissue: SafeReissue | null, digest: string, fate: SendFate): Promise<WriteAnswer> {
    this.fate = PROVIDER_FATES[fate]
    return this.provider.write(actor, this.request(reissue, digest))
  }

  /** The requests that applied. */
  get applied(): ReadonlyArray<LedgerEntry> {
    return this.provider.appliedOf(keyOf(KEYS[this.key]!))
  }

  /**
   * True once a request applied or went without an answer proving it did
   * not (lost, or its answer lost): as far as the store can know, it may
   * have landed.
   */
  get possiblyLanded(): boolean {
    return this.provider.ledger.some((entry) => entry.applied || entry.arrival !== "arrived")
  }
}

/** An empty model at the start of a run. */
export const emptyModel = (): OperationModel => ({
  now: START,
  operations: new Map(),
  watches: new Map(),
  runners: new Map(KEYS.map((_, i) => [i, []])),
  runs: new Map(),
  provider: new Map(KEYS.map((_, i) => [i, new KeyProvider(i)]))
})

/**
 * The provider receives run `token`'s request of key `key`, sent as its
 * claim's reissue says, and it meets `fate`. Returns what the run learns.
 */
export const providerReceives = async (
  model: OperationModel,
  key: number,
  token: string,
  fate: SendFate
): Promise<Exclude<RunAnswer, "unsent">> => {
  const run = model.runs.get(token)!
  const answer = await model.provider.get(key)!.send(token, run.reissue, model.operations.get(key)!.payloadHash, fate)
  const status = answer.status
  if (status !== 200 && status !== "timeout" && status !== 409 && status !== 412 && status !== 429) {
    throw new Error(`${keyLabel(key)}: the provider answered ${status}, which no fate of the model calls for`)
  }
  run.answer = status === 200 ? "ok" : status === "timeout" ? "none" : "not-applied"
  return run.answer
}

/** How a request fares on the way: answered, its answer lost, lost itself, or rate-limited (429). */
export type SendFate = "answered" | "answer-lost" | "lost" | "rate-limited"

/**
 * The lease token of runner `runner` of key `key`: `LATEST` is the newest
 * runner, other numbers cycle over all of them; a key with none uses a
 * token nobody holds.
 */
export const tokenOf = (model: OperationModel, key: number, runner: number): string => {
  const tokens = model.runners.get(key) ?? []
  if (tokens.length === 0) return "never-issued"
  return runner === LATEST ? tokens[tokens.length - 1]! : tokens[runner % tokens.length]!
}

/** The runner number that names a key's newest runner. */
export const LATEST = -1

/** A readable name of a runner number. */
export const runnerLabel = (runner: number): string => runner === LATEST ? "newest runner" : `runner ${runner}`

/** True while a runner's lease is live at `now` (a lease expiring at t is live strictly before t). */
export const leaseLive = (op: ModelOperation, now: number): boolean => op.lease !== null && op.lease.expiresAt > now

/** True when `token` holds the lease of the attempted operation. */
export const holds = (op: ModelOperation | undefined, token: string): boolean =>
  op !== undefined && op.state === "attempted" && op.lease?.token === token

/** Records a write to `op` at the model's time. */
export const touch = (model: OperationModel, op: ModelOperation): void => {
  op.updatedAt = model.now
  op.version++
}

/** Releases `op`'s lease and schedule, as every terminal transition does. */
export const endWith = (model: OperationModel, op: ModelOperation, state: OperationState): void => {
  op.state = state
  op.lease = null
  op.nextAttemptAt = null
  op.deferReason = null
  touch(model, op)
}

/** A readable label of key `i`. */
export const keyLabel = (i: number): string => `${KEYS[i]!.callerDID}/${KEYS[i]!.operationID}`
