import {
  blankSyncState,
  decideClaimSyncLease,
  decideConsume,
  decideReleaseSyncLease,
  decideRenewSyncLease,
  decideSetSyncState,
  decideSyncProgress,
  isPendingAuthExpired,
  isRedactedVerifier,
  jsonProblem,
  type JsonValue,
  MAX_JSON_DEPTH,
  type PendingAuth,
  type SyncStateRow,
  toSyncState
} from "@connector-store/core"
import { decodeJsonColumn, encodeJsonColumn } from "@connector-store/core/adapter"
import { Option, Redacted } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { propertyRuns } from "./support/runs.js"

const key = { connectorName: "gcal", ownerDID: "did:o" }
const row = (overrides: Partial<SyncStateRow> = {}): SyncStateRow => ({
  ...blankSyncState(key, "inc-1"),
  checkpoint: { page: 3 },
  recovery: ["r"],
  status: "syncing",
  lastSyncedAt: "t",
  entityCount: 4,
  version: 7,
  ...overrides
})

describe("JSON columns (pure)", () => {
  it("decode(encode(v)) is v for every JSON value, -0 and key order included", () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      expect(jsonProblem(value)).toBeUndefined()
      const back = decodeJsonColumn(encodeJsonColumn(value as JsonValue))
      expect(back).toEqual(value)
      expect(JSON.stringify(back)).toBe(JSON.stringify(value))
    }), { numRuns: propertyRuns(500) })
  })

  it("the encoding is JSON.stringify's for every value without -0, so the seed's store reads it", () => {
    const hasNegativeZero = (v: unknown): boolean =>
      Object.is(v, -0) || (typeof v === "object" && v !== null && Object.values(v).some(hasNegativeZero))
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      fc.pre(value !== null && !hasNegativeZero(value))
      expect(encodeJsonColumn(value as JsonValue)).toBe(JSON.stringify(value))
    }), { numRuns: propertyRuns(300) })
    expect(encodeJsonColumn({ a: [-0] })).toBe(`{"a":[-0]}`)
    expect(encodeJsonColumn(null)).toBeNull()
  })

  const refused: ReadonlyArray<readonly [string, unknown, string]> = [
    ["undefined", undefined, "$ is a undefined"],
    ["a function deep inside", { a: [1, { b: () => 1 }] }, "$.\"a\"[1].\"b\" is a function"],
    ["a BigInt", [1n], "$[0] is a bigint"],
    ["NaN", { n: Number.NaN }, "$.\"n\" is a non-finite number"],
    ["-Infinity", Number.NEGATIVE_INFINITY, "$ is a non-finite number"],
    ["a hole", [1, , 2], "$[1] is a hole"], // eslint-disable-line no-sparse-arrays
    ["a Date", new Date(0), "$ is not a plain object"],
    ["a symbol key", { [Symbol("k")]: 1 }, "$ has symbol keys"]
  ]
  for (const [label, value, reason] of refused) {
    it(`refuses ${label}, naming the path and not the value`, () => {
      expect(jsonProblem(value)).toContain(reason)
    })
  }

  it("refuses a cycle but accepts a value shared twice", () => {
    const shared = { s: 1 }
    expect(jsonProblem({ a: shared, b: [shared] })).toBeUndefined()
    const cyclic: Record<string, unknown> = { a: [] }
    ;(cyclic["a"] as Array<unknown>).push(cyclic)
    expect(jsonProblem(cyclic)).toContain("cycle")
  })

  it(`refuses nesting deeper than ${MAX_JSON_DEPTH} levels, and accepts it just below`, () => {
    const nest = (depth: number): unknown => depth === 0 ? 0 : [nest(depth - 1)]
    expect(jsonProblem(nest(MAX_JSON_DEPTH))).toBeUndefined()
    expect(jsonProblem(nest(MAX_JSON_DEPTH + 1))).toContain("deeper")
  })

  it("a reason never quotes the offending value", () => {
    expect(jsonProblem({ secret: ["sk_live_abc", Number.NaN] })).not.toContain("sk_live_abc")
  })
})

describe("sync-state decisions (pure)", () => {
  const report = { status: "idle", lastSyncedAt: "later", entityCount: 9 } as const

  it("set on no row inserts a blank row at version 0 under the given incarnation", () => {
    expect(decideSetSyncState(key, undefined, report, "inc-new")).toEqual({
      kind: "insert",
      row: { ...blankSyncState(key, "inc-new"), ...report }
    })
  })

  it("set on a row rewrites the report, clears an omitted error, keeps stamp, lease, checkpoint and recovery", () => {
    const stored = row({ error: "e", leaseToken: "t", leaseExpiresAt: 5 })
    expect(decideSetSyncState(key, stored, report, "unused")).toEqual({
      kind: "status",
      row: { ...stored, ...report, error: null },
      expected: { version: 7, incarnation: "inc-1" }
    })
  })

  it("progress on no row inserts version 1; on a row bumps the version, guarded by the stamp read", () => {
    const progress = { checkpoint: { page: 4 }, recovery: null }
    expect(decideSyncProgress(key, undefined, progress, "inc-new")).toEqual({
      kind: "insert",
      row: { ...blankSyncState(key, "inc-new"), ...progress, version: 1 }
    })
    const stored = row({ leaseToken: "t", leaseExpiresAt: 5, error: "e" })
    expect(decideSyncProgress(key, stored, progress, "unused")).toEqual({
      kind: "progress",
      row: { ...stored, ...progress, version: 8 },
      expected: { version: 7, incarnation: "inc-1" },
      reported: []
    })
    // The report fields a result gives are written and named; a fence joins the stamp.
    expect(decideSyncProgress(key, stored, { ...progress, entityCount: 3, error: null }, "unused", "t")).toEqual({
      kind: "progress",
      row: { ...stored, ...progress, entityCount: 3, error: null, version: 8 },
      expected: { version: 7, incarnation: "inc-1", leaseToken: "t" },
      reported: ["entityCount", "error"]
    })
  })

  it("a lease is live strictly before its expiry: a claim at the expiry instant takes it over", () => {
    const leased = row({ leaseToken: "old", leaseExpiresAt: 100 })
    expect(decideClaimSyncLease(key, leased, { now: 99, leaseMs: 10 }, "new", "x").outcome)
      .toEqual({ outcome: "busy", leaseExpiresAt: 100 })
    const takeover = decideClaimSyncLease(key, leased, { now: 100, leaseMs: 10 }, "new", "x")
    expect(takeover).toEqual({
      outcome: { outcome: "claimed", lease: { ...key, token: "new", expiresAt: 110 } },
      write: {
        kind: "lease",
        row: { ...leased, leaseToken: "new", leaseExpiresAt: 110 },
        expected: { incarnation: "inc-1", leaseToken: "old", leaseExpiresAt: 100 }
      }
    })
  })

  it("only the token of the current lease renews or releases it", () => {
    const leased = row({ leaseToken: "mine", leaseExpiresAt: 100 })
    expect(decideRenewSyncLease(leased, { token: "theirs" }, { now: 50, leaseMs: 10 })).toEqual({ outcome: { outcome: "lost" }, write: undefined })
    expect(decideRenewSyncLease(leased, { token: "mine" }, { now: 500, leaseMs: 10 }).outcome)
      .toEqual({ outcome: "renewed", lease: { ...key, token: "mine", expiresAt: 510 } })
    expect(decideReleaseSyncLease(leased, { token: "theirs" })).toEqual({ outcome: false, write: undefined })
    expect(decideReleaseSyncLease(undefined, { token: "mine" })).toEqual({ outcome: false, write: undefined })
    expect(decideReleaseSyncLease(leased, { token: "mine" }).write?.row).toMatchObject({ leaseToken: null, leaseExpiresAt: null })
  })

  it("the public state never carries the lease token, and shows incarnation and error only when set", () => {
    const state = toSyncState(row({ leaseToken: "secret-token", leaseExpiresAt: 5, incarnation: null }))
    expect(JSON.stringify(state)).not.toContain("secret-token")
    expect("incarnation" in state).toBe(false)
    expect("error" in state).toBe(false)
    expect(toSyncState(row({ error: "e" }))).toMatchObject({ incarnation: "inc-1", error: "e" })
  })
})

describe("pending-auth decisions (pure)", () => {
  const record = (expiresAt: number): PendingAuth => ({
    state: "s",
    provider: "c",
    ownerDID: "o",
    codeVerifier: Redacted.make("v".repeat(43)),
    redirectURL: "https://x",
    scopes: [],
    createdAt: 0,
    expiresAt
  })

  it("a record is expired strictly after its expiry instant", () => {
    expect(isPendingAuthExpired(record(10), 10)).toBe(false)
    expect(isPendingAuthExpired(record(10), 11)).toBe(true)
    expect(decideConsume(Option.some(record(10)), 10)).toEqual(Option.some(record(10)))
    expect(decideConsume(Option.some(record(10)), 11)).toEqual(Option.none())
    expect(decideConsume(Option.none(), 0)).toEqual(Option.none())
  })

  it("a verifier is a Redacted string of 43 to 128 unreserved characters", () => {
    const ok = (s: string) => isRedactedVerifier(Redacted.make(s))
    expect(ok("a".repeat(43))).toBe(true)
    expect(ok("A-._~z09".repeat(16))).toBe(true)
    expect(ok("a".repeat(42))).toBe(false)
    expect(ok("a".repeat(129))).toBe(false)
    expect(ok(`${"a".repeat(42)}+`)).toBe(false)
    expect(isRedactedVerifier("a".repeat(43))).toBe(false)
    expect(isRedactedVerifier(Redacted.make(43))).toBe(false)
  })
})
