import {
  collectableOperations,
  compareByAge,
  compareCodePoints,
  type ConnectorOperation,
  decideArm,
  decideClaim,
  decideDefer,
  decideVerification,
  hasLiveClaim,
  isAuditCandidate,
  isAuditDiverged,
  isScheduleDue,
  isUnderLiveLease,
  openGeneration,
  passesIngressGate,
  resumeDeferredOperation,
  resumeDeferredWatch,
  resumeReaches,
  staleVerification
} from "@connector-store/core"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { keyLabel, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { retentionCase } from "./support/contract/retentionCase.js"
import { propertyRuns } from "./support/runs.js"

/** A row the transitions may not mutate (they return new rows). */
const frozen = <A extends object>(row: A): A => Object.freeze({ ...row })

const pending = frozen(watchRow())
const verified = frozen(watchRow({ verificationStatus: "verified", nextAttemptAt: null }))
const failed = frozen(watchRow({ verificationStatus: "repair_failed", nextAttemptAt: null }))

describe("openGeneration", () => {
  it("bumps the generation and version, resets attempts, and schedules against the given winner", () => {
    const row = frozen(watchRow({ verificationStatus: "repair_failed", verificationAttempts: 4, claimedUntil: NOW + 1, deferReason: "auth" }))
    expect(openGeneration(row, "w", NOW + 9, NOW)).toEqual({
      ...row,
      repairGeneration: row.repairGeneration + 1,
      verificationAttempts: 0,
      verificationStatus: "pending_verification",
      observedWinnerDigest: "w",
      nextAttemptAt: NOW + 9,
      claimedUntil: null,
      deferReason: null,
      version: row.version + 1,
      updatedAt: NOW
    })
  })

  it("keeps the verified watermark and the identity", () => {
    const next = openGeneration(verified, null, NOW, NOW)
    expect(next.verifiedStateDigest).toBe(verified.verifiedStateDigest)
    expect(next.observedWinnerDigest).toBeNull()
    expect([next.ownerDID, next.sourceID, next.documentID, next.createdAt])
      .toEqual([verified.ownerDID, verified.sourceID, verified.documentID, verified.createdAt])
  })
})

describe("passesIngressGate", () => {
  it("passes a triggering winner that is current and news to both watermarks", () => {
    expect(passesIngressGate(verified, "w", "w")).toBe(true)
  })

  it.each([
    ["null", null, "w"],
    ["undefined", undefined, "w"],
    ["not the current winner", "w", "w2"],
    ["the verified watermark", "digest-verified", "digest-verified"],
    ["the observed watermark", "digest-observed", "digest-observed"]
  ] as const)("closes on a triggering winner that is %s", (_, triggering, current) => {
    expect(passesIngressGate(verified, triggering, current)).toBe(false)
  })

  it("closes when both the trigger and the winner are null, even if a watermark is not", () => {
    expect(passesIngressGate(watchRow({ verifiedStateDigest: null }), null, null)).toBe(false)
  })
})

describe("decideArm", () => {
  it("is a noop without a row", () => {
    expect(decideArm(undefined, { reason: "manual", dueAt: NOW }, "w", NOW)).toEqual({ outcome: "noop", next: undefined })
    expect(decideArm(undefined, { reason: "ingress", dueAt: NOW, triggeringWinner: "w" }, "w", NOW))
      .toEqual({ outcome: "noop", next: undefined })
  })

  it.each([pending, verified, failed])("manual opens a $verificationStatus row, gate or not", (row) => {
    expect(decideArm(row, { reason: "manual", dueAt: NOW + 1 }, row.observedWinnerDigest, NOW)).toEqual({
      outcome: "opened",
      next: openGeneration(row, row.observedWinnerDigest, NOW + 1, NOW)
    })
  })

  it.each([verified, failed])("ingress past the gate opens a $verificationStatus row", (row) => {
    expect(decideArm(row, { reason: "ingress", dueAt: NOW + 1, triggeringWinner: "w" }, "w", NOW)).toEqual({
      outcome: "opened",
      next: openGeneration(row, "w", NOW + 1, NOW)
    })
  })

  it.each([verified, failed, pending])("ingress with a closed gate is a noop on a $verificationStatus row", (row) => {
    expect(decideArm(row, { reason: "ingress", dueAt: NOW, triggeringWinner: "w" }, "w-other", NOW))
      .toEqual({ outcome: "noop", next: undefined })
  })

  it.each([
    [NOW + 5, NOW + 2, NOW + 2],
    [NOW + 1, NOW + 2, NOW + 1],
    [null, NOW + 2, NOW + 2]
  ])("ingress coalesces a pending row: next %s with dueAt %s becomes %s, nothing else moves", (next, dueAt, expected) => {
    const row = frozen(watchRow({ nextAttemptAt: next, claimedUntil: NOW + 3, deferReason: "offline" }))
    expect(decideArm(row, { reason: "ingress", dueAt, triggeringWinner: "w" }, "w", NOW)).toEqual({
      outcome: "coalesced",
      next: { ...row, nextAttemptAt: expected, version: row.version + 1, updatedAt: NOW }
    })
  })
})

describe("claims", () => {
  it("hasLiveClaim: a claim is live strictly before its expiry", () => {
    expect(hasLiveClaim(watchRow({ claimedUntil: null }), NOW)).toBe(false)
    expect(hasLiveClaim(watchRow({ claimedUntil: NOW + 1 }), NOW)).toBe(true)
    expect(hasLiveClaim(watchRow({ claimedUntil: NOW }), NOW)).toBe(false)
  })

  it("decideClaim takes a due pending row of the generation", () => {
    expect(decideClaim(pending, { generation: 1, until: NOW + 10 }, NOW)).toEqual({
      outcome: "claimed",
      next: { ...pending, claimedUntil: NOW + 10, version: pending.version + 1, updatedAt: NOW }
    })
  })

  it.each([
    ["no row", undefined],
    ["a verified row", verified],
    ["a repair_failed row", frozen(watchRow({ verificationStatus: "repair_failed" }))],
    ["another generation", frozen(watchRow({ repairGeneration: 0 }))],
    ["no schedule", frozen(watchRow({ nextAttemptAt: null }))],
    ["a future schedule", frozen(watchRow({ nextAttemptAt: NOW + 1 }))],
    ["a live claim", frozen(watchRow({ claimedUntil: NOW + 1 }))]
  ])("decideClaim refuses %s", (_, row) => {
    expect(decideClaim(row, { generation: 1, until: NOW + 10 }, NOW)).toEqual({ outcome: "not-claimable", next: undefined })
  })

  it("decideDefer lets the holder push out the attempt, releasing the claim", () => {
    const held = frozen(watchRow({ claimedUntil: NOW + 10 }))
    expect(decideDefer(held, { generation: 1, claimedUntil: NOW + 10, nextAttemptAt: NOW + 99, reason: "auth" }, NOW)).toEqual({
      outcome: "deferred",
      next: { ...held, nextAttemptAt: NOW + 99, deferReason: "auth", claimedUntil: null, version: held.version + 1, updatedAt: NOW }
    })
    expect(decideDefer(held, { generation: 1, claimedUntil: NOW + 10, nextAttemptAt: NOW + 99 }, NOW).next?.deferReason).toBeNull()
  })

  it.each([
    ["no row", undefined],
    ["another claim", frozen(watchRow({ claimedUntil: NOW + 11 }))],
    ["an unclaimed row", frozen(watchRow({ claimedUntil: null }))],
    ["another generation", frozen(watchRow({ claimedUntil: NOW + 10, repairGeneration: 2 }))],
    ["a verified row", frozen(watchRow({ claimedUntil: NOW + 10, verificationStatus: "verified" }))]
  ])("decideDefer refuses %s", (_, row) => {
    expect(decideDefer(row, { generation: 1, claimedUntil: NOW + 10, nextAttemptAt: NOW + 99 }, NOW))
      .toEqual({ outcome: "not-holder", next: undefined })
  })
})

describe("verification", () => {
  const claimed = frozen(watchRow({ claimedUntil: NOW + 10, verificationAttempts: 1, deferReason: "auth" }))
  const input = { generation: 1, claimedUntil: NOW + 10, fetchedDigest: "w", maxAttempts: 3, dueAt: NOW + 50 }

  it("staleVerification: generation first, then the claim (when one is given)", () => {
    expect(staleVerification(undefined, input)).toBe("stale-generation")
    expect(staleVerification({ ...claimed, repairGeneration: 2 }, input)).toBe("stale-generation")
    expect(staleVerification({ ...claimed, repairGeneration: 2, claimedUntil: null }, input)).toBe("stale-generation")
    expect(staleVerification({ ...claimed, claimedUntil: NOW + 11 }, input)).toBe("stale-claim")
    expect(staleVerification({ ...claimed, claimedUntil: null }, input)).toBe("stale-claim")
    expect(staleVerification({ ...claimed, claimedUntil: NOW + 11 }, { generation: 1, claimedUntil: null })).toBeUndefined()
    expect(staleVerification({ ...claimed, claimedUntil: NOW + 11 }, { generation: 1 })).toBeUndefined()
    expect(staleVerification(claimed, input)).toBeUndefined()
  })

  it("a stale result changes nothing", () => {
    expect(decideVerification({ ...claimed, repairGeneration: 7 }, input, "w", NOW)).toEqual({ outcome: "stale-generation", next: undefined })
    expect(decideVerification({ ...claimed, claimedUntil: 1 }, input, "w", NOW)).toEqual({ outcome: "stale-claim", next: undefined })
    expect(decideVerification(undefined, input, "w", NOW)).toEqual({ outcome: "stale-generation", next: undefined })
  })

  it("a match verifies: both watermarks := winner, schedule, claim and reason cleared, attempts kept", () => {
    expect(decideVerification(claimed, input, "w", NOW)).toEqual({
      outcome: "verified",
      next: {
        ...claimed,
        verificationStatus: "verified",
        verifiedStateDigest: "w",
        observedWinnerDigest: "w",
        nextAttemptAt: null,
        claimedUntil: null,
        deferReason: null,
        version: claimed.version + 1,
        updatedAt: NOW
      }
    })
  })

  it("a mismatch below the limit spends an attempt and reschedules, watermarks untouched", () => {
    for (const [fetched, winner] of [["w-fetched", "w"], [null, null], [null, "w"]] as const) {
      expect(decideVerification(claimed, { ...input, fetchedDigest: fetched }, winner, NOW)).toEqual({
        outcome: "pending",
        next: {
          ...claimed,
          verificationAttempts: 2,
          nextAttemptAt: NOW + 50,
          claimedUntil: null,
          deferReason: null,
          version: claimed.version + 1,
          updatedAt: NOW
        }
      })
    }
  })

  it("a mismatch reaching the limit gives up: repair_failed, both watermarks untouched (observed stays the generation's)", () => {
    for (const maxAttempts of [1, 2]) {
      expect(decideVerification(claimed, { ...input, fetchedDigest: "x", maxAttempts }, "w", NOW)).toEqual({
        outcome: "repair_failed",
        next: {
          ...claimed,
          verificationStatus: "repair_failed",
          verificationAttempts: 2,
          nextAttemptAt: null,
          claimedUntil: null,
          deferReason: null,
          version: claimed.version + 1,
          updatedAt: NOW
        }
      })
    }
    expect(decideVerification(claimed, { ...input, fetchedDigest: "x", maxAttempts: 3 }, "w", NOW).outcome).toBe("pending")
  })
})

describe("resume", () => {
  const auth = { reason: "auth", ownerDID: "did:owner:1", connectorNames: ["gcal", "jira"] } as const

  it("resumeReaches: the reason must match; auth also needs the owner and a listed connector", () => {
    const row = (deferReason: "offline" | "auth" | null, ownerDID = "did:owner:1", connectorName = "gcal") =>
      ({ deferReason, ownerDID, connectorName })
    expect(resumeReaches({ reason: "offline" }, row("offline", "anyone", "anything"))).toBe(true)
    expect(resumeReaches({ reason: "offline" }, row("auth"))).toBe(false)
    expect(resumeReaches({ reason: "offline" }, row(null))).toBe(false)
    expect(resumeReaches(auth, row("auth"))).toBe(true)
    expect(resumeReaches(auth, row("auth", "did:owner:1", "jira"))).toBe(true)
    expect(resumeReaches(auth, row("auth", "did:owner:1", "slack"))).toBe(false)
    expect(resumeReaches(auth, row("auth", "did:owner:2"))).toBe(false)
    expect(resumeReaches(auth, row("offline"))).toBe(false)
    expect(resumeReaches({ ...auth, connectorNames: [] }, row("auth"))).toBe(false)
  })

  it("resumeDeferredWatch makes a deferred pending watch due now and leaves others alone", () => {
    const deferred = frozen(watchRow({ deferReason: "offline", nextAttemptAt: NOW + 100 }))
    expect(resumeDeferredWatch(deferred, { reason: "offline" }, NOW)).toEqual({
      ...deferred,
      nextAttemptAt: NOW,
      deferReason: null,
      version: deferred.version + 1,
      updatedAt: NOW
    })
    expect(resumeDeferredWatch({ ...deferred, verificationStatus: "verified" }, { reason: "offline" }, NOW)).toBeUndefined()
    expect(resumeDeferredWatch(deferred, auth, NOW)).toBeUndefined()
  })

  it("resumeDeferredOperation makes a deferred attempted operation due now without spending an attempt", () => {
    const deferred = frozen(operationRow({ state: "attempted", deferReason: "auth", nextAttemptAt: NOW + 100, attempts: 2 }))
    expect(resumeDeferredOperation(deferred, auth, NOW)).toEqual({
      ...deferred,
      nextAttemptAt: NOW,
      deferReason: null,
      version: deferred.version + 1,
      updatedAt: NOW
    })
    expect(resumeDeferredOperation({ ...deferred, state: "committed" }, auth, NOW)).toBeUndefined()
    expect(resumeDeferredOperation(deferred, { reason: "offline" }, NOW)).toBeUndefined()
  })
})

describe("sweep predicates", () => {
  it("isScheduleDue: unsettled, scheduled, at or before now", () => {
    expect(isScheduleDue(watchRow({ nextAttemptAt: NOW }), NOW)).toBe(true)
    expect(isScheduleDue(watchRow({ nextAttemptAt: NOW + 1 }), NOW)).toBe(false)
    expect(isScheduleDue(watchRow({ nextAttemptAt: null }), NOW)).toBe(false)
    expect(isScheduleDue(watchRow({ verificationStatus: "repair_failed", nextAttemptAt: NOW }), NOW)).toBe(true)
    expect(isScheduleDue(watchRow({ verificationStatus: "verified", nextAttemptAt: NOW }), NOW)).toBe(false)
  })

  it("isAuditCandidate: verified and repair_failed rows only", () => {
    expect([pending, verified, failed].map(isAuditCandidate)).toEqual([false, true, true])
  })

  it("isAuditDiverged: a settled row whose winner differs from both watermarks", () => {
    expect(isAuditDiverged(verified, "w")).toBe(true)
    expect(isAuditDiverged(verified, "digest-verified")).toBe(false)
    expect(isAuditDiverged(verified, "digest-observed")).toBe(false)
    expect(isAuditDiverged(watchRow({ verificationStatus: "repair_failed", verifiedStateDigest: null }), "digest-observed"))
      .toBe(false)
    expect(isAuditDiverged(pending, "w")).toBe(false)
  })
})

describe("retention ordering", () => {
  it("compareCodePoints orders by code point, not by UTF-16 unit or locale", () => {
    expect(compareCodePoints("a", "a")).toBe(0)
    expect(compareCodePoints("a", "ab")).toBeLessThan(0)
    expect(compareCodePoints("Z", "a")).toBeLessThan(0)
    expect(compareCodePoints("é", "z")).toBeGreaterThan(0)
    // U+1F600 is stored as a surrogate pair (0xD83D…) below U+FFFF in UTF-16.
    expect(compareCodePoints("\u{1F600}", "\uFFFF")).toBeGreaterThan(0)
    expect(compareCodePoints("\uFFFF", "\u{1F600}")).toBeLessThan(0)
  })

  it("compareByAge: created_at, then caller, then operation id", () => {
    const op = (createdAt: number, callerDID: string, operationID: string) => operationRow({ createdAt, callerDID, operationID })
    expect(compareByAge(op(1, "z", "z"), op(2, "a", "a"))).toBeLessThan(0)
    expect(compareByAge(op(2, "a", "z"), op(2, "b", "a"))).toBeLessThan(0)
    expect(compareByAge(op(2, "a", "b"), op(2, "a", "a"))).toBeGreaterThan(0)
    expect(compareByAge(op(2, "a", "a"), op(2, "a", "a"))).toBe(0)
  })

  it("isUnderLiveLease: a token whose expiry is unset or not yet passed", () => {
    const leased = (leaseToken: string | null, leaseExpiresAt: number | null) => operationRow({ leaseToken, leaseExpiresAt })
    expect(isUnderLiveLease(leased("t", NOW + 1), NOW)).toBe(true)
    expect(isUnderLiveLease(leased("t", NOW), NOW)).toBe(true)
    expect(isUnderLiveLease(leased("t", null), NOW)).toBe(true)
    expect(isUnderLiveLease(leased("t", NOW - 1), NOW)).toBe(false)
    expect(isUnderLiveLease(leased(null, NOW + 1), NOW)).toBe(false)
  })
})

describe("collectableOperations", () => {
  const op = (operationID: string, createdAt: number, patch: Partial<ConnectorOperation> = {}) =>
    frozen(operationRow({ operationID, createdAt, updatedAt: NOW - 100 + createdAt, ...patch }))
  const collect = (rows: ReadonlyArray<ConnectorOperation>, before = NOW, limit = 100) =>
    collectableOperations(rows, { before, limit }, NOW).map(keyLabel)

  it("keeps the newest commit and the newest finished row of each caller and owner per document", () => {
    const rows = [
      op("c1", 1),
      op("d2", 2, { state: "dead" }),
      op("c3", 3),
      op("d4", 4, { state: "dead" }),
      op("other-owner", 0, { ownerDID: "did:owner:2" }),
      op("other-caller", 0, { callerDID: "did:caller:2" })
    ]
    expect(collect(rows)).toEqual(["did:caller:1/c1", "did:caller:1/d2"])
  })

  it("keeps a row that is newest in one partition only: its owner's, its caller's, or its owner's newest commit", () => {
    // The owner's newest finished row, superseded for its caller by the caller's later write for another owner.
    expect(collect([
      op("owners-newest", 2, { state: "dead" }),
      op("callers-later", 3, { ownerDID: "did:owner:2" }),
      op("owners-commit", 1, { callerDID: "did:caller:2" })
    ])).toEqual([])
    // The caller's newest finished row, superseded for its owner by another caller's later write.
    expect(collect([
      op("callers-newest", 2, { state: "dead" }),
      op("owners-later", 3, { callerDID: "did:caller:2" })
    ])).toEqual([])
    // The newest commit of caller and owner, followed by a dead row of both: the commit stays, as does the dead row.
    expect(collect([op("newest-commit", 2), op("later-dead", 3, { state: "dead" })])).toEqual([])
    // Only once each of its partitions has a newer row does it go.
    expect(collect([
      op("owners-newest", 2, { state: "dead" }),
      op("callers-later", 3, { ownerDID: "did:owner:2" }),
      op("owners-later", 4, { callerDID: "did:caller:2" })
    ])).toEqual(["did:caller:1/owners-newest"])
  })

  it("collects finished rows linked to no document, and never unfinished ones", () => {
    const rows = [
      op("orphan", 1, { documentID: null }),
      op("orphan-dead", 2, { documentID: null, state: "dead" }),
      op("orphan-attempted", 3, { documentID: null, state: "attempted" }),
      op("orphan-reconcile", 4, { documentID: null, state: "reconcile_only" })
    ]
    expect(collect(rows)).toEqual(["did:caller:1/orphan", "did:caller:1/orphan-dead"])
  })

  it("respects before (strictly), live leases and the limit, oldest updated_at first, ties by key", () => {
    const rows = [
      op("b", 1, { documentID: null, updatedAt: NOW - 5 }),
      op("a", 1, { documentID: null, updatedAt: NOW - 5 }),
      op("old", 1, { documentID: null, updatedAt: NOW - 9 }),
      op("at-before", 1, { documentID: null, updatedAt: NOW }),
      op("leased", 1, { documentID: null, updatedAt: NOW - 20, leaseToken: "t", leaseExpiresAt: NOW + 1 }),
      op("lease-lapsed", 1, { documentID: null, updatedAt: NOW - 8, leaseToken: "t", leaseExpiresAt: NOW - 1 })
    ]
    expect(collect(rows)).toEqual([
      "did:caller:1/old",
      "did:caller:1/lease-lapsed",
      "did:caller:1/a",
      "did:caller:1/b"
    ])
    expect(collect(rows, NOW, 3)).toEqual(["did:caller:1/old", "did:caller:1/lease-lapsed", "did:caller:1/a"])
    expect(collect(rows, NOW - 8)).toEqual(["did:caller:1/old"])
  })

  /** Newest, as the contract says: by (created_at, caller_did, operation_id), text by its UTF-8 bytes (code points). */
  const newerByContract = (a: ConnectorOperation, b: ConnectorOperation): boolean => {
    if (a.createdAt !== b.createdAt) return a.createdAt > b.createdAt
    const byBytes = Buffer.compare(Buffer.from(a.callerDID), Buffer.from(b.callerDID)) ||
      Buffer.compare(Buffer.from(a.operationID), Buffer.from(b.operationID))
    return byBytes > 0
  }

  it("never collects a partition's newest committed or newest finished row (property)", () => {
    fc.assert(
      fc.property(retentionCase, ({ rows, before, limit }) => {
        const collected = new Set(collectableOperations(rows, { before, limit }, NOW).map(keyLabel))
        expect(collected.size).toBeLessThanOrEqual(limit)
        for (const row of rows.filter((r) => collected.has(keyLabel(r)))) {
          expect(["committed", "dead"]).toContain(row.state)
          expect(row.updatedAt).toBeLessThan(before)
          // Live lease, from the contract: a token whose expiry is unset or not yet passed.
          expect(row.leaseToken !== null && (row.leaseExpiresAt === null || row.leaseExpiresAt >= NOW)).toBe(false)
        }
        for (const party of ["callerDID", "ownerDID"] as const) {
          for (const states of [["committed"], ["committed", "dead"]]) {
            const newest = new Map<string, ConnectorOperation>()
            for (const row of rows) {
              if (row.documentID === null || !states.includes(row.state)) continue
              const partition = `${row.documentID}\u0000${row[party]}`
              const current = newest.get(partition)
              if (current === undefined || newerByContract(row, current)) newest.set(partition, row)
            }
            for (const row of newest.values()) expect(collected.has(keyLabel(row))).toBe(false)
          }
        }
      }),
      { numRuns: propertyRuns(500) }
    )
  })
})
