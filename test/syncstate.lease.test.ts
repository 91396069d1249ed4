import { ConnectorStore, type StoreSnapshot, type SyncLease, SyncStateRepository, type SyncStateRow } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { NOW } from "./support/contract/fixtures.js"
import { onFreshStore, succeedsChangingNothing } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"
import { appending } from "./support/syncstate.js"

const adapters = await adaptersUnderTest()

const C = "gcal"
const O = "did:owner:1"
const LEASE = 60_000

const claimed = (claim: { readonly outcome: string; readonly lease?: SyncLease }): SyncLease => {
  if (claim.outcome !== "claimed" || claim.lease === undefined) throw new Error(`expected a claim, got ${JSON.stringify(claim)}`)
  return claim.lease
}

const leaseExpiry = (ownerDID = O) =>
  Effect.flatMap(ConnectorStore, (s) =>
    Effect.map(s.getSyncState(C, ownerDID), (state) => Option.getOrUndefined(state)?.leaseExpiresAt))

/** A row the seed's store wrote: a lease expiry and no token, no incarnation. */
const seedRow = (overrides: Partial<SyncStateRow> = {}): SyncStateRow => ({
  connectorName: C,
  ownerDID: O,
  checkpoint: { cursor: "seed" },
  lastSyncedAt: "2025-12-31T00:00:00.000Z",
  entityCount: 3,
  status: "syncing",
  error: null,
  leaseToken: null,
  leaseExpiresAt: NOW + 1_000,
  recovery: null,
  version: 3,
  incarnation: null,
  ...overrides
})

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, ConnectorStore | SyncStateRepository | StoreSnapshot>) =>
    onFreshStore(adapter, {}, body)

  describe(`the sync lease on ${adapter.name}`, () => {
    it.effect("claiming with no sync state creates a blank row that holds the lease until now + leaseMs", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const lease = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        expect(lease).toEqual({ connectorName: C, ownerDID: O, token: expect.any(String), expiresAt: NOW + LEASE })
        expect(Option.getOrUndefined(yield* store.getSyncState(C, O))).toEqual({
          checkpoint: null,
          recovery: null,
          lastSyncedAt: "",
          entityCount: 0,
          status: "idle",
          leaseExpiresAt: NOW + LEASE,
          version: 0,
          incarnation: expect.any(String)
        })
      })))

    it.effect("a live lease makes every other claim busy, up to and excluding its expiry, and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        for (const now of [NOW, NOW + 1, NOW + LEASE - 1]) {
          expect(yield* succeedsChangingNothing(store.claimSyncLease(C, O, { now, leaseMs: LEASE })))
            .toEqual({ outcome: "busy", leaseExpiresAt: NOW + LEASE })
        }
      })))

    it.effect("an expired lease is taken over; the old holder can then neither renew nor release it", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const first = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        const second = claimed(yield* store.claimSyncLease(C, O, { now: NOW + LEASE, leaseMs: LEASE }))
        expect(second.token).not.toEqual(first.token)
        expect(second.expiresAt).toBe(NOW + 2 * LEASE)
        expect(yield* succeedsChangingNothing(store.renewSyncLease(first, { now: NOW + LEASE, leaseMs: LEASE })))
          .toEqual({ outcome: "lost" })
        expect(yield* succeedsChangingNothing(store.releaseSyncLease(first))).toBe(false)
        expect(yield* leaseExpiry()).toBe(NOW + 2 * LEASE)
        expect((yield* store.renewSyncLease(second, { now: NOW + LEASE + 5, leaseMs: LEASE })).outcome).toBe("renewed")
      })))

    it.effect("renewing extends the holder's lease from now; a lapsed lease nobody took over can still be renewed", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const lease = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        expect(yield* store.renewSyncLease(lease, { now: NOW + 10, leaseMs: 2 * LEASE })).toEqual({
          outcome: "renewed",
          lease: { ...lease, expiresAt: NOW + 10 + 2 * LEASE }
        })
        const late = NOW + 10 * LEASE
        expect(yield* store.renewSyncLease(lease, { now: late, leaseMs: LEASE })).toEqual({
          outcome: "renewed",
          lease: { ...lease, expiresAt: late + LEASE }
        })
        expect(yield* leaseExpiry()).toBe(late + LEASE)
        expect((yield* store.claimSyncLease(C, O, { now: late, leaseMs: LEASE })).outcome).toBe("busy")
      })))

    it.effect("releasing frees the lease at once, only for its holder, and only once", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const lease = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        expect(yield* succeedsChangingNothing(store.releaseSyncLease({ ...lease, token: "someone-else" }))).toBe(false)
        expect(yield* store.releaseSyncLease(lease)).toBe(true)
        expect(yield* leaseExpiry()).toBeNull()
        expect(yield* succeedsChangingNothing(store.releaseSyncLease(lease))).toBe(false)
        expect(yield* succeedsChangingNothing(store.renewSyncLease(lease, { now: NOW, leaseMs: LEASE }))).toEqual({ outcome: "lost" })
        const next = claimed(yield* store.claimSyncLease(C, O, { now: NOW + 1, leaseMs: LEASE }))
        expect(next.token).not.toEqual(lease.token)
      })))

    it.effect("a lease's token fences only its own connector and owner", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const mine = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        claimed(yield* store.claimSyncLease(C, "did:owner:2", { now: NOW, leaseMs: LEASE }))
        const elsewhere = { ...mine, ownerDID: "did:owner:2" }
        expect(yield* succeedsChangingNothing(store.renewSyncLease(elsewhere, { now: NOW, leaseMs: LEASE }))).toEqual({ outcome: "lost" })
        expect(yield* succeedsChangingNothing(store.releaseSyncLease({ ...mine, connectorName: "jira" }))).toBe(false)
      })))

    it.effect("progress writes and setSyncState leave the lease alone; the state never shows the token", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const lease = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        yield* store.updateSyncProgress(C, O, appending("a"))
        yield* store.setSyncState(C, O, { status: "syncing", lastSyncedAt: "now", entityCount: 1 })
        const state = Option.getOrThrow(yield* store.getSyncState(C, O))
        expect(state.leaseExpiresAt).toBe(NOW + LEASE)
        expect(JSON.stringify(state)).not.toContain(lease.token)
        expect(JSON.stringify(yield* store.listSyncStatesForConnector(C))).not.toContain(lease.token)
        expect((yield* store.renewSyncLease(lease, { now: NOW, leaseMs: LEASE })).outcome).toBe("renewed")
      })))

    it.effect("deleting the sync state drops its lease: the holder has lost it, and the next claim starts a new row", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const lease = claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        const before = Option.getOrThrow(yield* store.getSyncState(C, O))
        yield* store.deleteSyncState(C, O)
        expect(yield* store.renewSyncLease(lease, { now: NOW, leaseMs: LEASE })).toEqual({ outcome: "lost" })
        expect(yield* store.getSyncState(C, O)).toEqual(Option.none())
        claimed(yield* store.claimSyncLease(C, O, { now: NOW, leaseMs: LEASE }))
        expect(Option.getOrThrow(yield* store.getSyncState(C, O)).incarnation).not.toEqual(before.incarnation)
      })))

    it.effect("a lease the seed's store wrote (an expiry, no token) keeps others out until it expires, then is taken over", () =>
      onStore(Effect.gen(function*() {
        const repo = yield* SyncStateRepository
        expect(yield* repo.insert(seedRow())).toBe(true)
        const store = yield* ConnectorStore
        expect(yield* store.claimSyncLease(C, O, { now: NOW + 999, leaseMs: LEASE })).toEqual({ outcome: "busy", leaseExpiresAt: NOW + 1_000 })
        const lease = claimed(yield* store.claimSyncLease(C, O, { now: NOW + 1_000, leaseMs: LEASE }))
        const state = Option.getOrThrow(yield* store.getSyncState(C, O))
        // The seed row's data is kept; it has no incarnation to show.
        expect(state).toEqual({
          checkpoint: { cursor: "seed" },
          recovery: null,
          lastSyncedAt: "2025-12-31T00:00:00.000Z",
          entityCount: 3,
          status: "syncing",
          leaseExpiresAt: lease.expiresAt,
          version: 3
        })
      })))

    it.effect("progress on a seed row without an incarnation is guarded by its version and keeps working", () =>
      onStore(Effect.gen(function*() {
        const repo = yield* SyncStateRepository
        yield* repo.insert(seedRow({ leaseExpiresAt: null }))
        const store = yield* ConnectorStore
        const written = yield* store.updateSyncProgress(C, O, (current) => {
          expect(current).toEqual({ checkpoint: { cursor: "seed" }, recovery: null, version: 3, incarnation: null })
          return { checkpoint: { cursor: "next" }, recovery: null }
        })
        expect(written).toMatchObject({ checkpoint: { cursor: "next" }, version: 4 })
        expect(written.incarnation).toBeUndefined()
      })))
  })
}
