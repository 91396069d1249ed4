import { type ClaimOperationInput, ConnectorStore, type FailureKind } from "@connector-store/core"
import { describeRequest } from "@connector-store/testkit"
import { Cause, Effect, Exit } from "effect"
import type fc from "fast-check"
import { expect } from "vitest"
import { expectAgreement } from "./agreement.js"
import type { ModelStore } from "./ModelStore.js"
import {
  endWith,
  holds,
  KEYS,
  keyLabel,
  leaseLive,
  MODEL_POLICY,
  type OperationModel,
  PARTY,
  providerReceives,
  runnerLabel,
  type SendFate,
  type SourceName,
  SOURCES,
  tokenOf,
  touch
} from "./OperationModel.js"

type Command = fc.AsyncCommand<OperationModel, ModelStore>

const call = <A, E>(real: ModelStore, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  real.value(Effect.flatMap(ConnectorStore, use))

const claimInputOf = (key: number, payloadHash: string, markSent = false): ClaimOperationInput => {
  const spec = KEYS[key]!
  return {
    ...(markSent ? { markSent } : {}),
    callerDID: spec.callerDID,
    operationID: spec.operationID,
    ...PARTY,
    op: spec.reissue.kind === "deterministic-create" ? "create" : "update",
    target: "calendar/primary",
    sourceID: null,
    deterministicEventID: `event-${key}`,
    payloadHash,
    reissueIntent: spec.reissue,
    documentID: spec.documentID
  }
}

/**
 * A runner claims key `key` with payload `hash` (another hash than the
 * stored one is a conflict); with `markSent`, a claim that leases also
 * marks the run's request sent.
 */
export class Claim implements Command {
  constructor(readonly key: number, readonly hash: string, readonly markSent = false) {}
  check = () => true
  toString = () => `claim(${keyLabel(this.key)}, ${this.hash}${this.markSent ? ", markSent" : ""})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const exit = await real.run(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimInputOf(this.key, this.hash, this.markSent))))
    const op = model.operations.get(this.key)
    const now = model.now
    if (op !== undefined && op.payloadHash !== this.hash) {
      expect(Exit.isFailure(exit) && Cause.isFailType(exit.cause) ? exit.cause.error : exit).toMatchObject({ _tag: "IdempotencyConflict" })
      return expectAgreement(model, real)
    }
    if (Exit.isFailure(exit)) throw new Error(Cause.pretty(exit.cause))
    const result = exit.value
    if (result.outcome === "claimed" && model.provider.get(this.key)!.possiblyLanded) {
      expect(result.reissue, "a claim after a possibly-landed request never answers reissue: null").not.toBeNull()
    }
    const runners = model.runners.get(this.key)!
    const granted = () => {
      if (result.outcome !== "claimed") throw new Error(`expected claimed, got ${result.outcome}`)
      expect(runners).not.toContain(result.lease.token)
      runners.push(result.lease.token)
      model.runs.set(result.lease.token, { key: this.key, reissue: result.reissue, marked: this.markSent, answer: "unsent" })
      return { token: result.lease.token, expiresAt: now + MODEL_POLICY.leaseMs }
    }
    /** The claim's own mark, when it was asked for: the attempt counted, the run's token the marker. */
    const markedIfAsked = (op: { attempts: number; sendMarker: string | null }, token: string) => {
      if (!this.markSent) return
      op.attempts++
      op.sendMarker = token
    }
    if (op === undefined) {
      expect(result).toMatchObject({ outcome: "claimed", created: true, reissue: null })
      const lease = granted()
      model.operations.set(this.key, {
        callerDID: KEYS[this.key]!.callerDID,
        operationID: KEYS[this.key]!.operationID,
        payloadHash: this.hash,
        safeReissue: KEYS[this.key]!.reissue.kind !== "reconcile",
        state: "attempted",
        attempts: 0,
        lease,
        sendMarker: null,
        inDoubtSince: null,
        nextAttemptAt: lease.expiresAt,
        deferReason: null,
        documentID: KEYS[this.key]!.documentID,
        sourceID: null,
        createdAt: now,
        updatedAt: now,
        version: 0
      })
      markedIfAsked(model.operations.get(this.key)!, lease.token)
    } else if (op.state !== "attempted") {
      expect(result.outcome).toBe("finished")
    } else if (leaseLive(op, now)) {
      expect(result).toMatchObject({ outcome: "busy", leaseExpiresAt: op.lease!.expiresAt })
    } else if (op.nextAttemptAt !== null && op.nextAttemptAt > now) {
      expect(result).toMatchObject({ outcome: "scheduled", nextAttemptAt: op.nextAttemptAt })
    } else {
      // The previous run's marker becomes the durable doubt; an older doubt keeps its time.
      op.inDoubtSince = op.inDoubtSince ?? (op.sendMarker !== null ? now : null)
      const inDoubt = op.inDoubtSince !== null
      if (op.attempts >= MODEL_POLICY.maxAttempts || (inDoubt && !op.safeReissue)) {
        endWith(model, op, inDoubt ? "reconcile_only" : "dead")
        expect(result).toMatchObject({ outcome: "finished", operation: { state: op.state } })
        return expectAgreement(model, real)
      }
      expect(result).toMatchObject({ outcome: "claimed", created: false, reissue: inDoubt ? KEYS[this.key]!.reissue : null })
      op.lease = granted()
      op.nextAttemptAt = op.lease.expiresAt
      op.sendMarker = null
      op.deferReason = null
      markedIfAsked(op, op.lease.token)
      touch(model, op)
    }
    return expectAgreement(model, real)
  }
}

/** Runner `runner` of key `key` marks its request sent. */
export class MarkSent implements Command {
  constructor(readonly key: number, readonly runner: number) {}
  // Runner commands go to keys that exist; a stale or unknown runner of one is still picked now and then.
  check = (model: Readonly<OperationModel>) => model.operations.has(this.key)
  toString = () => `markSent(${keyLabel(this.key)}, ${runnerLabel(this.runner)})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const spec = KEYS[this.key]!
    const token = tokenOf(model, this.key, this.runner)
    const result = await call(real, (s) => s.markOperationSent(spec, { leaseToken: token }))
    const op = model.operations.get(this.key)!
    if (!holds(op, token)) {
      expect(result.outcome).toBe("lease-lost")
    } else if (op.sendMarker === token) {
      expect(result.outcome).toBe("already-sent")
    } else if (op.attempts >= MODEL_POLICY.maxAttempts) {
      expect(result.outcome).toBe("exhausted")
      op.inDoubtSince = op.inDoubtSince ?? (op.sendMarker !== null ? model.now : null)
      endWith(model, op, op.inDoubtSince !== null ? "reconcile_only" : "dead")
    } else {
      expect(result.outcome).toBe("sent")
      model.runs.get(token)!.marked = true
      op.attempts++
      op.sendMarker = token
      touch(model, op)
    }
    return expectAgreement(model, real)
  }
}

/**
 * The provider's own judgement of key `key`'s life: `check()` names no
 * write applied twice outside a sanctioned reissue. Besides, at most one
 * request applied: a model's request arrives as it leaves, so a plain
 * request applied after a reissue was sent after it (a blind send), not a
 * request in flight landing late, the one case `check()` lets pass.
 */
const expectNoDoubleApply = (model: Readonly<OperationModel>, key: number): void => {
  const life = model.provider.get(key)!
  expect(life.provider.check(), "no request is applied twice at the provider").toEqual([])
  const applied = life.applied.map((entry) => `#${entry.n} ${describeRequest(entry.request)} (${entry.fate})`)
  expect(applied.length, `no request is applied twice at the provider: ${applied.join(", ")}`).toBeLessThanOrEqual(1)
}

/**
 * Run `runner` of key `key` sends its one request (after `markOperationSent`
 * said so, while it holds the lease), as its claim's reissue says, to the
 * key's provider, which decides whether it applies and what comes back.
 * Never a store call.
 */
export class Send implements Command {
  constructor(readonly key: number, readonly runner: number, readonly fate: SendFate) {}
  check = (model: Readonly<OperationModel>) => {
    const token = tokenOf(model, this.key, this.runner)
    const run = model.runs.get(token)
    return run !== undefined && run.marked && run.answer === "unsent" && holds(model.operations.get(this.key), token)
  }
  toString = () => `send(${keyLabel(this.key)}, ${runnerLabel(this.runner)}, ${this.fate})`
  async run(model: OperationModel): Promise<void> {
    await providerReceives(model, this.key, tokenOf(model, this.key, this.runner), this.fate)
    expectNoDoubleApply(model, this.key)
  }
}

/**
 * What a failure report says about its request: nothing proving it did not
 * apply (a 503), a 4xx status (429 or 400), the `notApplied` flag alone, or
 * a 4xx the runner flags as not proving it (`notApplied: false`).
 */
export type Evidence = "none" | "4xx" | "flag" | "4xx-not-proof"

/** True when the report proves the request did not apply: the model's own reading of the rule. */
const proves = (evidence: Evidence): boolean => evidence === "4xx" || evidence === "flag"

/** The report fields of `evidence` for a failure of `kind`. */
const reportOf = (kind: FailureKind, evidence: Evidence): { httpStatus: number | null; notApplied?: boolean } => {
  switch (evidence) {
    case "none":
      return { httpStatus: 503 }
    case "4xx":
      return { httpStatus: kind === "permanent" ? 400 : 429 }
    case "flag":
      return { httpStatus: null, notApplied: true }
    case "4xx-not-proof":
      return { httpStatus: 409, notApplied: false }
  }
}

/**
 * True when a run could honestly report `kind` with `evidence` given what
 * its request got back: offline / auth only if nothing left; proof only if
 * nothing left or the answer proved it; never a failure after the provider
 * answered that it applied the write.
 */
const honestFailure = (model: Readonly<OperationModel>, token: string, kind: FailureKind, evidence: Evidence): boolean => {
  const answer = model.runs.get(token)?.answer ?? "unsent"
  if (kind === "offline" || kind === "auth") return answer === "unsent"
  if ((kind === "retryable" || kind === "permanent") && proves(evidence)) return answer === "unsent" || answer === "not-applied"
  return answer !== "ok"
}

/** Runner `runner` of key `key` reports a failed attempt of `kind`. */
export class Fail implements Command {
  constructor(
    readonly key: number,
    readonly runner: number,
    readonly kind: FailureKind,
    readonly retryIn: number | undefined,
    readonly evidence: Evidence = "none"
  ) {}
  // Runner commands go to keys that exist; a stale or unknown runner of one is still picked now and then.
  check = (model: Readonly<OperationModel>) =>
    model.operations.has(this.key) && honestFailure(model, tokenOf(model, this.key, this.runner), this.kind, this.evidence)
  toString = () =>
    `fail(${keyLabel(this.key)}, ${runnerLabel(this.runner)}, ${this.kind} ${JSON.stringify(reportOf(this.kind, this.evidence))}${this.retryIn === undefined ? "" : `, retry in ${this.retryIn}`})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const spec = KEYS[this.key]!
    const token = tokenOf(model, this.key, this.runner)
    const now = model.now
    const retryAt = this.retryIn === undefined ? undefined : now + this.retryIn
    const report = reportOf(this.kind, this.evidence)
    const result = await call(real, (s) =>
      s.recordAttemptFailure(spec, { leaseToken: token, kind: this.kind, ...report, ...(retryAt === undefined ? {} : { retryAt }) }))
    const op = model.operations.get(this.key)!
    if (!holds(op, token)) {
      expect(result.outcome).toBe("lease-lost")
      return expectAgreement(model, real)
    }
    const counted = op.sendMarker === token
    const spent = counted ? op.attempts : op.attempts + 1
    const addsDoubt = this.kind === "unknown" || ((this.kind === "retryable" || this.kind === "permanent") && !proves(this.evidence))
    if (addsDoubt) op.inDoubtSince = op.inDoubtSince ?? now
    op.lease = null
    op.deferReason = null
    if (this.kind === "offline" || this.kind === "auth") {
      expect(result.outcome).toBe("deferred")
      op.attempts = counted ? op.attempts - 1 : op.attempts
      op.sendMarker = null
      op.deferReason = this.kind
      op.nextAttemptAt = retryAt ?? now + MODEL_POLICY.deferMs
      touch(model, op)
    } else if (this.kind === "unknown" && (spent >= MODEL_POLICY.maxAttempts || !op.safeReissue)) {
      expect(result.outcome).toBe("reconcile_only")
      op.attempts = spent
      op.sendMarker = token
      endWith(model, op, "reconcile_only")
    } else if (this.kind === "retryable" && spent >= MODEL_POLICY.maxAttempts && op.inDoubtSince !== null) {
      expect(result.outcome).toBe("reconcile_only")
      op.attempts = spent
      op.sendMarker = token
      endWith(model, op, "reconcile_only")
    } else if (this.kind === "permanent" || (this.kind === "retryable" && spent >= MODEL_POLICY.maxAttempts)) {
      expect(result.outcome).toBe("dead")
      op.attempts = spent
      op.sendMarker = null
      endWith(model, op, "dead")
    } else {
      expect(result.outcome).toBe("retrying")
      const ceiling = Math.min(MODEL_POLICY.backoff.maxDelayMs, MODEL_POLICY.backoff.baseDelayMs * 2 ** (spent - 1))
      const next = result.operation!.nextAttemptAt!
      expect(next).toBeGreaterThanOrEqual(Math.max(now + Math.floor(ceiling / 2), retryAt ?? 0))
      expect(next).toBeLessThanOrEqual(Math.max(now + ceiling, retryAt ?? 0))
      op.attempts = spent
      op.sendMarker = null
      op.nextAttemptAt = next
      touch(model, op)
    }
    return expectAgreement(model, real)
  }
}

/** Runner `runner` of key `key` reports the write landed at provider source `source`. */
export class Finalize implements Command {
  constructor(readonly key: number, readonly runner: number, readonly source: SourceName) {}
  // Runner commands go to keys that exist; a stale or unknown runner of one is still picked now and then.
  // A run finalizes when the provider answered that it applied, when a lookup
  // would find the write applied, when it holds a marked lease and sends now
  // (the send happens here), or, having never marked, as a plain lease test.
  check = (model: Readonly<OperationModel>) => {
    if (!model.operations.has(this.key)) return false
    const token = tokenOf(model, this.key, this.runner)
    const run = model.runs.get(token)
    if (run === undefined || !run.marked) return true
    return run.answer === "ok" || model.provider.get(this.key)!.applied.length > 0 ||
      (run.answer === "unsent" && holds(model.operations.get(this.key), token))
  }
  toString = () => `finalize(${keyLabel(this.key)}, ${runnerLabel(this.runner)}, ${this.source})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const spec = KEYS[this.key]!
    const token = tokenOf(model, this.key, this.runner)
    const run = model.runs.get(token)
    if (run !== undefined && run.marked && run.answer === "unsent" && holds(model.operations.get(this.key), token)) {
      await providerReceives(model, this.key, token, "answered")
      expectNoDoubleApply(model, this.key)
    }
    const documentID = SOURCES[this.source]
    const dueAt = model.now + 10_000
    const result = await call(real, (s) =>
      s.finalizeOperationAndArmWatch(spec, { leaseToken: token, sourceID: this.source, documentID, resultEntity: { id: this.source }, watchDueAt: dueAt }))
    const op = model.operations.get(this.key)
    if (op?.state === "committed" && op.sendMarker === token) {
      expect(result.outcome).toBe("already-committed")
    } else if (op !== undefined && (holds(op, token) || (op.state === "reconcile_only" && op.sendMarker === token))) {
      if (op.sendMarker !== token) op.attempts++
      op.sendMarker = token
      op.inDoubtSince = null
      op.sourceID = this.source
      op.documentID = documentID
      endWith(model, op, "committed")
      const superseded: Array<string> = []
      for (const [source, watch] of model.watches) {
        if (source !== this.source && watch.documentID === documentID) {
          model.watches.delete(source)
          superseded.push(source)
        }
      }
      const existing = model.watches.get(this.source)
      model.watches.set(this.source, existing === undefined
        ? { documentID, generation: 0, nextAttemptAt: dueAt, version: 0 }
        : { documentID, generation: existing.generation + 1, nextAttemptAt: dueAt, version: existing.version + 1 })
      expect(result.outcome).toBe("committed")
      if (result.outcome === "committed") expect(result.superseded.map((id) => id.sourceID).sort()).toEqual(superseded.sort())
    } else {
      expect(result.outcome).toBe("lease-lost")
    }
    return expectAgreement(model, real)
  }
}

/** Runner `runner` of key `key` renews its lease (a heartbeat). */
export class Renew implements Command {
  constructor(readonly key: number, readonly runner: number) {}
  // Runner commands go to keys that exist; a stale or unknown runner of one is still picked now and then.
  check = (model: Readonly<OperationModel>) => model.operations.has(this.key)
  toString = () => `renew(${keyLabel(this.key)}, ${runnerLabel(this.runner)})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const token = tokenOf(model, this.key, this.runner)
    const result = await call(real, (s) => s.renewOperationLease(KEYS[this.key]!, { leaseToken: token }))
    const op = model.operations.get(this.key)!
    if (holds(op, token)) {
      expect(result.outcome).toBe("renewed")
      op.lease = { token, expiresAt: model.now + MODEL_POLICY.leaseMs }
      op.nextAttemptAt = op.lease.expiresAt
      touch(model, op)
    } else {
      expect(result.outcome).toBe("lease-lost")
    }
    return expectAgreement(model, real)
  }
}
