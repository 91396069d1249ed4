import {
  ConnectorStore,
  decideOperatorReleaseSyncLease,
  OperatorActionRefused,
  OperatorTargetNotFound,
  pendingAuthCountsOf,
  type SyncStateRow,
  syncLeaseStateOf
} from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted, TestClock } from "effect"
import { NOW, onOperationStore } from "./operations.fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()

const row = (patch: Partial<SyncStateRow> = {}): SyncStateRow => ({
  connectorName: "gcal",
  ownerDID: "did:owner:1",
  checkpoint: null,
  lastSyncedAt: "",
  entityCount: 0,
  status: "syncing",
  error: null,
  leaseToken: "token-1",
  leaseExpiresAt: NOW + 1_000,
  recovery: null,
  version: 3,
  incarnation: "inc-1",
  ...patch
})

describe("an operator's release of a sync lease (pure)", () => {
  it("the lease state: none, held until it expires, stale from its expiry on (a seed lease without token too)", () => {
    expect(syncLeaseStateOf(row({ leaseToken: null, leaseExpiresAt: null }), NOW)).toBe("none")
    expect(syncLeaseStateOf(row(), NOW)).toBe("held")
    expect(syncLeaseStateOf(row(), NOW + 1_000)).toBe("stale")
    expect(syncLeaseStateOf(row({ leaseToken: null }), NOW + 2_000)).toBe("stale")
  })

  it("a stale lease is cleared, guarded by the lease stamp read; status and progress are kept", () => {
    const stale = row({ leaseExpiresAt: NOW - 1 })
    const decision = decideOperatorReleaseSyncLease(stale, NOW, { force: false })
    expect(decision).toEqual({
      outcome: "released",
      was: "stale",
      write: {
        kind: "lease",
        row: { ...stale, leaseToken: null, leaseExpiresAt: null },
        expected: { incarnation: "inc-1", leaseToken: "token-1", leaseExpiresAt: NOW - 1 }
      }
    })
  })

  it("a live lease is refused without force, released with it; no lease changes nothing", () => {
    const refused = decideOperatorReleaseSyncLease(row(), NOW, { force: false })
    expect(refused.outcome).toBe("refused")
    expect(refused.write).toBeUndefined()
    expect(decideOperatorReleaseSyncLease(row(), NOW, { force: true })).toMatchObject({ outcome: "released", was: "held" })
    expect(decideOperatorReleaseSyncLease(row({ leaseToken: null, leaseExpiresAt: null }), NOW, { force: true })).toEqual({
      outcome: "not-held",
      write: undefined
    })
  })

  it("pending authorizations count by expiry alone: expired once expiresAt is before now", () => {
    expect(pendingAuthCountsOf([NOW - 1, NOW, NOW + 1], NOW)).toEqual({ live: 2, expired: 1 })
  })
})

for (const adapter of adapters) {
  describe(`operator sync states on ${adapter.name}`, () => {
    it.effect("status counts leases held and stale and pending authorizations; listSyncStates pages and filters", () =>
      onOperationStore(adapter, {}, Effect.gen(function*() {
        const store = yield* ConnectorStore
        yield* store.claimSyncLease("gcal", "did:owner:1", { now: NOW, leaseMs: 60_000 })
        yield* store.claimSyncLease("jira", "did:owner:2", { now: NOW - 120_000, leaseMs: 60_000 })
        yield* store.setSyncState("slack", "did:owner:3", { status: "idle", lastSyncedAt: "t", entityCount: 1 })
        for (const [state, expiresAt] of [["a", NOW + 1], ["b", NOW], ["c", NOW - 1]] as const) {
          yield* store.createPendingAuth({
            state,
            provider: "gcal",
            ownerDID: "did:owner:1",
            codeVerifier: Redacted.make("v".repeat(43)),
            redirectURL: "https://app.example/cb",
            scopes: [],
            createdAt: NOW - 10_000,
            expiresAt
          })
        }
        const status = yield* store.getStoreStatus()
        expect(status.syncStates).toEqual({ total: 3, leasesHeld: 1, staleLeases: 1 })
        expect(status.pendingAuthorizations).toEqual({ live: 2, expired: 1 })

        const all = yield* store.listSyncStates()
        expect(all.items.map((item) => [item.connectorName, item.lease])).toEqual([["gcal", "held"], ["jira", "stale"], ["slack", "none"]])
        expect(JSON.stringify(all)).not.toMatch(/token/i)
        expect((yield* store.listSyncStates({ lease: "stale" })).items.map((item) => item.connectorName)).toEqual(["jira"])
        expect((yield* store.listSyncStates({ lease: "none" })).items.map((item) => item.connectorName)).toEqual(["slack"])
        expect((yield* store.listSyncStates({ ownerDID: "did:owner:1" })).items.map((item) => item.connectorName)).toEqual(["gcal"])
        const first = yield* store.listSyncStates({ limit: 2 })
        expect(first.items).toHaveLength(2)
        const second = yield* store.listSyncStates({ limit: 2, cursor: first.nextCursor! })
        expect([second.items.map((item) => item.connectorName), second.nextCursor]).toEqual([["slack"], null])
        // The lease lapses on the store's clock: what was held is stale a minute on.
        yield* TestClock.adjust(60_000)
        expect((yield* store.getStoreStatus()).syncStates).toEqual({ total: 3, leasesHeld: 0, staleLeases: 2 })
      })))

    it.effect("releaseSyncLeaseByOperator: stale released, live refused unchanged unless forced, the old holder's renew is lost", () =>
      onOperationStore(adapter, {}, Effect.gen(function*() {
        const store = yield* ConnectorStore
        const live = yield* store.claimSyncLease("gcal", "did:owner:1", { now: NOW, leaseMs: 60_000 })
        const stale = yield* store.claimSyncLease("jira", "did:owner:2", { now: NOW - 120_000, leaseMs: 60_000 })
        if (live.outcome !== "claimed" || stale.outcome !== "claimed") throw new Error("claims")

        const released = yield* store.releaseSyncLeaseByOperator("jira", "did:owner:2")
        expect([released.outcome, released.outcome === "released" && released.was, released.state.lease]).toEqual(["released", "stale", "none"])
        expect((yield* store.renewSyncLease(stale.lease, { now: NOW, leaseMs: 1_000 })).outcome).toBe("lost")

        const refused = yield* Effect.flip(store.releaseSyncLeaseByOperator("gcal", "did:owner:1"))
        expect(refused).toBeInstanceOf(OperatorActionRefused)
        expect((yield* store.getSyncState("gcal", "did:owner:1")).pipe((o) => o._tag === "Some" && o.value.leaseExpiresAt)).toBe(NOW + 60_000)
        expect((yield* store.releaseSyncLeaseByOperator("gcal", "did:owner:1", { force: true })).outcome).toBe("released")
        expect((yield* store.renewSyncLease(live.lease, { now: NOW, leaseMs: 1_000 })).outcome).toBe("lost")
        expect((yield* store.claimSyncLease("gcal", "did:owner:1", { now: NOW, leaseMs: 1_000 })).outcome).toBe("claimed")

        expect((yield* store.releaseSyncLeaseByOperator("jira", "did:owner:2")).outcome).toBe("not-held")
        expect(yield* Effect.flip(store.releaseSyncLeaseByOperator("nope", "did:owner:2"))).toBeInstanceOf(OperatorTargetNotFound)
      })))
  })
}
