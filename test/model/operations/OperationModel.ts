import type { DeferReason, OperationState } from "@connector-store/core"

/** The store's policy in every model run: small numbers, so limits and lapses happen often. */
export const MODEL_POLICY = {
  leaseMs: 1_000,
  maxAttempts: 3,
  backoff: { baseDelayMs: 100, maxDelayMs: 400, jitter: "equal" as const },
  deferMs: 5_000
}

/** Every operation of a run shares these, so finalizes of different keys meet on the same watches. */
export const PARTY = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" } as const

/** The idempotency keys a run uses, each with its own way to re-send after a request in doubt. */
export const KEYS = [
  { callerDID: "did:caller:1", operationID: "op-a", reissue: { kind: "conditional-update", ifMatch: "etag-0" }, documentID: "d1" },
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
 * answered (`ok`); no answer at all (`none`: a timeout, a reset, a 5xx, or
 * its request is still in flight); or an answer proving it did not apply
 * (`not-applied`: a 429, a 412 on a conditional re-send, an id taken).
 */
export type RunAnswer = "unsent" | "ok" | "none" | "not-applied"

/** One runner's run (one claim), as the runner itself knows it. */
export interface RunnerRun {
  readonly key: number
  /** The reissue the claim handed out: how this run must send (null: a plain send). */
  readonly reissue: { readonly kind: string } | null
  /** `markOperationSent` answered `sent` or `already-sent`: the run may send its one request. */
  marked: boolean
  answer: RunAnswer
}

/** One request that reached the provider's ledger. */
export interface ProviderRequest {
  readonly token: string
  readonly mode: string
  readonly applied: boolean
  readonly answer: Exclude<RunAnswer, "unsent">
}

/**
 * The provider's side of one key: every request that left, how many of
 * them it applied, and whether one may have landed without the store
 * knowing the outcome (a request without an answer proving it did not
 * apply, before the operation committed).
 */
export interface ProviderLedger {
  readonly requests: Array<ProviderRequest>
  applied: number
  possiblyLanded: boolean
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
  /** The provider's ledger of each key (a key retention forgot starts a new one). */
  readonly provider: Map<number, ProviderLedger>
}

/** A provider ledger with no request. */
export const emptyLedger = (): ProviderLedger => ({ requests: [], applied: 0, possiblyLanded: false })

/** An empty model at the start of a run. */
export const emptyModel = (): OperationModel => ({
  now: START,
  operations: new Map(),
  watches: new Map(),
  runners: new Map(KEYS.map((_, i) => [i, []])),
  runs: new Map(),
  provider: new Map(KEYS.map((_, i) => [i, emptyLedger()]))
})

/**
 * The provider receives run `token`'s request of key `key`, sent as its
 * claim's reissue says: a plain send applies; a conditional update or a
 * deterministic create applies only if nothing applied yet, and is refused
 * otherwise (412 / id taken: not applied). `answerLost` drops the answer on
 * the way back; `lost` drops the request on the way there; `rateLimited` is
 * refused with a 429. Returns what the run learns.
 */
export const providerReceives = (
  model: OperationModel,
  key: number,
  token: string,
  fate: SendFate
): Exclude<RunAnswer, "unsent"> => {
  const run = model.runs.get(token)!
  const ledger = model.provider.get(key)!
  const mode = run.reissue?.kind ?? "plain"
  const refused = fate === "lost" || fate === "rate-limited" || (mode !== "plain" && ledger.applied > 0)
  const applied = !refused
  const answer: Exclude<RunAnswer, "unsent"> = fate === "lost" || fate === "answer-lost" ? "none"
    : fate === "rate-limited" ? "not-applied"
    : applied ? "ok"
    : "not-applied"
  if (applied) ledger.applied++
  if (answer !== "not-applied") ledger.possiblyLanded = true
  ledger.requests.push({ token, mode, applied, answer })
  run.answer = answer
  return answer
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
