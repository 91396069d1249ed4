import {
  backoffDelay,
  type BackoffPolicy,
  type ConnectorOperation,
  decideAttemptFailure,
  decideCommit,
  decideMarkSent,
  decideOperationClaim,
  decideRenew,
  decodeCursor,
  DEFAULT_OPERATION_POLICY,
  encodeCursor,
  operationPolicyFrom,
  operationPolicyProblem,
  safeReissue,
  writeStateOf
} from "@connector-store/core"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attemptedRow, claimInput, NOW, POLICY } from "./operations.fixtures.js"
import { propertyRuns } from "./support/runs.js"

const fresh = { nodeKey: "node-new", incarnation: "inc-new", leaseToken: "token-new" }

describe("backoffDelay", () => {
  const policies = fc.record({
    baseDelayMs: fc.integer({ min: 1, max: 10_000 }),
    maxDelayMs: fc.integer({ min: 1, max: 1_000_000 }),
    jitter: fc.constantFrom<BackoffPolicy["jitter"]>("full", "equal", "none")
  }).filter((p) => p.maxDelayMs >= p.baseDelayMs)

  it("is an integer in [0, cap] that never exceeds the doubled ceiling, for any attempt count and random draw", () => {
    fc.assert(fc.property(policies, fc.integer({ min: 0, max: 10_000 }), fc.double({ min: 0, max: 1, noNaN: true }), (policy, attempts, random) => {
      const delay = backoffDelay(attempts, policy, random)
      const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(attempts - 1, 0))
      expect(Number.isSafeInteger(delay)).toBe(true)
      expect(delay).toBeGreaterThanOrEqual(policy.jitter === "full" ? 0 : Math.floor(ceiling / 2))
      expect(delay).toBeLessThanOrEqual(ceiling)
    }))
  })

  it("doubles from the base and stops at the cap", () => {
    const policy = { baseDelayMs: 1_000, maxDelayMs: 5_000, jitter: "none" } as const
    expect([1, 2, 3, 4, 5, 60].map((n) => backoffDelay(n, policy, 0.5))).toEqual([1_000, 2_000, 4_000, 5_000, 5_000, 5_000])
  })

  it("full jitter spans [0, ceiling), equal jitter [ceiling/2, ceiling)", () => {
    const full = { baseDelayMs: 1_000, maxDelayMs: 1_000, jitter: "full" } as const
    const equal = { ...full, jitter: "equal" } as const
    expect([backoffDelay(1, full, 0), backoffDelay(1, full, 0.999999)]).toEqual([0, 999])
    expect([backoffDelay(1, equal, 0), backoffDelay(1, equal, 0.999999)]).toEqual([500, 999])
  })
})

describe("operation policy", () => {
  it("fills what overrides leave out from the defaults", () => {
    expect(operationPolicyFrom({ maxAttempts: 2, backoff: { jitter: "full" } })).toEqual({
      ...DEFAULT_OPERATION_POLICY,
      maxAttempts: 2,
      backoff: { ...DEFAULT_OPERATION_POLICY.backoff, jitter: "full" }
    })
  })

  it("names the first setting a store cannot keep", () => {
    expect(operationPolicyProblem({ leaseMs: 0 })?.field).toBe("leaseMs")
    expect(operationPolicyProblem({ maxAttempts: 1.5 })?.field).toBe("maxAttempts")
    expect(operationPolicyProblem({ backoff: { baseDelayMs: 10_000, maxDelayMs: 5_000 } })?.field).toBe("backoff.maxDelayMs")
    expect(operationPolicyProblem({ backoff: { jitter: "wild" as never } })?.field).toBe("backoff.jitter")
    expect(operationPolicyProblem({ deferMs: Number.NaN })?.field).toBe("deferMs")
    expect(() => operationPolicyFrom({ leaseMs: -1 })).toThrow(/leaseMs/)
  })
})

describe("reissue intents fail closed", () => {
  it("only well-formed conditional updates and deterministic creates allow a re-send", () => {
    expect(safeReissue({ kind: "conditional-update", ifMatch: "e" })).toEqual({ kind: "conditional-update", ifMatch: "e" })
    expect(safeReissue({ kind: "deterministic-create", providerID: "p" })).toEqual({ kind: "deterministic-create", providerID: "p" })
    for (const stored of [{ kind: "reconcile" }, { kind: "conditional-update" }, { kind: "conditional" }, "conditional", null, 3, []]) {
      expect(safeReissue(stored), JSON.stringify(stored)).toBeUndefined()
    }
  })
})

describe("tracked-operation cursors", () => {
  it("round-trip any position and refuse anything else", () => {
    fc.assert(fc.property(fc.nat(), fc.string(), fc.string(), (createdAt, callerDID, operationID) => {
      expect(decodeCursor(encodeCursor({ createdAt, callerDID, operationID }))).toEqual({ createdAt, callerDID, operationID })
    }))
    fc.assert(fc.property(fc.string(), (text) => {
      const decoded = decodeCursor(text)
      if (decoded !== undefined) expect(encodeCursor(decoded)).toBeTypeOf("string")
    }))
  })
})

describe("the pure decisions", () => {
  const rows = fc.record({
    state: fc.constantFrom<ConnectorOperation["state"]>("attempted", "committed", "dead", "reconcile_only"),
    attempts: fc.nat({ max: 4 }),
    leaseToken: fc.constantFrom(null, "token-a", "token-b"),
    leaseExpiresAt: fc.constantFrom(null, NOW - 1, NOW, NOW + 1),
    sendMarker: fc.constantFrom(null, "token-a", "token-b"),
    inDoubtSince: fc.constantFrom(null, NOW - 5_000),
    nextAttemptAt: fc.constantFrom(null, NOW - 1, NOW, NOW + 1),
    payloadHash: fc.constantFrom("hash-1", "hash-2"),
    reissueIntent: fc.constantFrom<unknown>({ kind: "reconcile" }, { kind: "conditional-update", ifMatch: "e" }, "legacy")
  }).map((patch) => attemptedRow(patch))

  it("never write a row of another key, never go backwards in version, never exceed the attempt limit", () => {
    fc.assert(fc.property(rows, fc.constantFrom("token-a", "token-b"), fc.double({ min: 0, max: 0.999, noNaN: true }), (row, token, random) => {
      const claim = decideOperationClaim(row, claimInput(), fresh, POLICY, NOW)
      const decisions = [
        ...(claim.conflict ? [] : [claim]),
        decideRenew(row, token, 1_000, NOW),
        decideMarkSent(row, token, POLICY, NOW),
        ...(["retryable", "permanent", "unknown"] as const).map((kind) =>
          decideAttemptFailure(row, { leaseToken: token, kind }, POLICY, random, NOW)),
        decideCommit(row, { leaseToken: token, sourceID: "s", documentID: "d" }, POLICY, NOW)
      ]
      // offline / auth say this run's own request did not leave: they drop its own marker, and nothing else.
      const deferrals = (["offline", "auth"] as const).map((kind) =>
        decideAttemptFailure(row, { leaseToken: token, kind }, POLICY, random, NOW))
      for (const { next } of [...decisions, ...deferrals]) {
        if (next === undefined) continue
        expect([next.callerDID, next.operationID, next.nodeKey, next.createdAt]).toEqual([row.callerDID, row.operationID, row.nodeKey, row.createdAt])
        expect(next.version).toBe(row.version + 1)
        expect(next.updatedAt).toBe(NOW)
        if (row.attempts <= POLICY.maxAttempts) expect(next.attempts).toBeLessThanOrEqual(POLICY.maxAttempts)
        if (next.state !== "attempted") expect([next.leaseToken, next.nextAttemptAt]).toEqual([null, null])
        if (row.state === "committed") expect.fail("a committed operation never changes")
        // The in-doubt fact: once a row is in doubt, only a commit ends it, and it keeps its first time.
        const ownMarkerOnly = deferrals.some((d) => d.next === next) && row.sendMarker === token && row.inDoubtSince === null
        const wasInDoubt = row.inDoubtSince !== null || (row.sendMarker !== null && !ownMarkerOnly)
        if (wasInDoubt && next.state !== "committed") {
          expect(next.inDoubtSince !== null || next.sendMarker !== null, "no decision but a commit clears the doubt").toBe(true)
          if (row.inDoubtSince !== null) expect(next.inDoubtSince).toBe(row.inDoubtSince)
        }
        if (next.state === "committed") expect(next.inDoubtSince).toBeNull()
      }
      if (!claim.conflict && claim.result.outcome === "claimed" && (row.inDoubtSince !== null || row.sendMarker !== null)) {
        expect(claim.result.reissue, "a claim of a row in doubt never answers reissue: null").not.toBeNull()
      }
    }), { numRuns: propertyRuns(2_000) })
  })

  it("a claim conflicts exactly when the payload hash differs", () => {
    fc.assert(fc.property(rows, (row) => {
      expect(decideOperationClaim(row, claimInput(), fresh, POLICY, NOW).conflict).toBe(row.payloadHash !== "hash-1")
    }))
  })

  it("write state: pending with any attempted operation, else the newest ended one by (created, caller, operation)", () => {
    const op = (state: ConnectorOperation["state"], createdAt: number, operationID = "op") =>
      attemptedRow({ state, createdAt, operationID })
    expect(writeStateOf([])).toBe("none")
    expect(writeStateOf([op("committed", 5), op("attempted", 1)])).toBe("pending")
    expect(writeStateOf([op("committed", 5), op("dead", 1)])).toBe("committed")
    expect(writeStateOf([op("committed", 1), op("dead", 5)])).toBe("failed")
    expect(writeStateOf([op("committed", 1), op("reconcile_only", 5)])).toBe("unconfirmed")
    expect(writeStateOf([op("dead", 5, "op-b"), op("committed", 5, "op-a")])).toBe("failed")
    // An operation that died while a request may have landed is unconfirmed, never failed.
    expect(writeStateOf([op("committed", 1), attemptedRow({ state: "dead", createdAt: 5, inDoubtSince: 3 })])).toBe("unconfirmed")
    expect(writeStateOf([attemptedRow({ state: "dead", createdAt: 5, sendMarker: "run" })])).toBe("unconfirmed")
  })
})
