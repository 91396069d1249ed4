import { randomBytes } from "node:crypto"
import type { PromiseConnectorStore, SyncLease } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterEach, describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"
import { revealsNothing } from "./support/secrecy.js"

const adapters = await adaptersUnderTest()

const C = "gcal"
const O = "did:owner:1"

/** What a promise rejected with (fails the test if it resolved). */
const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then((value) => expect.unreachable(`expected a rejection, got ${JSON.stringify(value)}`), (error: unknown) => error)

for (const adapter of adapters) {
  const entryPoint = adapter.name === "memory" ? "openMemoryConnectorStore" : `openConnectorStore on ${adapter.name}`
  describe(`sync state and pending OAuth through the Promise API (${entryPoint})`, () => {
    let now = NOW
    let store: PromiseConnectorStore<unknown> | undefined
    const open = async () => {
      store = adapter.name === "memory"
        ? openMemoryConnectorStore({ now: () => now })
        : await openConnectorStore({ ...(await adapter.connection()), now: () => now })
      return store
    }
    afterEach(async () => {
      await store?.close()
      now = NOW
    })

    it("a runner's sync: claim, report, progress twice, renew, report, release; the next runner takes over", async () => {
      const s = await open()
      const claim = await s.claimSyncLease(C, O, { now, leaseMs: 30_000 })
      if (claim.outcome !== "claimed") return expect.unreachable("the first claim")
      expect(await s.claimSyncLease(C, O, { now, leaseMs: 30_000 })).toEqual({ outcome: "busy", leaseExpiresAt: NOW + 30_000 })
      await s.setSyncState(C, O, { status: "syncing", lastSyncedAt: "", entityCount: 0 })
      for (const page of ["p1", "p2"]) {
        await s.updateSyncProgress(C, O, (current) => ({
          checkpoint: { cursor: page },
          recovery: [...((current?.recovery as ReadonlyArray<string> | null) ?? []), page]
        }))
      }
      now += 20_000
      const renewal = await s.renewSyncLease(claim.lease, { now, leaseMs: 30_000 })
      expect(renewal).toEqual({ outcome: "renewed", lease: { ...claim.lease, expiresAt: now + 30_000 } })
      await s.setSyncState(C, O, { status: "idle", lastSyncedAt: "2026-01-01T00:00:00Z", entityCount: 42 })
      expect(await s.releaseSyncLease(claim.lease)).toBe(true)
      const state = await s.getSyncState(C, O)
      expect(state).toEqual({
        checkpoint: { cursor: "p2" },
        recovery: ["p1", "p2"],
        lastSyncedAt: "2026-01-01T00:00:00Z",
        entityCount: 42,
        status: "idle",
        leaseExpiresAt: null,
        version: 2,
        incarnation: expect.any(String)
      })
      expect(await s.listSyncStatesForConnector(C)).toEqual([{ connectorName: C, ownerDID: O, ...state }])
      const next = await s.claimSyncLease(C, O, { now, leaseMs: 1_000 })
      expect(next.outcome).toBe("claimed")
      expect((next as { lease: SyncLease }).lease.token).not.toBe(claim.lease.token)
      expect(await s.deleteSyncState(C, O)).toBe(true)
      expect(await s.getSyncState(C, O)).toBeNull()
    })

    it("failures reject with the store's tagged errors", async () => {
      const s = await open()
      expect(await rejection(s.setSyncState(C, "", { status: "idle", lastSyncedAt: "", entityCount: 0 })))
        .toMatchObject({ _tag: "InvalidInput", field: "ownerDID" })
      expect(await rejection(s.updateSyncProgress(C, O, () => {
        throw new Error("bad page")
      }))).toMatchObject({ _tag: "SyncProgressRecomputeFailed", connectorName: C, ownerDID: O })
      expect(await rejection(s.updateSyncProgress(C, O, (async () => ({ checkpoint: 1, recovery: 1 })) as never)))
        .toMatchObject({ _tag: "InvalidInput", field: "recompute()" })
      expect(await rejection(s.updateSyncProgress(C, O, () => ({ checkpoint: 10n, recovery: null }))))
        .toMatchObject({ _tag: "InvalidInput", field: "recompute().checkpoint" })
      expect(await s.getSyncState(C, O)).toBeNull()
    })

    it("pending OAuth takes and gives the verifier as a string, single use, expiry by the store's clock", async () => {
      const s = await open()
      const verifier = randomBytes(48).toString("base64url")
      const record = {
        state: "st-1",
        provider: C,
        ownerDID: O,
        codeVerifier: verifier,
        redirectURL: "https://app.example/cb",
        scopes: ["read"],
        expiresAt: NOW + 1_000
      }
      await s.createPendingAuth(record)
      await s.createPendingAuth({ ...record, state: "st-2" })
      await s.createPendingAuth({ ...record, state: "st-old", expiresAt: NOW - 1 })
      const duplicate = await rejection(s.createPendingAuth(record))
      expect(duplicate).toMatchObject({ _tag: "PendingAuthStateTaken", state: "st-1" })
      revealsNothing(duplicate, verifier)
      const refused = await rejection(s.createPendingAuth({ ...record, state: "st-3", codeVerifier: `${verifier}/` }))
      expect(refused).toMatchObject({ _tag: "InvalidInput", field: "record.codeVerifier" })
      revealsNothing(refused, verifier)
      expect(await s.consumePendingAuth("st-1")).toEqual({ ...record, createdAt: NOW })
      expect(await s.consumePendingAuth("st-1")).toBeNull()
      expect(await s.deleteExpiredPendingAuth(NOW)).toBe(1)
      now = NOW + 1_001
      expect(await s.consumePendingAuth("st-2")).toBeNull()
    })
  })
}
