import {
  admitUnderLimits,
  blankProviderLimit,
  decideClaimLimit,
  decidePause,
  type ProviderLimit,
  roomUnder,
  scopeKey
} from "@connector-store/core"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { propertyRuns } from "./support/runs.js"

// The pure rules of provider limits, on their own: a pause never shortens
// one in place, a scope's room is never negative, a batch never admits more
// leases than a scope's room nor any of a paused scope, and a claim is
// limited exactly when a scope is paused or full.

const NOW = 1_700_000_000_000
const runs = propertyRuns(200)
const scope = { connectorName: "gcal", accountKey: "acct-A" }
const connector = { connectorName: "gcal" }
const time = fc.integer({ min: NOW - 10_000, max: NOW + 10_000 })
const maybe = <A>(arb: fc.Arbitrary<A>) => fc.option(arb, { nil: null })
const limitOf = (over: Partial<ProviderLimit>): ProviderLimit => ({ ...blankProviderLimit(scope, NOW), ...over })

describe("provider limit rules", () => {
  it("a pause ends at the later of the two ends, with that end's status", () => {
    fc.assert(
      fc.property(maybe(time), maybe(fc.constantFrom(429, 503)), time, maybe(fc.constantFrom(429, 503)), (end, status, until, asked) => {
        const row = end === null ? undefined : limitOf({ pausedUntil: end, pauseStatus: status })
        const decision = decidePause(row, scope, { until, status: asked }, NOW)
        expect(decision.limit.pausedUntil).toBe(Math.max(end ?? -Infinity, until))
        if (row !== undefined && end! >= until) {
          expect(decision.write).toBeUndefined()
          expect(decision.limit.pauseStatus).toBe(status)
        } else {
          expect(decision.limit.pauseStatus).toBe(asked)
          expect(decision.write?.kind).toBe(row === undefined ? "insert" : "update")
        }
      }),
      { numRuns: runs }
    )
  })

  it("room is the cap less the live leases, never below zero, unbounded without a cap", () => {
    fc.assert(
      fc.property(maybe(fc.integer({ min: 1, max: 20 })), fc.nat(40), (cap, live) => {
        expect(roomUnder(cap, live)).toBe(cap === null ? Infinity : Math.max(0, cap - live))
      }),
      { numRuns: runs }
    )
  })

  it("a claim is limited exactly when a scope is paused at now or its live leases fill its cap", () => {
    fc.assert(
      fc.property(maybe(time), maybe(fc.integer({ min: 1, max: 5 })), fc.nat(6), maybe(time), (pausedUntil, cap, live, connectorPause) => {
        const limits = [
          { ...blankProviderLimit(connector, NOW), pausedUntil: connectorPause },
          limitOf({ pausedUntil, maxInFlight: cap })
        ]
        const decided = decideClaimLimit(limits, () => ({ live, earliestExpiry: live > 0 ? NOW + 5 : null }), NOW)
        const paused = [pausedUntil, connectorPause].filter((end): end is number => end !== null && end > NOW)
        if (paused.length > 0) expect(decided).toMatchObject({ reason: "paused", until: Math.max(...paused) })
        else if (cap !== null && live >= cap) expect(decided).toEqual({ scope, reason: "at-capacity", until: NOW + 5 })
        else expect(decided).toBeUndefined()
      }),
      { numRuns: runs }
    )
  })

  it("a batch admits, in order, no more leases than each scope's room, and none of a paused scope", () => {
    const account = fc.constantFrom("acct-A", "acct-B", "acct-C")
    fc.assert(
      fc.property(
        fc.array(account, { maxLength: 20 }),
        fc.record({ a: fc.nat(4), b: fc.nat(4), connector: fc.nat(8) }),
        fc.boolean(),
        (accounts, room, pauseC) => {
          const limits = new Map<string, ProviderLimit>([
            [scopeKey(scope), limitOf({ maxInFlight: 10 })],
            [scopeKey({ connectorName: "gcal", accountKey: "acct-B" }), { ...limitOf({ maxInFlight: 10 }), scope: { connectorName: "gcal", accountKey: "acct-B" } }],
            [scopeKey({ connectorName: "gcal", accountKey: "acct-C" }), {
              ...limitOf({ pausedUntil: pauseC ? NOW + 1 : NOW }),
              scope: { connectorName: "gcal", accountKey: "acct-C" }
            }],
            [scopeKey(connector), { ...blankProviderLimit(connector, NOW), maxInFlight: 10 }]
          ])
          const rooms = new Map([
            [scopeKey(scope), room.a],
            [scopeKey({ connectorName: "gcal", accountKey: "acct-B" }), room.b],
            [scopeKey(connector), room.connector]
          ])
          const candidates = accounts.map((accountKey, i) => ({ connectorName: "gcal", accountKey, i }))
          const { admitted } = admitUnderLimits(candidates, limits, rooms, NOW)
          const count = (key: string) => admitted.filter((c) => c.accountKey === key).length
          expect(count("acct-A")).toBeLessThanOrEqual(room.a)
          expect(count("acct-B")).toBeLessThanOrEqual(room.b)
          expect(admitted.length).toBeLessThanOrEqual(room.connector)
          if (pauseC) expect(count("acct-C")).toBe(0)
          // Greedy in order: a candidate is left out only when a scope of it was full or paused at its turn.
          const taken = { A: 0, B: 0, all: 0 }
          for (const candidate of candidates) {
            const own = candidate.accountKey === "acct-A" ? taken.A < room.a : candidate.accountKey === "acct-B" ? taken.B < room.b : !pauseC
            const fits = own && taken.all < room.connector
            expect(admitted.includes(candidate)).toBe(fits)
            if (!fits) continue
            taken.all++
            if (candidate.accountKey === "acct-A") taken.A++
            if (candidate.accountKey === "acct-B") taken.B++
          }
        }
      ),
      { numRuns: runs }
    )
  })
})
